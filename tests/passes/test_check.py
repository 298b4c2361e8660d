"""The device checker (passes/check.py): one model per rule, a model breaking many, the U-Nets.

Models are plain torch modules traced by the frontend, so every violation is also checked to
name the PyTorch module path.
"""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.frontend.torch_fx import trace
from cnnforge.passes.check import check_report
from cnnforge.passes.verify import verify
from cnnforge.targets.max7800x.device import MAX78000, MAX78002
from support.targets import rules_of
from support.torch_models import BLOCKS, Cat, RandomNet


class Seq(nn.Module):
    """A chain of modules (named l0, l1, ...), or of callables for functional ops."""

    def __init__(self, *mods) -> None:
        super().__init__()
        self.mods = nn.ModuleList(mods)

    def forward(self, x):
        for m in self.mods:
            x = m(x)
        return x


class Mul(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return self.a(x) * self.b(x)


class Sum17(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(3, 4, 1) for _ in range(17))
        self.head = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        total = self.convs[0](x)
        for conv in self.convs[1:]:
            total = total + conv(x)
        return self.head(total)


class FlatFC(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 32 * 32, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.conv(x), 1))


def conv(cin=3, cout=8, k=3, **kw) -> nn.Conv2d:
    kw.setdefault("padding", k // 2)
    return nn.Conv2d(cin, cout, k, **kw)


# (test id, model, input shape, device, expected rule, module path it names)
CASES = [
    ("kernel-5x5", Seq(conv(k=5)), (3, 16, 16), MAX78000, "kernel-size", "mods.0"),
    ("pad-3", Seq(conv(padding=3)), (3, 16, 16), MAX78000, "pad", "mods.0"),
    ("pad-asym", Seq(conv(padding=(1, 0))), (3, 16, 16), MAX78000, "pad", "mods.0"),
    ("stride-2x1", Seq(conv(stride=(2, 1))), (3, 16, 16), MAX78000, "stride", "mods.0"),
    ("dilation", Seq(conv(dilation=2, padding=2)), (3, 16, 16), MAX78000, "dilation", "mods.0"),
    ("groups", Seq(conv(4, 8, groups=2)), (4, 16, 16), MAX78002, "groups", "mods.0"),
    ("depthwise-78000", Seq(conv(8, 8, groups=8)), (8, 16, 16), MAX78000, "groups", "mods.0"),
    ("channels", Seq(conv(3, 1100, k=1)), (3, 2, 2), MAX78002, "output-channels", "mods.0"),
    ("dims", Seq(conv(k=1)), (3, 1100, 2), MAX78000, "dims", "mods.0"),
    ("data-memory", Seq(conv(3, 64)), (3, 128, 128), MAX78000, "data-memory-output", "mods.0"),
    (
        "layers",
        Seq(*[conv(3, 3, k=1) for _ in range(33)]),
        (3, 4, 4),
        MAX78000,
        "layer-count",
        "Seq",
    ),
    ("flatten", FlatFC(), (3, 32, 32), MAX78000, "flatten-hw", "fc"),
    ("concat-4", Cat(3, 8, False), (3, 8, 8), MAX78000, "concat-multiple-of-4", "cat"),
    ("concat-equal", Cat(4, 8, False), (3, 8, 8), MAX78000, "concat-channels", "cat"),
    (
        "pool-stride",
        Seq(nn.MaxPool2d(2, (2, 1)), conv()),
        (3, 16, 16),
        MAX78000,
        "pool-stride",
        "mods.1",
    ),
    ("pool-size", Seq(nn.AvgPool2d(17), conv(k=1)), (3, 34, 34), MAX78000, "pool-size", "mods.1"),
    (
        "pool-padding",
        Seq(nn.MaxPool2d(3, 2, padding=1), conv()),
        (3, 16, 16),
        MAX78000,
        "unsupported-op",
        "mods.0",
    ),
    (
        "pool-passes",
        Seq(conv(3, 128), nn.MaxPool2d(2)),
        (3, 8, 8),
        MAX78000,
        "pool-passes",
        "mods.1",
    ),
    ("sigmoid", Seq(conv(), nn.Sigmoid()), (3, 8, 8), MAX78000, "activation", "mods.1"),
    ("leakyrelu", Seq(conv(), nn.LeakyReLU()), (3, 8, 8), MAX78000, "activation", "mods.1"),
    (
        "upsample",
        Seq(conv(), nn.Upsample(scale_factor=2, mode="bilinear")),
        (3, 8, 8),
        MAX78000,
        "unsupported-op",
        "mods.1",
    ),
    ("mul", Mul(), (3, 8, 8), MAX78000, "eltwise-op", "mul"),
    ("operands", Sum17(), (3, 4, 4), MAX78000, "operands", "head"),
    ("bias", Seq(conv(3, 600, k=1)), (3, 2, 2), MAX78000, "bias-channels", "mods.0"),
    (
        "convtranspose",
        Seq(nn.ConvTranspose2d(3, 8, 4, 2, 1)),
        (3, 8, 8),
        MAX78000,
        "convtranspose",
        "mods.0",
    ),
    ("conv1d", Seq(nn.Conv1d(3, 8, 11, padding=2)), (3, 32), MAX78000, "kernel-size", "mods.0"),
]


@pytest.mark.parametrize(
    ("model", "shape", "device", "rule", "path"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_one_model_per_rule(model, shape, device, rule, path) -> None:
    report = check_report(trace(model.eval(), shape), device, rules=rules_of(device))
    assert not report.fits
    hits = [v for v in report.violations if v.rule == rule]
    assert hits, [v.rule for v in report.violations]
    v = hits[0]
    assert v.module_path.startswith(path) or v.module_path == path
    assert v.actual and v.limit and v.hint


def test_hints_name_the_fix() -> None:
    report = check_report(
        trace(Seq(conv(k=5)).eval(), (3, 16, 16)), MAX78000, rules=rules_of(MAX78000)
    )
    assert "two 3x3 convs" in report.violations[0].hint
    report = check_report(
        trace(Seq(conv(8, 8, groups=8)).eval(), (8, 16, 16)), MAX78000, rules=rules_of(MAX78000)
    )
    assert "MAX78002" in report.violations[0].hint
    assert check_report(
        trace(Seq(conv(8, 8, groups=8)).eval(), (8, 16, 16)), MAX78002, rules=rules_of(MAX78002)
    ).fits


class Many(nn.Module):
    """Breaks a rule in almost every layer: all must come back at once, in model order."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 5, padding=2)  # kernel-size
        self.b = nn.Conv2d(8, 8, 3, padding=1, dilation=1, groups=2)  # groups
        self.c = nn.Sigmoid()  # activation
        self.d = nn.Conv2d(8, 8, 3, padding=3)  # pad
        self.e = nn.Upsample(scale_factor=2, mode="bilinear")  # unsupported op

    def forward(self, x):
        return self.e(self.d(self.c(self.b(self.a(x)))))


def test_many_violations_in_model_order() -> None:
    report = check_report(trace(Many().eval(), (3, 8, 8)), MAX78000, rules=rules_of(MAX78000))
    got = [(v.module_path, v.rule) for v in report.violations]
    assert got == [
        ("a", "kernel-size"),
        ("b", "groups"),
        ("c", "activation"),
        ("d", "pad"),
        ("e", "unsupported-op"),
    ]


def test_a_legal_model_fits_with_its_rewrites() -> None:
    model = Seq(conv(3, 8, stride=2), nn.ReLU(), nn.MaxPool2d(2), conv(8, 8), nn.ReLU6())
    report = check_report(trace(model.eval(), (3, 16, 16)), MAX78000, rules=rules_of(MAX78000))
    assert report.fits, report.violations
    assert {r.rule for r in report.rewrites} >= {"stride-to-pool", "fuse-activation", "fuse-pool"}


# ---- the acceptance figures of issue #4 -------------------------------------------------------


@pytest.fixture(scope="module")
def unet_voc():
    from cnnforge.models.unet import UNetVOC

    torch.manual_seed(0)
    return trace(UNetVOC().eval(), (3, 64, 64))


def test_unet_voc_fits_max78002_after_the_rewrites(unet_voc) -> None:
    report = check_report(unet_voc, MAX78002, 8, rules=rules_of(MAX78002))
    assert report.fits, report.violations
    rules = [r.rule for r in report.rewrites]
    assert rules.count("fold-batchnorm") == 18 and rules.count("fuse-pool") == 4
    assert rules.count("convtranspose-k2") == 4
    # docs/hardware/unet.md §1.3: 59,928 3x3 kernels (one word each at 8 bits) + 168 1x1
    # kernels (8 -> 21, packed 9 per word: 3 words on each of 8 processors)
    assert report.kernel_words == 59_928 + 3 * 8
    kernels = {9: 0, 1: 0}
    for need in report.kernel_needs:
        kernels[need.ksize] += need.kernels * need.processors
    assert kernels == {9: 59_928, 1: 168}


def test_unet_voc_on_max78000_fails_only_on_kernel_memory(unet_voc) -> None:
    report = check_report(unet_voc, MAX78000, 8, rules=rules_of(MAX78000))
    assert [v.rule for v in report.violations] == ["kernel-memory"]
    v = report.violations[0]
    assert v.actual == "59952 words (539568 bytes)"
    assert v.limit == "49152 words (442368 bytes)"
    assert "short by 10800 words (97200 bytes)" in v.hint
    assert "4-bit weights on layers" in v.hint and "MAX78002" in v.hint


def test_unet_voc_on_max78000_fits_with_auto_widths(unet_voc) -> None:
    report = check_report(unet_voc, MAX78000, "auto", rules=rules_of(MAX78000))
    assert report.fits and report.weight_mode == "auto"
    narrowed = {k: b for k, b in report.weight_bits.items() if b != 8}
    # the largest layers go first (docs/hardware/unet.md §1.3: the bottleneck and dec4)
    assert narrowed == {"bottleneck.3": 4, "dec4.0": 4}
    assert report.to_dict()["weight_bits"]["bottleneck.3"] == 4


def test_unet_large_fits_max78000() -> None:
    from cnnforge.models.unet import UNetLarge

    report = check_report(
        trace(UNetLarge().eval(), (48, 88, 88)), MAX78000, 8, rules=rules_of(MAX78000)
    )
    assert report.fits, report.violations
    assert len(report.network) == 18  # the vendor's 19 YAML layers less the copy layer `pt`


@settings(max_examples=20)
@given(blocks=BLOCKS, c=st.integers(1, 4), seed=st.integers(0, 100))
def test_check_never_crashes_and_fitting_means_hardware(blocks, c, seed) -> None:
    torch.manual_seed(seed)
    net = trace(RandomNet(blocks, c).eval(), (c, 8, 8))
    for device in (MAX78000, MAX78002):
        report = check_report(net, device, "auto", rules=rules_of(device))
        json.dumps(report.to_dict())
        if report.fits:
            verify(report.network)
            assert report.network.is_hardware


def test_unet_voc_auto_widths_can_be_placed(unet_voc) -> None:
    """Integration: the planner finds a placement for what `auto` declared fitting."""
    from cnnforge.quant.ptq import quantize_network
    from cnnforge.targets.max7800x.planner import plan_network

    report = check_report(unet_voc, MAX78000, "auto", rules=rules_of(MAX78000))
    network, plan = plan_network(
        quantize_network(report.network, report.weight_bits, device=None), MAX78000
    )
    assert len(plan.placements) == len(network.layers) >= 23
