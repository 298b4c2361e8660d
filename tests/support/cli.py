"""Running the command line in-process, or as a user runs it (a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cnnforge.cli import main


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``cnnforge`` in-process: (exit status, stdout, stderr)."""
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def run_cnnforge(
    *args: str, cwd: Path | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """``cnnforge ARGS`` as a user runs it, output piped (not a terminal)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "cnnforge", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout,
    )  # fmt: skip


def one_error_line(r: subprocess.CompletedProcess) -> str:
    """A failed command printed exactly one line (stderr), nothing on stdout; exit status 2."""
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == "", r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]
