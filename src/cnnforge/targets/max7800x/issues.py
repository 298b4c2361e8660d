"""``Issue``: one rule a plan breaks, shared by the validator and the word-level run (a leaf module,
so neither imports the other)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Issue:
    """One broken rule: the layer, a short rule name and a sentence with the numbers."""

    layer: str
    rule: str
    message: str

    def one_line(self) -> str:
        """``layer L: message [rule]``, the CLI's line for one issue."""
        return f"layer {self.layer}: {self.message} [{self.rule}]"


__all__ = ["Issue"]
