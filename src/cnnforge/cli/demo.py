"""``cnnforge demo``: offline, no arguments — evaluate, compile, self-test, report."""

from __future__ import annotations

from pathlib import Path

import typer

from cnnforge.cli.app import app
from cnnforge.cli.common import console


@app.command("demo")
def demo(
    output: Path = typer.Option(Path("cnnforge-demo"), "--output", "-o", help="Output directory."),
    train: bool = typer.Option(False, "--train", help="Retrain the demo model from scratch."),
    overwrite: bool = typer.Option(
        True, "--overwrite/--no-overwrite", help="Replace an existing demo output directory."
    ),
    run_c: bool = typer.Option(True, "--run/--no-run", help="Build and run the C self-test."),
) -> None:
    """Offline end-to-end demo: float vs QAT-eval vs bit-exact mIoU, compile, C self-test."""
    from cnnforge.api import demo as run_demo
    from cnnforge.cli.evaluate import agreement_line, evaluation_table

    if train:
        console.print("[bold]training[/bold] the demo U-Net on shapes (from scratch)")
    result = run_demo(
        output, train=train, run=run_c, overwrite=overwrite,
        on_step=lambda name, i, n: console.print(f"  [{i + 1}/{n}] {name}", highlight=False),
        on_epoch=lambda r: console.print(
            f"  epoch {r.epoch} {r.phase}: loss {r.train_loss:.3f} mIoU {r.miou:.3f}",
            highlight=False,
        ),
    )  # fmt: skip
    console.print(evaluation_table(result.evaluation))
    console.print(agreement_line(result.evaluation), highlight=False)
    selftest = result.selftest
    if selftest is not None:
        verdict = "PASS" if selftest.passed else "FAIL"
        console.print(f"C self-test: {verdict} ({selftest.output.strip()})", highlight=False)
    console.print(f"wrote {output}/ (compile/, masks.png, README.md)", highlight=False)
