"""The generic on-chip-budget accelerator (``generic:onchip=3MiB,...``) as an entry of the table of
targets (api/targets.py): planned and checked, never compiled."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cnnforge.ir import Network
from cnnforge.pipeline.targets import Target
from cnnforge.targets.generic import integer, run
from cnnforge.targets.generic.target import GenericTarget, parse_generic


def check_float(
    model: str | None,
    device: str,
    input_shape: tuple[int, ...] | None,
    model_args: Mapping[str, Any],
    checkpoint: Path | None,
) -> tuple[GenericTarget, Network, tuple]:
    """``cnnforge check -d generic:...``: the layers the generic integers refuse (exit 0
    promises that ``budget --accuracy`` runs the network: the same rule, run.check_generic)."""
    target, network, _ = run.plan_budget(
        model, device, input_shape, model_args, checkpoint, points=2
    )
    return target, network, run.check_generic(network)


TARGET = Target(
    "generic",
    "generic accelerator: on-chip budget + DDR (generic:onchip=3MiB,...)",
    integer,  # saturating fixed point
    device=None,
    parse=parse_generic,
    planner=None,  # planned on the float model: run.plan_budget
    plans="budget",
    report=run.FILES,
    check_float=check_float,
)
