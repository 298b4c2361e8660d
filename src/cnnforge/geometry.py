"""One formula per hardware fact of the data layout (docs/hardware/devices.md §2, §6), asked of
the target-neutral ``Capabilities`` so no caller writes the formulas again."""

from __future__ import annotations

import math
from dataclasses import dataclass

from cnnforge.devices import Capabilities
from cnnforge.ir import INPUT, Layer, Network

#: Layer index at which the network input is produced (before the first layer).
BEFORE_FIRST = -1


def passes(channels: int, device: Capabilities) -> int:
    """Passes E = ceil(C / processors per pass) a tensor of ``channels`` channels needs (§2)."""
    return device.passes(channels)


def processors_per_pass(channels: int, device: Capabilities) -> int:
    """Processors per pass T = ceil(C / E), rounded up to the 4-processor instance when E > 1."""
    return device.processors_per_pass(channels)


def words_per_pixel(channels: int, device: Capabilities) -> int:
    """32-bit words one pixel of the tensor takes per instance group: E * ceil(T / 4) (§2); a
    word holds ``pass_align`` (4) channels, the processors sharing one data-memory instance."""
    dev = device
    per_pass = math.ceil(channels / dev.passes(channels))
    return dev.passes(channels) * math.ceil(per_pass / dev.pass_align)


def layer_in_channels(network: Network, layer: Layer) -> int:
    """Channels the layer's input mask carries: one operand's for element-wise layers, else the
    concatenation of its inputs (docs/hardware/devices.md §2)."""
    shapes = network.input_shapes(layer)
    if layer.eltwise is not None:
        return shapes[0][0] // max(1, layer.split_operands)
    return sum(s[0] for s in shapes)


def main_input_shape(network: Network, layer: Layer) -> tuple[int, ...]:
    """(C, dims...) entering the layer's main op: after pooling, concatenation/element-wise."""
    dims = network.input_shapes(layer)[0][1:]
    if layer.pool is not None:
        dims = layer.pool.output_dims(dims)
    return (layer_in_channels(network, layer), *dims)


def has_bias(layer: Layer) -> bool:
    """Whether the layer adds a bias (its integer one once quantized)."""
    if layer.quant is not None:
        return layer.quant.bias is not None
    return layer.bias is not None


def live_intervals(network: Network) -> dict[str, tuple[int, int]]:
    """``{tensor: (first, last)}`` layer indices (inclusive) over which each tensor is live;
    the input starts at ``-1`` and network outputs end at ``len(network)``."""
    n = len(network.layers)
    live: dict[str, tuple[int, int]] = {INPUT: (BEFORE_FIRST, BEFORE_FIRST)}
    for i, layer in enumerate(network.layers):
        live[layer.name] = (i, i)
        for name in layer.inputs:
            live[name] = (live[name][0], i)
    for name in network.outputs:
        live[name] = (live[name][0], n)
    return live


def last_use(network: Network) -> dict[str, int]:
    """Tensor name -> index of the last layer reading it (len(layers) for network outputs)."""
    return {name: last for name, (_, last) in live_intervals(network).items()}


@dataclass(frozen=True)
class TensorGeometry:
    """What data memory needs to know about one tensor (docs/hardware/devices.md §2)."""

    name: str
    channels: int
    pixels: int  # H*W (or L; 1 for a (C,) tensor)
    passes: int  # E
    processors: int  # T = processors per pass
    wide: bool = False  # 32-bit output (4 words per pixel and pass)

    @property
    def words(self) -> int:
        """32-bit words per instance without gaps (docs/hardware/devices.md §2 "Footprint")."""
        return self.pixels * self.passes * (4 if self.wide else 1)


def tensor_geometry(network: Network, name: str, device: Capabilities) -> TensorGeometry:
    """The geometry of the input or of one layer's output."""
    shape = network.shape_of(name)
    channels = shape[0]
    return TensorGeometry(
        name=name,
        channels=channels,
        pixels=math.prod(shape[1:]) if len(shape) > 1 else 1,
        passes=passes(channels, device),
        processors=processors_per_pass(channels, device),
        wide=name != INPUT and network.layer(name).wide,
    )


def layer_in_geometry(network: Network, layer: Layer, device: Capabilities) -> TensorGeometry:
    """The (pre-pooling) input of ``layer`` as the hardware reads it: C, pixels, E, T."""
    shape = network.input_shapes(layer)[0]
    channels = layer_in_channels(network, layer)
    return TensorGeometry(
        name=layer.name,
        channels=channels,
        pixels=math.prod(shape[1:]) if len(shape) > 1 else 1,
        passes=passes(channels, device),
        processors=processors_per_pass(channels, device),
    )


__all__ = [
    "BEFORE_FIRST",
    "TensorGeometry",
    "has_bias",
    "last_use",
    "layer_in_channels",
    "layer_in_geometry",
    "live_intervals",
    "main_input_shape",
    "passes",
    "processors_per_pass",
    "tensor_geometry",
    "words_per_pixel",
]
