"""The checker's rules on the MAX7800x data, bias and kernel memories, run through its
``TargetRules`` (rules.py; docs/hardware/devices.md §2-§4)."""

from __future__ import annotations

import math
from collections.abc import Iterator

from cnnforge.devices import Capabilities
from cnnforge.ir import BINARY_BITS, INPUT, Layer, Network
from cnnforge.passes.check_rules import Context, Violation, network_violation
from cnnforge.passes.geometry import has_bias, input_channels
from cnnforge.passes.target_rules import WeightMemory
from cnnforge.targets.max7800x.device import Max7800xDevice, as_max7800x
from cnnforge.targets.max7800x.kernel_words import KernelNeed, kernel_capacity, network_kernel_needs
from cnnforge.targets.max7800x.weight_bits import choose_weight_bits

WORD_BYTES = 4  # one data-memory word: 4 channels of one pixel (docs/hardware/devices.md §2)
WIDE_BYTES = 4  # a 32-bit output channel takes a word of its own
#: One 72-bit kernel word holds 9 bytes of weights (docs/hardware/devices.md §3).
KERNEL_WORD_BYTES = 9


def data_memory(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """Each input and output tensor of a layer fits one data-memory instance
    (docs/hardware/devices.md §2)."""
    dev = as_max7800x(ctx.device)
    if not layer.is_hardware:
        return
    limit = dev.instance_bytes
    in_shape = ctx.network.input_shapes(layer)[0]
    operands = layer.operand_count
    cin = input_channels(ctx.network, layer)
    pixels = math.prod(in_shape[1:])
    need_in = pixels * dev.passes(cin) * operands * WORD_BYTES
    if layer.inputs == (INPUT,) and cin <= dev.data_instances:
        need_in = min(need_in, pixels)  # CHW input: one channel per instance, a byte per pixel
    width = WIDE_BYTES if layer.wide else 1
    need_out = math.prod(layer.out_shape[1:]) * dev.passes(layer.out_shape[0]) * WORD_BYTES * width
    for what, need in (("input", need_in), ("output", need_out)):
        if need > limit:
            hint = "reduce the resolution or channels, or fold space into channels"
            hint += ctx.other_device(lambda d, n=need: n <= d.instance_bytes)
            yield ctx.violation(
                layer, f"data-memory-{what}", f"{need} bytes", f"{limit} bytes per instance", hint
            )


def bias(ctx: Context, layer: Layer) -> Iterator[Violation]:
    """A layer's bias values sit in one quadrant's bias memory (docs/hardware/devices.md §4)."""
    dev = as_max7800x(ctx.device)
    if not layer.has_weights or not has_bias(layer):
        return
    limit = dev.bias_entries_per_quadrant
    n = layer.out_channels
    if n > limit:
        hint = "drop the bias or split the layer" + ctx.other_device(
            lambda d: n <= d.bias_entries_per_quadrant
        )
        yield ctx.violation(layer, "bias-channels", n, limit, hint)


def kernel_memory(ctx: Context, bits: dict[str, int] | None) -> Iterator[Violation]:
    """Kernel words per layer (on its processors) and in total against the device."""
    dev = as_max7800x(ctx.device)
    needs = network_kernel_needs(ctx.network, dev, bits)
    capacity = kernel_capacity(dev)
    by_name = {x.name: x for x in ctx.network.layers}
    for need in needs:
        room = capacity.best_for(need.processors)
        if need.words > room:
            actual = f"{need.words} words on each of {need.processors} processors"
            hint = "narrower weights (--weight-bits auto) or split the layer"
            yield ctx.violation(by_name[need.layer], "kernel-memory", actual, room, hint)
    total = sum(n.total_words for n in needs)
    if total > capacity.total_words:
        yield network_violation(
            ctx.network,
            "kernel-memory",
            f"{total} words ({total * KERNEL_WORD_BYTES} bytes)",
            f"{capacity.total_words} words ({capacity.total_words * KERNEL_WORD_BYTES} bytes)",
            _kernel_hint(ctx, dev, needs, total - capacity.total_words),
        )


def _kernel_hint(
    ctx: Context, dev: Max7800xDevice, needs: tuple[KernelNeed, ...], short: int
) -> str:
    hint = f"short by {short} words ({short * KERNEL_WORD_BYTES} bytes)"
    choice = choose_weight_bits(ctx.network, dev)
    if choice.fits:
        narrowed = choice.narrowed(max(choice.bits.values()))
        groups: dict[int, list[str]] = {}
        for name, b in narrowed.items():
            groups.setdefault(b, []).append(name)
        full = sum(n.total_words for n in network_kernel_needs(ctx.network, dev))
        saved = (full - sum(n.total_words for n in choice.needs)) * KERNEL_WORD_BYTES
        parts = [f"{b}-bit weights on layers {', '.join(names)}" for b, names in groups.items()]
        hint += f"; {'; '.join(parts)} save {saved} bytes (--weight-bits auto)"
    total = sum(n.total_words for n in needs)
    return hint + ctx.other_device(lambda d: total <= kernel_capacity(d).total_words)


def bias_memory(ctx: Context) -> Iterator[Violation]:
    """All bias values together fit the bias memories of the quadrants
    (docs/hardware/devices.md §4)."""
    dev = as_max7800x(ctx.device)
    total = sum(x.out_channels for x in ctx.network.layers if x.has_weights and has_bias(x))
    limit = dev.bias_entries_per_quadrant * dev.quadrants
    if total > limit:
        hint = "drop biases (e.g. BatchNorm without affine parts before the next conv)"
        hint += ctx.other_device(lambda d: total <= d.bias_entries_per_quadrant * d.quadrants)
        yield network_violation(ctx.network, "bias-memory", total, limit, hint)


def binary_mix(ctx: Context, bits: dict[str, int] | None) -> Iterator[Violation]:
    """Binary (-1/+1) and 1-bit (-1/0) weights cannot be mixed in one network (R1.2)."""
    dev = as_max7800x(ctx.device)
    used = {n.weight_bits for n in network_kernel_needs(ctx.network, dev, bits)}
    if BINARY_BITS in used and 1 in used:
        hint = "use either binary or 1-bit weights"
        yield network_violation(ctx.network, "weight-bits", "binary and 1-bit", "one kind", hint)


def network_memory(ctx: Context, bits: dict[str, int] | None) -> Iterator[Violation]:
    """The network-wide memory rules, in the checker's order: kernel, bias, weight kinds."""
    yield from kernel_memory(ctx, bits)
    yield from bias_memory(ctx)
    yield from binary_mix(ctx, bits)


def weight_memory(
    network: Network, device: Capabilities, bits: dict[str, int] | None
) -> WeightMemory:
    """The kernel needs of every weight layer and the kernel words available (check's report)."""
    dev = as_max7800x(device)
    needs = network_kernel_needs(network, dev, bits)
    return WeightMemory(needs, kernel_capacity(dev).total_words, KERNEL_WORD_BYTES)
