"""The device checker: every limit that can be judged before planning, all at once.

``check_network`` runs every per-layer rule (check_rules.py, check_limits.py) over the layers in
model order, then the network-wide rules (layer count; on a MAX7800x record its kernel and bias
memories and weight kinds, check_memory.py), and returns ALL violations, each with the layer,
its PyTorch module path, the rule, the actual value, the device limit and a hint.
``check_report`` is the whole of ``cnnforge check``: lower the model (fold BN, fuse,
legalize), pick weight widths (fixed or ``auto``), check, run the planner when nothing else is
violated (passes/check_plan.py: exit 0 is a promise that ``plan`` and ``compile`` place the
network), and return a ``CheckReport``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cnnforge.ir import Network
from cnnforge.passes.check_limits import LAYER_RULES_LIMITS
from cnnforge.passes.check_memory import KERNEL_WORD_BYTES as WORD_BYTES
from cnnforge.passes.check_memory import (
    kernel_report,
    network_memory,
    network_violation,
    streamed_away,
    streaming_count,
)
from cnnforge.passes.check_plan import Placer, placement_violations, plan_max7800x
from cnnforge.passes.check_rules import LAYER_RULES_OPS, Context, Violation
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.passes.rewrites import Rewrite
from cnnforge.passes.weight_bits import choose_weight_bits
from cnnforge.targets.max7800x.kernel_words import KernelNeed

if TYPE_CHECKING:
    from cnnforge.devices import Capabilities
    from cnnforge.targets.max7800x.device import Max7800xDevice


LAYER_RULES = LAYER_RULES_OPS + LAYER_RULES_LIMITS


def _others(device: Capabilities) -> tuple[Max7800xDevice, ...]:
    """The other MAX7800x parts, for the hints that name one where the network would fit."""
    from cnnforge.targets.max7800x.device import DEVICES

    return tuple(d for d in DEVICES if d.name != device.name)


def layer_count(ctx: Context) -> Iterator[Violation]:
    """Hardware layers <= the device's layer slots."""
    n, limit = len(ctx.network.layers), ctx.device.max_layers
    if n > limit:
        hint = "merge or remove layers" + ctx.other_device(lambda d: n <= d.max_layers)
        yield network_violation(ctx.network, "layer-count", n, limit, hint)


def check_network(
    network: Network, device: Capabilities, weight_bits: int | dict[str, int] | None = None
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
    out.extend(network_memory(ctx, weight_bits))  # the MAX7800x memories (none elsewhere)
    return tuple(v for v in out if v not in streamed_away(network, device, out))


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


#: Rules that narrower weights can fix (the others stay whatever the widths).
WIDTH_RULES = frozenset({"kernel-memory"})

#: The mark of a violation no weight width changes.
INDEPENDENT = "independent of weight bits"


def beyond_weight_bits(
    network: Network,
    device: Capabilities,
    violations: tuple[Violation, ...],
    placer: Placer | None = plan_max7800x,
) -> tuple[Violation, ...]:
    """Only kernel memory is short: plan with the narrowest widths that fit it, so that the
    placement constraints no width changes (concatenation interleaving, channel structure)
    are listed in the same run; the ``--weight-bits auto`` suggestion is withdrawn when they
    exist (it would not suffice)."""
    choice = choose_weight_bits(network, device)
    if not choice.fits:
        return violations
    placed = placement_violations(network, device, choice.bits, placer)
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
    """A violation on a layer a rewrite turned into a conv (an identity conv carrying an
    activation, a nearest upsample as identity kernels) names the rewrite and the user's op;
    kernel memory there is not the user's weights to narrow."""
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
    placer: Placer | None = plan_max7800x,
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
        weighted = (x.name for x in net.layers if x.has_weights)
        bits = {name: own.get(name, device.default_weight_bits) for name in weighted}
        mode = "model"
    violations = check_network(net, device, bits)
    if not violations:  # the promise: what check passes, plan and compile place
        violations = placement_violations(net, device, bits, placer)
    elif all(v.rule in WIDTH_RULES for v in violations):
        violations = beyond_weight_bits(net, device, violations, placer)
    violations = tuple(_made_by_rewrite(v, network, net, lowered.rewrites) for v in violations)
    needs, capacity = kernel_report(net, device, bits)
    return CheckReport(
        device=device.name,
        network=net,
        rewrites=lowered.rewrites,
        violations=violations,
        weight_bits=bits,
        weight_mode=mode,
        kernel_needs=needs,
        kernel_capacity_words=capacity,
        streaming=tuple(x.name for x in net.layers[: streaming_count(net, device)]),
    )
