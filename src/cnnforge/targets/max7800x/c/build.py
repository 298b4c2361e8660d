"""Build the generated C with the host compiler and run its known-answer self-test."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from cnnforge.c_text import RunResult, run_exe
from cnnforge.errors import EmitError
from cnnforge.resources import tool_ran_out

#: The flags the acceptance criteria name (issue #6).
STRICT_CFLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2")
SANITIZE_CFLAGS = ("-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all")
SOURCES = ("main.c", "cnn.c", "cnn_kernels.c")


def find_cc(cc: str = "cc") -> str:
    """Path of the C compiler, or EmitError with a hint."""
    path = shutil.which(cc)
    if path is None:
        raise EmitError(f"C compiler {cc!r} not found", hint="install a C compiler or omit --run")
    return path


def compile_c(
    c_dir: Path,
    exe: Path,
    *,
    sources: tuple[str, ...] = SOURCES,
    extra: tuple[str, ...] = (),
    cc: str = "cc",
) -> None:
    """Compile ``sources`` of ``c_dir`` with the strict flags into ``exe``; EmitError on failure."""
    cmd = [find_cc(cc), *STRICT_CFLAGS, *extra, "-o", str(exe), *sources]
    proc = subprocess.run(cmd, cwd=c_dir, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tool_ran_out(proc.stderr, str(c_dir), proc.returncode)  # out of files, space: say so
        first = (proc.stderr.strip().splitlines() or ["(no output)"])[0]
        raise EmitError(f"the generated C does not compile: {first}", where=str(c_dir))


def build_and_run(
    c_dir: Path, *, sanitize: bool = False, build_dir: Path | None = None, cc: str = "cc"
) -> RunResult:
    """Compile the project in ``c_dir`` (optionally with sanitizers) into ``build_dir`` (default
    ``c_dir``) and run its self-test."""
    c_dir = Path(c_dir)
    exe = Path(build_dir or c_dir) / ("cnn_test_asan" if sanitize else "cnn_test")
    compile_c(c_dir, exe.resolve(), extra=SANITIZE_CFLAGS if sanitize else (), cc=cc)
    return run_exe(exe.resolve())
