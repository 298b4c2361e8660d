"""One formula per hardware fact of the data layout, asked of the typed device record.

Passes and processors per pass (../shared/spec/devices.md §2), the channels and the shape a
layer's main op reads, the kernel count ``kc`` of a weight layer (§3), and when each tensor
is live (§6 "No overwrite of live data"). Analysis, passes, planner, validator, frontend and
emitters ask here instead of writing the formulas again. Every question takes the device it is
asked of: a caller cannot silently get another part's rules. Pass and channel counts ask the
target-neutral ``Capabilities``; kernel and bias layouts the ``Max7800xDevice`` (its memories).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cnnforge.devices import Capabilities, Max7800xDevice
from cnnforge.ir import BINARY_BITS, INPUT, Layer, Network

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
    """Channels the layer's input mask carries: one operand's for element-wise layers (one
    channel group of a split input, ir.Layer.split_operands), else the concatenation of its
    inputs (devices.md §2 "Concatenation")."""
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


def kernel_count(
    layer: Layer,
    in_channels: int,
    out_channels: int,
    slots: int,
    pixels: int,
    device: Capabilities,
) -> int:
    """kc of devices.md §3: kernels per input processor for ``slots`` output slots S.

    S * E_out * E_in; depthwise: E_in; flatten: (S * E_out - unused slots) * pixels * E_in,
    ``pixels`` the H*W flattened per channel.
    """
    cout = out_channels
    e_in, e_out = passes(in_channels, device), passes(cout, device)
    if layer.groups > 1:
        return e_in
    if layer.flatten:
        unused = e_out * processors_per_pass(cout, device) - cout
        return (slots * e_out - unused) * pixels * e_in
    return slots * e_out * e_in


def kernel_slots(out_mask: int, device: Max7800xDevice) -> int:
    """S of devices.md §3 with the filler kernels of a mask not starting at a multiple of 4: last
    - first + 1, ``first`` rounded down to the 4-processor instance (the safe budget)."""
    first = (out_mask & -out_mask).bit_length() - 1
    last = out_mask.bit_length() - 1
    return last - (first - first % device.processors_per_instance) + 1


def packed_kernel_words(kernels: int, ksize: int, weight_bits: int, device: Max7800xDevice) -> int:
    """72-bit words for ``kernels`` kernels of ``ksize`` b-bit weights (vendor formula, §3).

    ceil((kc * ksize * b + (kc mod q) * ksize * (q - 1)) / 72), q = 8 / b.
    """
    bits = abs(weight_bits) if weight_bits != BINARY_BITS else 1
    q = 8 // bits
    pad = (kernels % q) * ksize * (q - 1)
    return math.ceil((kernels * ksize * bits + pad) / device.kernel_word_bits)


def has_bias(layer: Layer) -> bool:
    """Whether the layer adds a bias (its integer one once quantized)."""
    if layer.quant is not None:
        return layer.quant.bias is not None
    return layer.bias is not None


def bias_entries(out_channels: int, out_mask: int, device: Max7800xDevice) -> int:
    """Bias entries of a layer: Cout + (first output processor mod 4) * E_out (devices.md §4)."""
    first = (out_mask & -out_mask).bit_length() - 1
    align = device.processors_per_instance
    return out_channels + (first % align) * passes(out_channels, device)


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


def last_use(network: Network) -> dict[str, int]:
    """Tensor name -> index of the last layer reading it (len(layers) for network outputs)."""
    return {name: last for name, (_, last) in live_intervals(network).items()}


@dataclass(frozen=True)
class TensorGeometry:
    """What data memory needs to know about one tensor (devices.md §2)."""

    name: str
    channels: int
    pixels: int  # H*W (or L; 1 for a (C,) tensor)
    passes: int  # E
    processors: int  # T = processors per pass
    wide: bool = False  # 32-bit output (4 words per pixel and pass)

    @property
    def words(self) -> int:
        """32-bit words per instance without gaps (devices.md §2 "Footprint")."""
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
    "bias_entries",
    "has_bias",
    "kernel_count",
    "kernel_slots",
    "last_use",
    "layer_in_channels",
    "layer_in_geometry",
    "live_intervals",
    "main_input_shape",
    "packed_kernel_words",
    "passes",
    "processors_per_pass",
    "tensor_geometry",
    "words_per_pixel",
]
