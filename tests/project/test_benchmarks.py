"""Every benchmark script runs at its smoke size (``--smoke``), as a user starts it, so that a
changed signature cannot break one unseen. Figures are printed, never asserted here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO

BENCHMARKS = REPO / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py"))


def test_every_benchmark_has_a_smoke_size() -> None:
    assert [s for s in SCRIPTS if "--smoke" not in (BENCHMARKS / s).read_text("utf-8")] == []


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_at_smoke_size(script: str, tmp_path: Path) -> None:
    extra = ["--keep", str(tmp_path / "vendor")] if script == "vendor_oracle.py" else []
    run = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--smoke", *extra],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip()


@pytest.mark.slow
def test_the_gpu_checks_run_in_one_call(tmp_path: Path) -> None:
    """benchmarks/gpu_checks.sh, what a GPU machine's one call runs (docs/training.md), at the
    smoke size: without a GPU the CUDA tests are skipped and both benchmarks' CPU parts run."""
    run = subprocess.run(
        ["bash", str(BENCHMARKS / "gpu_checks.sh"), str(tmp_path / "out"), "--smoke"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = tmp_path / "out"
    tests = (out / "gpu_tests.txt").read_text("utf-8")
    assert " skipped" in tests and "failed" not in tests and "error" not in tests.lower()
    assert "width search" in (out / "adapt_startup.txt").read_text("utf-8")
    assert (out / "gpu_benchmark.txt").read_text("utf-8").strip()
