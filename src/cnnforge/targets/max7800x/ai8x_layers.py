"""One vendor YAML layer plus its paired checkpoint weights -> one hardware IR ``Layer``, with the
vendor's defaults (docs/hardware/network-yaml.md §3-§5, docs/hardware/checkpoint-format.md §5)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from cnnforge.arithmetic import bias_from_checkpoint, dequantize_params, implicit_shift
from cnnforge.devices import Capabilities
from cnnforge.errors import ConfigError
from cnnforge.ir import BINARY_BITS, INPUT, Activation, Layer, Op, Pooling, Quantized
from cnnforge.ranges import verify_quantized
from cnnforge.targets.max7800x.ai8x_checkpoint import CheckpointLayer
from cnnforge.targets.max7800x.ai8x_yaml import YamlLayer


@dataclass(frozen=True)
class LayerContext:
    """What the builder needs besides the YAML layer: file, inputs and their shapes."""

    path: str
    name: str
    inputs: tuple[str, ...]
    in_shapes: tuple[tuple[int, ...], ...]
    device: Capabilities  # asked for binary weights and depthwise support


def _fail(y: YamlLayer, ctx: LayerContext, what: str, key: str = "", hint: str | None = None):
    where = f"{ctx.path}:{y.line_of(key) if key else y.line}"
    raise ConfigError(f"{y.label()}: {what}", where=where, hint=hint)


def build_layer(y: YamlLayer, ck: CheckpointLayer | None, ctx: LayerContext) -> Layer:
    """The hardware ``Layer`` for YAML layer ``y`` (``ck``: its weights, None if weightless)."""
    channels, dims = _input_geometry(y, ctx)
    pool = _pooling(y, ctx, dims)
    pooled = pool.output_dims(dims) if pool else dims
    if any(n <= 0 for n in pooled):
        _fail(y, ctx, f"pooling gives a zero dimension ({list(dims)} -> {list(pooled)})", "")
    if y.op is Op.PASSTHROUGH:
        layer = _passthrough(y, ctx, channels, pooled)
    else:
        assert ck is not None
        layer = _weight_layer(y, ck, ctx, channels, pooled)
    return _common(layer, y, ctx, pool)


def _input_geometry(y: YamlLayer, ctx: LayerContext) -> tuple[int, tuple[int, ...]]:
    """Channels seen by the layer (sum for a concatenation, one operand's for element-wise)."""
    dims = ctx.in_shapes[0][1:]
    for shape in ctx.in_shapes[1:]:
        if shape[1:] != dims:
            what = (
                f"inputs of different sizes cannot be combined ({list(dims)} vs {list(shape[1:])})"
            )
            _fail(y, ctx, what, "in_sequences")
    if y.in_dim is not None and tuple(y.in_dim) not in (dims, dims[:1]):
        what = f"`in_dim` {list(y.in_dim)} differs from the input size {list(dims)}"
        _fail(y, ctx, what, "in_dim", "cnnforge does not support reshaping with `in_dim`")
    chans = [s[0] for s in ctx.in_shapes]
    if y.eltwise is not None:
        if len(chans) == 1 and y.operands > 1:
            return _split_operands(y, ctx, chans[0]), dims
        if len(chans) != y.operands:
            what = f"{y.operands} operands but {len(chans)} inputs"
            _fail(y, ctx, what, "in_sequences", "list one `in_sequences` entry per operand")
        if len(set(chans)) != 1:
            what = f"element-wise operands with different channel counts {chans}"
            _fail(y, ctx, what, "in_sequences")
        return chans[0], dims
    return sum(chans), dims


def _split_operands(y: YamlLayer, ctx: LayerContext, channels: int) -> int:
    """Input channels of an element-wise first layer: ``operands`` equal consecutive groups, loaded
    interleaved word by word (HWC only, docs/ai8x-format.md); another layer's output is refused."""
    if ctx.inputs != (INPUT,):
        what = (
            f"an element-wise operation over one layer's output split into {y.operands} "
            "operands (no `in_sequences`) is not supported by cnnforge"
        )
        _fail(y, ctx, what, "operands", "list one `in_sequences` entry per operand")
    if channels % y.operands:
        what = f"the network input's {channels} channels do not split into {y.operands} operands"
        _fail(y, ctx, what, "operands")
    if y.data_format == "CHW":
        _fail(y, ctx, "an element-wise operation on CHW input (the vendor takes HWC only)",
              "data_format")  # fmt: skip
    return channels // y.operands


def _pooling(y: YamlLayer, ctx: LayerContext, dims: tuple[int, ...]) -> Pooling | None:
    if y.pool_kind is None:
        for key in ("pool_stride", "pool_dilation"):
            if getattr(y, key):
                _fail(y, ctx, f"`{key}` without `max_pool`/`avg_pool`", key)
        if not y.pool_first:
            _fail(y, ctx, "`pool_first: false` needs pooling", "pool_first")
        return None
    n = len(dims)
    size = _axes(y.pool_size, n, y, ctx, "max_pool" if y.pool_kind.value == "max" else "avg_pool")
    stride = _axes(y.pool_stride or (1,), n, y, ctx, "pool_stride")
    if len(set(stride)) != 1:
        _fail(y, ctx, f"non-square pooling stride {list(stride)}", "pool_stride")
    dilation = _axes(y.pool_dilation or (1,), n, y, ctx, "pool_dilation")
    if any(d != 1 for d in dilation):
        _fail(y, ctx, "pool dilation is not supported by cnnforge's importer", "pool_dilation")
    if not y.pool_first and (y.eltwise is None or y.operands > 2):
        _fail(y, ctx, "`pool_first: false` needs an element-wise op of 2 operands", "pool_first")
    return Pooling(kind=y.pool_kind, size=size, stride=stride)


def _axes(values: tuple[int, ...], n: int, y: YamlLayer, ctx: LayerContext, key: str):
    if len(values) == 1:
        return values * n
    if len(values) != n:
        _fail(y, ctx, f"`{key}` has {len(values)} values for {n}-D data", key)
    return tuple(values)


def _passthrough(y: YamlLayer, ctx: LayerContext, channels: int, dims: tuple[int, ...]) -> Layer:
    """A weightless layer: copy, pool-only or element-wise (docs/hardware/network-yaml.md §5
    "Passthrough")."""
    checks = (
        (y.activation is not Activation.NONE, "a passthrough layer cannot have an activation",
         "activate"),
        (bool(y.pad), "a passthrough layer cannot pad", "pad"),
        (bool(y.output_shift), "`output_shift` must be 0 on a passthrough layer", "output_shift"),
        (y.wide, "a passthrough layer must have `output_width: 8`", "output_width"),
        (y.flatten, "`flatten` needs a linear layer", "flatten"),
        (y.kernel_size not in (None, (1, 1), (1,)), "a passthrough layer has a 1x1 kernel",
         "kernel_size"),
        (y.quantization is not None, "a passthrough layer has no weights to quantize",
         "quantization"),
    )  # fmt: skip
    for bad, what, key in checks:
        if bad:
            _fail(y, ctx, what, key)
    return Layer(
        name=ctx.name,
        op=Op.PASSTHROUGH,
        inputs=ctx.inputs,
        out_shape=(channels, *dims),
        in_channels=channels,
        out_channels=channels,
        kernel_size=(1,) * len(dims),
        stride=(1,) * len(dims),
        padding=(0,) * len(dims),
        dilation=(1,) * len(dims),
    )


def _weight_layer(
    y: YamlLayer, ck: CheckpointLayer, ctx: LayerContext, channels: int, dims: tuple[int, ...]
) -> Layer:
    if y.op is Op.LINEAR:
        geometry = _linear(y, ck, ctx, channels, dims)
    elif y.op is Op.CONVTRANSPOSE2D:
        geometry = _convtranspose(y, ck, ctx, channels, dims)
    else:
        geometry = _conv(y, ck, ctx, channels, dims)
    quant = _quantized(y, ck, ctx)
    weight, bias = dequantize_params(
        quant.weights, quant.bias, quant.weight_bits, quant.output_shift, y.wide
    )
    return Layer(
        name=ctx.name, op=y.op, inputs=ctx.inputs, weight=weight, bias=bias, quant=quant, **geometry
    )


def _check_in_channels(y, ck, ctx, expected: int, actual: int) -> None:
    if expected != actual:
        what = (
            f"the checkpoint's `{ck.weight_key}` {list(ck.weight.shape)} takes {actual} input "
            f"channels, but the layer's input has {expected}"
        )
        _fail(
            y,
            ctx,
            what,
            "in_sequences",
            "the YAML and the checkpoint do not describe the same network (check the layer order)",
        )


def _kernel_check(y: YamlLayer, ck: CheckpointLayer, ctx: LayerContext, kernel: tuple) -> None:
    if y.kernel_size is None:
        return
    given = y.kernel_size * len(kernel) if len(y.kernel_size) == 1 else y.kernel_size
    if tuple(given) != tuple(kernel):
        text = "x".join(map(str, kernel))
        what = (
            f"`kernel_size` {'x'.join(map(str, given))} does not match the checkpoint's "
            f"`{ck.weight_key}` ({text})"
        )
        _fail(y, ctx, what, "kernel_size", f"set `kernel_size: {text}`")


def _kernel_of(y, ck, ctx, dims: tuple[int, ...], n: int) -> tuple[int, ...]:
    """The kernel size of n-D weights on n-D data, checked against the YAML `kernel_size`."""
    if ck.weight.ndim != n + 2 or len(dims) != n:
        what = (
            f"{y.op.value} needs {n}-D data and {n + 2}-D weights; got input "
            f"{list(dims)} and `{ck.weight_key}` {list(ck.weight.shape)}"
        )
        _fail(y, ctx, what, "operation")
    kernel = tuple(int(k) for k in ck.weight.shape[2:])
    _kernel_check(y, ck, ctx, kernel)
    return kernel


def _conv(y, ck, ctx, channels: int, dims: tuple[int, ...]) -> dict:
    """Conv1d/Conv2d geometry (docs/hardware/arithmetic.md R2.5, R2.6)."""
    n = 1 if y.op is Op.CONV1D else 2
    kernel = _kernel_of(y, ck, ctx, dims, n)
    pad = 1 if y.pad is None else y.pad
    dil = y.dilation
    if n == 2 and (kernel not in ((1, 1), (3, 3)) or dil != 1):
        what = f"conv2d supports 1x1 and 3x3 kernels without dilation, not {kernel}"
        _fail(y, ctx, what, "kernel_size")
    if pad >= kernel[0] or pad > (3 if n == 1 else 2):
        _fail(y, ctx, f"pad {pad} must be smaller than the kernel ({kernel[0]}) and <= 2", "pad")
    if any(s != 1 for s in y.stride):
        _fail(y, ctx, "convolutions support stride 1 only", "stride")
    groups = y.groups
    in_ch = int(ck.weight.shape[1]) * groups
    _check_in_channels(y, ck, ctx, channels, in_ch)
    out = tuple(d + 2 * pad - dil * (kernel[0] - 1) for d in dims)
    if any(o <= 0 for o in out):
        _fail(y, ctx, f"the output would have a zero dimension ({list(out)})", "pad")
    return dict(
        out_shape=(int(ck.weight.shape[0]), *out),
        in_channels=in_ch,
        out_channels=int(ck.weight.shape[0]),
        kernel_size=kernel,
        stride=(1,) * n,
        padding=(pad,) * n,
        dilation=(dil,) * n,
        groups=groups,
    )


def _convtranspose(y, ck, ctx, channels: int, dims: tuple[int, ...]) -> dict:
    """ConvTranspose2d geometry: 3x3, stride 2, output_padding 1
    (docs/hardware/arithmetic.md R2.7)."""
    kernel = _kernel_of(y, ck, ctx, dims, 2)
    pad = 1 if y.pad is None else y.pad
    opad = 1 if y.output_pad is None else y.output_pad
    if kernel != (3, 3) or opad != 1 or pad > 2 or any(s != 2 for s in y.stride):
        what = "convtranspose2d supports 3x3, stride 2, output_pad 1, pad 0..2 only"
        _fail(y, ctx, what, "kernel_size")
    groups = y.groups
    in_ch = int(ck.weight.shape[0])
    out_ch = int(ck.weight.shape[1]) * groups
    _check_in_channels(y, ck, ctx, channels, in_ch)
    out = tuple((d - 1) * 2 - 2 * pad + 2 + opad + 1 for d in dims)
    return dict(
        out_shape=(out_ch, *out),
        in_channels=in_ch,
        out_channels=out_ch,
        kernel_size=kernel,
        stride=(2, 2),
        padding=(pad, pad),
        dilation=(1, 1),
        output_padding=(opad, opad),
        groups=groups,
    )


def _linear(y, ck, ctx, channels: int, dims: tuple[int, ...]) -> dict:
    """Linear on 1x1 data, or on a flattened C x H x W input (docs/hardware/arithmetic.md R2.8,
    R5.1)."""
    if ck.weight.ndim != 2:
        what = f"a linear layer needs 2-D weights, not `{ck.weight_key}` {list(ck.weight.shape)}"
        _fail(y, ctx, what, "operation")
    if y.kernel_size not in (None, (1, 1), (1,)):
        _fail(y, ctx, "a linear layer has no `kernel_size`", "kernel_size")
    if y.pad:
        _fail(y, ctx, "a linear layer cannot pad", "pad")
    pixels = math.prod(dims)
    if y.flatten and y.pool_kind is not None:
        _fail(y, ctx, "`flatten` is not compatible with pooling", "flatten")
    if y.flatten and pixels > 256:
        _fail(y, ctx, f"`flatten` needs at most 256 pixels per channel, not {pixels}", "flatten")
    if not y.flatten and pixels != 1:
        what = f"a linear layer needs 1x1 data, not {list(dims)}"
        _fail(y, ctx, what, "flatten", "add `flatten: true`")
    in_ch = int(ck.weight.shape[1])
    _check_in_channels(y, ck, ctx, channels * pixels, in_ch)
    out_ch = int(ck.weight.shape[0])
    return dict(
        out_shape=(out_ch,),
        in_channels=in_ch,
        out_channels=out_ch,
        kernel_size=(1, 1),
        stride=(1, 1),
        padding=(0, 0),
        dilation=(1, 1),
        flatten=y.flatten,
    )


def _weight_bits(y: YamlLayer, ck: CheckpointLayer, ctx: LayerContext) -> int:
    """YAML `quantization`, else checkpoint bits; all-zero -> 1, all +-1 -> binary (§5.9)."""
    if y.quantization is not None:
        bits = y.quantization
    elif not np.any(ck.weight):
        bits = 1
    elif ctx.device.binary_weights and np.all(np.abs(ck.weight) == 1):
        bits = BINARY_BITS
    else:
        bits = ck.weight_bits or 8
    if bits not in ctx.device.allowed_weight_bits:
        what = f"weight width {bits} is not available on {ctx.device.name}"
        _fail(
            y,
            ctx,
            what,
            "quantization",
            f"allowed: {', '.join(map(str, ctx.device.allowed_weight_bits))}",
        )
    return bits


def _quantized(y: YamlLayer, ck: CheckpointLayer, ctx: LayerContext) -> Quantized:
    bits = _weight_bits(y, ck, ctx)
    bias = None
    if ck.bias is not None:
        if ck.bias.shape != (int(ck.weight.shape[1 if y.op is Op.CONVTRANSPOSE2D else 0]),):
            what = f"`{ck.module}` bias of shape {list(ck.bias.shape)} does not match its weights"
            _fail(y, ctx, what)
        bias = bias_from_checkpoint(ck.bias, ck.weight_bits)  # R1.6: the checkpoint's bits
    shift = ck.output_shift if y.output_shift is None else y.output_shift
    quant = Quantized(weight_bits=bits, weights=ck.weight, bias=bias, output_shift=shift)
    for p in verify_quantized(quant, y.wide):
        if p.field == "weights":
            what = (
                f"{p.first}, outside the {bits}-bit range [{p.lo}, {p.hi}]"
                if p.integral
                else f"a non-integer value ({p.first})"
            )
            _fail(y, ctx, f"`{ck.weight_key}` holds {what}", "quantization")
        if p.field == "bias":
            what = (
                f"{p.low}..{p.high} does not fit the 8-bit bias memory [{p.lo}, {p.hi}]"
                if p.integral
                else f"holds a non-integer value ({p.first})"
            )
            _fail(y, ctx, f"`{ck.module}` bias {what}")
        what = (
            f"output shift {shift} + {implicit_shift(bits)} (implicit) = {p.low} is "
            f"outside [{p.lo}, {p.hi}]"
        )
        _fail(y, ctx, what, "output_shift")
    return quant


def _check_op_keys(y: YamlLayer, layer: Layer, ctx: LayerContext) -> None:
    """Keys that only some operations (or devices) accept (docs/hardware/network-yaml.md §5)."""
    convs = (Op.CONV2D, Op.CONV1D, Op.CONVTRANSPOSE2D)
    depthwise = y.op is not Op.LINEAR and y.groups == layer.in_channels == layer.out_channels
    dev = ctx.device.name
    for bad, what, key in (
        (y.dilation != 1 and y.op is not Op.CONV1D, "`dilation` > 1 needs conv1d", "dilation"),
        (y.output_pad is not None and y.op is not Op.CONVTRANSPOSE2D,
         "`output_pad` needs convtranspose2d", "output_pad"),
        (y.flatten and y.op is not Op.LINEAR, "`flatten` needs a linear layer", "flatten"),
        (bool(y.stride) and y.op not in convs, "`stride` needs a convolution", "stride"),
        (y.wide and y.activation is not Activation.NONE,
         "`output_width: 32` needs `activate: None`", "output_width"),
        (y.groups != 1 and not ctx.device.depthwise,
         f"`groups` (depthwise convolution) is not supported on {dev}", "groups"),
        (y.groups != 1 and not depthwise,
         "`groups` > 1 needs a depthwise convolution (groups = in = out)", "groups"),
        (y.in_channels not in (None, layer.in_channels)
         or y.out_channels not in (None, layer.out_channels),
         f"`in_channels`/`out_channels` differ from the derived {layer.in_channels}"
         f"/{layer.out_channels}", "in_channels"),
    ):  # fmt: skip
        if bad:
            _fail(y, ctx, what, key)


def _common(layer: Layer, y: YamlLayer, ctx: LayerContext, pool: Pooling | None) -> Layer:
    """Fields every layer kind shares: pooling, element-wise op, activation, width."""
    _check_op_keys(y, layer, ctx)
    return replace(
        layer,
        module_path=f"{ctx.path}:{y.line}",
        pool=pool,
        eltwise=y.eltwise,
        split_operands=y.operands if y.eltwise is not None and len(ctx.inputs) == 1 else 0,
        pool_first=y.pool_first,
        activation=y.activation,
        wide=y.wide,
    )
