"""Issue 27's examples, each run as the user runs it: input that asks for more than the machine
has, or holds a value that is not a number, ends in one line naming the input and the figure,
exit 2 — at once, before any allocation or tracing."""

from __future__ import annotations

import json
import math
import shutil
import struct
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from cnnforge.checkpoint import FORMAT
from cnnforge.resources import format_bytes, parse_memory
from support.fuzz import run_cli
from support.paths import AI8X

MODEL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, out_channels: int = 4):
        super().__init__()
        self.conv = nn.Conv2d(3, out_channels, 3, padding=1)
        self.head = nn.Conv2d(out_channels, 2, 1)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)))


class Huge(Net):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(100000, 100000)


class Bomb(Net):
    def __getattr__(self, name):
        return self.__getattr__(name + "x")


class Raises(Net):
    def __getattribute__(self, name):
        if name == "training":
            raise RuntimeError("no training here")
        return super().__getattribute__(name)


class Greedy(Net):
    def forward(self, x):
        return self.head(self.conv(x)) + torch.empty(10**13).sum()
"""
VENDOR = pytest.mark.skipif(not AI8X.is_dir(), reason="../shared/data/ai8x is not present")
YAML = AI8X / "networks" / "mnist-chw-ai85.yaml"
CKPT = AI8X / "trained" / "ai85-mnist-qat8-q.pth.tar"
SAMPLE = AI8X / "samples" / "sample_mnist.npy"
PAIR = ["--ai8x-yaml", str(YAML), "--ai8x-checkpoint", str(CKPT)]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "model.py").write_text(MODEL, encoding="utf-8")
    return tmp_path


def refused(args: list[str], cwd: Path, *figures: str, seconds: float = 60) -> str:
    """Run ``cnnforge ARGS``: exit 2, one line naming each of ``figures``, nothing written."""
    before = sorted(p.name for p in cwd.iterdir())
    start = time.monotonic()
    outcome = run_cli(args, cwd)
    took = time.monotonic() - start
    lines = outcome.err.strip().splitlines()
    assert outcome.code == 2, outcome.err
    assert len(lines) == 1 and lines[0].startswith("error: ") and "(hint: " in lines[0], lines
    assert "Traceback" not in outcome.err + outcome.out
    for figure in figures:
        assert figure in lines[0], (figure, lines[0])
    assert sorted(p.name for p in cwd.iterdir()) == before
    assert took < seconds, f"{took:.0f} s"
    return lines[0]


@pytest.mark.parametrize("command", ["check", "analyze", "quantize"])
@pytest.mark.parametrize(
    ("shape", "figures"),
    [
        ("3,100000,100000", ("3x100000x100000", "112 GB")),
        ("3,65536,65536", ("3x65536x65536", "48 GB")),
        ("999999999999999999999,1,1", ("999999999999999999999", "2147483647")),
    ],
)
def test_absurd_input_shapes(work: Path, command: str, shape: str, figures: tuple) -> None:
    out = ["-o", "q.pth"] if command == "quantize" else []
    refused([command, "model.py:Net", "-i", shape, *out], work, *figures, seconds=20)


def test_a_wide_layer_is_estimated_before_tracing(work: Path) -> None:
    args = ["analyze", "model.py:Net", "-i", "3,512,512", "--model-arg", "out_channels=100000"]
    line = refused(args, work, "3x512x512", "97.7 GB")  # 100000 x 512 x 512 float32
    assert "activations" in line


def test_a_huge_layer_is_refused_before_it_is_built(work: Path) -> None:
    args = ["quantize", "model.py:Huge", "-i", "3,8,8", "-o", "q.pth"]
    refused(args, work, "model.py:Huge", "37.3 GB of weights")  # 10^10 float32 weights


def test_a_small_model_at_a_large_input_is_refused_under_max_memory(work: Path) -> None:
    args = ["quantize", "model.py:Net", "-i", "3,4096,4096", "-o", "q.pth", "--max-memory", "1G"]
    refused(args, work, "3x4096x4096", "1.69 GB", "--max-memory is 1 GB")


def test_max_memory_goes_before_or_after_the_command(work: Path) -> None:
    for args in (
        ["--max-memory", "1M", "check", "model.py:Net", "-i", "3,1000,1000"],
        ["check", "model.py:Net", "-i", "3,1000,1000", "--max-memory=1M"],
    ):
        refused(args, work, "3x1000x1000", "11.4 MB", "--max-memory is 1 MB")
    refused(["check", "--max-memory", "lots"], work, "'lots'")


def test_a_model_that_fits_still_runs_under_max_memory(work: Path) -> None:
    outcome = run_cli(["check", "model.py:Net", "-i", "3,16,16", "--max-memory", "64M"], work)
    assert outcome.code == 0, outcome.err


def test_check_answers_a_100000_class_model_at_once(work: Path) -> None:
    args = ["check", "qat-unet", "--model-arg", "classes=100000"]
    refused(args, work, "out_channels=100000", "at most 1024", seconds=20)
    args = ["quantize", "qat-unet", "-i", "3,32,32", "--model-arg", "classes=5000", "-o", "q.pth"]
    refused(args, work, "out_channels=5000", "MAX78000 allows at most 1024", seconds=20)


def _npy_claiming(path: Path, shape: tuple[int, ...]) -> None:
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape!r}, }}"
    header += " " * (-(len(header) + 11) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())


@VENDOR
def test_an_npy_header_is_checked_against_the_file_size(work: Path) -> None:
    _npy_claiming(work / "big.npy", (10**12, 28, 28))
    args = ["simulate", *PAIR, "--input", "big.npy", "--output", "o.npy"]
    refused(args, work, "big.npy", "1000000000000x28x28", "2.79 PB", "0 B")


@VENDOR
def test_a_torch_checkpoint_where_an_npy_belongs_is_named(work: Path) -> None:
    torch.save({"a": torch.zeros(3)}, work / "t.npy")
    args = ["simulate", *PAIR, "--input", "t.npy", "--output", "o.npy"]
    refused(args, work, "t.npy", "zip archive", "torch checkpoint")


@VENDOR
def test_an_npy_where_a_checkpoint_belongs_is_named(work: Path) -> None:
    np.save(work / "a.npy", np.zeros((1, 28, 28), np.int8))
    refused(
        ["check", "--ai8x-yaml", str(YAML), "--ai8x-checkpoint", "a.npy"], work, "a.npy", "NumPy"
    )
    refused(["check", "model.py:Net", "-i", "3,8,8", "--checkpoint", "a.npy"], work, "NumPy")


@VENDOR
def test_deeply_nested_network_json(work: Path) -> None:
    doc = {"format": FORMAT, "network": "[" * 100_000 + "]" * 100_000, "layers": {}}
    torch.save(doc, work / "deep.pth")
    args = ["simulate", "--network", "deep.pth", "--input", str(SAMPLE), "--output", "o.npy"]
    refused(args, work, "deep.pth", "nested 100000 levels")


@VENDOR
@pytest.mark.parametrize("epoch", [math.nan, math.inf, -math.inf, 2**70])
@pytest.mark.parametrize("command", ["check", "plan"])
def test_a_non_finite_epoch(work: Path, epoch: float, command: str) -> None:
    doc = torch.load(CKPT, map_location="cpu", weights_only=False)
    doc = {k: v for k, v in doc.items() if k != "optimizer_type"}
    torch.save({**doc, "epoch": epoch}, work / "c.pth.tar")
    args = [command, "--ai8x-yaml", str(YAML), "--ai8x-checkpoint", "c.pth.tar"]
    args += ["-o", "out"] if command == "plan" else []
    refused(args, work, "c.pth.tar", f"`epoch` is {epoch!r}")


def test_a_getattr_bomb_is_the_models_error(work: Path) -> None:
    line = refused(["check", "model.py:Bomb", "-i", "3,8,8"], work, "RecursionError")
    line_no = MODEL.splitlines().index('        return self.__getattr__(name + "x")') + 1
    assert f"{work / 'model.py'}:{line_no}:" in line  # the user's file:line


def test_model_code_raising_during_capture_is_the_models_error(work: Path) -> None:
    line = refused(["check", "model.py:Raises", "-i", "3,8,8"], work, "no training here")
    assert str(work / "model.py") in line


def test_an_allocation_past_the_estimate_still_ends_in_one_line(work: Path) -> None:
    refused(["analyze", "model.py:Greedy", "-i", "3,8,8"], work, "40000000000000 bytes")


def test_an_output_name_too_long(work: Path) -> None:
    name = "x" * 300 + ".pth"
    refused(["quantize", "model.py:Net", "-i", "3,8,8", "-o", name], work, "(304 characters)")


def test_memory_sizes() -> None:
    assert parse_memory("512M") == 512 * 2**20
    assert parse_memory("1.5GB") == int(1.5 * 2**30)
    assert parse_memory("2GiB") == 2 * 2**30
    assert parse_memory("1000") == 1000
    assert format_bytes(120 * 10**9) == "112 GB"
    assert json.dumps(format_bytes(0)) == '"0 B"'


@VENDOR
def test_a_vendor_sample_of_absurd_shape_is_refused(work: Path) -> None:
    """The sample next to a vendor YAML gives the input shape: a (sparse) 40 GB one is refused."""
    shutil.copy(YAML, work / YAML.name)
    _npy_claiming(work / "sample_mnist.npy", (1, 100000, 100000))
    with open(work / "sample_mnist.npy", "r+b") as f:
        f.truncate(4 * 10**10 + 128)
    args = ["check", "--ai8x-yaml", YAML.name, "--ai8x-checkpoint", str(CKPT), "--max-memory", "1G"]
    refused(args, work, "1x100000x100000", "37.3 GB", "--max-memory is 1 GB")
