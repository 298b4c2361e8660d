"""``cnnforge quantize``: PyTorch model + float checkpoint -> cnnforge quantized checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from cnnforge.cli.app import app
from cnnforge.cli.common import (
    console,
    model_arg_option,
    model_input_shape,
    parse_bits_option,
    parse_model_args,
)
from cnnforge.errors import InputError
from cnnforge.targets.max7800x.device import DEFAULT_DEVICE, DEVICE_NAMES

if TYPE_CHECKING:
    from cnnforge.ir import Network


@app.command("quantize")
def quantize(
    model: str = typer.Argument(
        ..., help="path/to/file.py:Name, package.module:Name, or a short name (unet-voc)."
    ),
    input_shape: str = typer.Option(
        None,
        "--input-shape",
        "-i",
        help="Input shape without batch: C,H,W (or C,L for 1-D); shipped models and ONNX files "
        "know theirs.",
    ),
    output: Path = typer.Option(..., "--output", "-o", help="Quantized checkpoint to write."),
    checkpoint: Path = typer.Option(
        None, "--checkpoint", help="Float state_dict to load (weights-only .pth/.pt)."
    ),
    model_arg: list[str] = model_arg_option(),
    weight_bits: list[str] = typer.Option(
        None, "--weight-bits", help="8, 4, 2 or 1 for all layers; LAYER=BITS per layer (repeat)."
    ),
    device: str = typer.Option(DEFAULT_DEVICE, "--device", "-d", help=f"{DEVICE_NAMES}."),
    clip: str = typer.Option("max", "--clip", help="Clipping: max, avgmax, stddev, scale."),
    calibration: Path = typer.Option(
        None, "--calibration", help="int8 .npy inputs (N,C,H,W) to fit activation scales."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o file."),
) -> None:
    """Trace, lower, quantize (PTQ; QAT modules keep their integers) and save."""
    from cnnforge.api import quantize as quantize_model

    quantized = quantize_model(
        model, _input_shape(model, input_shape, calibration), device=device,
        checkpoint=checkpoint, weight_bits=parse_bits_option(weight_bits), clip=clip,
        calibration=calibration, model_args=parse_model_args(model_arg), output=output,
        overwrite=overwrite,
    )  # fmt: skip
    network, scales = quantized.network, quantized.output_exponents
    console.print(summary_table(network))
    for name, e in scales.items():
        if e:
            console.print(f"output {name}: value v means v * 2^{e} / 128", highlight=False)
    console.print(f"wrote [bold]{output}[/bold]", highlight=False)


def _input_shape(
    model: str, input_shape: str | None, calibration: Path | None
) -> tuple[int, ...] | None:
    """``-i``, else a shipped model's own shape, else None for an ONNX file (its own shape;
    docs/onnx.md), which ``--calibration`` cannot be checked against without ``-i``."""
    shape = model_input_shape(model, input_shape)
    if shape is not None:
        return shape
    if not model.lower().endswith(".onnx"):
        raise InputError("MODEL needs --input-shape", hint="e.g. --input-shape 3,64,64")
    if calibration is not None:
        raise InputError("--calibration needs --input-shape", hint="e.g. -i 3,64,64")
    return None


def summary_table(network: Network) -> Table:
    """One row per weight layer: name, op, weight bits, output shift."""
    table = Table(title=f"{network.name}: quantized layers")
    for column in ("layer", "op", "bits", "output_shift", "module"):
        table.add_column(column)
    for layer in network.layers:
        if layer.quant is not None:
            table.add_row(
                layer.name,
                layer.label(),
                str(layer.quant.weight_bits),
                str(layer.quant.output_shift),
                layer.module_path,
            )
    return table
