"""A target's own rules for the shared checker beyond its ``Capabilities``, handed down by its
record so no pass imports a target; ``NO_RULES`` has no memory to check."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cnnforge.ir import Network
from cnnforge.passes.check_rules import Context, LayerRule, Violation

if TYPE_CHECKING:
    from cnnforge.devices import Capabilities


@dataclass(frozen=True)
class WeightChoice:
    """Chosen widths by layer name, the target's memory needs (opaque here), its budget, and
    whether they fit."""

    bits: dict[str, int]
    needs: tuple[Any, ...] = ()
    budget_words: int = 0
    fits: bool = True

    def narrowed(self, widest: int = 8) -> dict[str, int]:
        """The layers given fewer than ``widest`` bits."""
        return {name: b for name, b in self.bits.items() if b != widest}


@dataclass(frozen=True)
class WeightMemory:
    """A target's weight memory in the check report: per-layer needs, the words available and the
    bytes one word holds."""

    needs: tuple[Any, ...] = ()
    capacity_words: int = 0
    word_bytes: int = 0


#: A target's placement: the function its compile recipe plans with (``network``, ``device``);
#: it raises a CnnforgeError for what the target cannot place or run.
Placer = Callable[[Network, "Capabilities"], object]
#: Network-wide rules: (context, weight widths by layer or None) -> violations.
NetworkRules = Callable[[Context, "dict[str, int] | None"], Iterable[Violation]]
#: ``--weight-bits auto``: (network, device, allowed widths or None) -> the choice.
WidthChooser = Callable[[Network, "Capabilities", "tuple[int, ...] | None"], WeightChoice]


def widest_weights(
    network: Network, device: Capabilities, allowed: tuple[int, ...] | None = None
) -> WeightChoice:
    """No weight memory to fit: the widest allowed width on every weight layer."""
    widest = max(b for b in (allowed or device.allowed_weight_bits) if b > 0)
    return WeightChoice({x.name: widest for x in network.layers if x.has_weights})


def _no_violations(ctx: Context, bits: dict[str, int] | None) -> Iterator[Violation]:
    del ctx, bits
    yield from ()


@dataclass(frozen=True)
class TargetRules:
    """The hooks of one target the shared checker calls; ``layer_rules`` pairs each extra rule with
    the shared rule it follows, so violations keep one order per layer."""

    layer_rules: tuple[tuple[LayerRule, LayerRule], ...] = ()
    network_rules: NetworkRules = _no_violations
    choose_weight_bits: WidthChooser = widest_weights
    place: Placer | None = None  # what its compile recipe plans with; None: nothing to place
    # layers that stream through input FIFOs (their data-memory violations are resolved)
    streaming_layers: Callable[[Network, Capabilities], int] = lambda network, device: 0
    weight_memory: Callable[[Network, Capabilities, dict[str, int] | None], WeightMemory] = (
        lambda network, device, bits: WeightMemory()
    )
    siblings: tuple[Capabilities, ...] = field(default=())  # for "or use ..." hints

    def layer_rule_order(self, shared: tuple[LayerRule, ...]) -> tuple[LayerRule, ...]:
        """The shared per-layer rules with this target's placed after their anchors."""
        out: list[LayerRule] = []
        for rule in shared:
            out.append(rule)
            out.extend(extra for anchor, extra in self.layer_rules if anchor is rule)
        return tuple(out)


#: A target with no rules of its own.
NO_RULES = TargetRules()
