"""Per-layer resource and data-flow rules of ``cnnforge check``, limits asked from the device
(docs/hardware/devices.md §1/§2/§7, docs/hardware/network-yaml.md §4/§5)."""

from __future__ import annotations

import math
from collections.abc import Iterator

from cnnforge.ir import HARDWARE_ELTWISE, Activation, Layer, Op, PoolKind
from cnnforge.passes.check_rules import Context, LayerRule, Violation, _fmt
from cnnforge.passes.concat_channels import why_not_padded
from cnnforge.passes.geometry import has_bias, input_channels, pooled_dims
from cnnforge.ranges import verify_quantized


def channels(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """Input and output channels per layer <= the device's maximum (16 passes x 64)."""
    if not layer.is_hardware:
        return
    dev = ctx.device
    cin = input_channels(ctx.network, layer)
    if layer.op is Op.LINEAR:
        yield from _linear(ctx, layer, cin)
        return
    for what, n in (("input", cin), ("output", layer.out_shape[0])):
        if n > dev.max_channels:
            hint = f"split the layer: at most {dev.max_channels} channels per layer"
            yield ctx.violation(layer, f"{what}-channels", n, dev.max_channels, hint)


def _linear(ctx: Context, layer: Layer, cin: int) -> Iterator[Violation]:
    dev = ctx.device
    features = layer.in_channels if layer.flatten else cin
    if not layer.flatten and features > dev.linear_max_in:
        yield ctx.violation(
            layer, "linear-in", features, dev.linear_max_in, "reduce the input features"
        )
    if layer.out_channels > dev.linear_max_out:
        yield ctx.violation(
            layer, "linear-out", layer.out_channels, dev.linear_max_out, "split the layer"
        )


def dims(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """Rows/columns in and out <= the device maximum; rows + 2*pad fit the counter; frames."""
    if not layer.is_hardware:
        return
    dev = ctx.device
    shapes = [*ctx.network.input_shapes(layer), layer.out_shape]
    big = max((n for s in shapes for n in s[1:]), default=1)
    if big > dev.max_row_col:
        hint = "reduce the resolution, or fold space into channels (space-to-depth)"
        hint += ctx.other_device(lambda d: big <= d.max_row_col)
        yield ctx.violation(layer, "dims", big, dev.max_row_col, hint)
    pad = max(layer.padding or (0,)) if layer.op is not Op.CONVTRANSPOSE2D else 0
    padded = max(pooled_dims(ctx.network, layer) or (1,)) + 2 * pad
    if padded > 1 << dev.count_bits:
        yield ctx.violation(
            layer, "dims", f"{padded} with padding", 1 << dev.count_bits, "reduce the resolution"
        )
    frame = math.prod(layer.out_shape[1:]) * dev.passes(layer.out_shape[0])
    if frame >= dev.frame_limit:
        yield ctx.violation(layer, "frame", frame, f"< {dev.frame_limit}", "reduce the size")


def pooling(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """Pool size and stride 1..16, square stride, dilation, no padding, pooled size > 0."""
    pool = layer.pool
    if pool is None or not layer.is_hardware:
        return
    dev = ctx.device
    lo, hi = dev.pool_size_range
    if not all(lo <= k <= hi for k in pool.size):
        yield ctx.violation(layer, "pool-size", _fmt(pool.size), f"{lo}..{hi}", "pool in steps")
    lo, hi = dev.pool_stride_range
    if not all(lo <= s <= hi for s in pool.stride) or len(set(pool.stride)) > 1:
        hint = (
            "use the same pool stride on all axes"
            if len(set(pool.stride)) > 1
            else f"pool in steps of at most {hi} (two pooling layers)"
        )
        yield ctx.violation(
            layer, "pool-stride", _fmt(pool.stride), f"{lo}..{hi}, same on all axes", hint
        )
    dil = max(pool.dilation_or_ones())
    if dil > dev.pool_dilation_max or (dil > 1 and pool.kind is PoolKind.AVG):
        hint = "use pool dilation 1" + ctx.other_device(lambda d: dil <= d.pool_dilation_max)
        yield ctx.violation(layer, "pool-dilation", dil, dev.pool_dilation_max, hint)
    yield from _passthrough_pool(ctx, layer)


def _passthrough_pool(ctx: Context, layer: Layer) -> Iterator[Violation]:
    if layer.op is not Op.PASSTHROUGH:
        return
    n = ctx.device.passes(input_channels(ctx.network, layer))
    one_pixel = all(d == 1 for d in layer.out_shape[1:])
    limit = ctx.device.passthrough_pool_max_passes
    if n > limit and not one_pixel:
        hint = "pool inside the next convolution instead, or use 64 channels or fewer"
        hint += ctx.other_device(lambda d: n <= d.passthrough_pool_max_passes)
        yield ctx.violation(layer, "pool-passes", f"{n} passes", f"{limit} pass", hint)


def eltwise(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """Element-wise: operator, 2..16 operands, pool-after <= 2 operands, multi-pass rules."""
    if layer.eltwise is None or not layer.is_hardware:
        return
    dev = ctx.device
    k = layer.operand_count
    lo, hi = dev.eltwise_operands_range
    if not lo <= k <= hi:
        yield ctx.violation(layer, "operands", k, f"{lo}..{hi}", "combine in several layers")
    if layer.eltwise not in HARDWARE_ELTWISE:
        yield ctx.violation(layer, "eltwise-op", layer.eltwise.value, "add, sub, or, xor", "")
    if layer.pool is not None and not layer.pool_first and k > dev.pool_after_eltwise_operands:
        yield ctx.violation(
            layer, "operands", k, dev.pool_after_eltwise_operands, "pool the operands first"
        )
    n = dev.passes(input_channels(ctx.network, layer))
    plain = layer.op is Op.PASSTHROUGH and layer.pool is None
    if n > 1 and dev.eltwise_multipass_plain_only and not plain and (k, n) != (2, 2):
        hint = "element-wise over more than 64 channels needs a layer of its own (no conv/pool)"
        yield ctx.violation(layer, "eltwise-passes", f"{n} passes", "1 pass", hint)
    # The vendor tool refuses this for any number of passes on the MAX78002, though its message
    # says multi-pass (docs/check.md, Rules); depthwise layers read their bias otherwise.
    conv_bias = layer.has_weights and has_bias(layer) and layer.groups == 1
    if conv_bias and not dev.eltwise_multipass_conv_bias:
        hint = "drop the conv's bias or do the element-wise op in a layer of its own"
        yield ctx.violation(layer, "eltwise-conv-bias", "a conv with bias", "no bias", hint)


def concat(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """Concatenation: every part but the last a multiple of 4 channels; equal channel counts."""
    if not layer.is_concat or not layer.is_hardware:
        return
    counts = [s[0] for s in ctx.network.input_shapes(layer)]
    why = why_not_padded(ctx.network, layer)
    why = f"cnnforge appends zero channels only where it can, not here: {why}" if why else ""
    if any(c % 4 for c in counts[:-1]):
        hint = why or "give every concatenated tensor but the last a multiple of 4 channels"
        yield ctx.violation(layer, "concat-multiple-of-4", counts, "multiples of 4", hint)
    if len(set(counts)) > 1:
        hint = why or "the vendor tool joins only inputs of equal channel counts"
        yield ctx.violation(layer, "concat-channels", counts, "equal counts", hint)


def flatten(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """Flatten: H*W <= 256, C*H*W <= 16384, no pooling, not with depthwise."""
    if not layer.flatten:
        return
    dev = ctx.device
    shape = ctx.network.input_shapes(layer)[0]
    hw, chw = math.prod(shape[1:]), math.prod(shape)
    if hw > dev.flatten_max_hw:
        hint = "pool before the Linear layer (a passthrough pooling layer) to shrink H*W"
        yield ctx.violation(layer, "flatten-hw", hw, dev.flatten_max_hw, hint)
    if chw > dev.flatten_max_chw:
        yield ctx.violation(
            layer, "flatten-chw", chw, dev.flatten_max_chw, "reduce the channels or size"
        )
    if layer.pool is not None:
        yield ctx.violation(layer, "flatten-pool", "pooling", "none", "pool in a layer before")
    if layer.op is not Op.LINEAR or layer.groups > 1:
        yield ctx.violation(layer, "flatten-op", layer.label(), "linear", "flatten feeds Linear")


def output(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """No activation on passthrough layers; 32-bit output only without activation, at the end."""
    if not layer.is_hardware:
        return
    if layer.op is Op.PASSTHROUGH and layer.activation is not Activation.NONE:
        hint = "an activation after an element-wise op or a pooling needs a conv to carry it"
        yield ctx.violation(layer, "passthrough-activation", layer.activation.value, "none", hint)
    if layer.wide and layer.op is Op.PASSTHROUGH:
        yield ctx.violation(layer, "wide-output", "32-bit passthrough", "8-bit", "")
    if layer.wide and layer.activation is not Activation.NONE:
        yield ctx.violation(layer, "wide-output", "32-bit with activation", "no activation", "")
    if layer.wide and layer.name not in ctx.network.outputs:
        yield ctx.violation(layer, "wide-output", "32-bit, not an output", "outputs only", "")


def quantization(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """Quantized layers: weight width from the device's set; total shift in [-15, 15]."""
    q = layer.quant
    if q is None:
        return
    dev = ctx.device
    if not dev.weight_bits_allowed(q.weight_bits):
        hint = "use 8, 4, 2 or 1-bit weights" + ctx.other_device(
            lambda d: d.weight_bits_allowed(q.weight_bits)
        )
        yield ctx.violation(layer, "weight-bits", q.weight_bits, _fmt(dev.weight_bits), hint)
    for problem in verify_quantized(q, layer.wide, shift_range=dev.shift_range):
        if problem.field == "shift":  # weights and bias: the simulator's check (sim/checks.py)
            limit = f"{problem.lo}..{problem.hi}"
            yield ctx.violation(layer, "output-shift", q.total_shift, limit, "requantize")
    if layer.op is Op.PASSTHROUGH and q.output_shift:
        yield ctx.violation(layer, "output-shift", q.output_shift, 0, "passthrough: shift 0")


LAYER_RULES_LIMITS: tuple[LayerRule, ...] = (
    channels,
    dims,
    pooling,
    eltwise,
    concat,
    flatten,
    output,
    quantization,
)
