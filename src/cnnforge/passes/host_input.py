"""``host-input``: move an input normalization ``(x - mean) / std`` to the host (exact, unlike
folding it into a padded conv); its scale and offset go to ``Network.host_input``."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from cnnforge.ir import INPUT, HostInput, Layer, Network
from cnnforge.passes.fold_constants import (
    fold_constants,
    is_constant_affine,
    scale_shift,
    why_not_folded,
)
from cnnforge.passes.rewrites import Rewrite, apply_rules, record, remove_layer


def why_not_host_input(network: Network, layer: Layer) -> str:
    """Why a constant affine layer reading the network input stays ('' when it moves)."""
    if layer.inputs != (INPUT,):
        return "it is not at the model's start (it does not read the network input)"
    if network.host_input is not None:
        return "the host already normalizes the input once"
    readers = network.consumers(INPUT)
    if len(readers) != 1:
        names = ", ".join(x.name for x in readers[:3])
        return f"the input is also read unnormalized ({names})"
    if layer.name in network.outputs:
        return "its result is a network output"
    scale, _ = scale_shift(layer)
    if np.any(scale == 0):
        return "a channel's scale is 0 (the input would be lost)"
    return ""


def input_exponent(scale: np.ndarray, shift: np.ndarray) -> int:
    """The ``e`` bringing the normalized input into ``[-1, 1]``, the input assumed in ``[0, 1]``
    (``[0, 255]`` when a mean exceeds 1), as quant/scales.py chooses exponents."""
    mean = -shift / scale
    top = 255.0 if np.any(np.abs(mean) > 1) else 1.0
    peak = float(np.max(np.maximum(np.abs(shift), np.abs(scale * top + shift))))
    return 0 if peak <= 1.0 else min(math.ceil(math.log2(peak)), 16)


def host_input(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """A constant affine map on the input that cannot fold exactly -> ``Network.host_input``, with
    a ``2^e`` scale left for the first conv when the input would leave the int8 range."""
    if not is_constant_affine(layer) or not why_not_folded(network, layer):
        return None
    if why_not_host_input(network, layer):
        return None
    scale, shift = scale_shift(layer)
    path = layer.module_path or layer.name
    step = HostInput(tuple(float(v) for v in scale), tuple(float(v) for v in shift), path)
    exponent = input_exponent(scale, shift)
    gain = _gain_layer(layer, exponent)
    moved = remove_layer(network, layer.name, INPUT)
    if gain is not None:
        with_gain = network.with_layers(gain if x.name == layer.name else x for x in network)
        if not why_not_folded(with_gain, gain):  # else: unscaled (values may be clamped)
            moved, step = with_gain, dataclasses.replace(step, exponent=exponent)
    detail = f"{step.describe()} (where the input is prepared; C: cnn_host_input)"
    return dataclasses.replace(moved, host_input=step), record(layer, "host-input", detail)


def _gain_layer(layer: Layer, exponent: int) -> Layer | None:
    """``layer`` as the scale ``2^exponent`` alone (None for 0)."""
    if exponent <= 0 or layer.batchnorm is None:
        return None
    n = len(layer.batchnorm.weight) if layer.batchnorm.weight is not None else 0
    bn = dataclasses.replace(
        layer.batchnorm, weight=np.full(n, 2.0**exponent, np.float32), bias=np.zeros(n, np.float32)
    )
    return dataclasses.replace(layer, batchnorm=bn, weight=None)


def move_input_normalization(network: Network) -> tuple[Network, tuple[Rewrite, ...]]:
    """``host-input`` on the network (after the constants are merged and folded), then the
    scale it may leave folded into the conv reading it."""
    network, moved = apply_rules(network, (host_input,))
    if not moved:
        return network, ()
    network, folded = fold_constants(network)
    return network, (*moved, *folded)
