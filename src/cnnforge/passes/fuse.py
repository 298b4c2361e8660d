"""Fusion: model-level layers -> hardware layers ``pool -> eltwise -> op -> activation``
(docs/hardware/network-yaml.md §1); only exact fusions, the rest is left for ``check``."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from cnnforge import geometry
from cnnforge.arithmetic import ACT_MAX, ACT_MIN, ACT_SCALE
from cnnforge.devices import PASS_CHANNELS
from cnnforge.ir import (
    HARDWARE_ELTWISE,
    WEIGHT_OPS,
    Activation,
    EltwiseOp,
    Layer,
    Network,
    Op,
    PoolKind,
)
from cnnforge.passes.host_ops import host_softmax
from cnnforge.passes.pad_rewrites import drop_zero_pad, pad_into_conv
from cnnforge.passes.rewrites import (
    Rewrite,
    absorb_into_consumer,
    absorb_into_producer,
    apply_rules,
    passthrough_geometry,
    record,
    redirect,
    remove_layer,
    replace_layer,
    sole_consumer,
)

if TYPE_CHECKING:
    from cnnforge.devices import Capabilities

OUT_MIN = ACT_MIN / ACT_SCALE  # -1.0: the 8-bit output clamp (docs/hardware/arithmetic.md R1.1)
OUT_MAX = ACT_MAX / ACT_SCALE  # 127/128

POOL_TARGETS = frozenset({Op.CONV1D, Op.CONV2D, Op.CONVTRANSPOSE2D, Op.LINEAR, Op.PASSTHROUGH})
CONCAT_TARGETS = POOL_TARGETS
#: Pooling after element-wise: at most 2 operands (docs/hardware/devices.md §1).
MAX_POOL_LAST_OPERANDS = 2


def hardware_activation(layer: Layer) -> Activation | None:
    """The hardware activation equal to a model-level one after the output clamp to [-1, 127/128]
    (R2.3), or None: ReLU, Abs, ReLU6 -> ReLU, some Hardtanh ranges."""
    act = layer.activation
    if act in (Activation.RELU, Activation.ABS, Activation.NONE):
        return act
    if act is Activation.RELU6:
        return Activation.RELU
    if act is Activation.HARDTANH and len(layer.activation_params) == 2:
        lo, hi = layer.activation_params
        if hi >= OUT_MAX and lo <= OUT_MIN:
            return Activation.NONE
        if hi >= OUT_MAX and lo == 0:
            return Activation.RELU
    return None


def _only_input_is(layer: Layer, name: str) -> bool:
    return layer.inputs == (name,)


def relu_before_maxpool(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """maxpool -> ReLU becomes ReLU -> maxpool (equal: ReLU is monotone, R3.4), so the ReLU can
    join the conv before the pool and the pool the layer after it."""
    if layer.op is not Op.ACTIVATION or hardware_activation(layer) is not Activation.RELU:
        return None
    pool = _layer_or_none(network, layer.inputs[0]) if len(layer.inputs) == 1 else None
    if pool is None or pool.op is not Op.POOL or pool.pool is None:
        return None
    if pool.pool.kind is not PoolKind.MAX or any(pool.padding) or len(pool.inputs) != 1:
        return None
    if sole_consumer(network, pool.name) is not layer:
        return None
    act = replace(layer, inputs=pool.inputs, out_shape=network.shape_of(pool.inputs[0]))
    pooled = replace(pool, inputs=(layer.name,))
    layers = []
    for x in network.layers:
        if x.name == pool.name:
            layers += [act, pooled]
        elif x.name != layer.name:
            layers.append(x)
    network = network.with_layers(layers)
    network = redirect(network, layer.name, pool.name, skip=pool.name)
    detail = f"{layer.label()} moved before {pool.label()} ({pool.name}): equal for max pooling"
    return network, record(layer, "relu-before-maxpool", detail)


def activation_into_concat(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """act(cat(a, b, ...)) -> cat(act(a), act(b), ...): element-wise, so exact; each part is a
    conv/linear without activation read only by the concatenation, which takes the activation."""
    act = hardware_activation(layer) if layer.op is Op.ACTIVATION else None
    cat = _layer_or_none(network, layer.inputs[0]) if act and len(layer.inputs) == 1 else None
    if cat is None or cat.op is not Op.CONCAT or sole_consumer(network, cat.name) is not layer:
        return None
    parts = [_layer_or_none(network, n) for n in cat.inputs]
    for part in parts:
        if part is None or part.op not in WEIGHT_OPS or part.activation is not Activation.NONE:
            return None
        if part.wide or sole_consumer(network, part.name) is not cat:
            return None
    for part in parts:
        network = replace_layer(network, replace(part, activation=act))
    detail = f"{layer.label()} after concatenation {cat.name} moved into {', '.join(cat.inputs)}"
    return remove_layer(network, layer.name, cat.name), record(
        layer, "activation-into-concat", detail
    )


def drop_redundant_activation(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """ReLU/Abs after a layer whose output already passed ReLU/Abs (so is >= 0) is the
    identity; so is an activation that is exact as "none" (e.g. Hardtanh(-1, 1))."""
    act = hardware_activation(layer) if layer.op is Op.ACTIVATION else None
    producer = _layer_or_none(network, layer.inputs[0]) if act is not None else None
    if producer is None or len(layer.inputs) != 1:
        return None
    nonneg = producer.is_hardware and producer.activation in (Activation.RELU, Activation.ABS)
    if act is not Activation.NONE and not nonneg:
        return None
    detail = f"{layer.label()} is the identity on the output of {producer.name}: removed"
    rec = record(layer, "drop-activation", detail)
    return remove_layer(network, layer.name, producer.name), rec


def fuse_activation(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """ACTIVATION after a conv/linear without activation -> that layer's activation."""
    if layer.op is not Op.ACTIVATION or len(layer.inputs) != 1:
        return None
    act = hardware_activation(layer)
    producer = _layer_or_none(network, layer.inputs[0])
    if act is None or producer is None or producer.op not in WEIGHT_OPS:
        return None
    if producer.activation is not Activation.NONE or producer.wide:
        return None
    if sole_consumer(network, producer.name) is not layer:
        return None
    fused = replace(producer, activation=act)
    detail = f"{layer.label()} ({layer.module_path or layer.name}) fused as activation {act.value}"
    return absorb_into_producer(network, layer, fused), record(producer, "fuse-activation", detail)


def drop_flat_flatten(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """FLATTEN of data that is already 1-D ((C,) shape) is the identity: remove it."""
    if layer.op is not Op.FLATTEN or len(layer.inputs) != 1:
        return None
    if len(network.shape_of(layer.inputs[0])) != 1:
        return None
    rec = record(layer, "drop-flatten", "flatten of 1-D data is the identity")
    return remove_layer(network, layer.name, layer.inputs[0]), rec


def fuse_flatten(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """FLATTEN followed by LINEAR -> a linear layer with ``flatten``
    (docs/hardware/arithmetic.md R5.1)."""
    if layer.op is not Op.FLATTEN or len(layer.inputs) != 1:
        return None
    consumer = sole_consumer(network, layer.name)
    if consumer is None or consumer.op is not Op.LINEAR or consumer.flatten:
        return None
    if consumer.pool is not None or not _only_input_is(consumer, layer.name):
        return None
    fused = replace(consumer, flatten=True, inputs=layer.inputs)
    rec = record(consumer, "fuse-flatten", f"flatten ({layer.name}) fused into the linear layer")
    return absorb_into_consumer(network, layer, fused), rec


def merge_eltwise(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """op(op(a, b), c) -> op(a, b, c) for add/or/xor (any position) and sub (first operand)."""
    if layer.op is not Op.ELTWISE or layer.eltwise not in HARDWARE_ELTWISE:
        return None
    for i, name in enumerate(layer.inputs):
        inner = _layer_or_none(network, name)
        if inner is None or inner.op is not Op.ELTWISE or inner.eltwise is not layer.eltwise:
            continue
        if inner.pool is not None or (layer.eltwise is EltwiseOp.SUB and i != 0):
            continue
        if sole_consumer(network, inner.name) is not layer:
            continue
        inputs = layer.inputs[:i] + inner.inputs + layer.inputs[i + 1 :]
        merged = replace(layer, inputs=inputs)
        detail = f"nested {layer.eltwise.value} ({inner.name}) merged: {len(inputs)} operands"
        return absorb_into_consumer(network, inner, merged), record(layer, "merge-eltwise", detail)
    return None


def eltwise_activation(
    network: Network, layer: Layer, device: Capabilities | None
) -> tuple[Network, Rewrite] | None:
    """op(a, b, ...) -> ReLU/Abs becomes an identity 1x1 conv carrying both (a passthrough cannot
    activate; docs/hardware/network-yaml.md §8); see ``why_no_eltwise_act``."""
    if layer.op is not Op.ACTIVATION or len(layer.inputs) != 1:
        return None
    act = hardware_activation(layer)
    inner = _layer_or_none(network, layer.inputs[0])
    if act in (None, Activation.NONE) or inner is None or inner.op is not Op.ELTWISE:
        return None
    if inner.eltwise not in HARDWARE_ELTWISE or len(inner.out_shape) != 3:
        return None
    if why_no_eltwise_act(device, inner) or sole_consumer(network, inner.name) is not layer:
        return None
    c = inner.out_shape[0]
    weight = np.zeros((c, c, 1, 1), dtype=np.float32)
    weight[np.arange(c), np.arange(c), 0, 0] = 1.0
    conv = replace(
        layer,
        op=Op.CONV2D,
        inputs=inner.inputs,
        module_path=inner.module_path or layer.module_path,
        in_channels=c,
        out_channels=c,
        kernel_size=(1, 1),
        stride=(1, 1),
        padding=(0, 0),
        dilation=(1, 1),
        eltwise=inner.eltwise,
        activation=act,
        activation_params=(),
        weight=weight,
        bias=None,
    )
    detail = (
        f"{inner.eltwise.value} ({inner.name}) then {layer.label()}: an identity 1x1 conv "
        f"with the {inner.eltwise.value} in flight and activation {act.value}"
    )
    network = absorb_into_consumer(network, inner, conv)
    return network, record(conv, "eltwise-activation", detail)


def why_no_eltwise_act(device: Capabilities | None, inner: Layer) -> str:
    """Why an activation after element-wise ``inner`` cannot ride an identity conv ('' if it can):
    several passes in flight need the device's multi-pass rule."""
    channels, operands = inner.out_shape[0], len(inner.inputs)
    if _in_flight_allowed(device, operands, channels, bias=False):
        return ""
    passes = _passes(channels, device)
    if device is None:
        return f"{channels} channels need {passes} passes; which device? (give --device)"
    return (
        f"{device.name} runs a {passes}-pass element-wise op ({operands} operands, "
        f"{channels} channels) together with a conv only for 2 operands x 2 passes "
        "(docs/check.md, Rules), and only a conv can carry the activation"
    )


def fuse_pool(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """POOL followed by a conv/linear/passthrough -> that layer's input pooling (R3.1)."""
    if layer.op is not Op.POOL or layer.pool is None or len(layer.inputs) != 1:
        return None
    if any(layer.padding):
        return None  # the hardware pools without padding: the checker reports it
    consumer = sole_consumer(network, layer.name)
    if consumer is None or consumer.op not in POOL_TARGETS or consumer.pool is not None:
        return None
    if consumer.flatten or not _only_input_is(consumer, layer.name):
        return None  # flatten cannot pool (R5.1); pooling would also pool the other inputs
    fused = replace(consumer, pool=layer.pool, inputs=layer.inputs)
    detail = f"{layer.label()} ({layer.module_path or layer.name}) fused as input pooling"
    return absorb_into_consumer(network, layer, fused), record(consumer, "fuse-pool", detail)


def _passes(channels: int, device: Capabilities | None) -> int:
    """Passes of ``channels`` on ``device``; without one, as the target-neutral record counts
    them (``PASS_CHANNELS`` a pass, what is legal on every device)."""
    if device is not None:
        return geometry.passes(channels, device)
    return max(1, -(-channels // PASS_CHANNELS))


def _in_flight_allowed(
    device: Capabilities | None, operands: int, channels: int, bias: bool
) -> bool:
    """Element-wise in flight with a conv over several passes: only on a device allowing it
    (docs/hardware/devices.md §1), with a bias only given ``eltwise_multipass_conv_bias``."""
    if bias and (device is None or not device.eltwise_multipass_conv_bias):
        return False
    passes = _passes(channels, device)  # one pass: in-flight element-wise always legal
    if passes == 1:
        return True
    if device is None:
        return False
    return not (device.eltwise_multipass_plain_only and (operands, passes) != (2, 2))


def fuse_eltwise(
    network: Network, layer: Layer, device: Capabilities | None
) -> tuple[Network, Rewrite] | None:
    """ELTWISE (or a passthrough element-wise layer without pooling) followed by a conv2d ->
    element-wise "in flight" in the conv (R4.1, R4.3)."""
    plain = layer.op is Op.PASSTHROUGH and layer.pool is None
    if not (layer.op is Op.ELTWISE or plain) or layer.eltwise not in HARDWARE_ELTWISE:
        return None
    consumer = sole_consumer(network, layer.name)
    if consumer is None or consumer.op is not Op.CONV2D or consumer.eltwise is not None:
        return None
    if not _only_input_is(consumer, layer.name):
        return None
    bias = consumer.bias is not None or (
        consumer.quant is not None and consumer.quant.bias is not None
    )
    if not _in_flight_allowed(device, len(layer.inputs), layer.out_shape[0], bias):
        return None
    pool_first = consumer.pool is None
    if not pool_first and len(layer.inputs) > MAX_POOL_LAST_OPERANDS:
        return None
    fused = replace(consumer, eltwise=layer.eltwise, inputs=layer.inputs, pool_first=pool_first)
    detail = f"{layer.eltwise.value} of {len(layer.inputs)} ({layer.name}) fused in flight"
    if not pool_first:
        detail += ", pooling after it (pool_first: false)"
    return absorb_into_consumer(network, layer, fused), record(consumer, "fuse-eltwise", detail)


def fuse_concat(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """CONCAT followed by a conv/linear/passthrough -> that layer's several inputs."""
    if layer.op is not Op.CONCAT:
        return None
    consumer = sole_consumer(network, layer.name)
    if consumer is None or consumer.op not in CONCAT_TARGETS or consumer.eltwise is not None:
        return None
    if consumer.flatten or not _only_input_is(consumer, layer.name):
        return None
    fused = replace(consumer, inputs=layer.inputs)
    detail = f"concatenation of {', '.join(layer.inputs)} read as {len(layer.inputs)} inputs"
    return absorb_into_consumer(network, layer, fused), record(consumer, "fuse-concat", detail)


def to_passthrough(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """A pool, hardware element-wise op or concatenation left alone -> a passthrough layer."""
    if layer.op is Op.POOL and layer.pool is not None and not any(layer.padding):
        what = f"{layer.label()} without a following conv"
    elif layer.op is Op.ELTWISE and layer.eltwise in HARDWARE_ELTWISE:
        what = f"{layer.eltwise.value} of {len(layer.inputs)} operands"
    elif layer.op is Op.CONCAT:
        what = f"concatenation of {len(layer.inputs)} inputs"
    else:
        return None
    ndim = len(layer.out_shape) - 1
    passthrough = replace(layer, **passthrough_geometry(layer.out_shape[0], ndim))
    rec = record(layer, "passthrough", f"{what} becomes a passthrough layer")
    return replace_layer(network, passthrough), rec


def _layer_or_none(network: Network, name: str) -> Layer | None:
    try:
        return network.layer(name)
    except KeyError:
        return None


#: The fusion steps, in the order they are tried (each runs to a fixpoint before the next).
FUSION_STEPS = (
    ("host softmax", (host_softmax,)),
    ("padding", (drop_zero_pad, pad_into_conv)),
    ("ReLU before max pooling", (relu_before_maxpool,)),
    ("activations", (fuse_activation, activation_into_concat, drop_redundant_activation)),
    ("flatten", (drop_flat_flatten, fuse_flatten)),
    ("element-wise chains", (merge_eltwise,)),
    ("element-wise + activation", (eltwise_activation,)),
    ("pooling", (fuse_pool,)),
    ("element-wise in flight", (fuse_eltwise,)),
    ("concatenation", (fuse_concat,)),
    ("passthrough", (to_passthrough,)),
)


def fuse_with_log(
    network: Network, device: Capabilities | None
) -> tuple[Network, tuple[Rewrite, ...]]:
    """``fuse`` that also returns the list of fusions it made, in the order made."""
    log: list[Rewrite] = []
    for _name, rules in FUSION_STEPS:
        with_device = (fuse_eltwise, eltwise_activation)
        rules = tuple(partial(r, device=device) if r in with_device else r for r in rules)
        network, records = apply_rules(network, rules)
        log.extend(records)
    return network, tuple(log)


def fuse(network: Network, device: Capabilities | None) -> Network:
    """Fuse model-level layers into hardware layers (the rules below); ``device``
    enables its device-specific fusions (multi-pass element-wise in flight); None: none of them."""
    return fuse_with_log(network, device)[0]
