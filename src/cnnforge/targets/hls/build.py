"""C-simulation of an emitted HLS project: g++ against the ap_types headers of hls4ml or
``$CNNFORGE_AP_TYPES`` (``-isystem``: ``-Werror`` judges only our code), then run."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

from cnnforge.c_text import RunResult, run_exe
from cnnforge.errors import EmitError
from cnnforge.resources import tool_ran_out

STRICT_CXXFLAGS = ("-std=c++17", "-Wall", "-Wextra", "-Werror")
SANITIZE_CXXFLAGS = ("-O1", "-g", "-fsanitize=address,undefined", "-fno-omit-frame-pointer")
#: ap_private.h shifts negative values left (defined from C++20 on, undefined in C++17):
#: UBSan's shift-base check is suppressed for that one header, nowhere else.
UBSAN_SUPPRESSIONS = "shift-base:ap_private.h\n"


def find_ap_types() -> Path | None:
    """The ap_types include directory ($CNNFORGE_AP_TYPES, else hls4ml's), or None."""
    env = os.environ.get("CNNFORGE_AP_TYPES")
    if env:
        return Path(env) if (Path(env) / "ap_int.h").is_file() else None
    spec = importlib.util.find_spec("hls4ml")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / "templates" / "vivado" / "ap_types"
        if (path / "ap_int.h").is_file():
            return path
    return None


def require_ap_types() -> Path:
    """``find_ap_types()`` or EmitError with the hint to install them."""
    path = find_ap_types()
    if path is None:
        raise EmitError(
            "the ap_types headers are not installed",
            hint="pip install 'cnnforge[test]' (hls4ml ships them) or set CNNFORGE_AP_TYPES",
        )
    return path


def compile_cpp(
    cwd: Path, exe: Path, sources: tuple[str, ...], *, sanitize: bool = False,
    opt: str = "-O2", extra: tuple[str, ...] = (),
) -> None:  # fmt: skip
    """g++ with the strict flags (and sanitizers) into ``exe``; EmitError on failure."""
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    if cxx is None:
        raise EmitError("C++ compiler g++ not found", hint="install g++ or omit --run")
    flags = (*STRICT_CXXFLAGS, *(SANITIZE_CXXFLAGS if sanitize else (opt,)), *extra)
    cmd = [cxx, *flags, "-isystem", str(require_ap_types()), "-o", str(exe), *sources]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tool_ran_out(proc.stderr, str(cwd), proc.returncode)  # out of files, space: say so
        first = next((x for x in proc.stderr.splitlines() if "error" in x), proc.stderr[:300])
        raise EmitError(f"the generated HLS C++ does not compile: {first}", where=str(cwd))


def csim(
    project: Path, top: str, *, sanitize: bool = False, build_dir: Path | None = None
) -> RunResult:
    """Build ``<top>.cpp`` + ``tb.cpp`` of ``project`` and run the testbench."""
    build = Path(build_dir or project).resolve()
    exe = build / ("csim_asan" if sanitize else "csim")
    compile_cpp(Path(project), exe, (f"{top}.cpp", "tb.cpp"), sanitize=sanitize)
    if not sanitize:
        return run_exe(exe)
    supp = build / "ubsan.supp"
    supp.write_text(UBSAN_SUPPRESSIONS, "utf-8")
    env = {**os.environ, "UBSAN_OPTIONS": f"suppressions={supp}:halt_on_error=1:print_stacktrace=1"}
    proc = subprocess.run(
        [str(exe)], capture_output=True, text=True, env=env, timeout=600, check=False
    )
    text = (proc.stdout + proc.stderr).strip()
    return RunResult(proc.returncode == 0 and text.startswith("PASS"), text, proc.returncode)
