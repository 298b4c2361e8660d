"""An input normalization at the model's start is done on the host (passes/host_input.py): the
lowered network with its host step computes the eager model exactly, check lists no violation,
compile --run's C applies it (cnn_host_input, checked by the self-test), simulate and samples
normalize float inputs, and a normalization elsewhere stays a violation that says why."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.cli import main
from cnnforge.frontend.capture import capture
from cnnforge.ir import Network
from cnnforge.passes.check import check_report
from cnnforge.samples import load_input_array, with_host_input
from cnnforge.sim.float_eval import run_float
from cnnforge.targets.max7800x.device import MAX78000
from support import library_styles as styles
from support.paths import REPO
from support.targets import rules_of

STYLES = REPO / "tests" / "support" / "library_styles.py"
KINDS = ("sub_div", "mul_add", "sub_mul_inverse", "normalize_module", "inplace")


class Normalized(nn.Module):
    """One way of writing ``(x - mean) / std`` at the start, then two zero-padded convs."""

    def __init__(self, kind: str, mean: list[float], std: list[float]) -> None:
        super().__init__()
        self.kind = kind
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))
        self.normalize = styles.Normalize(mean, std)
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.head = nn.Conv2d(6, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "sub_div":
            x = (x - self.mean) / self.std
        elif self.kind == "mul_add":
            x = x * (1 / self.std) + (-self.mean / self.std)
        elif self.kind == "sub_mul_inverse":
            x = (x - self.mean) * (1.0 / self.std)
        elif self.kind == "normalize_module":
            x = self.normalize(x)
        else:
            x = x.clone().sub_(self.mean).div(self.std)
        return self.head(F.relu(self.conv(x)))


numbers = st.floats(-2.0, 2.0, allow_nan=False, width=32)
stds = st.floats(0.0625, 4.0, allow_nan=False, width=32)


@settings(max_examples=12, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    mean=st.one_of(numbers.map(lambda v: [v] * 3), st.lists(numbers, min_size=3, max_size=3)),
    std=st.one_of(stds.map(lambda v: [v] * 3), st.lists(stds, min_size=3, max_size=3)),
    seed=st.integers(0, 2**16),
)
def test_the_host_step_is_exact(kind: str, mean: list[float], std: list[float], seed: int):
    torch.manual_seed(seed)
    model = Normalized(kind, mean, std).eval()
    report = check_report(capture(model, (3, 6, 6)), MAX78000, rules=rules_of(MAX78000))
    assert report.fits and report.violations == ()
    net = report.network
    assert net.is_hardware
    if any(mean):  # a shift: on the host
        assert "host-input" in {r.rule for r in report.rewrites}
        assert net.host_input is not None
        got_mean, got_std = net.host_input.mean_std()
        np.testing.assert_allclose(got_mean, mean, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got_std, std, rtol=1e-5)
    else:  # a scale alone commutes with zero padding: folded into the conv
        assert net.host_input is None
    x = torch.rand(2, 3, 6, 6, dtype=torch.float64)
    got = run_float(net, x)[net.outputs[0]]
    with torch.no_grad():
        want = model.double()(x.clone())
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))
    assert Network.from_json(net.to_json()).host_input == net.host_input


def test_a_normalization_inside_the_network_stays_a_violation_saying_why():
    class Middle(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = nn.Conv2d(3, 4, 3, padding=1)
            self.conv = nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.conv((F.relu(self.first(x)) - 0.5) / 0.25)

    report = check_report(capture(Middle().eval(), (3, 8, 8)), MAX78000, rules=rules_of(MAX78000))
    assert report.network.host_input is None
    (v,) = report.violations
    assert "not exact at the borders" in v.hint and "model's start" in v.hint


def test_an_input_also_read_raw_cannot_be_normalized_on_the_host():
    class Both(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.conv((x - 0.5) / 0.25) + x

    report = check_report(capture(Both().eval(), (3, 8, 8)), MAX78000, rules=rules_of(MAX78000))
    hints = [v.hint for v in report.violations if v.rule == "unsupported-op"]
    assert hints and "also read unnormalized" in hints[0]


def test_samples_are_normalized_on_the_host_then_quantized():
    net = check_report(
        capture(styles.NormalizedInput().eval(), (3, 4, 4)), MAX78000, rules=rules_of(MAX78000)
    ).network
    step = net.host_input
    x = np.random.default_rng(0).random((3, 4, 4)).astype(np.float32)
    read = with_host_input(load_input_array(x), step, 3)
    want = np.clip(np.rint(128 * step.apply(x, 3)), -128, 127)
    assert read.normalized and np.array_equal(read.values, want)
    ints = load_input_array(want.astype(np.int8))
    assert with_host_input(ints, step, 3) is ints  # integers: already the normalized input


@pytest.mark.parametrize("name", ["NormalizedInput", "NormalizeModuleInput"])
def test_check_and_analyze_list_no_violation(name: str, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exc:
        main(["check", f"{STYLES}:{name}", "-i", "3,16,16", "-d", "MAX78000"])
    out = capsys.readouterr().out
    assert exc.value.code in (0, None), out
    assert "0 violation(s)" in out and "input normalization (x - mean)/std on the host" in out
    with pytest.raises(SystemExit) as exc:
        main(["analyze", f"{STYLES}:{name}", "-i", "3,16,16"])
    out = capsys.readouterr().out
    assert exc.value.code in (0, None) and "violation" not in out


def test_compile_run_simulate_apply_the_host_step(tmp_path, capsys: pytest.CaptureFixture[str]):
    """The commands a user types: compile --run PASSes with the C's host step, and simulate on
    the same float input gives the known answer."""
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(1).random((3, 16, 16)).astype(np.float32) * 0.4 + 0.3)
    out = tmp_path / "out"
    args = ["compile", f"{STYLES}:NormalizeModuleInput", "-d", "MAX78000", "--ptq"]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--sample", str(x), "-o", str(out), "--run", "--no-report"])
    text = capsys.readouterr().out
    assert exc.value.code in (0, None), text
    assert "PASS" in text and "host input step: 768 inputs agree" in text
    assert "input normalization (x - mean)/std on the host" in " ".join(text.split())
    assert "cnn_host_input" in (out / "c" / "cnn.h").read_text()
    y = tmp_path / "y.npy"
    network = str(out / "network.pth")
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--network", network, "--input", str(x), "--output", str(y)])
    assert exc.value.code in (0, None), capsys.readouterr().out
    known = np.load(out / "sample_output.npz")
    assert np.array_equal(np.load(y), known[next(iter(known.files))])


def test_imagenet_normalization_keeps_the_input_in_range_and_tracks_eager(tmp_path):
    """(x - mean) / std reaches 2.6 on [0, 1] images: the host also divides by 2^2 (the first
    conv's weights carry 4), nothing is clamped and the known answer tracks the eager model."""
    from cnnforge.api.targets import compile_model
    from cnnforge.pipeline import CompileOptions
    from cnnforge.sim.agreement import output_scale

    x = np.random.default_rng(2).random((3, 16, 16)).astype(np.float32)
    options = CompileOptions(
        output=tmp_path / "out", model=f"{STYLES}:NormalizedInput", ptq=True, sample=x,
        run=True, report=False, device="MAX78000",
    )  # fmt: skip
    state = compile_model(options)
    step = state.network.host_input
    assert state.selftest.passed and step is not None and step.exponent == 2
    assert not any("clamped" in n for n in state.notes)
    torch.manual_seed(0)  # the untrained weights every command sees
    with torch.no_grad():
        eager = styles.NormalizedInput().eval()(torch.from_numpy(x)[None])[0].double().numpy()
    name = state.network.outputs[0]
    unit = output_scale(state.network, name, state.output_exponents.get(name, 0))
    got = state.answer[name] * unit
    assert np.corrcoef(got.ravel(), eager.ravel())[0, 1] >= 0.99
