"""``concat-pad-channels``: grow unequal concatenated parts to equal multiples of 4 with exactly
zero channels (docs/hardware/network-yaml.md §5), the vendor tool's condition; exact."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from cnnforge.arithmetic import IDENTITY_SHIFT, IDENTITY_WEIGHT
from cnnforge.ir import INPUT, WEIGHT_OPS, Layer, Network, Op, Quantized
from cnnforge.passes.rewrites import Rewrite, passthrough_geometry, record, unique_name


def _target(counts: list[int]) -> int:
    top = max(counts)
    return top + (-top % 4)


def _plain_reader(layer: Layer, name: str) -> bool:
    """A conv/linear that reads ``name`` once as (part of) a plain input, groups 1."""
    return (
        layer.op in WEIGHT_OPS
        and layer.groups == 1
        and not layer.flatten
        and layer.eltwise is None
        and layer.inputs.count(name) == 1
        and (layer.weight is not None or layer.quant is not None)
    )


def _in_axis(layer: Layer) -> int:
    """The weight axis of input channels (ConvTranspose2d stores (in, out, kh, kw))."""
    return 0 if layer.op is Op.CONVTRANSPOSE2D else 1


def _insert_zeros(array: np.ndarray | None, axis: int, at: int, n: int) -> np.ndarray | None:
    if array is None:
        return None
    return np.insert(array, [at] * n, 0, axis=axis) if n else array


def _zero_inputs(network: Network, reader: Layer, name: str, extra: int) -> Layer:
    """``reader`` with ``extra`` zero weights after the channels of its input ``name``."""
    shapes = network.input_shapes(reader)
    i = reader.inputs.index(name)
    at = sum(s[0] for s in shapes[: i + 1])
    axis = _in_axis(reader)
    quant = reader.quant
    if quant is not None:
        quant = replace(quant, weights=_insert_zeros(quant.weights, axis, at, extra))
    return replace(
        reader,
        in_channels=reader.in_channels + extra,
        weight=_insert_zeros(reader.weight, axis, at, extra),
        quant=quant,
    )


def _zero_outputs(layer: Layer, extra: int) -> Layer:
    """``layer`` with ``extra`` more output channels whose weights and bias are zero."""
    out_axis = 1 if layer.op is Op.CONVTRANSPOSE2D else 0
    n = layer.out_channels

    def grow(a: np.ndarray | None, axis: int) -> np.ndarray | None:
        return None if a is None else _insert_zeros(a, axis, a.shape[axis], extra)

    quant = layer.quant
    if quant is not None:
        quant = replace(quant, weights=grow(quant.weights, out_axis), bias=grow(quant.bias, 0))
    return replace(
        layer,
        out_channels=n + extra,
        out_shape=(n + extra, *layer.out_shape[1:]),
        weight=grow(layer.weight, out_axis),
        bias=grow(layer.bias, 0),
        quant=quant,
    )


def _producer_can_grow(network: Network, name: str) -> bool:
    if name == INPUT or name in network.outputs:
        return False
    producer = network.layer(name)
    if producer.op not in WEIGHT_OPS or producer.groups != 1 or producer.wide:
        return False
    if producer.weight is None and producer.quant is None:
        return False
    return all(_plain_reader(x, name) for x in network.consumers(name))


def _grow_producer(network: Network, name: str, extra: int) -> Network:
    readers = {x.name: _zero_inputs(network, x, name, extra) for x in network.consumers(name)}
    grown = _zero_outputs(network.layer(name), extra)
    layers = [readers.get(x.name, grown if x.name == name else x) for x in network.layers]
    return network.with_layers(layers)


def _identity_pad(network: Network, consumer: Layer, name: str, m: int) -> Network:
    """A 1x1 identity conv before ``consumer`` that copies ``name`` into ``m`` channels."""
    shape = network.shape_of(name)
    c, ndim = shape[0], len(shape) - 1
    eye = np.zeros((m, c) + (1,) * ndim, dtype=np.float32)
    eye[np.arange(c), np.arange(c)] = 1.0
    quantized = any(x.quant is not None for x in network.layers)
    quant = Quantized(8, IDENTITY_WEIGHT * eye.astype(np.int64), None, IDENTITY_SHIFT)
    geometry = passthrough_geometry(c, ndim) | {
        "op": Op.CONV1D if ndim == 1 else Op.CONV2D,
        "out_channels": m,
    }
    pad = Layer(
        name=unique_name(network, f"{consumer.name}.pad_{name}"),
        inputs=(name,),
        out_shape=(m, *shape[1:]),
        module_path=consumer.module_path,
        weight=eye,
        quant=quant if quantized else None,
        **geometry,
    )
    widened = _zero_inputs(network, consumer, name, m - c)
    i = consumer.inputs.index(name)
    widened = replace(widened, inputs=(*consumer.inputs[:i], pad.name, *consumer.inputs[i + 1 :]))
    layers: list[Layer] = []
    for x in network.layers:
        layers += [pad, widened] if x.name == consumer.name else [x]
    return network.with_layers(layers)


def _can_copy(network: Network, name: str) -> bool:
    if name == INPUT:
        return len(network.input_shape) in (2, 3)
    producer = network.layer(name)
    return not producer.wide and len(producer.out_shape) in (2, 3)


def why_not_padded(network: Network, layer: Layer) -> str:
    """Why ``concat_pad_channels`` leaves the unequal concatenation ``layer`` alone ('' if not)."""
    if layer.op not in WEIGHT_OPS:
        return f"its consumer is a {layer.op.value} layer, not a conv/linear that can take zeros"
    if layer.groups != 1 or layer.flatten or layer.eltwise is not None:
        return "its consumer has groups, flatten or an element-wise op"
    if layer.weight is None and layer.quant is None:
        return "its consumer has no weights"
    if len(set(layer.inputs)) != len(layer.inputs):
        return "a tensor is concatenated with itself"
    bad = [n for n in layer.inputs if not _can_copy(network, n)]
    if bad:
        return f"part {bad[0]} is a 32-bit output"
    return ""


def concat_pad_channels(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """Grow the first smaller part of an unequal (or not 4-aligned) concatenation to ``m``."""
    if not layer.is_hardware or not layer.is_concat:
        return None
    counts = [s[0] for s in network.input_shapes(layer)]
    m = _target(counts)
    if all(c == m for c in counts) or why_not_padded(network, layer):
        return None
    i = next(i for i, c in enumerate(counts) if c < m)
    name, extra = layer.inputs[i], m - counts[i]
    before = f"concatenation {counts} -> {[m] * len(counts)}"
    if _producer_can_grow(network, name):
        readers = ", ".join(x.name for x in network.consumers(name))
        network = _grow_producer(network, name, extra)
        detail = (
            f"{before}: {name} emits {extra} zero channels (zero weights and bias); "
            f"{readers} get zero weights on them"
        )
    else:
        network = _identity_pad(network, layer, name, m)
        detail = (
            f"{before}: a 1x1 identity conv copies {name} with {extra} zero channels; "
            f"{layer.name} gets zero weights on them"
        )
    return network, record(layer, "concat-pad-channels", detail)
