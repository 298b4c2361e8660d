"""``cnnforge compile`` and ``pipeline.compile_model``: outputs, the self-test, determinism,
the vendor pair, and bad input (exit 2, one line, no output directory left behind)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from cnnforge.api.targets import compile_model
from cnnforge.cli import main
from cnnforge.errors import InputError
from cnnforge.pipeline import CompileOptions
from cnnforge.targets.max7800x.recipe import STEPS

TINY = """
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.head = nn.Conv2d(16, 4, 1)

    def forward(self, x):
        a = torch.relu(self.bn(self.c1(x)))
        b = torch.relu(self.c2(nn.functional.max_pool2d(a, 2)))
        return self.head(torch.cat([self.up(b), a], 1))


class Wide7(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 7, padding=3)

    def forward(self, x):
        return self.c(x)
"""


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    return int(info.value.code), out, err


@pytest.fixture
def tiny(tmp_path: Path) -> str:
    (tmp_path / "tiny.py").write_text(TINY)
    return f"{tmp_path / 'tiny.py'}:Tiny"


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(1).integers(-128, 128, (3, 16, 16)).astype(np.int8))
    return path


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_compile_run_writes_everything_and_passes(tiny, sample, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    code, text, err = run(
        ["compile", tiny, "--ptq", "--sample", str(sample), "-o", str(out), "--run", "--probe"],
        capsys,
    )
    assert code == 0, err
    assert "PASS" in text
    files = set(_tree(out))
    for name in (
        "c/cnn.c",
        "c/cnn.h",
        "c/weights.h",
        "c/main.c",
        "c/Makefile",
        "firmware/cnn.c",  # the MSDK project, written by default for a MAX7800x
        "firmware/weights.h",
        "firmware/main.c",
        "report.html",
        "summary.json",
        "sample_output.npz",
        "network.json",
        "ai8x/Tiny.yaml",
        "ai8x/Tiny-q.pth.tar",
    ):
        assert name in files, name
    facts = json.loads((out / "summary.json").read_text())
    assert facts["selftest"]["passed"] is True
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]  # no temp left
    # --probe: every C layer dumped; equal to the simulator's layers
    code, text, err = run(["diff", str(out / "probe"), str(out / "sim_layers.npz")], capsys)
    assert code == 0 and "common layers are equal" in text, text + err


def test_two_compiles_are_byte_identical(tiny, sample, tmp_path, capsys) -> None:
    for name in ("a", "b"):
        code, _, err = run(
            ["compile", tiny, "--ptq", "--sample", str(sample), "-o", str(tmp_path / name)], capsys
        )
        assert code == 0, err
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


def test_existing_output_is_kept_without_overwrite(tiny, sample, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    code, _, err = run(["compile", tiny, "--ptq", "--sample", str(sample), "-o", str(out)], capsys)
    assert code == 2
    assert "already exists" in err and len(err.strip().splitlines()) == 1
    assert (out / "mine.txt").read_text() == "keep"
    again = ["compile", tiny, "--ptq", "--sample", str(sample), "-o", str(out), "--overwrite"]
    code, _, err = run(again, capsys)  # not cnnforge's directory: refused, kept
    assert code == 2 and "did not write" in err and (out / "mine.txt").read_text() == "keep"
    (out / "mine.txt").unlink()
    code, _, err = run([*again, "--no-report"], capsys)
    assert code == 0, err
    code, _, err = run([*again, "--max-verify", "5", "--no-report"], capsys)  # cnnforge's own
    assert code == 0, err
    assert not (out / "report.html").exists()
    assert "#define CNN_VERIFY_COUNT 5L" in (out / "c" / "sampleoutput.h").read_text()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--input-shape", "3,8,8"], r"sample shape \(3, 16, 16\) does not match .*\(3, 8, 8\)"),
        ([], "give --checkpoint"),
        (["--ptq", "--weight-bits", "3"], "--weight-bits"),
        (["--ptq", "--device", "MAX99999"], "MAX99999"),
    ],
)
def test_bad_input_exits_2_without_output(tiny, sample, tmp_path, capsys, extra, message) -> None:
    out = tmp_path / "out"
    argv = ["compile", tiny, "--sample", str(sample), "-o", str(out), *extra]
    if "--input-shape" in extra:
        argv.append("--ptq")
    code, _, err = run(argv, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert re.search(message, err), err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


def test_device_limit_fails_loudly(tmp_path, sample, capsys) -> None:
    (tmp_path / "m.py").write_text(TINY)
    out = tmp_path / "out"
    code, _, err = run(
        ["compile", f"{tmp_path / 'm.py'}:Wide7", "--ptq", "--sample", str(sample), "-o", str(out)],
        capsys,
    )
    assert code == 2 and "layer c" in err, err
    assert not out.exists()


def test_vendor_pair_compiles_and_runs(ai8x_data: Path, tmp_path, capsys) -> None:
    out = tmp_path / "mnist"
    code, _, err = run(
        [
            "compile",
            "--ai8x-yaml",
            str(ai8x_data / "networks" / "mnist-chw-ai85.yaml"),
            "--ai8x-checkpoint",
            str(ai8x_data / "trained" / "ai85-mnist-qat8-q.pth.tar"),
            "-o",
            str(out),
            "--run",
        ],
        capsys,
    )
    assert code == 0, err
    facts = json.loads((out / "summary.json").read_text())
    assert facts["selftest"]["passed"] and facts["checksum"] == "f6850277"  # the vendor's answer


def test_python_api(tiny, tmp_path) -> None:
    """``compile_model`` is the library entry point (the demo calls it)."""
    seen = []
    x = np.random.default_rng(2).integers(-128, 128, (3, 16, 16))
    options = CompileOptions(
        output=tmp_path / "api", model=tiny, ptq=True, sample=x, device="MAX78000"
    )
    state = compile_model(options, on_step=lambda name, i, n: seen.append(name))
    assert seen == [name for name, _ in STEPS]
    assert state.emitted.output_size == 4 * 16 * 16
    assert set(state.answer) == set(state.network.outputs)
    with pytest.raises(InputError, match="sample shape"):
        compile_model(
            CompileOptions(
                output=tmp_path / "bad",
                model=tiny,
                ptq=True,
                sample=x[:, :8],
                input_shape=(3, 16, 16),
                device="MAX78000",
            )
        )
    assert not (tmp_path / "bad").exists()


def test_qat_and_quantized_checkpoints(tmp_path, capsys) -> None:
    """A QAT state_dict of cnnforge.nn modules keeps its integers (no --ptq); a cnnforge
    quantized checkpoint is compiled as it is."""
    from cnnforge.checkpoint import save_quantized
    from cnnforge.models import build_model
    from cnnforge.nn.policy import enable_qat, set_quantized_eval

    torch.manual_seed(0)
    model = build_model("qat-unet")
    model(torch.rand(2, 3, 32, 32) - 0.5)
    enable_qat(model)
    model(torch.rand(2, 3, 32, 32) - 0.5)
    set_quantized_eval(model)
    torch.save(model.state_dict(), tmp_path / "qat.pth")
    sample = tmp_path / "x.npy"
    np.save(sample, np.random.default_rng(4).integers(-128, 128, (3, 32, 32)).astype(np.int8))
    argv = [
        "compile",
        "qat-unet",
        "--checkpoint",
        str(tmp_path / "qat.pth"),
        "--sample",
        str(sample),
        "-o",
        str(tmp_path / "qat"),
        "--run",
        "--no-report",
    ]
    code, text, err = run(argv, capsys)
    assert code == 0 and "PASS" in text, err
    state = compile_model(
        CompileOptions(
            output=tmp_path / "again",
            model="qat-unet",
            checkpoint=tmp_path / "qat.pth",
            sample=sample,
            report=False,
            device="MAX78000",
        )
    )
    save_quantized(state.network, tmp_path / "q.pth")
    argv = [
        "compile",
        "qat-unet",
        "--checkpoint",
        str(tmp_path / "q.pth"),
        "--sample",
        str(sample),
        "-o",
        str(tmp_path / "q"),
        "--run",
        "--no-report",
    ]
    code, text, err = run(argv, capsys)
    assert code == 0 and "PASS" in text, err
    summary = json.loads((tmp_path / "q" / "summary.json").read_text())
    assert (
        summary["checksum"]
        == json.loads((tmp_path / "qat" / "summary.json").read_text())["checksum"]
    )
