"""Models in the styles of smp, timm and torchvision (tests/support/library_styles.py): every
conv counted however it is called, exact rewrites, and analyze agreeing with forward hooks."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.analysis import analyze_network
from cnnforge.cli import main
from cnnforge.errors import ModelError
from cnnforge.frontend.capture import capture
from cnnforge.frontend.torch_export import capture_export
from cnnforge.frontend.torch_fx import trace
from cnnforge.ir import Op
from cnnforge.passes.check import check_network
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.sim.float_eval import run_float
from cnnforge.targets.max7800x.device import MAX78000, get_device
from support import library_styles as styles
from support.paths import REPO
from support.targets import rules_of

STYLES_FILE = Path(styles.__file__)


def hook_macs(model: nn.Module, shape: tuple[int, ...]) -> int:
    """MACs counted with forward hooks on conv/linear modules (torchinfo's method, weights
    only): a conv subclass with its own forward is a conv module, whatever it calls."""
    total = 0

    def hook(module: nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        nonlocal total
        if isinstance(module, nn.Conv2d | nn.Conv1d):
            total += module.weight.numel() * math.prod(out.shape[2:])
        elif isinstance(module, nn.ConvTranspose2d):
            total += module.weight.numel() * math.prod(args[0].shape[2:])
        elif isinstance(module, nn.Linear):
            total += module.weight.numel()

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    with torch.no_grad():
        model.eval()(torch.zeros(1, *shape))
    for handle in handles:
        handle.remove()
    return total


@pytest.mark.parametrize("name", ["EfficientStyle", "StdConvNet"])
def test_functional_convs_are_convs_in_fx_and_export(name: str) -> None:
    torch.manual_seed(0)
    model, shape = getattr(styles, name)().eval(), styles.STYLES[name]
    for network in (trace(model, shape), capture_export(model, shape, name).network):
        ops = [layer.opaque_kind for layer in network.layers if layer.op is Op.OPAQUE]
        assert not any("conv" in kind or "linear" in kind for kind in ops), ops
        convs = [layer for layer in network.layers if layer.op in (Op.CONV2D, Op.LINEAR)]
        assert len(convs) >= 2
    network = capture(model, shape)  # checked against eager on random input
    analysis = analyze_network(network, device=MAX78000)
    unhooked = {"StdConvNet": 8 * 10}  # F.linear outside any module: hooks cannot see it
    assert analysis.totals.macs == hook_macs(model, shape) + unhooked.get(name, 0)
    assert analysis.totals.params == sum(p.numel() for p in model.parameters())


def test_conv_subclass_layers_are_named_after_the_module() -> None:
    model = styles.EfficientStyle().eval()
    for network in (trace(model, (3, 32, 32)), capture_export(model, (3, 32, 32), "e").network):
        names = {layer.name for layer in network.layers if layer.op is Op.CONV2D}
        assert {"stem", "dw", "head"} <= names


class _SameConv(nn.Conv2d):
    def __init__(self, cin: int, cout: int, k: int, stride: int, size: int, groups: int) -> None:
        super().__init__(cin, cout, k, stride, groups=groups)
        out = math.ceil(size / stride)
        self.pad = max((out - 1) * stride + k - size, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.pad
        x = F.pad(x, [p // 2, p - p // 2, p // 2, p - p // 2])
        return F.conv2d(x, self.weight, self.bias, self.stride, 0, 1, self.groups)


@settings(max_examples=12, deadline=None)
@given(
    k=st.sampled_from([1, 3, 5]),
    stride=st.sampled_from([1, 2]),
    size=st.integers(5, 12),
    groups=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_same_padding_conv_capture_is_exact(
    k: int, stride: int, size: int, groups: int, seed: int
) -> None:
    torch.manual_seed(seed)
    model = nn.Sequential(_SameConv(4, 6, k, stride, size, groups), nn.ReLU()).eval()
    network = capture(model, (4, size, size))  # raises unless it equals eager on random input
    assert [layer.op for layer in network.layers if layer.op is Op.OPAQUE] == []
    x = torch.randn(1, 4, size, size)
    got = run_float(network, x)[network.outputs[0]]
    torch.testing.assert_close(got, model(x), rtol=1e-5, atol=1e-5)


def test_analyze_cli_counts_efficientnet_style_convs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["analyze", f"{STYLES_FILE}:EfficientStyle", "-i", "3,32,32", "--json", "-"])
    out = capsys.readouterr().out
    assert exc.value.code in (0, None)
    report = json.loads(out)
    assert report["totals"]["macs"] == hook_macs(styles.EfficientStyle(), (3, 32, 32))
    assert not any("torch.conv2d" in row["op"] for row in report["layers"])


def test_fixtures_are_importable_by_name() -> None:
    assert "support.library_styles" in sys.modules


@pytest.mark.parametrize("name", ["StackSumFPN", "StackMeanFPN"])
def test_stack_sum_is_an_n_input_add_in_fx_and_export(name: str) -> None:
    torch.manual_seed(1)
    model, shape = getattr(styles, name)().eval(), styles.STYLES[name]
    for network in (capture(model, shape), capture_export(model, shape, name).network):
        adds = [x for x in network.layers if x.op is Op.ELTWISE]
        assert len(adds) == 1 and len(adds[0].inputs) == 3
    lowered = lower_to_hardware(capture(model, shape), device=None)  # verified step by step
    assert not [x for x in lowered.network.layers if x.op is Op.BATCHNORM]


def test_other_readers_of_a_stack_name_the_op(capsys: pytest.CaptureFixture[str]) -> None:
    class StackMax(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.stack([self.a(x), self.b(x)]).amax(dim=0)

    with pytest.raises(ModelError, match=r"amax reads a torch.stack") as exc:
        capture(StackMax(), (3, 8, 8))
    assert f"(at {__file__}:" in str(exc.value)  # the user's file:line


@pytest.mark.parametrize("name", ["ConstantScales", "StackMeanFPN"])
def test_constants_fold_into_convs(name: str) -> None:
    torch.manual_seed(2)
    model, shape = getattr(styles, name)().eval(), styles.STYLES[name]
    network = capture(model, shape)
    assert analyze_network(network, device=MAX78000).totals.params == sum(
        p.numel() for p in model.parameters()
    )
    lowered = lower_to_hardware(network, device=None)
    assert not [x for x in lowered.network.layers if x.op is Op.BATCHNORM]
    rules = {r.rule for r in lowered.rewrites}
    assert "fold-constant-into-conv" in rules


@pytest.mark.parametrize("name", ["NormalizedInput", "NormalizeModuleInput"])
def test_input_normalization_before_a_padded_conv_runs_on_the_host(name: str) -> None:
    network = capture(getattr(styles, name)().eval(), (3, 16, 16))
    device = get_device("MAX78000")
    lowered = lower_to_hardware(network, device)  # verified equivalent step by step
    assert check_network(lowered.network, device, rules=rules_of(device)) == ()
    assert lowered.network.host_input is not None
    assert "host-input" in {r.rule for r in lowered.rewrites}


@pytest.mark.parametrize("how", ["fx", "export"])
def test_a_parameter_scale_counts_its_numel(how: str) -> None:
    class Gains(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.gain = nn.Parameter(torch.linspace(0.5, 2, 8).view(1, 8, 1, 1))
            self.scale = nn.Parameter(torch.tensor(3.0))
            self.shift = nn.Parameter(torch.linspace(0, 1, 8))
            self.head = nn.Conv2d(8, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.conv(x) * self.gain * self.scale
            return self.head(F.relu(y) + self.shift.view(1, -1, 1, 1))

    model = Gains().eval()
    if how == "fx":
        network = capture(model, (3, 8, 8))
    else:
        network = capture_export(model, (3, 8, 8), "g").network
    total = analyze_network(network, device=MAX78000).totals.params
    assert total == sum(p.numel() for p in model.parameters())
    lowered = lower_to_hardware(network, device=None)
    assert {"fold-batchnorm", "fold-constant-into-conv"} <= {r.rule for r in lowered.rewrites}


@settings(max_examples=15, deadline=None)
@given(
    k=st.sampled_from([1, 3]),
    padding=st.sampled_from([0, 1]),
    groups=st.sampled_from([1, 2]),
    shift=st.booleans(),
    op=st.sampled_from(["mul", "add", "sub", "rsub", "div"]),
    seed=st.integers(0, 2**16),
)
def test_constant_arithmetic_capture_and_fold_are_exact(
    k: int, padding: int, groups: int, shift: bool, op: str, seed: int
) -> None:
    torch.manual_seed(seed)

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = nn.Conv2d(4, 4, 3, padding=1)
            self.conv = nn.Conv2d(4, 6, k, padding=padding, groups=groups)
            self.register_buffer("c", torch.rand(1, 4, 1, 1) + 0.5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = F.relu(self.first(x))
            y = {
                "mul": lambda: y * self.c,
                "add": lambda: y + self.c,
                "sub": lambda: y - 0.5,
                "rsub": lambda: 2.0 - y,
                "div": lambda: y / self.c,
            }[op]()
            y = y * 3.0 + (0.25 if shift else 0.0)
            return self.conv(y)

    model = Model().eval()
    network = capture(model, (4, 7, 7))  # raises unless equal to eager on random input
    assert not [x for x in network.layers if x.op is Op.OPAQUE]
    lowered = lower_to_hardware(
        network, device=None
    )  # each step verified equivalent on random input
    x = torch.randn(1, 4, 7, 7)
    got = run_float(lowered.network, x)[lowered.network.outputs[0]]
    torch.testing.assert_close(got, model(x), rtol=1e-4, atol=1e-4)
    shifted = shift or op in ("add", "sub", "rsub")
    folded = not [x for x in lowered.network.layers if x.op is Op.BATCHNORM]
    assert folded == (not shifted or padding == 0)


@pytest.mark.parametrize("how", ["fx", "export"])
def test_unused_parameters_are_reported(how: str, capsys: pytest.CaptureFixture[str]) -> None:
    model = styles.UnusedStages().eval()
    if how == "fx":
        network = capture(model, (3, 16, 16))
    else:
        network = capture_export(model, (3, 16, 16), "u").with_unused(model)
    assert network.unused_params == (
        ("stages.2.weight", 576),
        ("stages.2.bias", 8),
        ("stages.3.weight", 576),
        ("stages.3.bias", 8),
    )
    with pytest.raises(SystemExit):
        main(["analyze", f"{STYLES_FILE}:UnusedStages", "-i", "3,16,16"])
    out = capsys.readouterr().out
    assert (
        "1,168 parameters (4 tensors) of the module are not used by forward: stages.2, stages.3"
        in out
    )
    with pytest.raises(SystemExit):
        main(["analyze", f"{STYLES_FILE}:UnusedStages", "-i", "3,16,16", "--json", "-"])
    report = json.loads(capsys.readouterr().out)
    assert report["unused_parameters"]["params"] == 1168
    assert report["totals"]["params"] + 1168 == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(("name", "stride"), [("EfficientStyle", 2), ("LRASPPStyle", 1)])
def test_gates_see_the_whole_input(name: str, stride: int) -> None:
    """Squeeze-excite / LRASPP gates (global pooling multiplied back) see the whole input, not
    a product of strides; an upsample captured by torch.export divides the stride."""
    model, shape = getattr(styles, name)().eval(), styles.STYLES[name]
    analysis = analyze_network(capture(model, shape), device=MAX78000)
    last = analysis.layers[-1]
    assert last.rf_size == (shape[1], shape[2])  # the gate saw the whole input
    assert last.rf_stride == (stride, stride)


def test_functional_batch_norm_on_own_statistics_folds() -> None:
    model = styles.TimmStyle().eval()
    network = capture(model, (3, 16, 16))
    assert [x.op for x in network.layers][:2] == [Op.CONV2D, Op.BATCHNORM]
    assert network.layers[1].name == "bn"
    lowered = lower_to_hardware(network, device=None)
    assert [x.op for x in lowered.network.layers] == [Op.CONV2D]
    assert analyze_network(network, device=MAX78000).totals.params == sum(
        p.numel() for p in model.parameters()
    )


def test_zoo_external_rows_on_a_library_style_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/zoo_external.py's row (run in its own venv on the real libraries), here on a
    fixture: params against numel, MACs against hooks, both checks."""
    import importlib.util

    path = REPO / "benchmarks" / "zoo_external.py"
    spec = importlib.util.spec_from_file_location("zoo_external", path)
    assert spec is not None and spec.loader is not None
    zoo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zoo)
    monkeypatch.setitem(zoo.MODELS, "EfficientStyle", styles.EfficientStyle)
    cells = zoo.row("EfficientStyle", 32)
    assert len(cells) == len(zoo.HEADER)
    assert cells[1] == "892 (+0 unused) / 892" and cells[2].endswith("(=)")
    assert "unsupported-op" in cells[4] and cells[6] == "-"
