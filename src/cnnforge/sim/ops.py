"""One small function per stage of a hardware layer (docs/hardware/arithmetic.md §2-§5), on
batched integer-valued tensors; all integer semantics come from ``cnnforge.arithmetic``."""

from __future__ import annotations

import math
from types import MappingProxyType

import torch
import torch.nn.functional as F

from cnnforge.arithmetic import (
    avgpool_divide,
    eltwise_fold,
    finish_output,
    finish_scaled,
    rounding_affine,
)
from cnnforge.ir import Layer, Op, Pooling, PoolKind
from cnnforge.sim.exact import Geometry, accumulate

# ---- pooling (docs/hardware/arithmetic.md §3)


def pool(x: torch.Tensor, pooling: Pooling, rounding: bool) -> torch.Tensor:
    """Max or average pooling without padding, partial windows dropped (R3.1-R3.6); 1-D follows the
    synthesizer's ``pool1d`` (R3.7, §8.9)."""
    one_d = x.dim() == 3
    x2 = x.unsqueeze(2) if one_d else x
    size, stride = _two_d(pooling.size), _two_d(pooling.stride)
    dilation = (1, 1) if one_d else _two_d(pooling.dilation_or_ones())
    if size == (1, 1):
        y = x2[:, :, :: stride[0], :: stride[1]]  # stride-only pooling: subsampling (R3.3)
    elif pooling.kind is PoolKind.MAX:
        y = _max_pool(x2, size, stride, dilation)
    else:
        total = _sum_pool(x2, size, stride)
        y = avgpool_divide(total, math.prod(size), rounding and not one_d)
    return y.squeeze(2) if one_d else y


def _two_d(values: tuple[int, ...]) -> tuple[int, int]:
    return (1, values[0]) if len(values) == 1 else (values[0], values[1])


def _max_pool(x: torch.Tensor, size, stride, dilation) -> torch.Tensor:
    if x.is_floating_point():
        return F.max_pool2d(x, size, stride, 0, dilation)  # exact on int8 values (R3.4)
    windows = _windows(x, size, stride, dilation)
    out = windows[0]
    for w in windows[1:]:
        out = torch.maximum(out, w)
    return out


def _sum_pool(x: torch.Tensor, size, stride) -> torch.Tensor:
    if x.is_floating_point():
        # window sums of at most 256 int8 values (< 2^15) are exact in float32
        return F.avg_pool2d(x, size, stride, 0, divisor_override=1)
    return sum(_windows(x, size, stride, (1, 1)))


def _windows(x: torch.Tensor, size, stride, dilation) -> list[torch.Tensor]:
    """Strided views, one per window element (rows ``r*t + i*d``, R3.4)."""
    h, w = x.shape[-2:]
    oh = (h - dilation[0] * (size[0] - 1) - 1) // stride[0] + 1
    ow = (w - dilation[1] * (size[1] - 1) - 1) // stride[1] + 1
    views = []
    for i in range(size[0]):
        for j in range(size[1]):
            r0, c0 = i * dilation[0], j * dilation[1]
            rows = slice(r0, r0 + stride[0] * (oh - 1) + 1, stride[0])
            cols = slice(c0, c0 + stride[1] * (ow - 1) + 1, stride[1])
            views.append(x[:, :, rows, cols])
    return views


# ---- combining inputs (docs/hardware/arithmetic.md §4, ir.Layer.is_concat)


def operands(layer: Layer, xs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The operands of an element-wise layer: its inputs, or its one input's equal consecutive
    channel groups (ir.Layer.split_operands)."""
    if layer.split_operands > 1 and len(xs) == 1:
        return list(torch.chunk(xs[0], layer.split_operands, dim=1))
    return xs


def combine(layer: Layer, xs: list[torch.Tensor]) -> torch.Tensor:
    """Element-wise fold (R4.2; unsaturated only for a standalone wide layer, R4.4), else the
    channel concatenation of the inputs in order, else the one input."""
    if layer.eltwise is not None:
        standalone_wide = layer.wide and layer.op is Op.PASSTHROUGH
        return eltwise_fold(layer.eltwise, operands(layer, xs), wide=standalone_wide)
    if len(xs) > 1:
        return torch.cat(xs, dim=1)
    return xs[0]


# ---- main operations (docs/hardware/arithmetic.md §2, §5)


def geometry(layer: Layer) -> Geometry:
    """PyTorch-style geometry of a conv layer (defaults: stride 1, pad 0, dilation 1)."""
    n = len(layer.kernel_size)
    return Geometry(
        stride=tuple(layer.stride) or (1,) * n,
        padding=tuple(layer.padding) or (0,) * n,
        dilation=tuple(layer.dilation) or (1,) * n,
        output_padding=tuple(layer.output_padding) or (0,) * n,
        groups=layer.groups,
    )


def conv1d(layer: Layer, x, w, bias, engine: str, affine=None) -> torch.Tensor:
    """Conv1d accumulator over length (R2.6)."""
    return accumulate(Op.CONV1D, x, w, bias, geometry(layer), engine, affine)


def conv2d(layer: Layer, x, w, bias, engine: str, affine=None) -> torch.Tensor:
    """Conv2d accumulator, zero padding, dilation and depthwise groups (R2.5, §8.14)."""
    return accumulate(Op.CONV2D, x, w, bias, geometry(layer), engine, affine)


def convtranspose2d(layer: Layer, x, w, bias, engine: str, affine=None) -> torch.Tensor:
    """ConvTranspose2d accumulator with PyTorch's (in, out/g, kh, kw) weights (R2.7)."""
    return accumulate(Op.CONVTRANSPOSE2D, x, w, bias, geometry(layer), engine, affine)


def linear(layer: Layer, x, w, bias, engine: str, affine=None) -> torch.Tensor:
    """Linear on 1x1 data or on the flattened input, index c*H*W + h*W + w (R2.8, R5.1)."""
    flat = x.reshape(x.shape[0], -1)
    return accumulate(Op.LINEAR, flat, w, bias, Geometry(), engine, affine)


_WEIGHT_OP_FNS = MappingProxyType(
    {Op.CONV1D: conv1d, Op.CONV2D: conv2d, Op.CONVTRANSPOSE2D: convtranspose2d, Op.LINEAR: linear}
)


def weight_op(layer: Layer, x: torch.Tensor, w, bias, engine: str) -> torch.Tensor:
    """The main op and its output stage (shift, round, saturate, activate), or a wide layer's raw
    accumulator (R2.3, R2.4)."""
    assert layer.quant is not None
    shift, op = layer.quant.total_shift, _WEIGHT_OP_FNS[layer.op]
    if layer.wide or engine == "int64":
        acc = op(layer, x, w, bias, engine)
        return finish_output(acc, shift, layer.activation, layer.wide, inplace=True)
    scaled = op(layer, x, w, bias, engine, rounding_affine(shift))
    return finish_scaled(scaled, layer.activation, inplace=True)  # a fresh tensor: in place


def run_layer(
    layer: Layer,
    xs: list[torch.Tensor],
    params: tuple[torch.Tensor, torch.Tensor | None] | None,
    rounding: bool,
    engine: str,
) -> torch.Tensor:
    """One hardware layer: pool -> combine (or combine -> pool) -> op -> finish (R4.3)."""
    if layer.pool is not None and layer.pool_first:
        xs = [pool(x, layer.pool, rounding) for x in xs]
    x = combine(layer, xs)
    if layer.pool is not None and not layer.pool_first:
        x = pool(x, layer.pool, rounding)
    if layer.op is Op.PASSTHROUGH:
        return x
    assert params is not None
    return weight_op(layer, x, *params, engine)
