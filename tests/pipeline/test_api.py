"""The Python API (docs/python-api.md): models in memory, the CLI's numbers, nothing printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import cnnforge
from cnnforge.errors import CnnforgeError, InputError
from support.cli import run_cli
from support.paths import REPO


class _Net(nn.Module):
    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.b1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c2(torch.relu(self.b1(self.c1(x))))


SHAPE = (3, 16, 16)


def _model() -> nn.Module:
    torch.manual_seed(0)
    m = _Net()
    with torch.no_grad():
        m.b1.running_mean.uniform_(-0.2, 0.2)
        m.b1.running_var.uniform_(0.5, 1.5)
    return m.eval()


def _sample() -> np.ndarray:
    return np.random.default_rng(1).uniform(-1, 1, SHAPE).astype(np.float32)


def test_public_names_are_the_commands() -> None:
    import cnnforge.adaptation.run
    import cnnforge.pipeline.compile
    import cnnforge.training.run  # no subpackage shadows a public function

    for name in ("analyze", "check", "quantize", "plan", "compile", "simulate", "budget",
                 "evaluate", "train", "adapt", "inspect", "diff", "demo"):  # fmt: skip
        assert name in cnnforge.__all__
        assert callable(getattr(cnnforge, name)), name
        assert getattr(cnnforge, name).__doc__


def test_analyze_a_module_object_counts_every_parameter() -> None:
    m = _model()
    a = cnnforge.analyze(m, SHAPE)
    assert a.totals.params == sum(p.numel() for p in m.parameters())
    assert a.totals.macs > 0 and a.layers
    assert "Analysis(_Net" in repr(a) and "<table>" in a._repr_html_()


def test_a_class_with_model_args_and_the_callers_module_untouched() -> None:
    a = cnnforge.analyze(_Net, SHAPE, model_args={"classes": 2})
    assert a.layers[-1].out_shape == (2, 16, 16)
    m = _model().train()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    cnnforge.check(m, "MAX78000", SHAPE)
    assert m.training  # evaluation mode was set on a copy
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())


def test_check_result_and_bad_input_raise_the_cli_message() -> None:
    r = cnnforge.check(_model(), "MAX78000", SHAPE)
    assert r.fits and not r.violations and r.rewrites
    with pytest.raises(InputError, match="no input_shape"):
        cnnforge.analyze(_model())
    with pytest.raises(CnnforgeError):
        cnnforge.check(_model(), "NOPE", SHAPE)
    with pytest.raises(InputError, match="do not apply to a model object"):
        cnnforge.analyze(_model(), SHAPE, model_args={"classes": 3})


def test_compile_simulate_equals_the_cli_on_the_written_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = _sample()
    c = cnnforge.compile(_model(), input_shape=SHAPE, ptq=True, sample=x,
                         output_dir=tmp_path / "out")  # fmt: skip
    assert c.report_html is not None and all(f.exists() for f in c.files)
    assert c.run().startswith("PASS")
    np.save(tmp_path / "x.npy", x)
    code, _, err = run_cli([
        "simulate", "--network", str(tmp_path / "out" / "network.pth"),
        "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"),
    ], capsys)  # fmt: skip
    assert code == 0, err
    assert np.array_equal(c.simulate(x), np.load(tmp_path / "y.npy"))
    assert np.array_equal(c.simulate(torch.from_numpy(x)), cnnforge.simulate(c, x))
    assert np.array_equal(cnnforge.simulate(c, x, cpu=True), cnnforge.simulate(c, x))
    cnnforge.compile(_model(), input_shape=SHAPE, ptq=True, sample=x, cpu=True,
                     output_dir=tmp_path / "cpu", report=False)  # fmt: skip
    known = [np.load(d / "sample_output.npz") for d in (tmp_path / "out", tmp_path / "cpu")]
    assert all(np.array_equal(known[0][k], known[1][k]) for k in known[0].files)
    assert "<table>" in c._repr_html_()


def test_quantize_and_plan_in_memory(tmp_path: Path) -> None:
    x = _sample()
    q = cnnforge.quantize(_model(), SHAPE, calibration=x[None], output=tmp_path / "q.pth")
    assert q.path is not None and q.path.is_file()
    assert np.array_equal(q.simulate(x), cnnforge.simulate(tmp_path / "q.pth", x))
    p = cnnforge.plan(_model(), "MAX78002", SHAPE)
    assert len(p.plan.placements) == len(p.network.layers)


@pytest.mark.parametrize("command", ["analyze", "check", "budget"])
def test_cli_json_equals_the_api_result(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    spec = f"{Path(__file__)}:_Net"
    if command == "budget":
        api = cnnforge.budget(_Net, "generic:onchip=16KiB", SHAPE).to_dict()
        args = ["budget", spec, "-d", "generic:onchip=16KiB", "-i", "3,16,16", "--json", "-"]
    elif command == "check":
        api = cnnforge.check(_Net, "MAX78000", SHAPE).to_dict()
        args = ["check", spec, "-i", "3,16,16", "--json", "-"]
    else:
        api = cnnforge.analyze(_Net, SHAPE).to_dict()
        args = ["analyze", spec, "-i", "3,16,16", "--json", "-"]
    capsys.readouterr()
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    cli = json.loads(out)
    cli.pop("network", None), api.pop("network", None)  # the name: file reference vs class
    assert cli == json.loads(json.dumps(api))


def test_import_cnnforge_imports_no_torch() -> None:
    code = "import sys, cnnforge; assert 'torch' not in sys.modules and 'numpy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_the_documented_example_script_runs(tmp_path: Path) -> None:
    """examples/python_api.py: a model class defined in __main__, analyze -> simulate."""
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "python_api.py"), str(tmp_path / "out")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "C self-test: PASS" in done.stdout
    assert "arg-max agrees" in done.stdout


class _Up(nn.Module):
    """A nearest upsample: the checker rewrites it into a convolution the accelerator runs."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.b = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.up(self.pool(torch.relu(self.a(x)))))


def test_compile_says_why_its_macs_differ_from_analyze(tmp_path: Path) -> None:
    """Issue 29: analyze and compile count MACs on different networks; the summary says which
    layers the rewrites changed, and the figures add up."""
    torch.manual_seed(0)
    model = _Up().eval()
    analyzed = cnnforge.analyze(model, SHAPE).totals.macs
    c = cnnforge.compile(model, input_shape=SHAPE, ptq=True, sample=_sample(),
                         output_dir=tmp_path / "out")  # fmt: skip
    notes = [n for n in c.summary["notes"] if n.startswith("MACs:")]
    assert len(notes) == 1, c.summary["notes"]
    delta = c.summary["macs"] - analyzed
    assert f"counts {analyzed:,}" in notes[0] and f"up {delta:+,} (upsample as" in notes[0]
    plain = cnnforge.compile(_model(), input_shape=SHAPE, ptq=True, sample=_sample(),
                             output_dir=tmp_path / "plain")  # fmt: skip
    assert not [n for n in plain.summary["notes"] if n.startswith("MACs:")]
