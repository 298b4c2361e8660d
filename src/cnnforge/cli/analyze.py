"""``cnnforge analyze``: per-layer params, MACs, receptive field and memory of a PyTorch model."""

from __future__ import annotations

from pathlib import Path

import typer

from cnnforge.analysis import analyze_network
from cnnforge.analysis.render import to_json, to_markdown, to_table, totals_lines
from cnnforge.cli import app
from cnnforge.cli.common import console, parse_model_args, parse_shape
from cnnforge.frontend import load_network
from cnnforge.outputs import atomic_output_file


@app.command("analyze")
def analyze(
    model: str = typer.Argument(
        ..., help="path/to/file.py:Name, package.module:Name, or a short name (unet-voc)."
    ),
    input_shape: str = typer.Option(
        ..., "--input-shape", "-i", help="Input shape without batch: C,H,W (or C,L for 1-D)."
    ),
    model_arg: list[str] = typer.Option(
        None, "--model-arg", help="Constructor argument key=value (repeatable)."
    ),
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
) -> None:
    """Per-layer parameters, MACs, receptive field, activation and parameter memory, totals."""
    network = load_network(model, parse_shape(input_shape), parse_model_args(model_arg), checkpoint)
    result = analyze_network(network, count=count, weight_bits=weight_bits)
    _write(json_out, to_json(result))
    _write(markdown_out, to_markdown(result))
    if "-" in (json_out, markdown_out):
        return
    console.print(to_table(result))
    for label, value in totals_lines(result):
        console.print(f"[bold]{label}[/bold]: {value}", highlight=False)


def _write(target: str | None, text: str) -> None:
    if target is None:
        return
    if target == "-":
        typer.echo(text, nl=False)
        return
    with atomic_output_file(Path(target)) as tmp:
        tmp.write_text(text, encoding="utf-8")
