"""The MAX7800x kernel and bias memory formulas (docs/hardware/devices.md §3-§4), asked by both the
planner and the independent validator so the two cannot drift apart."""

from __future__ import annotations

import math

from cnnforge.devices import Capabilities
from cnnforge.geometry import passes, processors_per_pass
from cnnforge.ir import BINARY_BITS, Layer
from cnnforge.targets.max7800x.device import Max7800xDevice


def kernel_count(
    layer: Layer,
    in_channels: int,
    out_channels: int,
    slots: int,
    pixels: int,
    device: Capabilities,
) -> int:
    """kc of docs/hardware/devices.md §3: kernels per input processor for ``slots`` output slots S
    (S * E_out * E_in; depthwise: E_in; flatten: per ``pixels``)."""
    cout = out_channels
    e_in, e_out = passes(in_channels, device), passes(cout, device)
    if layer.groups > 1:
        return e_in
    if layer.flatten:
        unused = e_out * processors_per_pass(cout, device) - cout
        return (slots * e_out - unused) * pixels * e_in
    return slots * e_out * e_in


def kernel_slots(out_mask: int, device: Max7800xDevice) -> int:
    """S of docs/hardware/devices.md §3 with the filler kernels of a mask not starting at a multiple
    of 4 (``first`` rounded down to its 4-processor instance)."""
    first = (out_mask & -out_mask).bit_length() - 1
    last = out_mask.bit_length() - 1
    return last - (first - first % device.processors_per_instance) + 1


def packed_kernel_words(kernels: int, ksize: int, weight_bits: int, device: Max7800xDevice) -> int:
    """72-bit words for ``kernels`` kernels of ``ksize`` b-bit weights (vendor formula, §3):
    ceil((kc * ksize * b + (kc mod q) * ksize * (q - 1)) / 72), q = 8 / b."""
    bits = abs(weight_bits) if weight_bits != BINARY_BITS else 1
    q = 8 // bits
    pad = (kernels % q) * ksize * (q - 1)
    return math.ceil((kernels * ksize * bits + pad) / device.kernel_word_bits)


def bias_entries(out_channels: int, out_mask: int, device: Max7800xDevice) -> int:
    """Bias entries of a layer: Cout + (first output processor mod 4) * E_out
    (docs/hardware/devices.md §4)."""
    first = (out_mask & -out_mask).bit_length() - 1
    align = device.processors_per_instance
    return out_channels + (first % align) * passes(out_channels, device)
