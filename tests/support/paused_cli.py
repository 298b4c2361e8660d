"""cnnforge's CLI paused at one moment of a training run, announced on stdout (``PAUSED``), so
that a test's Ctrl-C lands there (tests/faults/test_interrupts.py). Usage:
``python paused_cli.py MOMENT ARGS...``, MOMENT one of ``batch`` (epoch 1, after its first
training batch) or ``checkpoint`` (epoch 1's ``last.pth``: its temporary file half written)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cnnforge import durable
from cnnforge.cli import main
from cnnforge.training import loaders

PAUSE_S = 120


def pause() -> None:
    print("PAUSED", flush=True)
    time.sleep(PAUSE_S)


def pause_in_batches() -> None:
    """The training batches of epoch 1 pause after the first."""
    original = loaders.Batches.epoch

    def epoch(self: loaders.Batches, epoch: int = 0) -> Iterator[Any]:
        for index, batch in enumerate(original(self, epoch)):
            yield batch
            if epoch == 1 and index == 0:
                pause()

    loaders.Batches.epoch = epoch  # type: ignore[method-assign]


def pause_in_checkpoint() -> None:
    """The second write of ``last.tmp`` (epoch 1's checkpoint) pauses half way through."""
    original = durable.write_bytes
    seen: list[Path] = []

    def write_bytes(path: Path | str, data: bytes, *, sync: bool = True) -> None:
        if Path(path).name == "last.tmp":
            seen.append(Path(path))
            if len(seen) == 2:
                Path(path).write_bytes(data[: len(data) // 2])
                pause()
        original(path, data, sync=sync)

    durable.write_bytes = write_bytes  # type: ignore[assignment]


if __name__ == "__main__":
    moment = sys.argv.pop(1)
    {"batch": pause_in_batches, "checkpoint": pause_in_checkpoint}[moment]()
    main()
