"""Ctrl-C and SIGTERM: the run stops as a failure does (its staged outputs removed, its locks
let go), then one line with the command that continues it (docs/faults.md).

While a command runs, SIGINT and SIGTERM raise ``errors.Interrupted`` in the main thread (a
signal Python's parent told it to ignore, as ``nohup`` or a background job does, stays ignored).
A second signal during the clean-up is the usual one again: Ctrl-C a KeyboardInterrupt, SIGTERM
the end of the process (what a killed run leaves, the next run removes). A process forked
from the run (torch's DataLoader workers) gets a KeyboardInterrupt, on which torch's workers end
quietly (torch's own SIGTERM handler ends them): its parent cleans up and speaks, one line.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

from cnnforge.errors import Interrupted

#: The signals that end a run with its clean-up.
SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise ``Interrupted`` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) or signal.SIG_DFL for s in SIGNALS}
    owner = os.getpid()

    def handler(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:  # a forked helper (a DataLoader worker) ends quietly
            raise KeyboardInterrupt
        for s in SIGNALS:  # the clean-up runs once; a second signal acts as it usually does
            if previous[s] is not signal.SIG_IGN:
                signal.signal(s, previous[s])
        sys.unraisablehook = _quiet  # helpers the signal ended complain in destructors
        raise Interrupted(signum)

    for s in SIGNALS:
        if previous[s] is not signal.SIG_IGN:
            signal.signal(s, handler)
    hook = sys.unraisablehook
    try:
        yield
    finally:
        for s in SIGNALS:
            signal.signal(s, previous[s])
        sys.unraisablehook = hook


def _quiet(unraisable: object) -> None:
    """After an interrupt, errors in destructors (torch's DataLoader finding its workers ended
    by the same signal) are not reported: the run's one line says what happened."""


def exit_status(exc: Interrupted) -> int:
    """128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM), as shells report it."""
    return 128 + exc.signum


def interrupted_line(exc: Interrupted, args: Sequence[str]) -> str:
    """The one line: what stopped the run, what is left, and the command that continues it."""
    name = signal.Signals(exc.signum).name
    if exc.resumable:
        command = continue_command(args, resume=True)
        return (
            f"error: interrupted ({name}); the checkpoints so far are kept "
            f"(hint: continue with: {command})"
        )
    command = continue_command(args, resume=False)
    return f"error: interrupted ({name}); nothing was written (hint: run it again: {command})"


def continue_command(args: Sequence[str], *, resume: bool) -> str:
    """The command line that continues the run: the same one, with ``--resume`` instead of
    ``--overwrite`` when a checkpoint is there to continue from."""
    rest = list(args)
    if resume:
        rest = [a for a in rest if a != "--overwrite"]
        if "--resume" not in rest:
            rest.append("--resume")
    return f"{_program()} {shlex.join(rest)}"


def _program() -> str:
    """How the user started cnnforge: ``cnnforge``, ``python -m cnnforge`` or torchrun."""
    world = os.environ.get("WORLD_SIZE")
    if world and world != "1":
        local = os.environ.get("LOCAL_WORLD_SIZE", world)
        nodes = "" if local == world else " --nnodes ... --rdzv-endpoint ..."
        return f"torchrun{nodes} --nproc_per_node {local} -m cnnforge"
    if Path(sys.argv[0]).name == "__main__.py":
        return "python -m cnnforge"
    return "cnnforge"
