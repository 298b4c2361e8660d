"""Independent computations in forked child processes, at most ``workers`` at a time: the width
search's checks are Python-bound model captures, one core each (docs/adapt.md, "Fit")."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

#: The most children at once: a capture of a wide try holds a few hundred MB.
MAX_WORKERS = 8


def usable_workers(limit: int = MAX_WORKERS) -> int:
    """The cores this process may run on (its CPU affinity), at most ``limit``; 1 off Linux
    (macOS forks, but a forked child of a process using its system libraries is unsafe)."""
    if not hasattr(os, "sched_getaffinity"):
        return 1
    return max(1, min(limit, len(os.sched_getaffinity(0))))


def forked_map(
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    workers: int,
    stop: Callable[[Any], bool] | None = None,
) -> list[Any]:
    """``[fn(x) for x in items]``, ``workers`` items at once, each in a forked child (it sees
    this process's memory, nothing is pickled; ``fn`` returns JSON data, lists come back as
    lists); with ``stop``, the answers up to the first it accepts (later children are killed).
    An item whose child fails in any way (an exception, killed, no answer) is computed again
    here, so an error raises exactly as it would without children."""
    answers: list[Any] = []
    size = max(workers, 1)
    for start in range(0, len(items), size):
        wave = list(items[start : start + size])
        parallel = workers > 1 and len(wave) > 1
        with contextlib.closing(_wave(fn, wave) if parallel else (fn(x) for x in wave)) as each:
            for answer in each:
                answers.append(answer)
                if stop is not None and stop(answer):
                    return answers
    return answers


def _wave(fn: Callable[[Any], Any], items: list[Any]) -> Iterator[Any]:
    """One child per item; their answers in order (a failed child's item computed here). The
    children still running when this closes early (a stop, an interrupt) are killed and
    reaped: none is left behind."""
    running: dict[int, tuple[int, int]] = {}  # item -> (pid, the read end of its pipe)
    try:
        for i, item in enumerate(items):
            running[i] = _fork(fn, item)
        for i, item in enumerate(items):
            pid, fd = running[i]
            answer = _answer(pid, fd)
            del running[i]
            os.close(fd)
            yield fn(item) if answer is _MISSING else answer
    finally:
        for pid, fd in running.values():
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


_MISSING = object()


def _fork(fn: Callable[[Any], Any], item: Any) -> tuple[int, int]:
    """A child computing ``fn(item)`` into a pipe: (its pid, the pipe's read end)."""
    read, write = os.pipe()
    # Python 3.12+ warns of fork in a threaded process (a progress display's thread): the child
    # writes no output and uses no GPU, the only state such threads hold locks on
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid:
        os.close(write)
        return pid, read
    code = 1
    try:  # the child: one thread, no output of its own, never returns (nothing flushed)
        os.close(read)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - ends with the child
        torch.set_num_threads(1)
        data = json.dumps(fn(item)).encode("utf-8")
        while data:
            data = data[os.write(write, data) :]
        code = 0
    except BaseException:  # the parent computes this item itself
        pass
    finally:
        os._exit(code)


def _answer(pid: int, fd: int) -> Any:
    """What the child ``pid`` wrote to ``fd`` once it exited cleanly, else ``_MISSING``."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0 or not chunks:
        return _MISSING
    return json.loads(b"".join(chunks))
