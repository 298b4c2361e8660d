"""The memory a request may use, and the check that refuses one needing more, before any work.

A command estimates what it will need from shapes alone (input, activations, weights, the
simulator's integer buffers) and compares it with a limit: ``--max-memory`` when given, else
the memory this machine has available (``MemAvailable``). Above it, one ``InputError`` names the
input, the figure and the limit, instead of minutes of work ending in an allocation failure.

The limit a command was given lives in a ``ContextVar`` that the CLI sets for the one command it
runs (``memory_limit_set``), so library code deep in the frontend reads it without every call
in between passing it along; outside the CLI it is unset and the machine's memory applies.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Iterator, Sequence
from contextvars import ContextVar

from cnnforge.errors import InputError

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
            f"{option} {text!r} is not a memory size",
            hint="write a size such as 512M, 8G or 1.5GB",
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
