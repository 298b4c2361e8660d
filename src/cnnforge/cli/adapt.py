"""``cnnforge adapt``: a model with ops the device lacks becomes one it runs; the cost measured."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cnnforge.api.workflows import ADAPT_EPOCHS as EPOCHS
from cnnforge.api.workflows import ADAPT_QAT_EPOCHS as QAT_EPOCHS
from cnnforge.cli.app import app
from cnnforge.cli.common import (
    amp_option,
    batch_progress,
    console,
    cpu_option,
    gpus_option,
    parse_model_args,
    say_where,
    workers_option,
)
from cnnforge.targets.max7800x.device import DEFAULT_DEVICE, DEVICE_NAMES

if TYPE_CHECKING:
    from cnnforge.adaptation.run import AdaptResult
    from cnnforge.api.results import Adaptation


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
    epochs: int = typer.Option(
        EPOCHS, "--epochs", help="Float distillation: at most N epochs (ends on a plateau)."
    ),
    qat_epochs: int = typer.Option(
        QAT_EPOCHS, "--qat-epochs", help="Quantization-aware: at most N epochs (ends on a plateau)."
    ),
    width: str = typer.Option(
        "auto",
        "--width",
        help="Hidden-channel multiplier (0 to 8), or auto: the widest from 4x down that fits.",
    ),
    batch_size: int = typer.Option(32, "--batch-size"),
    lr: float = typer.Option(3e-3, "--lr"),
    seed: int = typer.Option(0, "--seed"),
    train_length: int = typer.Option(1024, "--train-length", help="shapes: training images."),
    val_length: int = typer.Option(256, "--val-length", help="shapes: validation images."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in OUT."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start OUT's run over."),
    allow_untrained: bool = typer.Option(
        False, "--allow-untrained", help="Distill from MODEL without --checkpoint (a dry run)."
    ),
    plateau: bool = typer.Option(
        True,
        "--plateau/--no-plateau",
        help="End each phase on a plateau; --no-plateau: exactly --epochs and --qat-epochs "
        "(a cosine schedule over them).",
    ),
    cpu: bool = cpu_option(),
    gpus: str = gpus_option(),
    workers: int = workers_option(),
    amp: bool = amp_option(),
) -> None:
    """Replace the ops DEVICE lacks (docs/adapt.md), widen or narrow to fit, distill from the
    original, write OUT/adapted.py, adapted.pth, adapt.json, and print the cost table. Trains
    on a CUDA GPU where one is present, else on the CPU."""
    from cnnforge.api import adapt as adapt_model

    def run(on_epoch: Any, on_step: Any, on_try: Any, on_batch: Any) -> Adaptation:
        return adapt_model(
            model, out, checkpoint=checkpoint, device=device, dataset=dataset, data=data,
            size=size, epochs=epochs, qat_epochs=qat_epochs, width=width,
            batch_size=batch_size, lr=lr, seed=seed, train_length=train_length,
            val_length=val_length, resume=resume, overwrite=overwrite,
            allow_untrained=allow_untrained, plateau=plateau,
            model_args=parse_model_args(model_arg), on_epoch=on_epoch, on_step=on_step,
            on_try=on_try, on_batch=on_batch,
            cpu=cpu, gpus=gpus, workers=workers, amp=amp, on_start=say_where("adapting"),
        )  # fmt: skip

    result = _with_progress(epochs + qat_epochs, run)
    _print_result(result.record, device, val_length, out)


def _with_progress(epochs: int, run: Callable[..., Adaptation]) -> Adaptation:
    """``run(on_epoch, on_step, on_try, on_batch)``: each width tried and each epoch's loss,
    mIoU and rate printed as it ends; on a terminal also a transient bar over at most
    ``epochs`` (float then QAT; a plateau ends each early) and the running epoch's batches
    (piped, a progress display would leave a blank line, even before a one-line error)."""

    def on_try(t: dict) -> None:
        console.print(f"width {try_text(t)}", highlight=False, markup=False)

    if not console.is_terminal:
        return run(_print_epoch, lambda _: None, on_try, None)
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
            _print_epoch(r)

        with batch_progress(progress) as on_batch:
            return run(on_epoch, lambda s: progress.update(task, description=s), on_try, on_batch)


def _print_epoch(r) -> None:
    console.print(
        f"epoch {r.epoch} ({r.phase}): loss {r.train_loss:.4f}, val mIoU {r.miou:.4f}, "
        f"lr {r.lr:.2e}",
        highlight=False,
    )


def _print_result(result: AdaptResult, device: str, images: int, out: Path) -> None:
    """What was replaced, the width chosen, the blocks cut, the scores, the result's size and
    latency, and how to compile it."""
    table = Table(title="replacements")
    for col in ("module", "was", "now", "row", "exact"):
        table.add_column(col, overflow="fold")
    for r in result.replacements:
        table.add_row(r.path, r.before, r.after, r.row, "yes" if r.exact else "no")
    console.print(table)
    capped = "" if result.cap is None else f", hidden layers at most {result.cap} channels"
    tried = len(result.width_tries)
    console.print(
        f"width {result.width:g}{capped}: the widest that check passes ({tried} tried)",
        highlight=False,
    )
    cuts = [r.path for r in result.replacements if r.row == "depth"]
    if cuts:
        console.print(
            f"depth: {len(cuts)} repeated blocks cut ({', '.join(cuts)}), the fewest that bring "
            f"the layers within {device}'s",
            highlight=False,
            soft_wrap=True,
        )
    runs = result.epochs
    console.print(
        f"epochs: {runs.get('distill', 0)} distilling, {runs.get('qat', 0)} quantization-aware "
        f"({'each to its plateau or cap' if result.plateau else 'as given: no plateau rule'})",
        highlight=False,
    )
    console.print(score_table(result.scores, images))
    console.print(size_line(result.size), highlight=False, soft_wrap=True)
    console.print(f"{result.minutes:.1f} min; {out}/adapted.py, adapted.pth, adapt.json")
    console.print(
        f"compile: cnnforge compile {out}/adapted.py:Adapted --checkpoint {out}/adapted.pth "
        f"--sample {out}/sample.npy -o BUILD --run",
        highlight=False,
        soft_wrap=True,
    )


def size_line(size: dict) -> str:
    """The result's parameters, weight memory and predicted latency (the original's
    parameters beside them)."""
    if "params" not in size:
        return "size: not measured"
    text = (
        f"size: {size['params']:,} parameters ({size['original_params']:,} in the original), "
        f"{size['weight_bytes']:,} bytes of weights"
    )
    if "cycles" in size:
        relative = size.get("latency_model") != "vendor"
        unit = " (relative: the MAX78000's model)" if relative else ""
        text += (
            f", kernel memory {size['kernel_words']:,} of {size['kernel_capacity']:,} words; "
            f"predicted latency {size['cycles']:,} cycles, {size['latency_us']:,.0f} us{unit}"
        )
    elif "latency" in size:
        text += f"; latency {size['latency']}"
    return text


def try_text(t: dict) -> str:
    """One width try: the multiplier, the cap, the parameters, and whether check passes."""
    cap = "" if t["cap"] is None else f", hidden layers at most {t['cap']} channels"
    params = f", {t['params']:,} parameters" if "params" in t else ""
    verdict = "fits" if t["fits"] else f"does not fit ({t['why']})"
    return f"{t['width']:g}{cap}{params}: {verdict}"


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
