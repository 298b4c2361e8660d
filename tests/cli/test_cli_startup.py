"""The CLI starts without torch, numpy or matplotlib: --help, --version and usage errors import
neither (issue 17); a vendor-pair compile imports only what it uses (issue 25). Measured in a
fresh interpreter; no timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cnnforge.cli.commands import COMMANDS
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


#: What a vendor-pair compile never uses: the other commands' modules (cli/commands.py imports
#: the one being run) and the heavy packages of other paths (plots, ONNX, torch.compile).
UNUSED_BY_COMPILE = (
    *(f"cnnforge.cli.{name}" for name in COMMANDS if name != "compile"),
    "matplotlib",
    "PIL",
    "onnx",
    "onnxruntime",
    "sympy",
    "torch._dynamo",
    "hypothesis",
    "scipy",
)


def test_a_vendor_pair_compile_imports_only_what_it_uses(ai8x_data: Path, tmp_path: Path) -> None:
    """``cnnforge compile --ai8x-yaml ... --firmware`` (benchmarks/vs_vendor.py, issue 25) in a
    fresh interpreter: it succeeds without importing any of ``UNUSED_BY_COMPILE``."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    code = PROBE.format(heavy=UNUSED_BY_COMPILE)
    pair = [
        "--ai8x-yaml", str(ai8x_data / "networks" / "mnist-chw-ai85.yaml"),
        "--ai8x-checkpoint", str(ai8x_data / "trained" / "ai85-mnist-qat8-q.pth.tar"),
        "--sample", str(ai8x_data / "samples" / "sample_mnist.npy"),
    ]  # fmt: skip
    args = ["compile", *pair, "-o", str(tmp_path / "out"), "--firmware", "--softmax"]
    result = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.stderr.strip().splitlines()[-1] == "HEAVY= CODE=0", result.stderr
    assert (tmp_path / "out" / "firmware" / "cnn.c").is_file()


def test_the_cli_uses_typers_public_api_only() -> None:
    """The help is shaped from the command functions' annotations, not from typer's internal
    helpers (``TyperOption.bare_type`` and the like differ between typer versions: with another
    typer every command died at startup, exit 70)."""
    import ast

    found = []
    for path in sorted((SRC / "cnnforge" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            if module.startswith("typer.") and module != "typer.main":
                found.append(f"{path.name}:{node.lineno}: from {module}")
            if isinstance(node, ast.Attribute) and node.attr in ("bare_type", "_bare_type"):
                found.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert found == []
