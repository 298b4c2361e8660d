"""The command modules, imported when needed: each registers itself on the app when imported.

``cnnforge compile ...`` imports cli/compile.py alone (the other twelve modules and what they
import cost a vendor-pair compile ~0.1 s); ``--help``, a usage error or an unknown command
imports them all, so that every command is listed or suggested.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

#: Every command, each the name of its module in cnnforge.cli.
COMMANDS = (
    "adapt",
    "analyze",
    "budget",
    "check",
    "compile",
    "demo",
    "diff",
    "evaluate",
    "inspect",
    "plan",
    "quantize",
    "simulate",
    "train",
)


def register(args: Sequence[str] | None = None) -> None:
    """Import the module of the command ``args`` names (its first word that is no option),
    or every command module when it names none of them (or ``args`` is None)."""
    words = [a for a in args or () if not a.startswith("-")]
    named = words[0] if words and words[0] in COMMANDS else None
    for name in (named,) if named else COMMANDS:
        importlib.import_module(f"cnnforge.cli.{name}")
