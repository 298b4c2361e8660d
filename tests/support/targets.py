"""The table's rules of a device record, for tests that call the shared checker directly."""

from __future__ import annotations

from cnnforge.passes.target_rules import TargetRules
from cnnforge.pipeline.targets import target_of


def rules_of(device: object) -> TargetRules:
    """The checker hooks of ``device``'s target (its record in the table)."""
    return target_of(device).rules  # type: ignore[arg-type]
