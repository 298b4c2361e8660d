"""Figures of the HTML report as inline ``data:image/svg+xml`` URIs, written as SVG text (no
plotting library, byte-identical across runs)."""

from __future__ import annotations

import base64
import math
import struct
import zlib
from collections.abc import Sequence
from html import escape

import numpy as np

from cnnforge.arithmetic import ACT_SCALE

#: Qualitative palette (the 20 colours of matplotlib's ``tab20``), for layers and classes.
PALETTE = (
    "#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896",
    "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7",
    "#bcbd22", "#dbdb8d", "#17becf", "#9edae5",
)  # fmt: skip
BAR = "#4477aa"
MAX_DOTS = 4096  # scatter plots show at most this many values
FONT = 'font-family="DejaVu Sans, Arial, sans-serif"'
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 44  # plot margins in pixels (title above, labels below)


def svg_uri(svg: str) -> str:
    """SVG text as a base64 data URI (``<img src=...>`` keeps the report self-contained)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def _num(value: float) -> str:
    """Coordinates with two decimals at most, no trailing zeros (short, deterministic text)."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _text(x: float, y: float, text: str, size: int = 11, anchor: str = "middle", **attrs) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return (
        f'<text x="{_num(x)}" y="{_num(y)}" font-size="{size}" text-anchor="{anchor}"{extra}>'
        f"{escape(text)}</text>"
    )


def nice_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    """Round tick values (1, 2, 5 x 10^k apart) covering [lo, hi], about ``count`` of them."""
    if not hi > lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9)
    ticks, k = [], first
    while k * step <= hi + step * 1e-9:
        ticks.append(round(k * step, 9))
        k += 1
    return ticks


def _tick_label(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"


class _Axes:
    """A plot area: data limits mapped to pixels, with a frame, ticks, labels and a title."""

    def __init__(self, width: int, height: int, limits: tuple[float, float, float, float]):
        self.width, self.height = width, height
        self.x0, self.x1, self.y0, self.y1 = limits
        self.left, self.right = LEFT, width - RIGHT
        self.top, self.bottom = TOP, height - BOTTOM

    def px(self, x: float) -> float:
        return self.left + (x - self.x0) / (self.x1 - self.x0) * (self.right - self.left)

    def py(self, y: float) -> float:
        return self.bottom - (y - self.y0) / (self.y1 - self.y0) * (self.bottom - self.top)

    def frame(self, title: str, xlabel: str, ylabel: str, xticks: bool = True) -> list[str]:
        """Grid lines and y ticks (and x ticks unless the caller labels x), axis labels, title."""
        out = []
        for v in nice_ticks(self.y0, self.y1):
            y = self.py(v)
            out.append(
                f'<line x1="{self.left}" y1="{_num(y)}" x2="{self.right}" y2="{_num(y)}" '
                'stroke="#e4e4e4" stroke-width="1"/>'
            )
            out.append(_text(self.left - 5, y + 4, _tick_label(v), 10, "end"))
        if xticks:
            for v in nice_ticks(self.x0, self.x1, 8):
                x = self.px(v)
                out.append(
                    f'<line x1="{_num(x)}" y1="{self.bottom}" x2="{_num(x)}" '
                    f'y2="{self.bottom + 4}" stroke="#222"/>'
                )
                out.append(_text(x, self.bottom + 16, _tick_label(v), 10))
        mid_y = (self.top + self.bottom) / 2
        out.append(_text(14, mid_y, ylabel, 11, transform=f"rotate(-90 14 {_num(mid_y)})"))
        if xlabel:
            out.append(_text((self.left + self.right) / 2, self.height - 6, xlabel, 11))
        out.append(_text(self.width / 2, 17, title, 13, font_weight="bold"))
        return out

    def border(self) -> str:
        return (
            f'<rect x="{self.left}" y="{self.top}" width="{self.right - self.left}" '
            f'height="{self.bottom - self.top}" fill="none" stroke="#222" stroke-width="1"/>'
        )


def _svg(width: int, height: int, body: Sequence[str]) -> str:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" {FONT} fill="#222">'
        f'<rect width="{width}" height="{height}" fill="white"/>'
    )
    return svg_uri(head + "".join(body) + "</svg>")


def bar_figure(labels: list[str], values: list[float], ylabel: str, title: str) -> str:
    """One bar per layer (cycles, utilization), the layer names below, rotated."""
    n = max(len(values), 1)
    longest = max((len(s) for s in labels), default=1)
    width = max(320, 20 * n + LEFT + RIGHT + 16)
    height = 240 + 6 * min(longest, 24)
    top = max(values, default=0.0) or 1.0
    ax = _Axes(width, height, (-0.6, n - 0.4, 0.0, top * 1.05))
    ax.bottom = height - 12 - 6 * min(longest, 24)
    body = ax.frame(title, "", ylabel, xticks=False)
    bar_w = 0.8 * (ax.px(1) - ax.px(0))
    for i, v in enumerate(values):
        y = ax.py(v)
        body.append(
            f'<rect x="{_num(ax.px(i) - bar_w / 2)}" y="{_num(y)}" width="{_num(bar_w)}" '
            f'height="{_num(ax.bottom - y)}" fill="{BAR}"><title>{escape(labels[i])}: '
            f"{_tick_label(v)}</title></rect>"
        )
    for i, label in enumerate(labels):
        x, y = ax.px(i) + 3, ax.bottom + 6
        body.append(_text(x, y, label, 9, "end", transform=f"rotate(-90 {_num(x)} {_num(y)})"))
    body.append(ax.border())
    return _svg(width, height, body)


def rect_map(
    rects: list[tuple[float, float, float, float, int]],
    xlabel: str,
    ylabel: str,
    title: str,
    limits: tuple[float, float, float, float],
) -> str:
    """Rectangles (x, y, width, height, colour index): memory and kernel maps."""
    ax = _Axes(640, 330, tuple(float(v) for v in limits))  # type: ignore[arg-type]
    body = ax.frame(title, xlabel, ylabel)
    for x, y, w, h, c in rects:
        left, right = ax.px(x), ax.px(x + w)
        low, high = ax.py(y), ax.py(y + h)
        body.append(
            f'<rect x="{_num(left)}" y="{_num(high)}" width="{_num(max(right - left, 0.5))}" '
            f'height="{_num(max(low - high, 0.5))}" fill="{PALETTE[c % len(PALETTE)]}" '
            f'stroke="black" stroke-width="0.4"><title>#{c}</title></rect>'
        )
    body.append(ax.border())
    return _svg(ax.width, ax.height, body)


def png_bytes(rgb: np.ndarray) -> bytes:
    """A minimal PNG (8-bit RGB, no metadata) of an H x W x 3 uint8 array."""
    h, w, _ = rgb.shape
    rows = np.concatenate([np.zeros((h, 1), np.uint8), rgb.reshape(h, w * 3)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 9))
        + chunk(b"IEND", b"")
    )


def _rgb(hex_colours: Sequence[str]) -> np.ndarray:
    return np.array([[int(c[i : i + 2], 16) for i in (1, 3, 5)] for c in hex_colours], np.uint8)


def _image(rgb: np.ndarray, x: float, y: float, size: float) -> str:
    """An embedded PNG scaled to ``size`` pixels on its longer side, pixels kept sharp."""
    h, w, _ = rgb.shape
    scale = size / max(h, w)
    uri = "data:image/png;base64," + base64.b64encode(png_bytes(rgb)).decode("ascii")
    return (
        f'<image x="{_num(x)}" y="{_num(y)}" width="{_num(w * scale)}" '
        f'height="{_num(h * scale)}" preserveAspectRatio="none" image-rendering="pixelated" '
        f'style="image-rendering:pixelated" href="{uri}"/>'
    )


def _as_image(sample: np.ndarray | None) -> np.ndarray | None:
    """An int8 C,H,W sample as an RGB image (v/256 + 0.5, R6.1), if it is one (1 or 3 channels)."""
    if sample is None or sample.ndim != 3 or sample.shape[0] not in (1, 3):
        return None
    img = np.clip(sample.astype(np.float64) / 256.0 + 0.5, 0.0, 1.0)
    img = np.repeat(img, 3, axis=0) if sample.shape[0] == 1 else img
    return np.round(img.transpose(1, 2, 0) * 255.0).astype(np.uint8)


def masks_figure(float_out: np.ndarray, quant_out: np.ndarray, sample: np.ndarray | None) -> str:
    """Segmentation: the input, argmax masks of float and quantized outputs, their difference."""
    a, b = float_out.argmax(axis=0), quant_out.argmax(axis=0)
    # class k of C gets palette entry k * 20 // (C - 1) (the last: 19): few classes, far apart
    vmax = max(int(float_out.shape[0]) - 1, 1)
    classes = _rgb(PALETTE)[[min(k * len(PALETTE) // vmax, len(PALETTE) - 1) for k in
                             range(vmax + 1)]]  # fmt: skip
    agree = float((a == b).mean()) * 100
    differ = np.where((a != b)[..., None], np.uint8(0), np.uint8(255)).repeat(3, axis=2)
    panels = [(classes[a], "float model"), (classes[b],
              "quantized (simulator)"), (differ, f"differ ({agree:.1f}% agree)")]  # fmt: skip
    image = _as_image(sample)
    if image is not None:
        panels.insert(0, (image, "sample"))
    size, gap = 180, 16
    width, height = len(panels) * (size + gap) + gap, size + 40
    body = []
    for i, (rgb, label) in enumerate(panels):
        x = gap + i * (size + gap)
        body.append(_text(x + size / 2, 18, label, 12))
        body.append(_image(rgb, x, 28, size))
        h, w, _ = rgb.shape
        body.append(
            f'<rect x="{x}" y="28" width="{_num(w * size / max(h, w))}" '
            f'height="{_num(h * size / max(h, w))}" fill="none" stroke="#888"/>'
        )
    return _svg(width, height, body)


def scatter_figure(float_out: np.ndarray, quant_out: np.ndarray) -> str:
    """Non-spatial outputs: quantized against float, both in units of 1/128 of the float value."""
    x, y = float_out.reshape(-1) * ACT_SCALE, quant_out.reshape(-1).astype(np.float64)
    lo, hi = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
    step = -(-x.size // MAX_DOTS)  # every step-th value: a bounded SVG, same range
    x, y = x[::step], y[::step]
    pad = (hi - lo) * 0.05 or 1.0
    ax = _Axes(340, 320, (lo - pad, hi + pad, lo - pad, hi + pad))
    body = ax.frame("", "float x 128", "quantized (same units)")
    body.append(
        f'<line x1="{_num(ax.px(lo))}" y1="{_num(ax.py(lo))}" x2="{_num(ax.px(hi))}" '
        f'y2="{_num(ax.py(hi))}" stroke="gray" stroke-width="0.8"/>'
    )
    for u, v in zip(x.tolist(), y.tolist(), strict=True):
        body.append(f'<circle cx="{_num(ax.px(u))}" cy="{_num(ax.py(v))}" r="2" fill="{BAR}"/>')
    body.append(ax.border())
    return _svg(ax.width, ax.height, body)
