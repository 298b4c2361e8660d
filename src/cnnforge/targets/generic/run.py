"""The generic budget target's sequence (``cnnforge budget`` and ``plan -d generic:...``):
load the float model, plan it for the on-chip budget + DDR, write the report files."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnnforge.errors import InputError
from cnnforge.ir import Network
from cnnforge.outputs import atomic_output_dir
from cnnforge.targets.generic.target import GenericTarget, parse_generic

if TYPE_CHECKING:  # the planner loads with the command (pipeline.targets lists FILES for all)
    from cnnforge.passes.check_rules import Violation
    from cnnforge.targets.generic.budget_plan import GenericPlan

FILES = ("generic-plan.json", "ddr-vs-budget.svg", "report.html", "generic-plan.txt")


def plan_budget(
    model: str | None,
    device: str,
    input_shape: tuple[int, ...] | None,
    model_args: Mapping[str, Any],
    checkpoint: Path | None,
    points: int = 24,
) -> tuple[GenericTarget, Network, GenericPlan]:
    """``(target, float network, GenericPlan)`` of ``model`` on ``--device generic:...``."""
    from cnnforge.frontend import load_network
    from cnnforge.models import default_input_shape, model_names
    from cnnforge.targets.generic.budget_plan import plan_generic

    target = parse_generic(device)
    if points < 2:
        raise InputError(f"--points {points} is below 2", hint="e.g. --points 24")
    if model is None:
        raise InputError("no MODEL", hint="e.g. cnnforge budget unet-voc -d generic:onchip=1MiB")
    shape = input_shape
    if shape is None and model in model_names():
        shape = default_input_shape(model)
    elif shape is None and not model.lower().endswith(".onnx"):  # ONNX: the file's own shape
        raise InputError("--input-shape is needed", hint="e.g. -i 3,224,224")
    network = load_network(model, shape, dict(model_args), checkpoint)
    return target, network, plan_generic(network, target, points)


def check_generic(network: Network) -> tuple[Violation, ...]:
    """``cnnforge check -d generic:...``: every layer the generic integers do not run (the rule
    ``budget --accuracy`` applies: targets.generic.integer.integer_refusals), as violations."""
    from cnnforge.passes.check_rules import Violation
    from cnnforge.targets.generic.integer import integer_refusals

    return tuple(
        Violation(
            layer.name,
            layer.module_path or layer.name,
            "integer semantics",
            why,
            "conv/linear, pools, nearest upsampling, add/sub, concat; ReLU/ReLU6/Hardtanh/Abs",
            "run it on the host, or replace it (docs/generic-target.md)",
        )
        for layer, why in integer_refusals(network)
    )


def write_budget(
    plan: GenericPlan,
    output: Path,
    overwrite: bool,
    write_text: Callable[[GenericPlan, Path], None],
) -> None:
    """The report files (FILES) into ``output``, atomically; ``write_text`` renders the text
    report (the CLI's tables) into a file."""
    from cnnforge.targets.generic import report

    with atomic_output_dir(output, overwrite) as tmp:
        (tmp / "generic-plan.json").write_text(report.to_json(plan), encoding="utf-8")
        (tmp / "ddr-vs-budget.svg").write_text(report.curve_svg(plan), encoding="utf-8")
        (tmp / "report.html").write_text(report.to_html(plan), encoding="utf-8")
        write_text(plan, tmp / "generic-plan.txt")
