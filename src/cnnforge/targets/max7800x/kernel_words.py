"""Kernel (weight) memory a layer needs: 72-bit words per processor, by the packing rules.

docs/hardware/devices.md §3 (the vendor tool's kernel packer): a layer's kernels live in the
processors of its input mask; each input processor stores ``kc`` kernels, one per (output slot,
output pass, input pass); with b-bit weights q = 8 // b output channels share one byte, and a kernel
of ``ksize`` weights packs into 72-bit words as

    L = ceil((kc * ksize * b + (kc mod q) * ksize * (q - 1)) / 72)        words per processor

Output slots S = last - first + 1 output processors (first rounded down to a multiple of 4 when
the output has several passes); with a packed output mask (no plan yet) S = processors per pass.
Flatten + linear: every input processor holds H*W*E_in 1x1 weights per output channel.
Depthwise (groups = in = out): one kernel per pass per processor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cnnforge.geometry import main_input_shape, passes, processors_per_pass
from cnnforge.ir import Layer, Network
from cnnforge.targets.max7800x.geometry import kernel_count
from cnnforge.targets.max7800x.geometry import packed_kernel_words as packed_words

if TYPE_CHECKING:
    from cnnforge.targets.max7800x.device import Max7800xDevice


def output_slots(out_mask: int, out_channels: int, device: Max7800xDevice) -> int:
    """Output slots S of a placed layer from its output-processor mask
    (docs/hardware/devices.md §3): last - first + 1, the first rounded down to a multiple of 4 when
    the output has several passes."""
    if out_mask <= 0:
        raise ValueError("an output mask needs at least one processor")
    first = (out_mask & -out_mask).bit_length() - 1
    last = out_mask.bit_length() - 1
    if passes(out_channels, device) > 1:
        first -= first % device.pass_align
    return last - first + 1


@dataclass(frozen=True)
class KernelNeed:
    """Kernel memory of one layer: ``words`` on each of ``processors`` input processors."""

    layer: str
    module_path: str
    weight_bits: int
    processors: int  # input processors per pass that hold the kernels
    kernels: int  # kernels per processor (kc)
    ksize: int  # weights per kernel
    words: int  # 72-bit words per processor (L)

    @property
    def total_words(self) -> int:
        return self.words * self.processors


def layer_kernel_need(
    layer: Layer,
    device: Max7800xDevice,
    weight_bits: int | None = None,
    in_shape: tuple[int, ...] | None = None,
    out_slots: int | None = None,
) -> KernelNeed | None:
    """The ``KernelNeed`` of a weight layer (None for weightless layers).

    ``in_shape`` is the (C, H, W...) shape entering the main op (needed for flatten);
    ``out_slots`` the output-processor span S of a placed layer (default: packed mask).
    """
    if not layer.has_weights:
        return None
    bits = weight_bits or (layer.quant.weight_bits if layer.quant is not None else 8)
    cin = layer.in_channels
    ksize = math.prod(layer.kernel_size) if layer.kernel_size else 1
    pixels = 1
    if layer.flatten:
        if in_shape is None:
            raise ValueError(f"layer {layer.name}: flatten needs the input shape")
        cin, ksize = in_shape[0], 1
        pixels = math.prod(in_shape[1:])
    slots = out_slots or processors_per_pass(layer.out_channels, device)
    kc = kernel_count(layer, cin, layer.out_channels, slots, pixels, device)
    return KernelNeed(
        layer=layer.name,
        module_path=layer.module_path or layer.name,
        weight_bits=bits,
        processors=processors_per_pass(cin, device),
        kernels=kc,
        ksize=ksize,
        words=packed_words(kc, ksize, bits, device),
    )


def layer_kernel_words(
    layer: Layer,
    device: Max7800xDevice,
    weight_bits: int | None = None,
    in_shape: tuple[int, ...] | None = None,
    out_slots: int | None = None,
) -> int:
    """72-bit kernel-memory words per input processor of ``layer`` (0 for weightless layers)."""
    need = layer_kernel_need(layer, device, weight_bits, in_shape, out_slots)
    return need.words if need is not None else 0


def network_kernel_needs(
    network: Network,
    device: Max7800xDevice,
    weight_bits: int | dict[str, int] | None = None,
) -> tuple[KernelNeed, ...]:
    """``KernelNeed`` of every weight layer, in model order (``weight_bits``: one or per layer)."""
    needs = []
    for layer in network.layers:
        bits = weight_bits.get(layer.name) if isinstance(weight_bits, dict) else weight_bits
        need = layer_kernel_need(layer, device, bits, main_input_shape(network, layer))
        if need is not None:
            needs.append(need)
    return tuple(needs)


# ---- the device side: capacity per processor ----------------------------------------------


@dataclass(frozen=True)
class KernelCapacity:
    """72-bit kernel words of every processor of a device, and the allocator's alignment."""

    per_processor: tuple[int, ...]
    start_align: int  # a layer's first kernel column: a multiple of 4 (docs/hardware/devices.md §3)

    @property
    def total_words(self) -> int:
        return sum(self.per_processor)

    def best_for(self, processors: int) -> int:
        """Largest per-processor room a layer on ``processors`` processors can have."""
        ranked = sorted(self.per_processor, reverse=True)
        return ranked[min(processors, len(ranked)) - 1]


def kernel_capacity(device: Max7800xDevice) -> KernelCapacity:
    """The device's kernel memory (docs/hardware/devices.md §1 "Weight memory per proc", §3)."""
    words = tuple(device.kernel_words(p) for p in range(device.processors))
    return KernelCapacity(words, device.kernel_start_align)


def aligned_words(need: KernelNeed, align: int) -> int:
    """A layer's words on all its processors, each column count rounded up to the start
    alignment ``align`` of the allocator (the device's, 4): a budget with room for a placement."""
    return (need.words + (-need.words) % align) * need.processors


def skyline_fits(needs: tuple[KernelNeed, ...], capacity: KernelCapacity) -> bool:
    """Whether a simple placement of every layer's kernels exists (a sufficient test).

    Layers, widest first, each take the window of ``processors`` adjacent processors whose highest
    used column (rounded up to the start alignment) is lowest, as the vendor's allocator needs one
    start column for all processors of a layer (docs/hardware/devices.md §3). True means such a
    kernel map exists; False means this greedy did not find one (the exact total may still fit; the
    planner decides).
    """
    heights = [0] * len(capacity.per_processor)
    align = capacity.start_align
    for need in sorted(needs, key=lambda n: (-n.processors, -n.words)):
        width = need.processors
        best: tuple[int, int] | None = None
        for start in range(len(heights) - width + 1):
            window = range(start, start + width)
            base = max(heights[p] for p in window)
            base += (-base) % align
            fits = all(base + need.words <= capacity.per_processor[p] for p in window)
            if fits and (best is None or base < best[0]):
                best = (base, start)
        if best is None:
            return False
        base, start = best
        for p in range(start, start + width):
            heights[p] = base + need.words
    return True
