"""Which input rows a layer reads for a range of its output rows: the geometry of row bands (window,
transposed, upsample and pad stages; None for layers that read whole blobs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cnnforge.ir import Layer, Op, Pooling

WINDOW, TRANSPOSED, UPSAMPLE, PAD = "window", "transposed", "upsample", "pad"
_SAME_ROWS = frozenset({Op.ACTIVATION, Op.ELTWISE, Op.CONCAT, Op.BATCHNORM, Op.PASSTHROUGH})
_CONVS = frozenset({Op.CONV1D, Op.CONV2D})


@dataclass(frozen=True)
class RowStage:
    """One stage's row geometry (module docstring): ``in_rows`` -> ``out_rows``."""

    kind: str
    in_rows: int
    out_rows: int
    stride: int = 1
    pad: int = 0  # rows before row 0 (window/transposed padding, pad's top amount)
    span: int = 1  # window/transposed: dilation x (kernel - 1) + 1
    factor: int = 1  # upsample

    def raw_first(self, o):
        """Lowest input row output row ``o`` reads, before clipping (window, pad)."""
        if self.kind == PAD:
            return o - self.pad
        return o * self.stride - self.pad

    def raw_last(self, o):
        """Highest input row output row ``o`` reads, before clipping (window, pad)."""
        if self.kind == PAD:
            return o - self.pad
        return o * self.stride - self.pad + self.span - 1

    def first(self, o):
        """Lowest input row that output row ``o`` needs (clipped to the input)."""
        if self.kind == UPSAMPLE:
            lo = o // self.factor
        elif self.kind == TRANSPOSED:
            lo = (o + self.pad - (self.span - 1)) // self.stride
        else:
            lo = self.raw_first(o)
        return _clip(lo, 0, self.in_rows - 1)

    def last(self, o):
        """Highest input row that output row ``o`` needs (clipped to the input)."""
        if self.kind == UPSAMPLE:
            hi = o // self.factor
        elif self.kind == TRANSPOSED:
            hi = np.maximum((o + self.pad) // self.stride, self.first(o))
        else:
            hi = self.raw_last(o)
        return _clip(hi, 0, self.in_rows - 1)

    def ready(self, r):
        """Highest output row computable from input rows 0..``r`` (-1: none yet)."""
        if self.kind == UPSAMPLE:
            o = (r + 1) * self.factor - 1
        elif self.kind == TRANSPOSED:
            o = (r + 1) * self.stride - self.pad - 1
        elif self.kind == PAD:
            o = r + self.pad
        else:
            o = (r + self.pad - self.span + 1) // self.stride
        o = np.where(np.asarray(r) >= self.in_rows - 1, self.out_rows - 1, o)
        return np.where(np.asarray(r) < 0, -1, _clip(o, -1, self.out_rows - 1))


def _clip(x, lo: int, hi: int):
    """``np.clip`` without its dispatch cost (called per band and step by the planner)."""
    return np.minimum(np.maximum(x, lo), hi)


def chain_first(stages: Sequence[RowStage], o):
    """Lowest row of the chain's input that output row ``o`` needs."""
    for stage in reversed(stages):
        o = stage.first(o)
    return o


def chain_last(stages: Sequence[RowStage], o):
    """Highest row of the chain's input that output row ``o`` needs."""
    for stage in reversed(stages):
        o = stage.last(o)
    return o


def chain_ready(stages: Sequence[RowStage], r):
    """Highest output row of the chain computable from input rows 0..``r``."""
    for stage in stages:
        r = stage.ready(r)
    return r


def rows_of(shape: tuple[int, ...]) -> int | None:
    """The row count of a blob (C, H, W) or (C, L); None for a vector."""
    return shape[1] if len(shape) >= 2 else None


def layer_stages(
    layer: Layer, in_shape: tuple[int, ...], out_shape: tuple[int, ...]
) -> tuple[RowStage, ...] | None:
    """The row stages of ``layer`` (module docstring); None when it reads whole blobs."""
    rows, out_rows = rows_of(in_shape), rows_of(out_shape)
    if rows is None or out_rows is None or layer.flatten:
        return None
    stages: list[RowStage] = []
    if layer.pool is not None and layer.op is not Op.POOL:  # a weight layer's input pooling
        stages.append(_pool_stage(layer.pool, 0, rows))
        rows = stages[-1].out_rows
    main = _main_stage(layer, rows, out_rows, len(in_shape))
    if main is None:
        return None
    return (*stages, *main)


def _main_stage(layer: Layer, rows: int, out_rows: int, rank: int) -> tuple[RowStage, ...] | None:
    op = layer.op
    if op in _SAME_ROWS:
        return ()
    if op is Op.POOL and layer.pool is not None:
        pad = layer.padding[0] if layer.padding else 0
        return (_pool_stage(layer.pool, pad, rows),)
    if op in _CONVS:
        span = _dilation(layer) * (layer.kernel_size[0] - 1) + 1
        stride, pad = _first(layer.stride), _first(layer.padding, 0)
        return (RowStage(WINDOW, rows, out_rows, stride, pad, span),)
    if op is Op.CONVTRANSPOSE2D:
        span = _dilation(layer) * (layer.kernel_size[0] - 1) + 1
        stride, pad = _first(layer.stride), _first(layer.padding, 0)
        return (RowStage(TRANSPOSED, rows, out_rows, stride, pad, span),)
    if op is Op.UPSAMPLE and layer.upsample_mode in ("", "nearest"):
        return (RowStage(UPSAMPLE, rows, out_rows, factor=int(layer.scale_factor[0])),)
    if op is Op.PAD:  # F.pad's amounts: last axis first, (before, after) each
        at = 2 if rank == 3 else 0
        top = layer.pad_amounts[at] if len(layer.pad_amounts) > at else 0
        return (RowStage(PAD, rows, out_rows, pad=top),)
    return None


def _pool_stage(pool: Pooling, pad: int, rows: int) -> RowStage:
    size, stride, dilation = pool.size[0], pool.stride[0], pool.dilation_or_ones()[0]
    span = dilation * (size - 1) + 1
    out_rows = (rows + 2 * pad - span) // stride + 1
    return RowStage(WINDOW, rows, out_rows, stride, pad, span)


def _first(values: tuple[int, ...], default: int = 1) -> int:
    return values[0] if values else default


def _dilation(layer: Layer) -> int:
    return _first(layer.dilation)
