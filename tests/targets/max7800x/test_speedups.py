"""The MAX78002's calcx4 and read-ahead (targets/max7800x/speedups.py; their firmware against
the vendor tool's: test_firmware_cases speedups-*): which layers take them, the rules, the
refusals in one line, and the YAML keys both ways."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.device import MAX78002
from cnnforge.targets.max7800x.speedups import read_ahead_conflict, speedup_issues
from support.cli import run_cli
from support.firmware import own_sample
from support.firmware_cases import MODELS, Case, compiled


def test_compile_names_the_layers_that_take_them() -> None:
    """--calcx4 on the 3x3 layers with channels in fours, not the 68-channel one nor the 1x1;
    the YAML says so per layer and reads back the same."""
    fw, out = compiled(Case("Speedups", "MAX78002", options=("--calcx4",)))
    assert [f.calcx4 for f in fw.facts] == [True, False, True, False]
    text = (out / "ai8x" / "Speedups.yaml").read_text(encoding="utf-8")
    assert text.count("calcx4: true") == 2
    again = read_ai8x(
        out / "ai8x" / "Speedups.yaml",
        out / "ai8x" / "Speedups-q.pth.tar",
        (3, 16, 16),
        device="MAX78002",
    )
    assert [p.calcx4 for p in again.plan.placements] == [True, False, True, False]
    every = read_ai8x(
        out / "ai8x" / "Speedups.yaml",
        out / "ai8x" / "Speedups-q.pth.tar",
        (3, 16, 16),
        device="MAX78002",
        read_ahead=True,
    )  # the vendor's --read-ahead: every layer
    assert all(p.read_ahead for p in every.plan.placements)


def test_read_ahead_needs_input_and_output_in_different_memories() -> None:
    """The vendor's rule: the first and the last words of input and output lie in different
    16 KiB memories of the data-memory instance."""
    _, out = compiled(Case("Speedups", "MAX78002"))
    model = read_ai8x(
        out / "ai8x" / "Speedups.yaml", out / "ai8x" / "Speedups-q.pth.tar", (3, 16, 16),
        device="MAX78002",
    )  # fmt: skip
    network, plan = model.network, model.plan
    assert "share a memory" in read_ahead_conflict(network, plan, 1, MAX78002)
    apart = [replace(p, in_offset=0x8000 * (i % 2), out_offset=0x8000 * ((i + 1) % 2))
             for i, p in enumerate(plan.placements)]  # fmt: skip
    assert read_ahead_conflict(network, replace(plan, placements=tuple(apart)), 1, MAX78002) == ""
    ahead = replace(plan, placements=tuple(replace(p, read_ahead=True) for p in plan.placements))
    assert [name for name, _ in speedup_issues(network, ahead, MAX78002)] == ["a", "b", "c", "head"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--device", "MAX78000", "--calcx4"], "--calcx4 is a MAX78002 option"),
        (["--device", "HLS", "--read-ahead"], "--read-ahead is for MAX78000/MAX78002"),
    ],
)
def test_compile_refuses_them_elsewhere_in_one_line(
    args: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "x.npy", own_sample((3, 16, 16)))
    code, _, err = run_cli(
        ["compile", f"{MODELS}:Speedups", "--ptq", "-i", "3,16,16", "--sample",
         str(tmp_path / "x.npy"), "-o", str(tmp_path / "out"), "--no-report", *args],
        capsys,
    )  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert needle in err and not (tmp_path / "out").exists()


def test_a_max78002_yaml_key_on_the_max78000_is_refused_at_its_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, out = compiled(Case("Speedups", "MAX78002", options=("--calcx4",)))
    code, _, err = run_cli(
        ["compile", "--ai8x-yaml", str(out / "ai8x" / "Speedups.yaml"), "--ai8x-checkpoint",
         str(out / "ai8x" / "Speedups-q.pth.tar"), "--device", "MAX78000", "-i", "3,16,16",
         "--sample", str(out.parent / "x.npy"), "-o", str(tmp_path / "o"), "--no-report"],
        capsys,
    )  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "Speedups.yaml:" in err and "`calcx4` is not supported on MAX78000" in err
