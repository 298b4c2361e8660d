"""Figures of the HTML report, each a function returning an inline ``data:image/png`` URI.

matplotlib with the Agg backend, fixed sizes and no PNG metadata, so the report is
byte-identical across runs.
"""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle


def to_data_uri(fig: Figure) -> str:
    """PNG of ``fig`` as a base64 data URI (metadata stripped for determinism)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, metadata={"Software": None})
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def bar_figure(labels: list[str], values: list[float], ylabel: str, title: str) -> str:
    """One bar per layer (cycles, utilization)."""
    fig, ax = plt.subplots(figsize=(max(4.0, 0.25 * len(labels) + 2), 3.0))
    ax.bar(range(len(values)), values, color="#4477aa")
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=6)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    return to_data_uri(fig)


def rect_map(
    rects: list[tuple[float, float, float, float, int]],
    xlabel: str,
    ylabel: str,
    title: str,
    limits: tuple[float, float, float, float],
) -> str:
    """Rectangles (x, y, width, height, colour index): memory and kernel maps."""
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    cmap = plt.get_cmap("tab20")
    for x, y, w, h, c in rects:
        ax.add_patch(Rectangle((x, y), w, h, facecolor=cmap(c % 20), edgecolor="black", lw=0.3))
    ax.set_xlim(limits[0], limits[1])
    ax.set_ylim(limits[2], limits[3])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    return to_data_uri(fig)


def _as_image(sample: np.ndarray | None) -> np.ndarray | None:
    """An int8 C,H,W sample as an RGB/gray image in [0, 1] (v/256 + 0.5, R6.1), if it is one."""
    if sample is None or sample.ndim != 3 or sample.shape[0] not in (1, 3):
        return None
    img = np.clip(sample.astype(np.float64) / 256.0 + 0.5, 0.0, 1.0)
    return img[0] if sample.shape[0] == 1 else img.transpose(1, 2, 0)


def masks_figure(float_out: np.ndarray, quant_out: np.ndarray, sample: np.ndarray | None) -> str:
    """Segmentation: the input, argmax masks of float and quantized outputs, their difference."""
    a, b = float_out.argmax(axis=0), quant_out.argmax(axis=0)
    image = _as_image(sample)
    panels = 4 if image is not None else 3
    fig, axes = plt.subplots(1, panels, figsize=(2.5 * panels, 2.8))
    if image is not None:
        axes[0].imshow(image, cmap="gray", interpolation="nearest")
        axes[0].set_title("sample", fontsize=9)
        axes[0].axis("off")
        axes = axes[1:]
    vmax = max(int(float_out.shape[0]) - 1, 1)
    for ax, img, title in ((axes[0], a, "float model"), (axes[1], b, "quantized (simulator)")):
        ax.imshow(img, cmap="tab20", vmin=0, vmax=vmax, interpolation="nearest")
        ax.set_title(title, fontsize=9)
        ax.axis("off")
    agree = float((a == b).mean()) * 100
    axes[2].imshow(a != b, cmap="gray_r", vmin=0, vmax=1, interpolation="nearest")
    axes[2].set_title(f"differ ({agree:.1f}% agree)", fontsize=9)
    axes[2].axis("off")
    fig.tight_layout()
    return to_data_uri(fig)


def scatter_figure(float_out: np.ndarray, quant_out: np.ndarray) -> str:
    """Non-spatial outputs: quantized against float, both in units of 1/128 of the float value."""
    fig, ax = plt.subplots(figsize=(3.6, 3.4))
    x, y = float_out.reshape(-1) * 128.0, quant_out.reshape(-1).astype(np.float64)
    ax.scatter(x, y, s=4, color="#4477aa")
    lo, hi = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
    ax.plot([lo, hi], [lo, hi], color="gray", lw=0.5)
    ax.set_xlabel("float x 128")
    ax.set_ylabel("quantized (same units)")
    fig.tight_layout()
    return to_data_uri(fig)
