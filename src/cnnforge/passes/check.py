"""The device checker: every limit that can be judged before planning, all at once.

``check_network`` runs every per-layer rule (check_rules.py, check_limits.py) over the layers in
model order, then the network-wide rules (layer count, kernel memory, bias memory, weight
widths), and returns ALL violations, each with the layer, its PyTorch module path, the rule,
the actual value, the device limit and a hint. ``check_report`` is the whole of
``cnnforge check``: lower the model (fold BN, fuse, legalize), pick weight widths (fixed or
``auto``), check, run the planner when nothing else is violated (passes/check_plan.py: exit 0
is a promise that ``plan`` and ``compile`` place the network), and return a ``CheckReport``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cnnforge.ir import BINARY_BITS, Network
from cnnforge.passes.check_limits import LAYER_RULES_LIMITS
from cnnforge.passes.check_plan import Placer, placement_violations, plan_max7800x
from cnnforge.passes.check_rules import LAYER_RULES_OPS, Context, Violation
from cnnforge.passes.geometry import has_bias
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.passes.rewrites import Rewrite
from cnnforge.passes.weight_bits import choose_weight_bits
from cnnforge.targets.max7800x.kernel_words import KernelNeed, kernel_capacity, network_kernel_needs

if TYPE_CHECKING:
    from cnnforge.devices import Device

WORD_BYTES = 9  # one 72-bit kernel word holds 9 bytes of weights (devices.md §3)
NETWORK = "network"  # the "layer" of network-wide violations

LAYER_RULES = LAYER_RULES_OPS + LAYER_RULES_LIMITS


def _others(device: Device) -> tuple[Device, ...]:
    from cnnforge.devices import DEVICES

    return tuple(d for d in DEVICES if d.name != device.name)


def _network_violation(network: Network, rule: str, actual, limit, hint: str) -> Violation:
    return Violation(NETWORK, network.name, rule, str(actual), str(limit), hint)


def layer_count(ctx: Context) -> Iterator[Violation]:
    """Hardware layers <= the device's layer slots."""
    n, limit = len(ctx.network.layers), ctx.device.max_layers
    if n > limit:
        hint = "merge or remove layers" + ctx.other_device(lambda d: n <= d.max_layers)
        yield _network_violation(ctx.network, "layer-count", n, limit, hint)


def kernel_memory(ctx: Context, bits: dict[str, int] | None) -> Iterator[Violation]:
    """Kernel words per layer (on its processors) and in total against the device."""
    needs = network_kernel_needs(ctx.network, ctx.device, bits)
    capacity = kernel_capacity(ctx.device)
    by_name = {x.name: x for x in ctx.network.layers}
    for need in needs:
        room = capacity.best_for(need.processors)
        if need.words > room:
            actual = f"{need.words} words on each of {need.processors} processors"
            hint = "narrower weights (--weight-bits auto) or split the layer"
            yield ctx.violation(by_name[need.layer], "kernel-memory", actual, room, hint)
    total = sum(n.total_words for n in needs)
    if total > capacity.total_words:
        yield _network_violation(
            ctx.network,
            "kernel-memory",
            f"{total} words ({total * WORD_BYTES} bytes)",
            f"{capacity.total_words} words ({capacity.total_words * WORD_BYTES} bytes)",
            _kernel_hint(ctx, needs, total - capacity.total_words),
        )


def _kernel_hint(ctx: Context, needs: tuple[KernelNeed, ...], short: int) -> str:
    hint = f"short by {short} words ({short * WORD_BYTES} bytes)"
    choice = choose_weight_bits(ctx.network, ctx.device)
    if choice.fits:
        narrowed = choice.narrowed(max(choice.bits.values()))
        groups: dict[int, list[str]] = {}
        for name, b in narrowed.items():
            groups.setdefault(b, []).append(name)
        full = sum(n.total_words for n in network_kernel_needs(ctx.network, ctx.device))
        saved = (full - sum(n.total_words for n in choice.needs)) * WORD_BYTES
        parts = [f"{b}-bit weights on layers {', '.join(names)}" for b, names in groups.items()]
        hint += f"; {'; '.join(parts)} save {saved} bytes (--weight-bits auto)"
    total = sum(n.total_words for n in needs)
    return hint + ctx.other_device(lambda d: total <= kernel_capacity(d).total_words)


def bias_memory(ctx: Context) -> Iterator[Violation]:
    """All bias values together fit the bias memories of the quadrants (devices.md §4)."""
    dev = ctx.device
    total = sum(x.out_channels for x in ctx.network.layers if x.has_weights and has_bias(x))
    limit = dev.bias_entries_per_quadrant * dev.quadrants
    if total > limit:
        hint = "drop biases (e.g. BatchNorm without affine parts before the next conv)"
        hint += ctx.other_device(lambda d: total <= d.bias_entries_per_quadrant * d.quadrants)
        yield _network_violation(ctx.network, "bias-memory", total, limit, hint)


def binary_mix(ctx: Context, bits: dict[str, int] | None) -> Iterator[Violation]:
    """Binary (-1/+1) and 1-bit (-1/0) weights cannot be mixed in one network (R1.2)."""
    used = {n.weight_bits for n in network_kernel_needs(ctx.network, ctx.device, bits)}
    if BINARY_BITS in used and 1 in used:
        hint = "use either binary or 1-bit weights"
        yield _network_violation(ctx.network, "weight-bits", "binary and 1-bit", "one kind", hint)


def check_network(
    network: Network, device: Device, weight_bits: int | dict[str, int] | None = None
) -> tuple[Violation, ...]:
    """Every violation of ``device``'s limits, per layer in model order, then network-wide.

    ``weight_bits``: widths for the kernel-memory estimate (one for all, or by layer name);
    quantized layers use their own by default.
    """
    ctx = Context(network, device, _others(device))
    if isinstance(weight_bits, int):
        weight_bits = {x.name: weight_bits for x in network.layers if x.has_weights}
    out: list[Violation] = []
    for layer in network.layers:
        for rule in LAYER_RULES:
            out.extend(rule(ctx, layer))
    out.extend(layer_count(ctx))
    out.extend(kernel_memory(ctx, weight_bits))
    out.extend(bias_memory(ctx))
    out.extend(binary_mix(ctx, weight_bits))
    return tuple(v for v in out if v not in streamed_away(network, device, out))


def streamed_away(
    network: Network, device: Device, violations: list[Violation]
) -> tuple[Violation, ...]:
    """Data-memory violations that streaming the first layers through the FIFO resolves (the
    planner then streams them, plan/streaming.py): their inputs and all but the last output."""
    from cnnforge.targets.max7800x.streaming import streaming_layers

    n = streaming_layers(network, device)
    ins = {x.name for x in network.layers[:n]}
    outs = {x.name for x in network.layers[: max(n - 1, 0)]}
    return tuple(
        v
        for v in violations
        if (v.rule == "data-memory-input" and v.layer in ins)
        or (v.rule == "data-memory-output" and v.layer in outs)
    )


@dataclass(frozen=True)
class CheckReport:
    """What ``cnnforge check`` reports: rewrites made, widths used, kernel needs, violations."""

    device: str
    network: Network
    rewrites: tuple[Rewrite, ...]
    violations: tuple[Violation, ...]
    weight_bits: dict[str, int]
    weight_mode: str  # "8", "4", ..., "auto", "given"
    kernel_needs: tuple[KernelNeed, ...]
    kernel_capacity_words: int
    streaming: tuple[str, ...] = ()  # layers that stream through the FIFO (plan/streaming.py)

    @property
    def fits(self) -> bool:
        return not self.violations

    @property
    def kernel_words(self) -> int:
        return sum(n.total_words for n in self.kernel_needs)

    def to_dict(self) -> dict:
        """The JSON form (``cnnforge check --json``)."""
        return {
            "device": self.device,
            "network": self.network.name,
            "fits": self.fits,
            "hardware_layers": len(self.network.layers),
            "weight_bits_mode": self.weight_mode,
            "weight_bits": self.weight_bits,
            "kernel_memory": {
                "words_needed": self.kernel_words,
                "words_available": self.kernel_capacity_words,
                "bytes_needed": self.kernel_words * WORD_BYTES,
                "bytes_available": self.kernel_capacity_words * WORD_BYTES,
                "layers": [_need_dict(n) for n in self.kernel_needs],
            },
            "streaming_layers": list(self.streaming),
            "rewrites": [r.to_dict() for r in self.rewrites],
            "violations": [v.to_dict() for v in self.violations],
        }


def _need_dict(need: KernelNeed) -> dict:
    return {
        "layer": need.layer,
        "module_path": need.module_path,
        "weight_bits": need.weight_bits,
        "processors": need.processors,
        "words_per_processor": need.words,
    }


def check_report(
    network: Network,
    device: Device,
    weight_bits: int | str | dict[str, int] | None = None,
    placer: Placer = plan_max7800x,
) -> CheckReport:
    """Lower ``network`` for ``device``, choose widths (``"auto"``, a width, a dict, or None for
    the layers' own, else the device's default), check it, and place it with ``placer`` (the
    target's compile planner; pipeline.targets.check_for calls this with the right one)."""
    lowered = lower_to_hardware(network, device)
    net = lowered.network
    if weight_bits == "auto":
        bits, mode = choose_weight_bits(net, device).bits, "auto"
    elif isinstance(weight_bits, int):
        bits, mode = {x.name: weight_bits for x in net.layers if x.has_weights}, str(weight_bits)
    elif isinstance(weight_bits, dict):
        bits, mode = dict(weight_bits), "given"
    else:
        own = {x.name: x.quant.weight_bits for x in net.layers if x.quant is not None}
        needs = network_kernel_needs(net, device)
        bits = {n.layer: own.get(n.layer, device.default_weight_bits) for n in needs}
        mode = "model"
    violations = check_network(net, device, bits)
    if not violations:  # the promise: what check passes, plan and compile place
        violations = placement_violations(net, device, bits, placer)
    return CheckReport(
        device=device.name,
        network=net,
        rewrites=lowered.rewrites,
        violations=violations,
        weight_bits=bits,
        weight_mode=mode,
        kernel_needs=network_kernel_needs(net, device, bits),
        kernel_capacity_words=kernel_capacity(device).total_words,
        streaming=_streaming_names(net, device),
    )


def _streaming_names(network: Network, device: Device) -> tuple[str, ...]:
    from cnnforge.targets.max7800x.streaming import streaming_layers

    return tuple(x.name for x in network.layers[: streaming_layers(network, device)])
