"""``cnnforge inspect FIRMWARE_DIR``: read a MAX7800x firmware folder (never compiled or run) and
explain the network its set-up configures, one row per hardware layer (docs/firmware.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.table import Table

from cnnforge.cli.app import app
from cnnforge.cli.common import console


def write_pair(network, plan, yaml_out: Path, arch: str) -> Path:
    """The recovered network as a vendor pair: ``yaml_out`` and its checkpoint beside it
    (``.pth.tar`` for ``.yaml``), with cnnforge's YAML and checkpoint writers."""
    from cnnforge.targets.max7800x.ai8x_checkpoint_writer import write_checkpoint
    from cnnforge.targets.max7800x.ai8x_yaml_writer import write_yaml

    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in arch) or "decoded"
    ckpt = yaml_out.with_suffix(".pth.tar")
    write_yaml(network, plan, yaml_out, arch=name, dataset=name)
    write_checkpoint(network, ckpt, arch=name)
    return ckpt


@app.command("inspect")
def inspect_command(
    folder: Path = typer.Argument(..., help="Firmware folder: cnn.c, weights.h, main.c, ..."),
    device: str = typer.Option(
        None, "--device", "-d", help="MAX78000 or MAX78002 (default: the part cnn.c addresses)."
    ),
    json_out: str = typer.Option(None, "--json", help="Write every field as JSON ('-': stdout)."),
    yaml_out: Path = typer.Option(
        None, "--yaml", help="Write the equivalent vendor YAML (and its checkpoint OUT.pth.tar)."
    ),
) -> None:
    """Decode the network a firmware folder configures: a row per layer, weights and biases."""
    from cnnforge.api import inspect as inspect_folder

    found = inspect_folder(folder, device or "auto")
    if yaml_out is not None:
        from cnnforge.targets.max7800x.firmware_read import read_firmware

        decoded = read_firmware(folder, device)
        write_pair(decoded.network, decoded.plan, yaml_out, folder.resolve().name)
    if json_out is not None:
        text = json.dumps(found.to_dict())
        if json_out == "-":
            sys.stdout.write(text + "\n")
        else:
            Path(json_out).write_text(text, encoding="utf-8")
    if json_out != "-":
        from cnnforge.targets.max7800x.firmware.inspect import COLUMNS, rows

        table = Table(title=f"{folder} ({found.device}, {len(found.layers)} layers)")
        for col in COLUMNS:
            table.add_column(col)
        for row in rows(found.layers):
            table.add_row(*row)
        console.print(table)
    for line in found.contradictions:
        console.print(f"contradiction: {line}", markup=False, highlight=False)
    if found.contradictions:
        raise typer.Exit(1)
