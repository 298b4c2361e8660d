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

from cnnforge.cli import app
from cnnforge.cli.common import console, parse_model_args, parse_shape, parse_weight_bits
from cnnforge.errors import InputError
from cnnforge.outputs import check_target

if TYPE_CHECKING:
    from cnnforge.plan.deploy import PlanResult


@app.command("plan")
def plan(
    model: str = typer.Argument(
        None, help="path/to/file.py:Name, package.module:Name, or a short name (unet-large)."
    ),
    device: str = typer.Option(
        "MAX78000", "--device", "-d", help="MAX78000, MAX78002 or generic:onchip=3MiB,..."
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
    model_arg: list[str] = typer.Option(
        None, "--model-arg", help="Constructor argument key=value (repeatable)."
    ),
    ai8x_yaml: Path = typer.Option(None, "--ai8x-yaml", help="A vendor network YAML."),
    ai8x_checkpoint: Path = typer.Option(
        None, "--ai8x-checkpoint", help="The vendor quantized checkpoint of --ai8x-yaml."
    ),
    allow_overlap: bool = typer.Option(
        False, "--allow-overlap", help="Accept what the vendor's --overlap-data accepts."
    ),
    no_in_place: bool = typer.Option(
        False,
        "--no-in-place",
        help="Never let a layer overwrite its own input, even where proven safe (planning "
        "and --validate-only).",
    ),
) -> None:
    """Plan processors, data memory, kernels and bias; validate; write YAML + checkpoint + plan."""
    from cnnforge.devices import get_device
    from cnnforge.plan import deploy
    from cnnforge.targets.generic.target import is_generic

    if is_generic(device):  # an on-chip budget + DDR, planned on the float model (budget.py)
        from cnnforge.cli.budget import run_budget

        if ai8x_yaml or ai8x_checkpoint or validate_only or weight_bits or allow_overlap:
            raise InputError(
                "--device generic plans a float MODEL: --ai8x-yaml/--ai8x-checkpoint, "
                "--validate-only, --weight-bits and --allow-overlap do not apply",
                hint="see 'cnnforge budget --help'",
            )
        run_budget(model, device, input_shape, model_arg, checkpoint, output=output,
                   overwrite=overwrite)  # fmt: skip
        return
    dev = get_device(device)
    shape = _input_shape(model, input_shape)
    if not validate_only and output is None:
        raise InputError("no output directory", hint="give -o DIR, or --validate-only")
    if not validate_only:
        check_target(output, directory=True, overwrite=overwrite)  # refuse before planning
    if ai8x_yaml is not None or ai8x_checkpoint is not None:
        result = _vendor(
            model, shape, ai8x_yaml, ai8x_checkpoint, dev, allow_overlap, validate_only, no_in_place
        )
        if validate_only:
            _print_issues(result)
            raise typer.Exit(1 if result.issues else 0)
    else:
        result = _planned_model(model, shape, model_arg, checkpoint, dev, weight_bits, no_in_place)
    _print_summary(result)
    if validate_only:
        return
    written = deploy.write_outputs(result, dev, output, overwrite)
    console.print(f"wrote [bold]{output}[/bold]: {len(written.files)} files", highlight=False)


def _input_shape(model: str | None, text: str | None) -> tuple[int, ...] | None:
    """``--input-shape``, else the shipped model's own shape, else None."""
    from cnnforge.models import default_input_shape, model_names

    if text:
        return parse_shape(text)
    return default_input_shape(model) if model in model_names() else None


def _planned_model(
    model, shape, model_arg, checkpoint, dev, weight_bits, no_in_place
) -> PlanResult:
    """Quantize a PyTorch MODEL for ``dev`` and plan it (the plan must validate)."""
    from cnnforge.plan import deploy

    if model is None or shape is None:
        raise InputError("MODEL and --input-shape are needed", hint="e.g. unet-large -i 48,88,88")
    bits = parse_weight_bits(weight_bits) if weight_bits is not None else None
    network = deploy.quantized_network(
        model, shape, parse_model_args(model_arg), checkpoint, dev, bits
    )
    return deploy.plan_and_validate(network, dev, not no_in_place)


def _vendor(
    model, shape, yaml_path, ckpt, dev, allow_overlap, validate_only, no_in_place
) -> PlanResult:
    from cnnforge.frontend.ai8x import load_ai8x
    from cnnforge.plan import deploy

    if yaml_path is None or ckpt is None:
        raise InputError("--ai8x-yaml and --ai8x-checkpoint must be given together")
    if model is not None:
        raise InputError(f"give MODEL ({model}) or --ai8x-yaml, not both")
    network, vendor_plan = load_ai8x(
        yaml_path, ckpt, shape, device=dev.name, overlap_data=allow_overlap
    )
    if validate_only:
        return deploy.validate_imported(network, vendor_plan, dev, allow_overlap, not no_in_place)
    return deploy.plan_and_validate(network, dev, not no_in_place)


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
    table = Table(title=f"{result.network.name} on {result.plan.device}", title_justify="left")
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
