"""A firmware folder read back into cnnforge's network and plan (issue 26): the decoder and the
recovery of targets/max7800x/firmware with the ai8x frontend as the vendor-pair reader (the
frontend sits above the targets, so the pipeline joins them)."""

from __future__ import annotations

import functools
from pathlib import Path

from cnnforge.frontend.ai8x import load_ai8x
from cnnforge.targets.max7800x.firmware import selftest
from cnnforge.targets.max7800x.firmware.hostrun import StateImage

_READ = functools.partial(load_ai8x, overlap_data=True)


def read_firmware(folder: Path, device: str | None) -> selftest.Decoded:
    """Read, decode and recover ``folder`` (nothing of it is compiled or run)."""
    return selftest.read_network(folder, device, _READ)


def decode_firmware_image(
    image: StateImage, records: list[tuple[int, list[int]]] | None = None
) -> selftest.Decoded:
    """Decode and recover a firmware's set-up state (a stored state image; ``records``: its
    kernel loader's records, None: the state alone)."""
    return selftest.decode_image(image, records, _READ)
