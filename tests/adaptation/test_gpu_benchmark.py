"""benchmarks/gpu.py's adapt section: the fixed part and the epochs side by side, from the
times the CLI's lines came (the GPU run itself is the lead's, on a GPU machine)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu.py"


def _gpu_bench():
    spec = importlib.util.spec_from_file_location("_gpu_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_adapt_prints_the_fixed_part_and_the_epochs_side_by_side() -> None:
    bench = _gpu_bench()
    lines = [(19.0, "adapting on cuda:0"), (20.0, "epoch 0"), (21.2, "epoch 1"), (22.3, "epoch 2")]
    assert abs(bench.epoch_seconds(lines) - 1.1) < 1e-9  # the first from 'adapting on'
    said: list[str] = []
    bench.adapt_ratios(
        said.append,
        {"GPU cuda:0": (55.0, "measured"), "CPU 2 cores": (508.0, "PROJECTED")},
        {"GPU cuda:0": 1.1, "CPU 2 cores": 17.6},
        {"GPU cuda:0": 19.0, "CPU 2 cores": 38.0},
    )
    assert said[1].split()[-2:] == ["19.0", "38.0"] and said[2].split()[-2:] == ["1.1", "17.6"]
    assert "adapt fixed part: GPU 19.00 s, CPU 2 cores 38.00 s: 2.0x" in said
    assert "adapt epochs (median): GPU 1.10 s, CPU 2 cores 17.60 s: 16.0x" in said
    assert said[-1].endswith("(PROJECTED): 9.2x")
