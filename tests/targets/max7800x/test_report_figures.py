"""The report's SVG figures: well-formed SVG, exact embedded PNGs, round tick values."""

from __future__ import annotations

import base64
import io
import xml.etree.ElementTree as ET

import numpy as np
from PIL import Image

from cnnforge.targets.max7800x import report_figures as figs

SVG = "{http://www.w3.org/2000/svg}"


def _svg(uri: str) -> ET.Element:
    head, _, data = uri.partition(",")
    assert head == "data:image/svg+xml;base64"
    return ET.fromstring(base64.b64decode(data))


def test_png_bytes_decode_to_the_same_pixels() -> None:
    rgb = np.random.default_rng(0).integers(0, 256, (7, 5, 3)).astype(np.uint8)
    decoded = np.asarray(Image.open(io.BytesIO(figs.png_bytes(rgb))).convert("RGB"))
    assert np.array_equal(decoded, rgb)


def test_figures_are_well_formed_svg() -> None:
    bars = _svg(figs.bar_figure(["a<b", "c"], [3.0, 7.5], "cycles", "t & u"))
    assert len(bars.findall(f".//{SVG}rect")) >= 3
    boxes = [(0, 0, 1, 10, 0), (1, 5, 2, 3, 21)]
    rects = _svg(figs.rect_map(boxes, "x", "y", "map", (0, 4, 0, 20)))
    assert len(rects.findall(f".//{SVG}rect")) == 4  # background, two rectangles, frame
    out = np.random.default_rng(1).normal(size=(5, 6, 6))
    sample = np.random.default_rng(2).integers(-128, 128, (3, 6, 6))
    masks = _svg(figs.masks_figure(out, out, sample))
    assert len(masks.findall(f".//{SVG}image")) == 4
    dots = _svg(figs.scatter_figure(np.linspace(-1, 1, 10), np.arange(10) - 5))
    assert len(dots.findall(f".//{SVG}circle")) == 10


def test_nice_ticks() -> None:
    assert figs.nice_ticks(0, 152064 * 1.05) == [0, 50000, 100000, 150000]
    assert figs.nice_ticks(-1, 19) == [0, 5, 10, 15]
    assert figs.nice_ticks(0, 0) == [0, 0.2, 0.4, 0.6, 0.8, 1]
