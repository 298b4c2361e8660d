"""An input normalization at the model's start -> done on the host where the input is prepared.

``(x - mean) / std`` (or ``x * k + b``, torchvision's ``Normalize``, a ``sub_``/``div`` on the
input) is captured as a constant affine layer reading the network input (frontend/affine.py).
Folded into the first conv it is exact only when that conv reads no zero padding (a shift does
not commute with zero padding: the border would see ``offset`` instead of 0). ``host-input``
removes such a layer when it is the only reader of the input and records its per-channel scale
and offset in ``Network.host_input``: the accelerator's input becomes the normalized input, so
the network computes exactly what the model computes. Every consumer applies the step where the
input is prepared: float evaluation (sim/float_eval.py), float samples and simulator inputs
(samples.py), the portable C (``cnn_host_input``, checked by the self-test).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from cnnforge.ir import INPUT, HostInput, Layer, Network
from cnnforge.passes.fold_constants import is_constant_affine, scale_shift, why_not_folded
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


def host_input(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """A constant affine map on the input that cannot fold exactly -> ``Network.host_input``."""
    if not is_constant_affine(layer) or not why_not_folded(network, layer):
        return None
    if why_not_host_input(network, layer):
        return None
    scale, shift = scale_shift(layer)
    step = HostInput(
        tuple(float(v) for v in scale),
        tuple(float(v) for v in shift),
        layer.module_path or layer.name,
    )
    network = remove_layer(network, layer.name, INPUT)
    network = dataclasses.replace(network, host_input=step)
    detail = f"{step.describe()} (where the input is prepared; C: cnn_host_input)"
    return network, record(layer, "host-input", detail)


def move_input_normalization(network: Network) -> tuple[Network, tuple[Rewrite, ...]]:
    """``host-input`` on the network (after the constants are merged and folded)."""
    return apply_rules(network, (host_input,))
