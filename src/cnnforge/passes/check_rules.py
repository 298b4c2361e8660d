"""The per-layer device rules of ``cnnforge check``, one small function each yielding
``Violation``s (docs/hardware/devices.md §1, §7; docs/hardware/network-yaml.md §5)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cnnforge.ir import HARDWARE_ELTWISE, INPUT, Layer, Network, Op
from cnnforge.passes.fold_constants import is_constant_affine, why_not_folded
from cnnforge.passes.fuse import hardware_activation, why_no_eltwise_act
from cnnforge.passes.geometry import input_channels
from cnnforge.passes.host_input import why_not_host_input
from cnnforge.passes.host_ops import why_not_host
from cnnforge.passes.pad_rewrites import pad_hint

if TYPE_CHECKING:
    from cnnforge.devices import Capabilities


@dataclass(frozen=True)
class Violation:
    """One broken device rule: where (layer, PyTorch module path), what, the value, the limit,
    and a hint (the rewrite to apply, or what to change)."""

    layer: str
    module_path: str
    rule: str
    actual: str
    limit: str
    hint: str

    def to_dict(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Context:
    """What the rules look at: the network, the device, and the other devices for hints."""

    network: Network
    device: Capabilities
    others: tuple[Capabilities, ...] = ()  # the target's other parts, for hints

    def violation(self, layer: Layer, rule: str, actual, limit, hint: str) -> Violation:
        return Violation(
            layer.name, layer.module_path or layer.name, rule, str(actual), str(limit), hint
        )

    def other_device(self, ok: Callable[[Any], bool]) -> str:
        """' or use MAX78002' when another device satisfies ``ok``, else ''."""
        names = [d.name for d in self.others if ok(d)]
        return f"; or use {' / '.join(names)}" if names else ""


LayerRule = Callable[[Context, Layer], Iterator[Violation]]

NETWORK = "network"  # the "layer" of network-wide violations


def network_violation(network: Network, rule: str, actual, limit, hint: str) -> Violation:
    """A violation of the whole network (its "layer" is ``NETWORK``)."""
    return Violation(NETWORK, network.name, rule, str(actual), str(limit), hint)


#: Where ``cnnforge adapt`` makes the suggested swap itself (its table, docs/adapt.md) and
#: recovers the accuracy by distillation from the original, the hint says so.
ADAPT = "; `cnnforge adapt` does it (docs/adapt.md)"

_KERNEL_HINTS = {
    5: "replace the 5x5 conv by two 3x3 convs and retrain" + ADAPT,
    7: "replace the 7x7 conv by three 3x3 convs and retrain" + ADAPT,
    2: "use a 3x3 kernel and retrain (a 2x2 conv is an exact 3x3 only before a stride that "
    "drops the extra row)",
}

_MODEL_LEVEL_HINTS = {
    Op.UPSAMPLE: "use nn.ConvTranspose2d(k=2, s=2) (rewritten exactly) or (k=3, s=2, p=1, "
    "output_padding=1) instead of upsampling, and retrain",
    Op.BATCHNORM: "a BatchNorm folds only into the conv/linear right before it: move it there",
    Op.FLATTEN: "flatten only feeds a Linear layer: put the Linear right after it",
    Op.CONCAT: "concatenate only along channels (dim=1) of equally sized tensors",
    Op.POOL: "the hardware pools without padding: use padding=0" + ADAPT,
}


def constant_hint(network: Network, layer: Layer) -> str:
    """Why captured constant arithmetic stays, and what to do about it."""
    why = why_not_folded(network, layer)
    if layer.inputs[0] == INPUT:
        return (
            f"an input normalization stays because {why} and cnnforge cannot do it on the "
            f"host: {why_not_host_input(network, layer)}; apply it where the input is prepared "
            "and remove it from forward()"
        )
    return (
        f"a constant scale/shift folds only into the conv/linear next to it; here {why}; only "
        "a normalization at the model's start (the input's only reader) is done on the host"
    )


def _fmt(values) -> str:
    values = tuple(values)
    return "x".join(str(v) for v in values) if values else "-"


def unsupported_op(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """Model-level layers left after lowering: no hardware operation computes them."""
    if layer.is_hardware:
        return
    if layer.op is Op.ACTIVATION:
        yield _activation(ctx, layer)
        return
    if layer.op is Op.ELTWISE and layer.eltwise not in HARDWARE_ELTWISE:
        hint = (
            "multiply is not a hardware operator (docs/hardware/arithmetic.md R4.5); use add/sub "
            "or retrain"
        )
        yield ctx.violation(layer, "eltwise-op", layer.eltwise.value, "add, sub, or, xor", hint)
        return
    if layer.op is Op.SOFTMAX:
        why = why_not_host(ctx.network, layer)
        hint = f"softmax/argmax runs on the host only at an output, over channels; here {why}"
        yield ctx.violation(layer, "softmax", layer.reduce_kind, "an output, over dim 1", hint)
        return
    if layer.op is Op.PAD:
        hint = pad_hint(ctx.network, layer)
        yield ctx.violation(layer, "pad", list(layer.pad_amounts), "inside a conv", hint)
        return
    if layer.op is Op.OPAQUE:
        hint = opaque_hint(layer.opaque_kind)
        yield ctx.violation(layer, "unsupported-op", layer.opaque_kind, "a hardware layer", hint)
        return
    hint = _MODEL_LEVEL_HINTS.get(layer.op, "no hardware operation computes this")
    if is_constant_affine(layer):
        hint = constant_hint(ctx.network, layer)
    label = layer.label()
    if layer.op is Op.UPSAMPLE and layer.upsample_mode not in ("", "nearest"):
        hint, label = opaque_hint(layer.upsample_mode), f"upsample {layer.upsample_mode}"
    yield ctx.violation(layer, "unsupported-op", label, "a hardware layer", hint)


#: Replacements for ops the device lacks, by (lower-case) op name without its namespace: OPAQUE
#: rows of the frontend are named with these.
_OPAQUE_HINTS = {
    "instancenorm": "per-sample statistics do not exist on the device: use BatchNorm2d (folded "
    "into the conv) and retrain" + ADAPT,
    "groupnorm": "per-sample statistics do not exist on the device: use BatchNorm2d (folded "
    "into the conv) and retrain" + ADAPT,
    "layernorm": "per-sample statistics do not exist on the device: use BatchNorm2d and retrain",
    "hardswish": "the device has ReLU and Abs only: use ReLU and retrain" + ADAPT,
    "hardsigmoid": "the device has ReLU and Abs only: use ReLU (or drop the gate) and retrain",
    "silu": "the device has ReLU and Abs only: use ReLU and retrain" + ADAPT,
    "gelu": "the device has ReLU and Abs only: use ReLU and retrain" + ADAPT,
    "elu": "the device has ReLU and Abs only: use ReLU and retrain" + ADAPT,
    "prelu": "the device has ReLU and Abs only: use ReLU and retrain" + ADAPT,
    "upsample_bilinear2d": "bilinear interpolation does not exist on the device: use "
    "nn.ConvTranspose2d(k=2, s=2) (rewritten exactly) or (k=3, s=2, p=1, output_padding=1) "
    "and retrain, or a nearest upsample" + ADAPT,
    "mul": "products of feature maps (attention gates, broadcasts, scaling by constants) do not "
    "exist on the device: use add/sub or drop the gate and retrain (a sigmoid gate: "
    "`cnnforge adapt` holds it open and retrains, docs/adapt.md)",
    "getitem": "slicing/indexing feature maps does not exist on the device: use a conv with "
    "fewer output channels, or do it on the host",
    "slice": "slicing feature maps does not exist on the device: do it on the host",
}


def opaque_hint(kind: str) -> str:
    """The replacement to suggest for an OPAQUE op (``nn.GroupNorm``, ``aten.hardswish``,
    ``F.interpolate: bilinear``): keyed by the op name and the reason after ``:``."""
    op = kind.partition(":")[0]
    name = op.rsplit(".", 1)[-1].lower().replace("_", "")  # aten.instance_norm, InstanceNorm2d
    for key, hint in _OPAQUE_HINTS.items():
        if name.startswith(key.replace("_", "")):
            return hint
    if "not by an integer factor" in kind:
        return (
            "the input size is not a multiple of the network's total downsampling, so an "
            "upsampling is by a non-integer factor: use an input size that is a multiple of "
            "2^depth (8 or 16 for most U-Nets)"
        )
    if "bilinear" in kind or "bicubic" in kind or "linear" in kind.partition(":")[2]:
        return _OPAQUE_HINTS["upsample_bilinear2d"]
    return (
        "no hardware operation computes this: replace it by a supported layer (conv, pool, "
        "add, concat, ReLU) or compute it on the host"
    )


def _activation(ctx: Context, layer: Layer) -> Violation:
    act = layer.activation.value
    if hardware_activation(layer) is None:
        hint = (
            f"the hardware has ReLU and Abs only (after a conv/linear); replace {act} by "
            f"ReLU and retrain, or compute it on the host{ADAPT}"
        )
        return ctx.violation(layer, "activation", act, "relu, abs", hint)
    source = layer.inputs[0]
    hint = (
        f"{act} runs in the layer before it, but {source} cannot carry it (not a conv/linear, "
        "already activated, or its output is read elsewhere): apply it right after a conv"
    )
    producer = ctx.network.layer(source) if source in {x.name for x in ctx.network} else None
    why = why_no_eltwise_act(ctx.device, producer) if producer and producer.eltwise else ""
    if why:
        hint = f"{act} after an element-wise op needs an identity conv to carry it, but {why}"
    return ctx.violation(layer, "activation", f"{act} after {source}", "after a conv", hint)


def conv2d_geometry(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """Conv2d: kernel 1x1/3x3, pad 0..2 and < kernel, square pad, dilation, groups."""
    if layer.op is not Op.CONV2D:
        return
    dev = ctx.device
    if layer.kernel_size not in dev.conv2d_kernels:
        hint = _KERNEL_HINTS.get(max(layer.kernel_size), "use 1x1 or 3x3 kernels and retrain")
        yield ctx.violation(layer, "kernel-size", _fmt(layer.kernel_size), "1x1 or 3x3", hint)
    yield from _padding(ctx, layer, dev.conv_pads)
    dil = max(layer.dilation or (1,))
    if dil > dev.conv2d_dilation_max:
        hint = "dilated Conv2d is not supported: use pooling or more layers and retrain" + ADAPT
        yield ctx.violation(layer, "dilation", dil, dev.conv2d_dilation_max, hint)
    yield from _groups(ctx, layer)


def _padding(ctx: Context, layer: Layer, pads: tuple[int, ...]) -> Iterator[Violation]:
    pad = layer.padding or (0,)
    if len(set(pad)) > 1:
        hint = "the hardware pads all sides alike: use equal padding and retrain"
        yield ctx.violation(layer, "pad", _fmt(pad), "one value for all sides", hint)
    kmin = min(layer.kernel_size or (1,))
    if max(pad) not in pads or max(pad) >= kmin:
        legal = [str(p) for p in pads if p < kmin]
        limit = f"{' or '.join(legal) or 'none'} (below the kernel size {kmin})"
        hint = "pad 0, 1 or 2, smaller than the kernel; retrain with a legal pad"
        yield ctx.violation(layer, "pad", max(pad), limit, hint)


def _groups(ctx: Context, layer: Layer) -> Iterator[Violation]:
    if layer.groups == 1:
        return
    depthwise = layer.groups == layer.in_channels == layer.out_channels
    if depthwise and ctx.device.depthwise:
        return
    limit = "1, or depthwise (groups = in = out)" if ctx.device.depthwise else "1"
    hint = "use groups=1 (or a depthwise conv with groups = in = out channels)"
    if depthwise:
        hint = "use groups=1" + ctx.other_device(lambda d: d.depthwise)
    yield ctx.violation(layer, "groups", layer.groups, limit, hint)


def conv1d_geometry(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """Conv1d: kernel 1..9, pad, dilation range and the long-dilation restrictions."""
    if layer.op is not Op.CONV1D:
        return
    dev = ctx.device
    (k,) = layer.kernel_size
    lo, hi = dev.conv1d_kernel_range
    if not lo <= k <= hi:
        yield ctx.violation(
            layer, "kernel-size", k, f"{lo}..{hi}", "split the kernel into smaller ones"
        )
    yield from _padding(ctx, layer, dev.conv_pads)
    (d,) = layer.dilation or (1,)
    if d > dev.conv1d_dilation_max or (d > 1 and k == 1):
        limit = f"1..{dev.conv1d_dilation_max}, 1 for kernel 1"
        yield ctx.violation(layer, "dilation", d, limit, "reduce the dilation")
    if (k - 1) * d >= 9 and (k > 3 or any(layer.padding) or layer.pool or layer.eltwise):
        limit = "kernel <= 3, no pad, no pooling, one operand when (k-1)*dilation >= 9"
        yield ctx.violation(layer, "dilation", f"k={k} d={d}", limit, "use kernel 3, pad 0")
    if layer.eltwise is not None:
        hint = "add the operands in a passthrough layer before the Conv1d"
        yield ctx.violation(layer, "eltwise-conv1d", layer.eltwise.value, "none", hint)
    cin = input_channels(ctx.network, layer)
    if not dev.conv1d_multipass_pad and any(layer.padding) and dev.passes(cin) > 1:
        yield ctx.violation(
            layer, "pad", f"pad with {cin} input channels", "pad 0 above 64 channels", "pad 0"
        )
    yield from _groups(ctx, layer)


def convtranspose_geometry(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """ConvTranspose2d: 3x3, stride 2, output_padding 1, pad 0..2."""
    if layer.op is not Op.CONVTRANSPOSE2D:
        return
    dev = ctx.device
    got = (layer.kernel_size, layer.stride, layer.output_padding, max(layer.padding or (0,)))
    ok = (
        layer.kernel_size == dev.convtranspose2d_kernel
        and layer.stride == (dev.convtranspose2d_stride,) * 2
        and tuple(layer.output_padding) == (dev.convtranspose2d_output_padding,) * 2
        and len(set(layer.padding)) == 1
        and layer.padding[0] in dev.convtranspose2d_pads
    )
    if not ok:
        actual = f"k={_fmt(got[0])} s={_fmt(got[1])} output_padding={_fmt(got[2])} p={got[3]}"
        hint = (
            "use ConvTranspose2d(k=2, s=2, p=0) (rewritten exactly) or (k=3, s=2, p=1, "
            "output_padding=1) and retrain"
        )
        yield ctx.violation(layer, "convtranspose", actual, "k=3 s=2 output_padding=1 p=0..2", hint)
    if layer.dilation and max(layer.dilation) > 1:
        yield ctx.violation(layer, "dilation", max(layer.dilation), 1, "use dilation 1")
    yield from _groups(ctx, layer)


def stride(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """Conv1d/Conv2d/linear/passthrough run with stride 1 (strides are rewritten as pooling)."""
    if layer.op in (Op.CONV1D, Op.CONV2D) and any(s != 1 for s in layer.stride or (1,)):
        hint = "use one stride (<= 16) on all axes: it is then rewritten exactly as pooling"
        yield ctx.violation(layer, "stride", _fmt(layer.stride), 1, hint)


LAYER_RULES_OPS: tuple[LayerRule, ...] = (
    unsupported_op,
    conv2d_geometry,
    conv1d_geometry,
    convtranspose_geometry,
    stride,
)
