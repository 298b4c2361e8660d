"""cnnforge's own plans whose firmware is compared with the vendor tool's (tests/test_firmware.py,
benchmarks/firmware_states.py): the shipped models, their device, input and vendor flags."""

from __future__ import annotations

import numpy as np

# (model, device, input shape, vendor flags the YAML header names)
OWN = (
    ("unet-voc", "MAX78002", (3, 64, 64), ()),
    ("unet-large", "MAX78000", (48, 88, 88), ("--overlap-data",)),
    ("qat-unet", "MAX78000", (3, 32, 32), ()),
)


def own_sample(shape: tuple[int, ...]) -> np.ndarray:
    """A smooth int8 test pattern (it compresses well in the stored state images)."""
    c, h, w = np.meshgrid(*(np.arange(n) for n in shape), indexing="ij")
    return ((3 * h + 5 * w + 7 * c) % 256 - 128).astype(np.int64)
