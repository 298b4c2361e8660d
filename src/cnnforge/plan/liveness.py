"""When each tensor of a network is live, and its geometry on the accelerator.

A tensor is the output of one layer (or the network input). It is live from the start of its
producer (the input: from before layer 0, index -1) to the end of its last consumer; network
outputs stay live forever (../shared/spec/devices.md §6 "No overwrite of live data"). The
planner allocates data memory from these intervals, the validator re-checks them, and the C
emitter lays out its static arena with the same function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cnnforge.ir import INPUT, Layer, Network
from cnnforge.plan.kernel_words import main_input_shape, passes, processors_per_pass

#: Layer index at which the network input is produced (before the first layer).
BEFORE_FIRST = -1


def live_intervals(network: Network) -> dict[str, tuple[int, int]]:
    """``{tensor: (first, last)}`` layer indices (inclusive) over which each tensor is live.

    ``first`` is the producer's index (``-1`` for the input), ``last`` the index of the last
    consumer; network outputs end at ``len(network)`` (forever); a tensor nobody reads lives
    only while its producer writes it.
    """
    n = len(network.layers)
    live: dict[str, tuple[int, int]] = {INPUT: (BEFORE_FIRST, BEFORE_FIRST)}
    for i, layer in enumerate(network.layers):
        live[layer.name] = (i, i)
        for name in layer.inputs:
            live[name] = (live[name][0], i)
    for name in network.outputs:
        live[name] = (live[name][0], n)
    return live


@dataclass(frozen=True)
class TensorGeometry:
    """What data memory needs to know about one tensor (devices.md §2)."""

    name: str
    channels: int
    pixels: int  # H*W (or L; 1 for a (C,) tensor)
    passes: int  # E = ceil(C / 64)
    processors: int  # T = processors per pass
    wide: bool = False  # 32-bit output (4 words per pixel and pass)

    @property
    def words(self) -> int:
        """32-bit words per instance without gaps (devices.md §2 "Footprint")."""
        return self.pixels * self.passes * (4 if self.wide else 1)


def tensor_geometry(network: Network, name: str) -> TensorGeometry:
    """The geometry of the input or of one layer's output."""
    shape = network.shape_of(name)
    wide = name != INPUT and network.layer(name).wide
    channels = shape[0]
    return TensorGeometry(
        name=name,
        channels=channels,
        pixels=math.prod(shape[1:]) if len(shape) > 1 else 1,
        passes=passes(channels),
        processors=processors_per_pass(channels),
        wide=wide,
    )


def layer_in_channels(network: Network, layer: Layer) -> int:
    """Channels the layer's input mask must carry (one operand's for element-wise layers)."""
    shapes = network.input_shapes(layer)
    return shapes[0][0] if layer.eltwise is not None else sum(s[0] for s in shapes)


def layer_in_geometry(network: Network, layer: Layer) -> TensorGeometry:
    """The (pre-pooling) input of ``layer`` as the hardware reads it: C, pixels, E, T."""
    shape = network.input_shapes(layer)[0]
    channels = layer_in_channels(network, layer)
    return TensorGeometry(
        name=layer.name,
        channels=channels,
        pixels=math.prod(shape[1:]) if len(shape) > 1 else 1,
        passes=passes(channels),
        processors=processors_per_pass(channels),
    )


__all__ = [
    "BEFORE_FIRST",
    "TensorGeometry",
    "layer_in_channels",
    "layer_in_geometry",
    "live_intervals",
    "main_input_shape",
    "tensor_geometry",
]
