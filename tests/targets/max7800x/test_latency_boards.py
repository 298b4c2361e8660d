"""The predicted inference time against times measured on MAX78000 boards and published with
the vendor's examples (tests/data/latency_boards.json; docs/firmware.md, "Latency"): within
0.5 % for the networks that do not stream, within 2 % for the two that stream (the streaming
factor of targets/max7800x/latency.py is calibrated on those two). compile prints the time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cnnforge.targets.max7800x.metrics import latency
from support.cli import run_cli
from support.firmware import demo_pair_args
from support.latency_boards import board_model, boards

BOARDS = {b.name: b for b in boards()}


def test_published_figures_cover_streaming_and_not() -> None:
    models = {name: board_model(b) for name, b in BOARDS.items()}
    streams = {n for n, m in models.items() if any(p.streaming for p in m.plan.placements)}
    assert streams == {"cats-dogs --fifo", "faceid --fifo"}
    assert len(BOARDS) - len(streams) >= 5


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_predicted_time_matches_the_board(name: str) -> None:
    board = BOARDS[name]
    model = board_model(board)
    time = latency(model.network, model.plan)
    assert time.clock_mhz == 50 and time.vendor_model
    tolerance = 0.02 if time.streaming else 0.005
    assert abs(time.time_us / board.published_us - 1) < tolerance, (time.time_us, board)


def test_compile_prints_the_predicted_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The summary's latency row, summary.json's record and report.html: mnist, 1,403.2 us at
    50 MHz."""
    out = tmp_path / "out"
    args = [*demo_pair_args("MAX78000-mnist", tmp_path), "-o", str(out), "--no-firmware"]
    code, printed, err = run_cli(args, capsys)
    assert code == 0, err
    assert "1,403.2 us at the 50 MHz CNN clock" in " ".join(printed.split())
    record = json.loads((out / "summary.json").read_text(encoding="utf-8"))["latency"]
    assert record["cycles"] == 70158 and record["clock_mhz"] == 50.0
    assert record["text"] in (out / "report.html").read_text(encoding="utf-8")
