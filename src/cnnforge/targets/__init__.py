"""Every target cnnforge compiles or plans for, one package each: ``max7800x`` (MAX78000 and
MAX78002), ``hls`` (an FPGA overlay from HLS C++) and ``generic`` (an on-chip budget + DDR).

A target package owns its planner, writers and reports; what a target provides is the
``Target`` record of ``pipeline/targets.py`` (docs/internal-apis.md, "How to add a target").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cnnforge.target_options import TargetOptions


def declared_options() -> tuple[TargetOptions, ...]:
    """Every target's own `compile` options (each its ``Target.options``), imported without
    the targets' heavy parts: the CLI lists them in ``--help``, which imports no numpy."""
    from cnnforge.targets.max7800x.firmware.options import TARGET_OPTIONS as max7800x

    return (max7800x,)
