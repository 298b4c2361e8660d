"""Proven in-place layers: an output may overlap its own dying input while every word written
trails the earliest input pixel a later output still reads (outputs come in raster order)."""

from __future__ import annotations

import numpy as np

from cnnforge.geometry import passes
from cnnforge.ir import Layer, Network, Op
from cnnforge.targets.max7800x.device import Max7800xDevice

#: Extra words kept between the write and read fronts (pipeline slack; the proof needs 0). The
#: vendor's hardware-verified U-Net overlaps with 19 words of slack at its tightest (dec0: 108
#: words behind where 89 are needed); cnnforge keeps exactly that much.
IN_PLACE_MARGIN_WORDS = 19

_ELIGIBLE = frozenset({Op.CONV2D, Op.CONV1D, Op.PASSTHROUGH})


def in_place_words(network: Network, layer: Layer, dev: Max7800xDevice) -> int | None:
    """Words the output must start below the input: max over q of q - the first pixel outputs q..
    read, plus the margin (one word per pixel); None: never in place."""
    if layer.op not in _ELIGIBLE or len(layer.inputs) != 1 or layer.eltwise is not None:
        return None
    if layer.flatten or layer.wide or layer.groups > 1:
        return None
    in_shape = network.shape_of(layer.inputs[0])
    if passes(in_shape[0], dev) != 1 or passes(layer.out_shape[0], dev) != 1:
        return None
    first = _first_needed(layer, in_shape)
    if first.size <= 1:
        return IN_PLACE_MARGIN_WORDS
    suffix = np.minimum.accumulate(first[::-1])[::-1]
    q = np.arange(1, first.size)
    return int((q - suffix[1:]).max()) + IN_PLACE_MARGIN_WORDS


def _first_needed(layer: Layer, in_shape: tuple[int, ...]) -> np.ndarray:
    """Per output pixel (raster order): the smallest input pixel index its window reads."""
    dims = tuple(in_shape[1:]) or (1,)
    out_dims = tuple(layer.out_shape[1:]) or (1,)
    if len(dims) == 1:
        dims, out_dims = (dims[0], 1), (out_dims[0], 1)
    width = dims[1]
    if layer.pool is not None:
        strides = tuple(layer.pool.stride) + (1,) * (2 - len(layer.pool.stride))
    else:
        strides = (1, 1)
    pads = tuple(layer.padding) + (0,) * (2 - len(layer.padding)) if layer.padding else (0, 0)
    rows = np.maximum(np.arange(out_dims[0]) - pads[0], 0) * strides[0]
    cols = np.maximum(np.arange(out_dims[1]) - pads[1], 0) * strides[1]
    return (rows[:, None] * width + cols[None, :]).ravel()
