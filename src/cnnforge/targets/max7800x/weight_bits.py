"""``--weight-bits auto``: narrow one layer at a time, the largest saving first (first and last
layer last), until kernel memory fits (docs/hardware/devices.md §3)."""

from __future__ import annotations

from cnnforge.devices import Capabilities
from cnnforge.ir import Network
from cnnforge.passes.target_rules import WeightChoice
from cnnforge.targets.max7800x.device import Max7800xDevice, as_max7800x
from cnnforge.targets.max7800x.kernel_words import (
    KernelNeed,
    aligned_words,
    kernel_capacity,
    layer_kernel_need,
    main_input_shape,
    network_kernel_needs,
    skyline_fits,
)


def _next_width(bits: int, allowed: tuple[int, ...]) -> int | None:
    smaller = [b for b in allowed if 0 < b < bits]
    return max(smaller) if smaller else None


def _saving(need: KernelNeed, bits: int, network: Network, device: Max7800xDevice) -> int:
    layer = network.layer(need.layer)
    new = layer_kernel_need(layer, device, bits, main_input_shape(network, layer))
    align = device.kernel_start_align
    return aligned_words(need, align) - aligned_words(new, align) if new is not None else 0


def _pick(
    network: Network, device: Max7800xDevice, bits: dict[str, int], allowed: tuple[int, ...]
) -> str | None:
    needs = {n.layer: n for n in network_kernel_needs(network, device, bits)}
    names = list(needs)
    protected = {names[0], names[-1]} if len(names) > 2 else set()
    for guard in (protected, set()):
        candidates = [n for n in names if n not in guard and _next_width(bits[n], allowed)]
        if not candidates:
            continue
        widest = max(bits[n] for n in candidates)
        best, best_saving = None, 0
        for name in candidates:
            if bits[name] != widest:
                continue
            saving = _saving(needs[name], _next_width(bits[name], allowed), network, device)
            if saving >= best_saving and saving > 0:
                best, best_saving = name, saving
        if best is not None:
            return best
    return None


def choose_weight_bits(
    network: Network, device: Capabilities, allowed: tuple[int, ...] | None = None
) -> WeightChoice:
    """Per-layer widths by the module's rule (``allowed``: default the device's); ``fits`` is False
    when even the narrowest do not fit (``bits`` is then the narrowest)."""
    device = as_max7800x(device)
    allowed = tuple(sorted({b for b in (allowed or device.allowed_weight_bits) if b > 0}))
    capacity = kernel_capacity(device)
    budget = capacity.total_words
    bits = {n.layer: max(allowed) for n in network_kernel_needs(network, device)}
    while True:
        needs = network_kernel_needs(network, device, bits)
        words = sum(aligned_words(n, capacity.start_align) for n in needs)
        if words <= budget and skyline_fits(needs, capacity):
            return WeightChoice(dict(bits), needs, budget, True)
        name = _pick(network, device, bits, allowed)
        if name is None:
            return WeightChoice(dict(bits), needs, budget, False)
        bits[name] = _next_width(bits[name], allowed)
