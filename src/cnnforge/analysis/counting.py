"""Per-layer parameter counts, MACs (true, or ``count="thop"`` to reproduce thop 0.1.x) and
memory sizes; OPAQUE layers count 0 MACs and their own parameters."""

from __future__ import annotations

import math

from cnnforge.devices import Capabilities
from cnnforge.geometry import words_per_pixel
from cnnforge.ir import BINARY_BITS, Layer, Op, PoolKind

COUNT_MODES = ("true", "thop")

#: thop 0.1.x ``calculate_upsample`` operations per output element.
THOP_UPSAMPLE_OPS = {"nearest": 1, "linear": 5, "bilinear": 11, "bicubic": 259}


def weight_and_bias_sizes(layer: Layer) -> tuple[int, int]:
    """Number of weights and of biases (float arrays, else quantized ones, else geometry)."""
    weight = layer.weight if layer.weight is not None else getattr(layer.quant, "weights", None)
    bias = layer.bias if layer.bias is not None else getattr(layer.quant, "bias", None)
    if weight is not None:
        n_weights = int(weight.size)
    elif layer.op is Op.LINEAR:
        n_weights = layer.in_channels * layer.out_channels
    else:
        k = math.prod(layer.kernel_size or (1,))
        n_weights = layer.in_channels * layer.out_channels * k // max(layer.groups, 1)
    return n_weights, 0 if bias is None else int(bias.size)


def layer_params(layer: Layer) -> int:
    """Trainable parameters: weights + bias; BatchNorm's affine gamma/beta (statistics excluded)."""
    if layer.has_weights:
        return sum(weight_and_bias_sizes(layer))
    if layer.op is Op.BATCHNORM and layer.batchnorm is not None:
        bn = layer.batchnorm
        if bn.eps == 0:  # constant arithmetic (frontend/affine.py): only the model parameters
            return 0 if layer.weight is None else int(layer.weight.size)  # it was computed from
        return sum(0 if a is None else int(a.size) for a in (bn.weight, bn.bias))
    if layer.op is Op.OPAQUE:
        return sum(0 if a is None else int(a.size) for a in (layer.weight, layer.bias))
    return 0


def pooled_shape(layer: Layer, in_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The main op's input shape: ``in_shape`` after a hardware layer's input pooling."""
    if layer.pool is None or layer.op is Op.POOL or len(in_shape) < 2:
        return in_shape
    return (in_shape[0], *layer.pool.output_dims(tuple(in_shape[1:])))


def layer_macs(layer: Layer, in_shape: tuple[int, ...], count: str = "true") -> int:
    """MACs of one layer for batch 1; ``in_shape`` is its (first) input's shape."""
    out = math.prod(layer.out_shape) if layer.out_shape else 0
    kernel = math.prod(layer.kernel_size or (1,))
    groups = max(layer.groups, 1)
    op = layer.op
    if op in (Op.CONV1D, Op.CONV2D) or (op is Op.CONVTRANSPOSE2D and count == "thop"):
        main = out * (layer.in_channels // groups) * kernel
    elif op is Op.CONVTRANSPOSE2D:
        spatial = math.prod(pooled_shape(layer, in_shape)[1:])
        main = layer.in_channels * spatial * (layer.out_channels // groups) * kernel
    elif op is Op.LINEAR:
        main = layer.in_channels * layer.out_channels
    else:
        main = 0
    return main + (_thop_extra(layer, in_shape) if count == "thop" else 0)


def _thop_extra(layer: Layer, in_shape: tuple[int, ...]) -> int:
    """thop's counts for what true MACs ignore: BatchNorm, average pooling, upsampling."""
    out = math.prod(layer.out_shape) if layer.out_shape else 0
    if layer.op is Op.BATCHNORM and layer.batchnorm is not None:
        affine = layer.batchnorm.weight is not None
        return 2 * math.prod(in_shape) * (2 if affine else 1)
    if layer.op is Op.UPSAMPLE:
        return out * THOP_UPSAMPLE_OPS.get(layer.upsample_mode, 0)
    pool = layer.pool
    if pool is None or pool.kind is not PoolKind.AVG:
        return 0
    pooled = pooled_shape(layer, in_shape) if layer.op is not Op.POOL else layer.out_shape
    elements = math.prod(pooled)
    if tuple(pool.size) == tuple(in_shape[1:]) and not any(layer.padding):
        return (math.prod(pool.size) + 1) * elements  # global pooling: thop's adaptive rule
    return elements


def int8_layout_bytes(shape: tuple[int, ...], device: Capabilities, wide: bool = False) -> int:
    """Bytes of a tensor in the HWC data memory (docs/hardware/devices.md §2): one 32-bit word per
    pixel, pass and group of 4 processors; wide outputs take 4 bytes per channel."""
    if not shape:
        return 0
    pixels = math.prod(shape[1:])
    return pixels * words_per_pixel(shape[0], device) * 4 * (4 if wide else 1)


def float32_bytes(shape: tuple[int, ...]) -> int:
    """Bytes of a float32 tensor."""
    return 4 * math.prod(shape) if shape else 0


def param_bytes_at(layer: Layer, weight_bits: int) -> int:
    """Parameter bytes on the device: weights at ``weight_bits`` (-1: binary), bias 1 byte each;
    BatchNorm is folded and takes none."""
    if not layer.has_weights:
        return 0
    bits = layer.quant.weight_bits if layer.quant is not None else weight_bits
    n_weights, n_bias = weight_and_bias_sizes(layer)
    per_weight = 1 if bits == BINARY_BITS else abs(bits)
    return math.ceil(n_weights * per_weight / 8) + n_bias
