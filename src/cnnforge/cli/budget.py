"""``cnnforge budget``: plan a float model for a generic accelerator (on-chip budget + DDR).

``cnnforge budget MODEL -d generic:onchip=3MiB,act_bytes=2 -i 3,224,224`` prints the schedule,
the blobs (interval, on-chip range or DDR), the tiled schedule (fused groups on row bands), the
totals (ops as xfDNN counts them, the least on-chip memory needing no DDR transfer and where
its peak is, DDR bytes at the budget beside a lower bound, the tiled plan beside its bound)
and the DDR-bytes-against-budget curve of both plans. ``--json`` writes the JSON document,
``-o DIR`` writes generic-plan.json, generic-plan.txt, ddr-vs-budget.svg and report.html.
``--accuracy`` quantizes to the target's integers and simulates them bit-exactly (SNR against
float); with ``--dataset shapes`` also float and integer pixel accuracy / mIoU on shapes val
images, as ``cnnforge evaluate`` reports them for the MAX7800x.
``cnnforge plan MODEL -d generic:...`` runs the same.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from cnnforge.cli.app import app
from cnnforge.cli.common import (
    console,
    err_console,
    make_console,
    model_arg_option,
    model_argument,
    old_name,
    parse_model_args,
    parse_shape,
    renamed,
)
from cnnforge.errors import InputError
from cnnforge.outputs import atomic_output_file


@app.command("budget")
def budget(
    cli: typer.Context,
    model: str = model_argument(),
    device: str = typer.Option(
        "generic",
        "--device",
        "-d",
        help="generic[:onchip=3MiB,act_bytes=2,weight_bytes=2,ddr=4GiB,weight_onchip=0,"
        "macs_per_cycle=1024,ddr_bytes_per_cycle=64,inplace=1,halo=keep|recompute]",
    ),
    input_shape: str = typer.Option(
        None, "--input-shape", "-i", help="C,H,W (or C,L); shipped models know theirs."
    ),
    model_arg: list[str] = model_arg_option(),
    checkpoint: Path = typer.Option(None, "--checkpoint", help="state_dict to load."),
    json_out: str = typer.Option(None, "--json", help="Write the plan as JSON to FILE ('-')."),
    output: Path = typer.Option(None, "--output", "-o", help="Write the report files to DIR."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o."),
    points: int = typer.Option(24, "--points", help="Budgets sampled on the curve (>= 2)."),
    accuracy: bool = typer.Option(
        False, "--accuracy", help="Quantize to the target's integers, simulate, compare with float."
    ),
    dataset: str = typer.Option(
        None, "--dataset", help="With --accuracy: also score segmentation on 'shapes' val images."
    ),
    val_length: int = typer.Option(
        64, "--val-length", help="--dataset shapes: validation images scored."
    ),
    length: int = old_name("--length"),
) -> None:
    """Schedule, blob allocation, DDR spill traffic, ops and the budget curve (generic target)."""
    run_budget(
        model,
        device,
        input_shape,
        model_arg,
        checkpoint,
        json_out,
        output,
        overwrite,
        points,
        accuracy,
        (dataset, renamed(cli, "val_length", "length")),
    )


def run_budget(
    model: str | None,
    device: str,
    input_shape: str | None,
    model_arg: list[str] | None,
    checkpoint: Path | None,
    json_out: str | None = None,
    output: Path | None = None,
    overwrite: bool = False,
    points: int = 24,
    accuracy: bool = False,
    scored: tuple[str | None, int] = (None, 0),
) -> None:
    """The ``budget`` command's work (``plan -d generic:...`` calls it too)."""
    from cnnforge.api import budget as budget_plan
    from cnnforge.targets.generic import report
    from cnnforge.targets.generic.run import write_budget

    if scored[0] is not None and (scored[0] != "shapes" or not accuracy or scored[1] < 1):
        raise InputError(
            f"--dataset {scored[0]} --length {scored[1]}",
            hint="--dataset shapes goes with --accuracy and a --length of at least 1",
        )
    shape = parse_shape(input_shape) if input_shape else None
    planned = budget_plan(
        model, device, shape, model_args=parse_model_args(model_arg), checkpoint=checkpoint,
        points=points,
    )  # fmt: skip
    plan = planned.plan
    images = None if scored[0] is None else scored[1]  # --dataset shapes: images scored
    lines = []  # everything that can fail runs before the first line is printed
    if accuracy:
        lines = _accuracy_lines(model, checkpoint, planned.network, plan.target, images)
    if json_out not in (None, "-"):
        with atomic_output_file(Path(json_out)) as tmp:
            tmp.write_text(report.to_json(plan), encoding="utf-8")
    if output is not None:
        write_budget(plan, output, overwrite, _write_text)
    if json_out == "-":
        typer.echo(report.to_json(plan), nl=False)
    else:
        _print(console, plan)  # unwrapped when not a terminal (cli/common.py)
    for line in lines:
        (err_console if json_out == "-" else console).print(line, highlight=False, markup=False)
    if output is not None and json_out != "-":
        console.print(f"wrote [bold]{output}[/bold]: 4 files", highlight=False)


def _write_text(plan, path: Path) -> None:
    """generic-plan.txt: the tables as the terminal shows them, unfolded."""
    with path.open("w", encoding="utf-8") as fh:
        _print(make_console(file=fh), plan)


def _accuracy_lines(
    model: str | None, checkpoint: Path | None, network, target, images: int | None
) -> list[str]:
    """``--accuracy``'s lines: the integers against float and, given ``images``, the scores
    on that many shapes val images."""
    from cnnforge.frontend import untrained_note

    untrained_note(model, checkpoint, "the accuracy figures")
    lines = [_accuracy_line(network, target)]
    if images is not None:
        lines.append(_scores_line(network, target, images))
    return lines


def _accuracy_line(network, target) -> str:
    """Quantize to the target's integers, simulate bit-exactly, compare with float (one line)."""
    from cnnforge.targets.generic.integer import quantized_accuracy

    acc = quantized_accuracy(network, target)
    sem = acc.semantics
    return (
        f"quantized (int{sem.act_bits} activations, int{sem.weight_bits} weights, "
        f"int{sem.acc_bits} accumulator; bit-exact integer simulation) against float on a "
        f"seeded random input: SNR {acc.snr_db:.1f} dB, max |error| {acc.max_abs_error:.3g}"
    )


def _scores_line(network, target, length: int) -> str:
    """Float and integer segmentation scores on ``length`` shapes val images (one line)."""
    import torch

    from cnnforge.targets.generic.scores import evaluate_generic
    from cnnforge.training.datasets import ShapesDataset

    shape = network.input_shape
    if len(shape) != 3 or shape[0] != 3 or shape[1] != shape[2]:
        raise InputError(
            f"--dataset shapes needs a 3,N,N input, not {shape}", hint="e.g. -i 3,32,32"
        )
    classes = network.shape_of(network.outputs[0])[0]
    train = ShapesDataset("train", 8, shape[1])
    calibration = torch.stack([train[i][0] for i in range(8)]).double().numpy() / 128
    result = evaluate_generic(
        network, target, ShapesDataset("val", length, shape[1]), calibration, classes
    )
    f, i = result.scores["float"], result.scores["integer"]
    return (
        f"shapes val, {result.images} images (calibrated on 8 train images): float pixel acc "
        f"{100 * f.pixel_accuracy:.2f}% mIoU {100 * f.miou:.2f}%, integer pixel acc "
        f"{100 * i.pixel_accuracy:.2f}% mIoU {100 * i.miou:.2f}%; arg-max agrees on "
        f"{100 * result.pixels_agreeing / result.pixels:.3f}% of pixels"
    )


def _print(out: Console, plan) -> None:
    from cnnforge.targets.generic import report

    out.print(report.steps_table(plan))
    out.print(report.blobs_table(plan))
    out.print(report.groups_table(plan))
    out.print(report.curve_table(plan))
    for label, value in report.summary_lines(plan):
        out.print(Text.assemble((label, "bold"), ": ", value), highlight=False)
