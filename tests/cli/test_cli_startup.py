"""The CLI starts without torch, numpy or matplotlib: --help, --version and usage errors import
neither (issue 17). Measured in a fresh interpreter; no timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO

SRC = REPO / "src"
HEAVY = ("torch", "matplotlib", "numpy")  # numpy alone costs --help ~0.2 s

PROBE = """
import sys
from cnnforge.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print("HEAVY=" + ",".join(heavy), "CODE=" + str(code), file=sys.stderr)
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    code = PROBE.format(heavy=HEAVY)
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (("--help",), 0),
        (("--version",), 0),
        (("compile", "--help"), 0),
        (("compile",), 2),  # usage error: -o missing
        (("check", "--no-such-option"), 2),
        (("frobnicate",), 2),
    ],
)
def test_cli_starts_without_torch_or_matplotlib(args: tuple[str, ...], status: int) -> None:
    result = _run(*args)
    last = result.stderr.strip().splitlines()[-1]
    assert last == f"HEAVY= CODE={status}", result.stderr


def test_the_program_flushes_its_output_before_its_quick_exit(tmp_path: Path) -> None:
    """``python -m cnnforge`` ends with os._exit after flushing: output and status survive."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for args, status, stream, text in (
        (["--version"], 0, "stdout", "cnnforge "),
        (["check", "--no-such-option"], 2, "stderr", "error: No such option"),
        (["simulate", "--input", str(tmp_path / "x.npy"), "--output", "o.npy"], 2, "stderr", ""),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "cnnforge", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert result.returncode == status, result.stderr
        assert getattr(result, stream).startswith(text or "error:"), result
