"""``cnnforge analyze``: per-layer params, MACs, receptive field and memory of a PyTorch model."""

from __future__ import annotations

from pathlib import Path

import typer

from cnnforge.cli.app import app
from cnnforge.cli.common import (
    ai8x_checkpoint_option,
    console,
    model_arg_option,
    model_argument,
    model_input_shape,
    parse_model_args,
)
from cnnforge.outputs import atomic_outputs


@app.command("analyze")
def analyze(
    model: str = model_argument(),
    input_shape: str = typer.Option(
        None,
        "--input-shape",
        "-i",
        help="Input shape without batch: C,H,W (or C,L for 1-D); shipped models know theirs.",
    ),
    model_arg: list[str] = model_arg_option(),
    checkpoint: Path = typer.Option(
        None, "--checkpoint", help="state_dict to load (weights-only .pth/.pt)."
    ),
    count: str = typer.Option(
        "true", "--count", help="MAC counting: 'true' multiply-accumulates or 'thop' (thop 0.1.x)."
    ),
    json_out: str = typer.Option(
        None, "--json", help="Write the analysis as JSON to FILE ('-' for stdout)."
    ),
    markdown_out: str = typer.Option(
        None, "--markdown", help="Write a Markdown report to FILE ('-' for stdout)."
    ),
    weight_bits: int = typer.Option(
        8, "--weight-bits", help="Weight width for the parameter memory (8, 4, 2, 1; -1 binary)."
    ),
    ai8x_yaml: Path = typer.Option(
        None, "--ai8x-yaml", help="Analyze a vendor network YAML (with --ai8x-checkpoint)."
    ),
    ai8x_checkpoint: Path = ai8x_checkpoint_option(),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing output files."),
) -> None:
    """Per-layer parameters, MACs, receptive field, activation and parameter memory, totals."""
    from cnnforge.analysis.render import to_json, to_markdown, to_table, totals_lines
    from cnnforge.api import analyze as analyze_model

    result = analyze_model(
        model, model_input_shape(model, input_shape), count=count, weight_bits=weight_bits,
        model_args=parse_model_args(model_arg), checkpoint=checkpoint, ai8x_yaml=ai8x_yaml,
        ai8x_checkpoint=ai8x_checkpoint,
    ).record  # fmt: skip
    _write([(json_out, to_json(result)), (markdown_out, to_markdown(result))], overwrite)
    if "-" in (json_out, markdown_out):
        return
    # Piped output is not cut to 80 columns: the full table, for files and other tools.
    out = console  # unwrapped when not a terminal (cli/common.py)
    out.print(to_table(result))
    for label, value in totals_lines(result):
        out.print(f"[bold]{label}[/bold]: {value}", highlight=False)


def _write(texts: list[tuple[str | None, str]], overwrite: bool) -> None:
    """Each requested text to stdout ('-') or its file; the files appear together or not at all."""
    with atomic_outputs() as staged:
        for target, text in texts:
            if target == "-":
                typer.echo(text, nl=False)
            elif target is not None:
                staged.file(Path(target), overwrite).write_text(text, encoding="utf-8")
