"""``cnnforge adapt``: a model with ops the device lacks becomes one it runs; the cost measured."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cnnforge.cli.app import app
from cnnforge.cli.common import (
    amp_option,
    console,
    cpu_option,
    gpus_option,
    parse_model_args,
    say_where,
    workers_option,
)
from cnnforge.errors import InputError
from cnnforge.targets.max7800x.device import DEFAULT_DEVICE, DEVICE_NAMES

if TYPE_CHECKING:
    from cnnforge.adapt.run import AdaptResult
    from cnnforge.devices import Capabilities


@app.command("adapt")
def adapt(
    model: str = typer.Argument(..., help="path/to/file.py:Name, package.module:Name or a name."),
    checkpoint: Path = typer.Option(None, "--checkpoint", help="The model's float state_dict."),
    device: str = typer.Option(DEFAULT_DEVICE, "--device", "-d", help=f"{DEVICE_NAMES}."),
    dataset: str = typer.Option("shapes", "--dataset", help="shapes, voc or folder."),
    data: Path = typer.Option(None, "--data", help="Dataset directory (voc, folder)."),
    out: Path = typer.Option(Path("runs/adapt"), "--output", "-o", help="Output directory."),
    model_arg: list[str] = typer.Option(None, "--model-arg", help="key=value (repeatable)."),
    size: int = typer.Option(32, "--size", help="Image side length."),
    epochs: int = typer.Option(30, "--epochs", help="Float distillation epochs."),
    qat_epochs: int = typer.Option(20, "--qat-epochs", help="Quantization-aware epochs."),
    width: str = typer.Option("auto", "--width", help="Hidden-channel multiplier or auto."),
    batch_size: int = typer.Option(32, "--batch-size"),
    lr: float = typer.Option(3e-3, "--lr"),
    seed: int = typer.Option(0, "--seed"),
    train_length: int = typer.Option(1024, "--train-length", help="shapes: training images."),
    val_length: int = typer.Option(256, "--val-length", help="shapes: validation images."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in OUT."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start OUT's run over."),
    cpu: bool = cpu_option(),
    gpus: str = gpus_option(),
    workers: int = workers_option(),
    amp: bool = amp_option(),
) -> None:
    """Replace the ops DEVICE lacks (docs/adapt.md), narrow to fit, distill from the original,
    write OUT/adapted.py, adapted.pth, adapt.json, and print the cost table. Trains on a CUDA
    GPU where one is present, else on the CPU."""
    from cnnforge.adapt.run import adapt_model
    from cnnforge.api.targets import device_for, get_target
    from cnnforge.compute import check_workers, choose_device, default_workers
    from cnnforge.training.loop import TrainConfig
    from cnnforge.training.run import DataSpec

    target = get_target(device)
    device_for(target, "check")
    compute = choose_device(cpu=cpu, gpus=gpus)
    workers = default_workers(compute) if workers is None else check_workers(workers)
    _check_width(width)
    spec = DataSpec(dataset, data, size, train_length, val_length, seed)
    config = TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, amp=amp)
    result = _with_progress(
        epochs + qat_epochs,
        lambda on_epoch, on_step: adapt_model(
            model,
            parse_model_args(model_arg),
            checkpoint,
            target=target,
            data=spec,
            out=out,
            config=config,
            width=width,
            resume=resume,
            qat_epochs=qat_epochs,
            overwrite=overwrite,
            on_epoch=on_epoch,
            on_step=on_step,
            compute=compute,
            workers=workers,
            on_start=say_where("adapting"),
        ),
    )
    _print_result(result, target.device, spec.val_length, out)


def _with_progress(epochs: int, run: Callable[[Any, Any], AdaptResult]) -> AdaptResult:
    """``run(on_epoch, on_step)`` under a transient progress bar over ``epochs`` (float then
    QAT), each epoch's loss and mIoU printed as it ends."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("adapt", total=epochs)

        def on_epoch(r) -> None:
            progress.advance(task)
            progress.console.print(
                f"epoch {r.epoch} ({r.phase}): loss {r.train_loss:.4f}, val mIoU {r.miou:.4f}",
                highlight=False,
            )

        return run(on_epoch, lambda s: progress.update(task, description=s))


def _print_result(result: AdaptResult, dev: Capabilities, images: int, out: Path) -> None:
    """What was replaced, the width chosen, the blocks cut, the scores, and how to compile it."""
    table = Table(title="replacements")
    for col in ("module", "was", "now", "row", "exact"):
        table.add_column(col, overflow="fold")
    for r in result.replacements:
        table.add_row(r.path, r.before, r.after, r.row, "yes" if r.exact else "no")
    console.print(table)
    tries = "; ".join(_try_text(t) for t in result.width_tries)
    capped = "" if result.cap is None else f", hidden layers at most {result.cap} channels"
    console.print(
        f"width {result.width}{capped} (the largest that check passes; tried {tries})",
        highlight=False,
    )
    cuts = [r.path for r in result.replacements if r.row == "depth"]
    if cuts:
        console.print(
            f"depth: {len(cuts)} repeated blocks cut ({', '.join(cuts)}), the fewest that bring "
            f"the layers within {dev.name}'s {dev.max_layers}",
            highlight=False,
            soft_wrap=True,
        )
    console.print(score_table(result.scores, images))
    console.print(f"{result.minutes:.1f} min; {out}/adapted.py, adapted.pth, adapt.json")
    console.print(
        f"compile: cnnforge compile {out}/adapted.py:Adapted --checkpoint {out}/adapted.pth "
        f"--sample {out}/sample.npy -o BUILD --run",
        highlight=False,
        soft_wrap=True,
    )


def _check_width(width: str) -> None:
    """``auto`` or a multiplier in (0, 1]; else InputError (exit 2)."""
    if width == "auto":
        return
    try:
        value = float(width)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise InputError(f"--width {width!r}", hint="auto, or a multiplier in (0, 1] such as 0.5")


def _try_text(t: dict) -> str:
    cap = "" if t["cap"] is None else f" cap {t['cap']}"
    return f"{t['width']}{cap}: {t['why']}"


def score_table(scores: dict, images: int) -> Table:
    """original float | adapted float | QAT-eval | bit-exact: mIoU, pixel acc, Dice (%)."""
    table = Table(title=f"segmentation on the same {images} validation images")
    for col in ("row", "mIoU %", "pixel acc %", "Dice %"):
        table.add_column(col, justify="left" if col == "row" else "right")
    for row, s in scores.items():
        if s is None:
            table.add_row(row, "-", "-", "-")
            continue
        cells = (s["miou"], s["pixel_accuracy"], s["dice"])
        table.add_row(row, *(f"{100 * v:.2f}" for v in cells))
    return table
