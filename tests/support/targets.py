"""The table's rules of a device record, for tests that call the shared checker directly."""

from __future__ import annotations

from cnnforge.api.targets import get_target
from cnnforge.passes.target_rules import TargetRules


def rules_of(device: object) -> TargetRules:
    """The checker hooks of ``device``'s target (its record in the table)."""
    return get_target(device).rules  # type: ignore[arg-type]
