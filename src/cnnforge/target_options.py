"""The record of a target's own `compile` options: declared once in the target's folder, the
CLI derives its flags from it (a leaf: light enough for `--help`, which imports no numpy)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: A target's reader of its `compile` options: (the CLI's values by name, in_place) ->
#: (``cnnforge.compile``'s keyword arguments, the flags given that only its targets take).
OptionReader = Callable[[dict[str, Any], bool], "tuple[dict[str, Any], tuple[str, ...]]"]


@dataclass(frozen=True)
class TargetOption:
    """One `compile` option a target declares: the CLI derives its flag, help and default."""

    name: str  # the parameter's name (the reader's key)
    flag: str  # "--softmax", or a switch pair "--firmware/--no-firmware"
    help: str
    default: Any = False
    kind: type = bool  # what it takes: bool (a flag), int, str
    metavar: str | None = None
    only_its_own: bool = True  # refused for the other targets (False: taken by any)


@dataclass(frozen=True)
class TargetOptions:
    """A target's own `compile` options (declared once, its ``Target.options``) and the
    reader of their values."""

    options: tuple[TargetOption, ...]
    read: OptionReader
