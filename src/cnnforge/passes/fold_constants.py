"""Fold captured constant affine maps (``x * 4``, ``x * gain + 0.25``) into a following conv,
exact unless a shift meets zero padding (then it stays for ``check``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from cnnforge.ir import INPUT, Layer, Network, Op
from cnnforge.passes.rewrites import Rewrite, absorb_into_consumer, apply_rules, record

#: The eps of a captured constant affine map (frontend/affine.py CONSTANT_EPS).
_CONSTANT_EPS = 0.0


def is_constant_affine(layer: Layer) -> bool:
    """A BATCHNORM layer that stands for captured constant arithmetic."""
    return (
        layer.op is Op.BATCHNORM
        and layer.batchnorm is not None
        and layer.batchnorm.eps == _CONSTANT_EPS
        and len(layer.inputs) == 1
    )


def scale_shift(layer: Layer) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` of a constant affine layer, float64."""
    bn = layer.batchnorm
    assert bn is not None and bn.weight is not None and bn.bias is not None
    return np.asarray(bn.weight, np.float64), np.asarray(bn.bias, np.float64)


def fold_constants(network: Network) -> tuple[Network, tuple[Rewrite, ...]]:
    """Merge adjacent constant affine maps and fold them into the conv/linear reading them."""
    return apply_rules(network, (_merge, _into_consumer))


def _sole_reader(network: Network, layer: Layer) -> Layer | None:
    if layer.name in network.outputs:
        return None
    readers = network.consumers(layer.name)
    if len(readers) != 1 or readers[0].inputs.count(layer.name) != 1:
        return None
    return readers[0]


def _merge(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    if not is_constant_affine(layer):
        return None
    second = _sole_reader(network, layer)
    if second is None or not is_constant_affine(second):
        return None
    a1, b1 = scale_shift(layer)
    a2, b2 = scale_shift(second)
    bn = dataclasses.replace(
        second.batchnorm,  # type: ignore[arg-type]
        weight=(a2 * a1).astype(np.float32),
        bias=(a2 * b1 + b2).astype(np.float32),
    )
    merged = dataclasses.replace(second, inputs=layer.inputs, batchnorm=bn)
    detail = f"constant arithmetic {layer.name} and {second.name} are one scale and shift"
    return absorb_into_consumer(network, layer, merged), record(second, "merge-constants", detail)


def why_not_folded(network: Network, layer: Layer) -> str:
    """Why a constant affine layer stays ('' when it folds into its reader)."""
    conv = _sole_reader(network, layer)
    if conv is None:
        return "its result is read by several layers or is an output"
    if conv.op not in (Op.CONV1D, Op.CONV2D, Op.LINEAR, Op.CONVTRANSPOSE2D):
        return f"it is read by {conv.label()} {conv.name}, not by a conv or linear layer"
    if conv.weight is None or conv.quant is not None or conv.pool is not None:
        return f"{conv.name} is already quantized or pools its input"
    _, b = scale_shift(layer)
    if np.any(b != 0) and (any(conv.padding) or conv.op is Op.CONVTRANSPOSE2D):
        return (
            f"a shift before the zero-padded {conv.name} is not exact at the borders (the "
            "padding would have to be shifted too)"
        )
    if conv.op is Op.LINEAR and len(network.shape_of(layer.name)) != 1:
        return f"it is read by {conv.name} through a reshape"
    return ""


def _into_consumer(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    if not is_constant_affine(layer) or why_not_folded(network, layer):
        return None
    conv = _sole_reader(network, layer)
    assert conv is not None and conv.weight is not None
    a, b = scale_shift(layer)
    w = np.asarray(conv.weight, np.float64)
    groups = max(conv.groups, 1)
    if conv.op is Op.CONVTRANSPOSE2D:  # (in, out/g, k...): input channels on axis 0
        w_new = w * a.reshape((-1,) + (1,) * (w.ndim - 1))
        bias = None if conv.bias is None else np.asarray(conv.bias, np.float64)
    else:
        out, per_group = w.shape[0], w.shape[1]
        column = (np.arange(out)[:, None] // (out // groups)) * per_group + np.arange(per_group)
        shape = (out, per_group) + (1,) * (w.ndim - 2)
        w_new = w * a[column].reshape(shape)
        b0 = np.zeros(out) if conv.bias is None else np.asarray(conv.bias, np.float64)
        spatial = tuple(range(2, w.ndim))
        bias = b0 + (w.sum(axis=spatial) * b[column]).sum(axis=1)
    dtype = np.asarray(conv.weight).dtype
    folded = dataclasses.replace(
        conv,
        inputs=tuple(layer.inputs[0] if n == layer.name else n for n in conv.inputs),
        weight=w_new.astype(dtype),
        bias=None if bias is None else bias.astype(dtype),
    )
    source = "the network input" if layer.inputs[0] == INPUT else layer.inputs[0]
    detail = (
        f"constant scale/shift {layer.module_path or layer.name} (on {source}) folded into "
        f"the weights and bias of {conv.name}"
    )
    return absorb_into_consumer(network, layer, folded), record(
        conv, "fold-constant-into-conv", detail
    )
