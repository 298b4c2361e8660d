"""Every benchmark script runs at its smoke size (``--smoke``), as a user starts it, so that a
changed signature cannot break one unseen. Figures are printed, never asserted here."""

from __future__ import annotations

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
