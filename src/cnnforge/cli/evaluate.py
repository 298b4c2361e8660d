"""``cnnforge evaluate``: float, QAT-eval and bit-exact simulation of one model, side by side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from cnnforge.cli.app import app
from cnnforge.cli.common import (
    console,
    cpu_option,
    gpus_option,
    old_name,
    parse_model_args,
    renamed,
    say_where,
    workers_option,
)

if TYPE_CHECKING:
    from cnnforge.training.evaluate import Evaluation


@app.command("evaluate")
def evaluate(
    cli: typer.Context,
    model: str = typer.Argument(..., help="path/to/file.py:Name, package.module:Name or a name."),
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Trained weights (train's .pth)."),
    dataset: str = typer.Option("shapes", "--dataset", help="shapes, voc or folder."),
    data: Path = typer.Option(None, "--data", help="Dataset directory (voc, folder)."),
    split: str = typer.Option("val", "--split", help="Split to evaluate (val, test, train)."),
    model_arg: list[str] = typer.Option(None, "--model-arg", help="key=value (repeatable)."),
    size: int = typer.Option(32, "--size", help="Image side length."),
    fold: int = typer.Option(1, "--fold", help="Space-to-depth factor of the input."),
    val_length: int = typer.Option(
        256, "--val-length", help="shapes: images scored (of --split; train's --val-length)."
    ),
    length: int = old_name("--length"),
    batch_size: int = typer.Option(64, "--batch-size"),
    seed: int = typer.Option(0, "--seed", help="shapes: dataset seed."),
    cpu: bool = cpu_option(),
    gpus: str = gpus_option(),
    workers: int = workers_option(),
) -> None:
    """Score MODEL as float, as QAT-eval and bit-exact in the simulator, on the same images;
    on a CUDA GPU where one is present, else on the CPU (the same numbers either way)."""
    from cnnforge.api import evaluate as evaluate_model

    result = evaluate_model(
        model, checkpoint, dataset=dataset, data=data, split=split, size=size, fold=fold,
        val_length=renamed(cli, "val_length", "length"), batch_size=batch_size, seed=seed,
        model_args=parse_model_args(model_arg), cpu=cpu, gpus=gpus, workers=workers,
        on_start=say_where("evaluating"),
    )  # fmt: skip
    console.print(evaluation_table(result))
    if result.float_only:
        console.print(
            f"qat-eval and bit-exact: not scored: {result.absent['bit-exact']}",
            highlight=False, markup=False,
        )  # fmt: skip
        return
    console.print(agreement_line(result), highlight=False)


def evaluation_table(result: Evaluation) -> Table:
    """One row per mode: pixel accuracy, mIoU and mean Dice in percent."""
    table = Table(title=f"segmentation on {result.images} images")
    for col in ("mode", "pixel acc %", "mIoU %", "mean Dice %"):
        table.add_column(col, justify="right" if col != "mode" else "left")
    for mode, s in result.scores.items():
        table.add_row(
            mode, f"{100 * s.pixel_accuracy:.2f}", f"{100 * s.miou:.2f}", f"{100 * s.mean_dice:.2f}"
        )
    return table


def agreement_line(result: Evaluation) -> str:
    if result.outputs_differing == 0:
        return f"QAT-eval == bit-exact on all {result.outputs_compared:,} output values"
    return (
        f"QAT-eval and bit-exact differ on {result.outputs_differing:,} of "
        f"{result.outputs_compared:,} output values"
    )
