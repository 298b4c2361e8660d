"""``F.pad`` layers: a zero-size pad is dropped and a symmetric zero pad read by a conv becomes its
padding (docs/hardware/network-yaml.md §5); anything else stays for ``check``."""

from __future__ import annotations

from dataclasses import replace

from cnnforge.ir import Layer, Network, Op
from cnnforge.passes.rewrites import (
    Rewrite,
    absorb_into_consumer,
    record,
    remove_layer,
    sole_consumer,
)

PAD_TARGETS = frozenset({Op.CONV1D, Op.CONV2D})


def pad_pairs(layer: Layer) -> tuple[tuple[int, int], ...]:
    """(before, after) per spatial axis, first axis first, from F.pad's last-dim-first list."""
    ndim = len(layer.out_shape) - 1
    amounts = list(layer.pad_amounts) + [0] * max(0, 2 * ndim - len(layer.pad_amounts))
    pairs = [(amounts[2 * k], amounts[2 * k + 1]) for k in range(ndim)]
    return tuple(reversed(pairs))


def drop_zero_pad(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """A PAD of size zero (every amount 0) is the identity: remove it."""
    if layer.op is not Op.PAD or any(layer.pad_amounts) or len(layer.inputs) != 1:
        return None
    rec = record(layer, "drop-zero-pad", "F.pad of size zero is the identity: removed")
    return remove_layer(network, layer.name, layer.inputs[0]), rec


def _absorbing_conv(network: Network, layer: Layer) -> Layer | None:
    consumer = sole_consumer(network, layer.name)
    if consumer is None or consumer.op not in PAD_TARGETS or consumer.pool is not None:
        return None
    if consumer.inputs != (layer.name,) or consumer.eltwise is not None:
        return None
    return consumer


def pad_into_conv(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """Zero PAD, symmetric on every axis, read only by a conv -> that conv's padding."""
    if layer.op is not Op.PAD or layer.pad_value != 0.0 or len(layer.inputs) != 1:
        return None
    pairs = pad_pairs(layer)
    if any(a != b or a < 0 for a, b in pairs):
        return None
    conv = _absorbing_conv(network, layer)
    if conv is None:
        return None
    ndim = len(pairs)
    old = tuple(conv.padding) or (0,) * ndim
    padding = tuple(p + a for p, (a, _) in zip(old, pairs, strict=True))
    fused = replace(conv, inputs=layer.inputs, padding=padding)
    detail = (
        f"zero F.pad {list(layer.pad_amounts)} ({layer.module_path or layer.name}) becomes "
        f"the conv's padding: {_fmt(old)} -> {_fmt(padding)}"
    )
    return absorb_into_consumer(network, layer, fused), record(conv, "pad-into-conv", detail)


def pad_hint(network: Network, layer: Layer) -> str:
    """Why a PAD layer is left (the real reason), and what to change."""
    pairs = pad_pairs(layer)
    if any(a < 0 or b < 0 for a, b in pairs):
        return "a negative pad crops; the device cannot crop: choose sizes that need no crop"
    if layer.pad_value != 0.0:
        return f"pads with {layer.pad_value:g}; the hardware pads with zeros only"
    if any(a != b for a, b in pairs):
        readers = network.consumers(layer.name)
        if len(readers) == 1 and readers[0].op in (Op.CONV1D, Op.CONV2D):
            return (
                f"pads unequally ({list(layer.pad_amounts)}) before {readers[0].name} (a "
                "TensorFlow-style 'same' padding); the hardware pads a conv equally on both "
                "sides: give the conv padding=kernel//2 and retrain"
            )
        return (
            f"pads unequally ({list(layer.pad_amounts)}); the hardware pads a conv equally on "
            "both sides: use an input size divisible by 2^depth so the U-Net pad is zero"
        )
    if _absorbing_conv(network, layer) is None:
        readers = ", ".join(x.name for x in network.consumers(layer.name)) or "a network output"
        return (
            f"the pad feeds {readers}, not one conv that could pad instead (the hardware pads "
            "only inside a conv): use an input size divisible by 2^depth so the pad is zero"
        )
    return "pad by at most 2 per side, inside the conv"


def _fmt(values: tuple[int, ...]) -> str:
    return "x".join(str(v) for v in values)
