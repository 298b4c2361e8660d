"""``cnnforge plan``: place a model on the device, prove the plan, write the vendor pair + report.

``cnnforge plan MODEL -d MAX78000 -i 48,88,88 [--checkpoint q.pth] -o DIR`` plans and writes
network.yaml, the vendor checkpoint, a sample input, plan.json, plan.md and pictures.
``--validate-only`` plans (or, with ``--ai8x-yaml``/``--ai8x-checkpoint``, takes the vendor's
plan) and only reports; exit 1 when the given plan breaks a rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from cnnforge.cli.app import app
from cnnforge.cli.common import (
    ai8x_checkpoint_option,
    console,
    model_arg_option,
    model_input_shape,
    parse_model_args,
    parse_weight_bits,
)
from cnnforge.errors import InputError
from cnnforge.outputs import check_target
from cnnforge.targets.max7800x.device import DEFAULT_DEVICE, DEVICE_NAMES

if TYPE_CHECKING:
    from cnnforge.pipeline.targets import Target
    from cnnforge.targets.max7800x.plan_flow import PlanResult


@app.command("plan")
def plan(
    model: str = typer.Argument(
        None, help="path/to/file.py:Name, package.module:Name, or a short name (unet-large)."
    ),
    device: str = typer.Option(
        DEFAULT_DEVICE,
        "--device",
        "-d",
        help=f"{DEVICE_NAMES} or generic:onchip=3MiB,... (a target of pipeline.targets)",
    ),
    input_shape: str = typer.Option(
        None, "--input-shape", "-i", help="C,H,W (or C,L); shipped models know theirs."
    ),
    checkpoint: Path = typer.Option(
        None, "--checkpoint", help="cnnforge quantized checkpoint, or a float state_dict."
    ),
    output: Path = typer.Option(None, "--output", "-o", help="Output directory."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o."),
    validate_only: bool = typer.Option(
        False, "--validate-only", help="Only plan/validate and report; write nothing."
    ),
    weight_bits: str = typer.Option(
        None, "--weight-bits", help="8, 4, 2, 1 or auto (float models; default 8)."
    ),
    model_arg: list[str] = model_arg_option(),
    ai8x_yaml: Path = typer.Option(None, "--ai8x-yaml", help="A vendor network YAML."),
    ai8x_checkpoint: Path = ai8x_checkpoint_option(),
    allow_overlap: bool = typer.Option(
        False, "--allow-overlap", help="Accept what the vendor's --overlap-data accepts."
    ),
    no_in_place: bool = typer.Option(
        False,
        "--no-in-place",
        help="Never let a layer overwrite its own input, even where proven safe (planning "
        "and --validate-only).",
    ),
    sample: Path = typer.Option(
        None,
        "--sample",
        help="C,H,W .npy (as compile's --sample): calibrates PTQ as compile does and is "
        "written as the sample input (default: a seeded random one, no calibration).",
    ),
    calibration: Path = typer.Option(
        None, "--calibration", help="N,C,H,W .npy calibrating PTQ (as compile's --calibration)."
    ),
) -> None:
    """Plan processors, data memory, kernels and bias; validate; write YAML + checkpoint + plan."""
    from cnnforge.api import plan as plan_model
    from cnnforge.api.targets import get_target

    target = get_target(device)
    if target.plans == "budget":  # the record says: planned on the float model, as budget
        vendor_only = ai8x_yaml or ai8x_checkpoint or validate_only or weight_bits or allow_overlap
        _plan_budget(target.name, bool(vendor_only), model, device, input_shape, model_arg,
                     checkpoint, output, overwrite)  # fmt: skip
        return
    _check_plannable(target, validate_only, output, overwrite)
    result = plan_model(
        model, target, model_input_shape(model, input_shape), checkpoint=checkpoint,
        weight_bits=parse_weight_bits(weight_bits) if weight_bits is not None else None,
        model_args=parse_model_args(model_arg), sample=sample, calibration=calibration,
        in_place=not no_in_place, ai8x_yaml=ai8x_yaml, ai8x_checkpoint=ai8x_checkpoint,
        allow_overlap=allow_overlap, validate_only=validate_only, output_dir=output,
        overwrite=overwrite,
    )  # fmt: skip
    if validate_only and ai8x_yaml is not None:
        _print_issues(result)
        raise typer.Exit(1 if result.issues else 0)
    _print_summary(result)
    if not validate_only:
        console.print(f"wrote [bold]{output}[/bold]: {len(result.files)} files", highlight=False)


def _check_plannable(
    target: Target, validate_only: bool, output: Path | None, overwrite: bool
) -> None:
    """The target places layers (it has a planner and a writer) and, unless only validating,
    ``-o`` is given and may be written: refused before any planning."""
    if target.plans != "place" or target.planner is None or target.write is None:
        raise InputError(
            f"--device {target.name} has no `cnnforge plan`",
            hint=f"compile it: cnnforge compile -d {target.name}",
        )
    if not validate_only and output is None:
        raise InputError("no output directory", hint="give -o DIR, or --validate-only")
    if not validate_only:
        check_target(output, directory=True, overwrite=overwrite)  # refuse before planning


def _plan_budget(name: str, vendor_only: bool, model: str | None, device: str,
                 input_shape: str | None, model_arg: list[str] | None, checkpoint: Path | None,
                 output: Path | None, overwrite: bool) -> None:  # fmt: skip
    """``plan -d generic:...`` is ``budget``: options of the vendor flow do not apply."""
    from cnnforge.cli.budget import run_budget

    if vendor_only:
        raise InputError(
            f"--device {name} plans a float MODEL: --ai8x-yaml/--ai8x-checkpoint, "
            "--validate-only, --weight-bits and --allow-overlap do not apply",
            hint="see 'cnnforge budget --help'",
        )
    run_budget(model, device, input_shape, model_arg, checkpoint, output=output,
               overwrite=overwrite)  # fmt: skip


def _print_issues(result: PlanResult) -> None:
    _print_summary(result)
    if not result.issues:
        console.print("[green]the plan is valid[/green]")
        return
    table = Table(title=f"{len(result.issues)} issue(s)", title_justify="left")
    for col in ("layer", "rule", "issue"):
        table.add_column(col, overflow="fold")
    for issue in result.issues:
        table.add_row(issue.layer, issue.rule, issue.message)
    console.print(table)


def _print_summary(result: PlanResult) -> None:
    m = result.metrics
    table = Table(title=f"{result.network.name} on {result.plan.device.name}", title_justify="left")
    for col in ("#", "layer", "op", "processors", "output", "in", "out", "gap", "cycles"):
        table.add_column(col)
    for i, (layer, p) in enumerate(zip(result.network.layers, result.plan.placements, strict=True)):
        table.add_row(
            str(i),
            layer.name,
            layer.label(),
            f"{p.in_processors:#018x}",
            f"{p.out_processors:#018x}",
            f"{p.in_offset:#06x}",
            f"{p.out_offset:#06x}",
            str(p.write_gap),
            str(p.cycles or "-"),
        )
    console.print(table)
    console.print(
        f"{m.layers} layers, {m.cycles} cycles (estimated), data high water "
        f"{m.high_water_bytes} B/instance, peak live {m.peak_live_bytes} B, kernel "
        f"{m.kernel_words}/{m.kernel_capacity} words; {result.wall_s:.2f} s",
        highlight=False,
    )
