"""The first ``shapes`` renderer (cnnforge.training.datasets before it was vectorised), kept
verbatim as the reference the fast one must equal bit for bit: the shipped checkpoint and
docs/training.md's recipe were trained on its images."""

from __future__ import annotations

import math

import numpy as np

from cnnforge.training.datasets import SHAPES_CLASSES, ShapesConfig


def render_shapes(index: int, config: ShapesConfig) -> tuple[np.ndarray, np.ndarray]:
    """One image (H, W, 3 float in [0, 1]) and its mask (H, W uint8) for ``index``."""
    rng = np.random.default_rng([config.seed, index])
    n = config.size
    yy, xx = np.mgrid[0:n, 0:n].astype(np.float64) + 0.5
    image = _background(rng, yy, xx, n)
    mask = np.zeros((n, n), np.uint8)
    for _ in range(int(rng.integers(1, config.max_objects + 1))):
        cls = int(rng.integers(1, len(SHAPES_CLASSES)))
        region = _shape_region(rng, cls, yy, xx, n)
        image[region] = _texture(rng, yy, xx)[region]
        mask[region] = cls
    image += rng.normal(0.0, config.noise, image.shape)
    return np.clip(image, 0.0, 1.0), mask


def _background(rng: np.random.Generator, yy: np.ndarray, xx: np.ndarray, n: int) -> np.ndarray:
    base = rng.uniform(0.1, 0.9, 3)
    slope = rng.uniform(-0.4, 0.4, (2, 3)) / n
    img = base + yy[..., None] * slope[0] + xx[..., None] * slope[1]
    if rng.random() < 0.5:  # distractor texture on the background
        freq = rng.uniform(0.2, 0.8)
        img += 0.08 * np.sin(freq * (xx + yy))[..., None]
    return img


def _texture(rng: np.random.Generator, yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
    colour = rng.uniform(0.0, 1.0, 3)
    kind = rng.integers(0, 3)
    if kind == 0:
        return np.broadcast_to(colour, (*yy.shape, 3)).copy()
    other = rng.uniform(0.0, 1.0, 3)
    if kind == 1:  # stripes
        angle = rng.uniform(0, math.pi)
        phase = np.sin(rng.uniform(0.6, 1.5) * (xx * math.cos(angle) + yy * math.sin(angle)))
        t = (phase > 0)[..., None]
    else:  # checker
        step = int(rng.integers(2, 5))
        t = (((yy // step) + (xx // step)) % 2 == 0)[..., None]
    return np.where(t, colour, 0.5 * (colour + other))


def _shape_region(
    rng: np.random.Generator, cls: int, yy: np.ndarray, xx: np.ndarray, n: int
) -> np.ndarray:
    r = rng.uniform(n / 6, n / 3.5)
    cy, cx = rng.uniform(r * 0.5, n - r * 0.5, 2)
    angle = rng.uniform(0, 2 * math.pi)
    dy, dx = yy - cy, xx - cx
    u = dx * math.cos(angle) + dy * math.sin(angle)
    v = -dx * math.sin(angle) + dy * math.cos(angle)
    dist = np.hypot(dy, dx)
    name = SHAPES_CLASSES[cls]
    if name == "disc":
        return dist <= r
    if name == "square":
        return (np.abs(u) <= 0.8 * r) & (np.abs(v) <= 0.8 * r)
    if name == "ring":
        return (dist <= r) & (dist >= 0.55 * r)
    # triangle: inside all three half-planes of an equilateral triangle of circumradius r
    inside = np.ones_like(u, dtype=bool)
    for k in range(3):
        a = angle + k * 2 * math.pi / 3
        inside &= (dx * math.cos(a) + dy * math.sin(a)) <= r / 2
    return inside
