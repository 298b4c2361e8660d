"""The device checker: every per-layer and network-wide limit judged before planning, ALL
violations at once; ``check_report`` is the whole of ``cnnforge check``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cnnforge.ir import Network
from cnnforge.passes.check_limits import LAYER_RULES_LIMITS
from cnnforge.passes.check_plan import placement_violations
from cnnforge.passes.check_rules import LAYER_RULES_OPS, Context, Violation, network_violation
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.passes.rewrites import Rewrite
from cnnforge.passes.target_rules import TargetRules, WeightMemory

if TYPE_CHECKING:
    from cnnforge.devices import Capabilities


LAYER_RULES = LAYER_RULES_OPS + LAYER_RULES_LIMITS


def layer_count(ctx: Context) -> Iterator[Violation]:
    """Hardware layers <= the device's layer slots."""
    n, limit = len(ctx.network.layers), ctx.device.max_layers
    if n > limit:
        hint = "merge or remove layers" + ctx.other_device(lambda d: n <= d.max_layers)
        yield network_violation(ctx.network, "layer-count", n, limit, hint)


def check_network(
    network: Network,
    device: Capabilities,
    weight_bits: int | dict[str, int] | None = None,
    *,
    rules: TargetRules,
) -> tuple[Violation, ...]:
    """Every violation of ``device``'s limits, per layer in model order, then network-wide;
    ``weight_bits`` sizes the kernel-memory estimate, ``rules`` are the target's own."""
    others = tuple(d for d in rules.siblings if d.name != device.name)
    ctx = Context(network, device, others)
    if isinstance(weight_bits, int):
        weight_bits = {x.name: weight_bits for x in network.layers if x.has_weights}
    out: list[Violation] = []
    layer_rules = rules.layer_rule_order(LAYER_RULES)
    for layer in network.layers:
        for rule in layer_rules:
            out.extend(rule(ctx, layer))
    out.extend(layer_count(ctx))
    out.extend(rules.network_rules(ctx, weight_bits))
    streamed = _streamed_away(network, rules.streaming_layers(network, device), out)
    return tuple(v for v in out if v not in streamed)


def _streamed_away(
    network: Network, streaming: int, violations: list[Violation]
) -> tuple[Violation, ...]:
    """Data-memory violations that streaming the first ``streaming`` layers through the FIFO
    resolves (the planner then streams them): their inputs and all but the last output."""
    ins = {x.name for x in network.layers[:streaming]}
    outs = {x.name for x in network.layers[: max(streaming - 1, 0)]}
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
    weight_memory: WeightMemory  # the target's kernel memory (none: zeros)
    streaming: tuple[str, ...] = ()  # layers that stream through the FIFO (plan/streaming.py)

    @property
    def fits(self) -> bool:
        return not self.violations

    @property
    def kernel_needs(self) -> tuple:
        """Per weight layer: its words on each of its processors (none without kernel memory)."""
        return self.weight_memory.needs

    @property
    def kernel_capacity_words(self) -> int:
        return self.weight_memory.capacity_words

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
                "bytes_needed": self.kernel_words * self.weight_memory.word_bytes,
                "bytes_available": self.kernel_capacity_words * self.weight_memory.word_bytes,
                "layers": [_need_dict(n) for n in self.kernel_needs],
            },
            "streaming_layers": list(self.streaming),
            "rewrites": [r.to_dict() for r in self.rewrites],
            "violations": [v.to_dict() for v in self.violations],
        }


def _need_dict(need) -> dict:
    return {
        "layer": need.layer,
        "module_path": need.module_path,
        "weight_bits": need.weight_bits,
        "processors": need.processors,
        "words_per_processor": need.words,
    }


#: Rules that narrower weights can fix (the others stay whatever the widths).
WIDTH_RULES = frozenset({"kernel-memory"})

#: The mark of a violation no weight width changes.
INDEPENDENT = "independent of weight bits"


def beyond_weight_bits(
    network: Network, device: Capabilities, violations: tuple[Violation, ...], rules: TargetRules
) -> tuple[Violation, ...]:
    """Only kernel memory is short: plan at the narrowest widths, so width-independent placement
    constraints show in the same run (then ``--weight-bits auto`` is not suggested)."""
    choice = rules.choose_weight_bits(network, device, None)
    if not choice.fits:
        return violations
    placed = placement_violations(network, device, choice.bits, rules.place)
    if not placed:
        return violations
    marked = tuple(dataclasses.replace(v, hint=f"{INDEPENDENT}: {v.hint}") for v in placed)
    note = "--weight-bits auto, not enough alone: see the placement violation"
    kept = tuple(
        dataclasses.replace(v, hint=v.hint.replace("--weight-bits auto", note)) for v in violations
    )
    return kept + marked


#: Rewrites whose layer computes what the user's op did with weights the rewrite made.
_MADE_WEIGHTS = frozenset({"upsample-nearest", "eltwise-activation", "passthrough"})


def _made_by_rewrite(
    violation: Violation, model: Network, lowered: Network, rewrites: tuple[Rewrite, ...]
) -> Violation:
    """A violation on a conv a rewrite made names the rewrite and the user's op (its kernel memory
    is not the user's weights to narrow)."""
    made = [r for r in rewrites if r.layer == violation.layer and r.rule in _MADE_WEIGHTS]
    if not made or violation.layer not in {x.name for x in lowered.layers}:
        return violation
    before = {x.name: x for x in model.layers}.get(violation.layer)
    what = f"{before.label()} {before.module_path or before.name}" if before else made[0].detail
    note = f"this layer is the {made[0].rule} rewrite of {what}, with weights the rewrite made"
    hint = violation.hint
    if violation.rule == "kernel-memory":
        hint = "its identity kernels are not weights to narrow: use fewer channels there"
    return dataclasses.replace(violation, hint=f"{note}; {hint}")


def check_report(
    network: Network,
    device: Capabilities,
    weight_bits: int | str | dict[str, int] | None = None,
    *,
    rules: TargetRules,
) -> CheckReport:
    """Lower ``network`` for ``device``, choose widths, check it with the target's ``rules`` and
    place it with their placer, as the target's record hands them down."""
    lowered = lower_to_hardware(network, device)
    net = lowered.network
    if weight_bits == "auto":
        bits, mode = rules.choose_weight_bits(net, device, None).bits, "auto"
    elif isinstance(weight_bits, int):
        bits, mode = {x.name: weight_bits for x in net.layers if x.has_weights}, str(weight_bits)
    elif isinstance(weight_bits, dict):
        bits, mode = dict(weight_bits), "given"
    else:
        own = {x.name: x.quant.weight_bits for x in net.layers if x.quant is not None}
        weighted = (x.name for x in net.layers if x.has_weights)
        bits = {name: own.get(name, device.default_weight_bits) for name in weighted}
        mode = "model"
    violations = check_network(net, device, bits, rules=rules)
    if not violations:  # the promise: what check passes, plan and compile place
        violations = placement_violations(net, device, bits, rules.place)
    elif all(v.rule in WIDTH_RULES for v in violations):
        violations = beyond_weight_bits(net, device, violations, rules)
    violations = tuple(_made_by_rewrite(v, network, net, lowered.rewrites) for v in violations)
    return CheckReport(
        device=device.name,
        network=net,
        rewrites=lowered.rewrites,
        violations=violations,
        weight_bits=bits,
        weight_mode=mode,
        weight_memory=rules.weight_memory(net, device, bits),
        streaming=tuple(x.name for x in net.layers[: rules.streaming_layers(net, device)]),
    )
