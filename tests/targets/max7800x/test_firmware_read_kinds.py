"""Layer kinds of the vendor's test suite, written by cnnforge and read back (issue 38): a
passthrough that packs sparse input processors, dilated Conv1d layers (their kernels stretched
with zeros between the taps, as the vendor tool writes them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from cnnforge.targets.max7800x.firmware.writer import write_folder
from cnnforge.targets.max7800x.firmware_read import read_firmware
from support.cli import run_cli
from support.firmware import pair_firmware


def _pair(folder: Path, text: str, shapes: list[tuple[int, ...]], seed: int = 5) -> tuple:
    """A vendor pair of ``text`` with random weights of ``shapes`` (one per weight layer)."""
    rng = np.random.default_rng(seed)
    state = {}
    for i, shape in enumerate(shapes):
        state[f"l{i}.op.weight"] = torch.from_numpy(rng.integers(-128, 128, shape).astype("f4"))
        state[f"l{i}.output_shift"] = torch.tensor([-2.0])
    (folder / "n.yaml").write_text(text)
    torch.save({"arch": "kinds", "epoch": 1, "state_dict": state}, folder / "n.pth.tar")
    return folder / "n.yaml", folder / "n.pth.tar", rng


def _simulates_back(folder: Path, capsys) -> None:
    code, out, err = run_cli(["simulate", "--firmware", str(folder)], capsys)
    assert code == 0, err
    assert "PASS" in out, out


def test_a_passthrough_packs_sparse_processors(tmp_path: Path, capsys) -> None:
    """One channel on each of processors 0, 4, 8, 12, 16 passes through to 0-3 and 16: the
    hardware packs each quadrant's channels; read back so, the known answer holds."""
    text = """\
arch: kinds
dataset: kinds
layers:
  - {processors: 0x0000000000011111, output_processors: 0x000000000001000f, out_offset: 0x2000,
     operation: none, data_format: HWC}
"""
    yaml, ckpt, rng = _pair(tmp_path, text, [])
    x = rng.integers(-128, 128, (5, 9, 7))
    write_folder(pair_firmware(yaml, ckpt, x, "MAX78000", []), tmp_path / "fw")
    _simulates_back(tmp_path / "fw", capsys)
    decoded = read_firmware(tmp_path / "fw", None)
    assert decoded.plan.placements[0].out_processors == 0x1000F


@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
@pytest.mark.parametrize(("kernel", "dilation"), [(3, 4), (2, 8), (3, 2)])
def test_dilated_conv1d_runs_on_a_stretched_kernel(
    kernel: int, dilation: int, device: str, tmp_path: Path, capsys
) -> None:
    """A Conv1d of dilation d: its kernel written (k - 1) x d + 1 long with zeros between the
    taps; the folder simulates back to its known answer (the dilated convolution's)."""
    text = f"""\
arch: kinds
dataset: kinds
layers:
  - {{processors: 0x000000000000001f, out_offset: 0x2000, operation: conv1d,
     kernel_size: {kernel}, pad: 0, dilation: {dilation}, activate: None, data_format: HWC}}
"""
    yaml, ckpt, rng = _pair(tmp_path, text, [(6, 5, kernel)])
    x = rng.integers(-128, 128, (5, 40))
    fw = pair_firmware(yaml, ckpt, x, device, [])
    assert fw.facts[0].kernel == ((kernel - 1) * dilation + 1, 1)
    write_folder(fw, tmp_path / "fw")
    _simulates_back(tmp_path / "fw", capsys)
