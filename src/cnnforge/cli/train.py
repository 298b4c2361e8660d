"""``cnnforge train``: float training then QAT, on one process or under ``torchrun`` (DDP)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from cnnforge.cli.app import app
from cnnforge.cli.common import (
    amp_option,
    batch_progress,
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
    from cnnforge.training.loop import EpochRecord


@app.command("train")
def train(
    cli: typer.Context,
    model: str = typer.Argument(..., help="path/to/file.py:Name, package.module:Name or a name."),
    dataset: str = typer.Option("shapes", "--dataset", help="shapes, voc or folder."),
    data: Path = typer.Option(None, "--data", help="Dataset directory (voc, folder)."),
    out: Path = typer.Option(Path("runs/train"), "--output", "-o", help="Checkpoint directory."),
    old_out: Path = old_name("--out"),
    model_arg: list[str] = typer.Option(None, "--model-arg", help="key=value (repeatable)."),
    size: int = typer.Option(32, "--size", help="Image side length the data is resized to."),
    epochs: int = typer.Option(10, "--epochs"),
    batch_size: int = typer.Option(16, "--batch-size"),
    lr: float = typer.Option(1e-2, "--lr"),
    optimizer: str = typer.Option("adam", "--optimizer", help="adam, adamw or sgd."),
    schedule: str = typer.Option("cosine", "--schedule", help="cosine, step or none."),
    weight_decay: float = typer.Option(0.0, "--weight-decay"),
    seed: int = typer.Option(0, "--seed"),
    fold: int = typer.Option(1, "--fold", help="Space-to-depth factor for the input."),
    qat_policy: Path = typer.Option(
        None, "--qat-policy", help="qat_policy.yaml (start_epoch, weight_bits, overrides)."
    ),
    no_qat: bool = typer.Option(False, "--no-qat", help="Float training only."),
    train_length: int = typer.Option(1024, "--train-length", help="shapes: training images."),
    val_length: int = typer.Option(256, "--val-length", help="shapes: validation images."),
    resume: bool = typer.Option(False, "--resume", help="Continue from OUT/last.pth."),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Start again in an existing OUT that cnnforge train wrote."
    ),
    cpu: bool = cpu_option(),
    gpus: str = gpus_option(),
    workers: int = workers_option(),
    amp: bool = amp_option(),
) -> None:
    """Train MODEL on a segmentation dataset: float phase, then QAT from the start_epoch; on a
    CUDA GPU where one is present, else on the CPU."""
    from cnnforge.api import train as train_model
    from cnnforge.compute import choose_device, parse_gpus
    from cnnforge.errors import DistributedError
    from cnnforge.training.distributed import init_from_env, local_rank, peer_failure, shutdown

    out = renamed(cli, "out", "old_out")
    device = choose_device(cpu=cpu, gpus=gpus, local_rank=local_rank())  # before any work
    ctx = init_from_env(device, parse_gpus(gpus))
    try:
        with batch_progress() as on_batch:  # on a terminal only
            history = train_model(
                model, out, dataset=dataset, data=data, size=size, epochs=epochs,
                batch_size=batch_size, lr=lr, optimizer=optimizer, schedule=schedule,
                weight_decay=weight_decay, seed=seed, fold=fold, qat=not no_qat,
                qat_policy=qat_policy, train_length=train_length, val_length=val_length,
                resume=resume, overwrite=overwrite, model_args=parse_model_args(model_arg),
                on_epoch=_print_epoch if ctx.is_main else None, cpu=cpu, gpus=gpus,
                workers=workers, amp=amp, on_batch=on_batch,
                on_start=say_where("training", ctx.world_size) if ctx.is_main else None,
            )  # fmt: skip
    except Exception as exc:  # a rank that died ends the others: say so once, no traceback
        lost = peer_failure(exc) if ctx.world_size > 1 else None
        if lost is None:
            raise
        raise DistributedError(f"lost contact with another rank: {lost}") from None
    finally:
        shutdown()
    if ctx.is_main and history:
        _print_best(history, out)


def _print_best(history: list[EpochRecord], out: Path) -> None:
    """The epoch best.pth holds (the best QAT epoch, else the best float one)."""
    qat_epochs = [r for r in history if r.phase == "qat"]
    best = max(qat_epochs or history, key=lambda r: r.miou)
    console.print(
        f"best mIoU {best.miou:.4f} at epoch {best.epoch} ({best.phase}); "
        f"checkpoints in {out}/ (last.pth, best.pth)",
        highlight=False,
    )


def _print_epoch(record: EpochRecord) -> None:
    table = Table(show_header=record.epoch == 0, box=None, pad_edge=False)
    for col in ("epoch", "phase", "train loss", "val loss", "pixel acc", "mIoU", "lr", "train s"):
        table.add_column(col, justify="right", width=10)
    table.add_row(
        str(record.epoch),
        record.phase,
        f"{record.train_loss:.4f}",
        f"{record.val_loss:.4f}",
        f"{record.pixel_accuracy:.4f}",
        f"{record.miou:.4f}",
        f"{record.lr:.2e}",
        f"{record.seconds:.1f}",
    )
    console.print(table)
