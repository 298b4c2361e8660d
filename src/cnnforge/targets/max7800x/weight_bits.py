"""``--weight-bits auto``: per-layer weight widths that make a network fit kernel memory.

The rule (documented for the user in the check report): start with every weight layer at the
widest width the device allows (8 bits). While the network's kernel words exceed the budget,
narrow ONE layer to the next allowed width (8 -> 4 -> 2 -> 1; binary is never chosen
automatically). The layer chosen is, among the layers at the widest width still in use, the one
whose narrowing saves the most kernel words -- the largest layers first, so the fewest weights
lose precision -- with the first and the last weight layer kept at 8 bits as long as any other
layer can still be narrowed (they are the most sensitive to quantization in practice). Ties go
to the later layer (deeper layers have more redundancy).

(A target without kernel memory gets the widest width everywhere: passes/target_rules.py.) The
budget: the device's total kernel words, each layer's need rounded up to the 4-word start alignment
of the kernel allocator (docs/hardware/devices.md §3), AND a simple kernel map must exist
(``plan.kernel_words.skyline_fits``), so that the planner has room to place the layers.
"""

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
    """Per-layer widths by the rule of the module docstring (``allowed``: default the device's).

    ``fits`` is False when even the narrowest widths do not fit; ``bits`` is then the narrowest.
    """
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
