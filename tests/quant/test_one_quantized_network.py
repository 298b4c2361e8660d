"""One way to a quantized network (pipeline.quantized): ``plan`` and ``compile`` of the same
model with the same ``--sample`` write the same vendor checkpoint, and ``quantize`` calibrated
on that sample gives compile's integers. The model's outputs leave the int8 range, so the
calibration (which ``plan`` skipped before) changes the network."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from cnnforge.checkpoint import load_quantized
from cnnforge.cli import main

LOUD = """
import torch
from torch import nn


class Loud(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 4, 3, padding=1)
        with torch.no_grad():  # large weights: float outputs far beyond the int8 range
            self.c1.weight.copy_(torch.linspace(-0.9, 0.9, self.c1.weight.numel()).view_as(
                self.c1.weight))
            self.c2.weight.copy_(torch.linspace(0.9, -0.5, self.c2.weight.numel()).view_as(
                self.c2.weight))

    def forward(self, x):
        return self.c2(torch.relu(self.c1(x)))
"""


def _run(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    out, err = capsys.readouterr()
    assert stop.value.code in (0, None), err
    return out


def _vendor_state(folder: Path) -> dict[str, np.ndarray]:
    (path,) = folder.rglob("*-q.pth.tar")
    data = torch.load(path, map_location="cpu", weights_only=False)
    return {k: np.asarray(v) for k, v in data["state_dict"].items()}


@pytest.fixture
def loud(tmp_path: Path) -> tuple[str, Path]:
    (tmp_path / "loud.py").write_text(LOUD)
    sample = tmp_path / "x.npy"
    np.save(sample, np.random.default_rng(3).integers(-128, 128, (3, 8, 8)).astype(np.int8))
    torch.manual_seed(0)
    return f"{tmp_path / 'loud.py'}:Loud", sample


def test_plan_and_compile_give_the_same_network(loud, tmp_path: Path, capsys) -> None:
    model, sample = loud
    common = [model, "-i", "3,8,8", "--sample", str(sample)]
    _run(["compile", *common, "--ptq", "-o", str(tmp_path / "c"), "--no-report"], capsys)
    _run(["plan", *common, "-o", str(tmp_path / "p")], capsys)
    notes = json.loads((tmp_path / "c" / "summary.json").read_text())["notes"]
    assert any("is calibrated" in n for n in notes), notes  # the calibration mattered
    compiled, planned = _vendor_state(tmp_path / "c"), _vendor_state(tmp_path / "p")
    assert compiled.keys() == planned.keys()
    for key, value in compiled.items():
        np.testing.assert_array_equal(value, planned[key], err_msg=key)
    # The written sample is the one given, so it is the known answer's input too.
    (planned_sample,) = (tmp_path / "p").glob("sample_*.npy")
    np.testing.assert_array_equal(np.load(planned_sample), np.load(sample).astype(np.int64))
    # Without --sample, plan does not calibrate: a different network, as before.
    _run(["plan", model, "-i", "3,8,8", "-o", str(tmp_path / "u")], capsys)
    uncalibrated = _vendor_state(tmp_path / "u")
    assert any(not np.array_equal(v, uncalibrated[k]) for k, v in compiled.items())


def test_quantize_calibrated_on_the_sample_matches_compile(loud, tmp_path: Path, capsys) -> None:
    model, sample = loud
    _run(["compile", model, "-i", "3,8,8", "--sample", str(sample), "--ptq", "-o",
          str(tmp_path / "c"), "--no-report"], capsys)  # fmt: skip
    _run(["quantize", model, "-i", "3,8,8", "--calibration", str(sample), "-o",
          str(tmp_path / "q.pth")], capsys)  # fmt: skip
    compiled = load_quantized(tmp_path / "c" / "network.pth")
    quantized = load_quantized(tmp_path / "q.pth")
    for layer in quantized.layers:
        if layer.quant is None:
            continue
        other = compiled.layer(layer.name).quant
        assert other.weight_bits == layer.quant.weight_bits
        assert other.output_shift == layer.quant.output_shift
        np.testing.assert_array_equal(other.weights, layer.quant.weights)
        np.testing.assert_array_equal(other.bias, layer.quant.bias)
