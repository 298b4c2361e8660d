"""Messages that point at the cause (issue 29): pad limits in words, a 'same' pad named as
such, a pool-stride hint that says what to change, one name per upsampling op, a non-integer
upsample that names the input size, and hints that cite docs users have."""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from cnnforge.frontend.capture import capture
from cnnforge.passes.check import check_network
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.targets.max7800x.device import get_device
from support import library_styles as styles
from support.paths import SRC
from support.targets import rules_of


def _violations(model: nn.Module, shape: tuple[int, ...], device: str = "MAX78000") -> list:
    dev = get_device(device)
    return list(
        check_network(
            lower_to_hardware(capture(model.eval(), shape), dev).network, dev, rules=rules_of(dev)
        )
    )


def test_pad_limit_is_in_words() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=3))
    pads = [v for v in _violations(model, (3, 16, 16)) if v.rule == "pad"]
    assert pads and str(pads[0].limit) == "0 or 1 or 2 (below the kernel size 3)"


def test_same_padding_is_named_not_a_unet_input_size() -> None:
    model = styles.EfficientStyle()
    pads = [v for v in _violations(model, (3, 32, 32), "MAX78002") if v.rule == "pad"]
    assert pads and "'same' padding" in pads[0].hint and "2^depth" not in pads[0].hint


def test_pool_stride_hint_says_what_to_change() -> None:
    dev = get_device("MAX78000")
    model = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(3, 4, 3, padding=1)).eval()
    network = lower_to_hardware(capture(model, (3, 64, 64)), dev).network
    conv = next(x for x in network.layers if x.pool is not None)
    wide = dataclasses.replace(conv.pool, size=(2, 2), stride=(32, 32))
    network = network.with_layers(
        dataclasses.replace(x, pool=wide) if x is conv else x for x in network.layers
    )
    hints = [
        v.hint for v in check_network(network, dev, rules=rules_of(dev)) if v.rule == "pool-stride"
    ]
    assert hints and "square" not in hints[0] and "at most 16" in hints[0]


def test_bilinear_upsampling_has_one_name() -> None:
    class Fx(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.interpolate(x, scale_factor=2, mode="bilinear")

    fx_names = {v.actual for v in _violations(nn.Sequential(nn.Conv2d(3, 4, 1), Fx()), (3, 8, 8))}
    export = {
        str(v.actual).partition(":")[0] for v in _violations(styles.LRASPPStyle(), (3, 32, 32))
    }
    assert "upsample bilinear" in fx_names and "upsample bilinear" in export


def test_non_integer_upsample_names_the_input_size() -> None:
    class Up(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.down = nn.Conv2d(3, 4, 3, stride=2, padding=1)
            self.out = nn.Conv2d(4, 2, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.down(self.down_pool(x))
            return self.out(F.interpolate(y, size=(x.shape[-2] // 3, x.shape[-1] // 3)))

        def down_pool(self, x: torch.Tensor) -> torch.Tensor:
            return F.max_pool2d(x, 4)

    found = [v for v in _violations(Up(), (3, 60, 60)) if "integer" in str(v.actual)]
    assert found and "multiple of" in found[0].hint


def test_hints_cite_no_spec_files() -> None:
    src = SRC / "cnnforge"
    assert (src / "passes").is_dir()
    for path in src.rglob("*.py"):
        for line in path.read_text().splitlines():
            text = line.strip()
            quoted = text.startswith('"') and not text.startswith('"""')
            if "docs/hardware/devices.md" in text and ("hint" in text or quoted):
                raise AssertionError(f"{path.name}: {line.strip()}")


class _BigCat(nn.Module):
    """Too many 8-bit weights for MAX78000 and a [256, 256] concatenation no width places."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 256, 3, padding=1)
        self.b = nn.Conv2d(256, 256, 3, padding=1)
        self.c = nn.Conv2d(256, 256, 3, padding=1)
        self.d = nn.Conv2d(512, 16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(self.a(x))
        b = torch.relu(self.b(a))
        c = torch.relu(self.c(b))
        return self.d(torch.cat([b, c], 1))


def test_check_lists_width_independent_blockers_with_kernel_memory() -> None:
    from cnnforge.passes.check import INDEPENDENT, check_report

    report = check_report(
        capture(_BigCat().eval(), (3, 8, 8)),
        get_device("MAX78000"),
        rules=rules_of(get_device("MAX78000")),
    )
    rules = [v.rule for v in report.violations]
    assert "kernel-memory" in rules and "placement" in rules  # both, in one run
    placement = next(v for v in report.violations if v.rule == "placement")
    assert placement.hint.startswith(INDEPENDENT) and "interleaved" in placement.actual
    for v in report.violations:
        if v.rule == "kernel-memory":
            assert "not enough alone" in v.hint
    auto = check_report(
        capture(_BigCat().eval(), (3, 8, 8)),
        get_device("MAX78000"),
        "auto",
        rules=rules_of(get_device("MAX78000")),
    )
    assert [v.rule for v in auto.violations] == ["placement"]  # what auto leaves was listed


def test_violation_on_a_rewrite_made_layer_names_the_rewrite_and_the_users_op() -> None:
    from cnnforge.passes.check import check_report

    class Up(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Conv2d(3, 512, 3, padding=1)
            self.c = nn.Conv2d(512, 4, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.c(F.interpolate(torch.relu(self.a(x)), scale_factor=2))

    report = check_report(
        capture(Up().eval(), (3, 4, 4)),
        get_device("MAX78000"),
        rules=rules_of(get_device("MAX78000")),
    )
    up = [v for v in report.violations if v.layer == "interpolate"]
    assert up and "upsample-nearest rewrite of upsample interpolate" in up[0].hint
    assert "--weight-bits" not in up[0].hint
