"""The memory a request may use (``--max-memory`` or ``MemAvailable``, in a ``ContextVar`` the CLI
sets) and the check that refuses one needing more, from shapes, before any work."""

from __future__ import annotations

import contextlib
import errno
import math
import os
import re
from collections.abc import Iterator, Sequence
from contextvars import ContextVar

from cnnforge.errors import InputError

try:  # imported now: with no file descriptor left, importing it then would fail (EMFILE)
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]

#: The ``--max-memory`` of the command running now (None: the machine's available memory).
_LIMIT: ContextVar[int | None] = ContextVar("cnnforge_max_memory", default=None)
#: No single size (an axis, a channel count) of a real network comes near this.
MAX_DIMENSION = 2**31 - 1
_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)(I?B)?\s*", re.IGNORECASE)
#: Fallback when the machine does not say (not Linux, no /proc): assume this much.
FALLBACK_BYTES = 4 * 2**30


def parse_memory(text: str, option: str = "--max-memory") -> int:
    """``"8G"``, ``"512M"``, ``"1.5GB"``, ``"2GiB"``, ``"1000000"`` (bytes) -> bytes."""
    match = _SIZE.fullmatch(str(text))
    value = float(match.group(1)) * _UNITS[match.group(2).upper()] if match else math.nan
    if not match or not math.isfinite(value) or value < 1 or value > 2**60:
        raise InputError(
            f"{option} {text!r} is not a memory size", hint="write a size such as 512M, 8G or 1.5GB"
        )
    return int(value)


def available_memory() -> int:
    """The memory this machine can give a new allocation now (Linux ``MemAvailable``)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/meminfo", encoding="ascii") as info:
        for line in info:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return FALLBACK_BYTES


def memory_limit() -> int:
    """The limit in force: the command's ``--max-memory``, else the available memory."""
    limit = _LIMIT.get()
    return available_memory() if limit is None else limit


def _limit_text() -> str:
    given = _LIMIT.get()
    if given is None:
        return f"this machine has {format_bytes(available_memory())} available"
    return f"--max-memory is {format_bytes(given)}"


@contextlib.contextmanager
def memory_limit_set(limit: int | None) -> Iterator[None]:
    """Within the block, ``memory_limit()`` is ``limit`` (None: the machine's memory)."""
    token = _LIMIT.set(limit)
    try:
        yield
    finally:
        _LIMIT.reset(token)


def format_bytes(n: float) -> str:
    """``123456789`` -> ``"118 MB"`` (binary units, at most three digits)."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} PB"  # pragma: no cover - the loop returns


def shape_text(shape: Sequence[int]) -> str:
    """``(3, 64, 64)`` -> ``"3x64x64"``."""
    return "x".join(str(int(n)) for n in shape)


def require(need: int, what: str, hint: str) -> None:
    """Refuse (``InputError``) when ``need`` bytes exceed the limit: ``what`` names the request."""
    if need > memory_limit():
        raise InputError(
            f"{what} needs {format_bytes(need)}; {_limit_text()}",
            hint=f"{hint}, or raise --max-memory if the machine has it",
        )


def check_input_shape(shape: Sequence[int], option: str = "--input-shape") -> None:
    """Every size of an input shape is a plausible number, and one float32 input fits."""
    text = shape_text(shape)
    for n in shape:
        if not 0 < int(n) <= MAX_DIMENSION:
            raise InputError(
                f"{option} {text}: size {n} is beyond any input (at most {MAX_DIMENSION})",
                hint="give the model's input shape, e.g. 3,64,64",
            )
    require(
        4 * math.prod(int(n) for n in shape),
        f"input {text} as float32",
        "give a smaller --input-shape",
    )


class ResourceError(InputError):
    """The machine ran out of something (disk, quota, open files) or refused a write; ``cause`` is
    the ``OSError``, ``path`` the file named (``renamed`` by an outer stage)."""

    default_hint = "free what ran out, or choose another output path"
    cause: OSError
    path: str | None
    doing: str

    def renamed(self, shown: str | None) -> ResourceError:
        """The same error naming ``shown`` instead (None: unchanged)."""
        return self if shown is None else resource_error(self.cause, shown, self.doing)


#: What ran out (or stood in the way), by errno, and what the user can do about it.
_RAN_OUT = {
    errno.ENOSPC: ("no space left on device", "free some space there or choose another path"),
    errno.EDQUOT: ("disk quota exceeded", "free some of your quota or choose another path"),
    errno.EFBIG: ("file size limit exceeded", "raise the limit (ulimit -f) or choose another path"),
    errno.EROFS: ("read-only file system", "choose a path on a writable file system"),
    errno.EACCES: ("permission denied", "choose a path you may write, or change its permissions"),
    errno.EPERM: ("operation not permitted", "choose a path you may write"),
    errno.EMFILE: ("too many open files", "raise the limit (ulimit -n 1024) and run again"),
    errno.ENFILE: ("the system's table of open files is full", "close other programs and rerun"),
    errno.ENOENT: ("a file or folder vanished", "something removed it while cnnforge ran; rerun"),
}


#: The errors of a write that found no room (the file written last is the one named).
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def is_resource_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a write the machine refused (space, quota, limits, permissions)."""
    return isinstance(exc, OSError) and exc.errno in _RAN_OUT


def resource_error(exc: OSError, shown: str | None = None, doing: str = "writing") -> InputError:
    """One line for ``exc`` naming the file (``shown``, else the exception's) and what ran out:
    ``no space left on device writing OUT/network.pth: about 2.4 MB needed, 1.1 MB free``."""
    what, hint = _RAN_OUT.get(exc.errno or 0, (exc.strerror or str(exc), "check the path named"))
    name = shown or (os.fsdecode(exc.filename) if exc.filename else None)
    text = what
    if name is not None:
        text += f" {doing} {name}" if doing else f": {name}"
    detail = []
    needed, written = getattr(exc, "needed", None), getattr(exc, "written", None)
    if needed:
        detail.append(f"about {format_bytes(needed)} needed")
    elif written:  # what the output took before the disk was full: less than it needs
        detail.append(f"more than {format_bytes(written)} needed")
    free = getattr(exc, "free", None)
    if free is None and name and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        free = _free_space(name)
    if free is not None:
        detail.append(f"{format_bytes(free)} free")
    if exc.errno == errno.EMFILE:
        detail.append(f"the limit is {_open_files_limit()}")
    error = ResourceError(text + (": " + ", ".join(detail) if detail else ""), hint=hint)
    error.cause, error.path, error.doing = exc, name, doing
    return error


def _free_space(path: str) -> int | None:
    """The bytes free for this user on the file system of ``path`` (its nearest existing
    folder)."""
    import shutil
    from pathlib import Path

    for folder in (Path(path), *Path(path).parents):
        with contextlib.suppress(OSError):
            if folder.is_dir():
                return shutil.disk_usage(folder).free
    return None


def _open_files_limit() -> str:
    if resource is None:
        return "unknown"
    return str(resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def tool_ran_out(output: str, what: str, returncode: int = 0) -> None:
    """Raise ``ResourceError`` when a tool cnnforge ran (the C compiler) failed because the machine
    ran out (its messages, or SIGXFSZ); ``what`` is what it made."""
    import signal

    found = next((code for code in _TOOL_ERRNOS if os.strerror(code) in output), None)
    if found is None and returncode == -getattr(signal, "SIGXFSZ", 0):
        found = errno.EFBIG
    if found is not None:
        raise resource_error(OSError(found, os.strerror(found)), shown=what, doing="building")


#: The errors a tool reports in its output (its strerror text), the longer text first.
_TOOL_ERRNOS = (errno.ENFILE, errno.EMFILE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)
