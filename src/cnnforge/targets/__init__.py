"""Every target cnnforge compiles or plans for, one package each: ``max7800x`` (MAX78000 and
MAX78002), ``hls`` (an FPGA overlay from HLS C++) and ``generic`` (an on-chip budget + DDR).

A target package owns its planner, writers and reports; what a target provides is the
``Target`` record of ``pipeline/targets.py`` (docs/internal-apis.md, "How to add a target").
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cnnforge.target_options import TargetOptions


def declared_options() -> tuple[TargetOptions, ...]:
    """Every target's own `compile` options: the ``TARGET_OPTIONS`` of each target package's
    ``options`` module, found without importing the targets' heavy parts (``--help`` imports
    no numpy), so a new target declares its options in its own folder."""
    found = []
    for package in sorted(pkgutil.iter_modules(__path__), key=lambda p: p.name):
        name = f"{__name__}.{package.name}.options"
        if package.ispkg and importlib.util.find_spec(name) is not None:
            found.append(importlib.import_module(name).TARGET_OPTIONS)
    return tuple(found)
