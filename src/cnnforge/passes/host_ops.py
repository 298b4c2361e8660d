"""``host-softmax``: softmax / log_softmax / argmax over the channels of an output moves to the host
(the accelerator has no exponent), recorded in ``Network.host_reduce``."""

from __future__ import annotations

import dataclasses

from cnnforge.ir import INPUT, Layer, Network, Op
from cnnforge.passes.rewrites import Rewrite, record, remove_layer
from cnnforge.sim.float_eval import KEEPDIM


def host_kind(network: Network, layer: Layer) -> str:
    """The ``host_reduce`` entry for SOFTMAX ``layer`` (argmax keeps the axis when its output
    shape has it)."""
    source = network.shape_of(layer.inputs[0])
    keep = layer.reduce_kind == "argmax" and len(layer.out_shape) == len(source)
    return layer.reduce_kind + (KEEPDIM if keep else "")


def why_not_host(network: Network, layer: Layer) -> str:
    """Why a SOFTMAX layer cannot move to the host ('' when it can)."""
    if layer.name not in network.outputs:
        return "it is not a network output (the accelerator cannot compute it inside the network)"
    if layer.axis != 0:
        return f"it reduces axis {layer.axis + 1}, not the channels (dim 1)"
    source = layer.inputs[0]
    if source == INPUT or source in network.outputs:
        return "its input is the network input or another output"
    return ""


def host_softmax(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """A SOFTMAX output over the channels -> the host, recorded in ``host_reduce``."""
    if layer.op is not Op.SOFTMAX or len(layer.inputs) != 1 or why_not_host(network, layer):
        return None
    kind = host_kind(network, layer)
    index = network.outputs.index(layer.name)
    reduce = list(network.host_reduce or ("",) * len(network.outputs))
    reduce[index] = kind
    network = remove_layer(network, layer.name, layer.inputs[0])
    network = dataclasses.replace(network, host_reduce=tuple(reduce))
    detail = (
        f"{layer.reduce_kind} over the channels of {layer.inputs[0]} runs on the host after the "
        "accelerator (portable C: cnn_host_output); the known answer is taken before it"
    )
    return network, record(layer, "host-softmax", detail)

