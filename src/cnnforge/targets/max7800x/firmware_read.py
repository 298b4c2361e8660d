"""A firmware folder read back into cnnforge's network and plan: the decoder and the recovery
of firmware/ with the vendor-pair reader (ai8x.py) that turns the recovered pair into both."""

from __future__ import annotations

import functools
from pathlib import Path

from cnnforge.targets.max7800x.ai8x import load_ai8x
from cnnforge.targets.max7800x.firmware import selftest


def read_firmware(folder: Path, device: str | None) -> selftest.Decoded:
    """Read, decode and recover ``folder`` (nothing of it is compiled or run)."""
    return selftest.read_network(folder, device, functools.partial(load_ai8x, overlap_data=True))
