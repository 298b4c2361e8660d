"""``cnnforge analyze``: per-layer params, MACs, receptive field and memory of a PyTorch model."""

from __future__ import annotations

from pathlib import Path

import typer

from cnnforge.cli.app import app
from cnnforge.cli.common import console, parse_model_args, parse_shape
from cnnforge.outputs import atomic_outputs


@app.command("analyze")
def analyze(
    model: str = typer.Argument(
        None, help="path/to/file.py:Name, package.module:Name, or a short name (unet-voc)."
    ),
    input_shape: str = typer.Option(
        None,
        "--input-shape",
        "-i",
        help="Input shape without batch: C,H,W (or C,L for 1-D); shipped models know theirs.",
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
    ai8x_yaml: Path = typer.Option(
        None, "--ai8x-yaml", help="Analyze a vendor network YAML (with --ai8x-checkpoint)."
    ),
    ai8x_checkpoint: Path = typer.Option(
        None, "--ai8x-checkpoint", help="The vendor quantized checkpoint of --ai8x-yaml."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing output files."),
) -> None:
    """Per-layer parameters, MACs, receptive field, activation and parameter memory, totals."""
    from cnnforge.analysis import analyze_network
    from cnnforge.analysis.render import to_json, to_markdown, to_table, totals_lines
    from cnnforge.frontend import load_network
    from cnnforge.models import default_input_shape, model_names
    from cnnforge.pipeline.sources import network_for_cli

    shape = parse_shape(input_shape) if input_shape else None
    if shape is None and model in model_names():  # a shipped model knows its input
        shape = default_input_shape(model)
    network = network_for_cli(model, shape, ai8x_yaml, ai8x_checkpoint)
    if network is None:
        network = load_network(model, shape, parse_model_args(model_arg), checkpoint)
    result = analyze_network(network, count=count, weight_bits=weight_bits)
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
