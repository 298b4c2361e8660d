"""The command modules, imported when needed: each registers itself on the app when imported.

``cnnforge compile ...`` imports cli/compile.py alone (the other twelve modules and what they
import cost a vendor-pair compile ~0.1 s); ``--help``, a usage error or an unknown command
imports them all, so that every command is listed or suggested.
"""

from __future__ import annotations

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
        _import(name)


def _import(name: str) -> None:
    """Import the command module ``name`` by an ordinary import (readers and import-linter see
    what the CLI depends on; nothing is loaded by a computed name)."""
    if name == "adapt":
        from cnnforge.cli import adapt  # noqa: F401
    elif name == "analyze":
        from cnnforge.cli import analyze  # noqa: F401
    elif name == "budget":
        from cnnforge.cli import budget  # noqa: F401
    elif name == "check":
        from cnnforge.cli import check  # noqa: F401
    elif name == "compile":
        from cnnforge.cli import compile  # noqa: F401
    elif name == "demo":
        from cnnforge.cli import demo  # noqa: F401
    elif name == "diff":
        from cnnforge.cli import diff  # noqa: F401
    elif name == "evaluate":
        from cnnforge.cli import evaluate  # noqa: F401
    elif name == "inspect":
        from cnnforge.cli import inspect  # noqa: F401
    elif name == "plan":
        from cnnforge.cli import plan  # noqa: F401
    elif name == "quantize":
        from cnnforge.cli import quantize  # noqa: F401
    elif name == "simulate":
        from cnnforge.cli import simulate  # noqa: F401
    elif name == "train":
        from cnnforge.cli import train  # noqa: F401
    else:
        raise ValueError(f"no command module {name!r}")
