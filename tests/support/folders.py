"""Dataset folders on disk for the tests: the ``folder`` layout with a corrupt image."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def folder_with_a_corrupt_image(root: Path, size: int) -> Path:
    """``root/images/{a,b}.png`` and their masks, ``b.png`` not an image; returns ``root``."""
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    for name in ("a", "b"):
        mask = Image.fromarray(np.zeros((size, size), np.uint8), mode="L")
        mask.save(root / "masks" / f"{name}.png")
    Image.fromarray(np.zeros((size, size, 3), np.uint8)).save(root / "images" / "a.png")
    (root / "images" / "b.png").write_bytes(b"\x89PNG broken")
    return root
