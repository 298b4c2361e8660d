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
from cnnforge.errors import InputError
from cnnforge.targets.max7800x.device import DEVICE_NAMES, DEVICES


def load_firmware(folder: Path, device: str | None):
    """(device, state image, decoded layers), bad input as InputError (one line, exit 2)."""
    from cnnforge.targets.max7800x.firmware.decode import DecodeError
    from cnnforge.targets.max7800x.firmware.inspect import read_folder
    from cnnforge.targets.max7800x.firmware.interpret import FirmwareError

    _check(folder, device)
    try:
        return read_folder(folder, device)
    except (FirmwareError, DecodeError) as exc:
        raise InputError(str(exc)) from None


def load_network(folder: Path, device: str | None):
    """The folder read, decoded and its network recovered (selftest.Decoded); bad input as
    InputError (one line, exit 2)."""
    from cnnforge.targets.max7800x.firmware.decode import DecodeError
    from cnnforge.targets.max7800x.firmware.interpret import FirmwareError
    from cnnforge.targets.max7800x.firmware_read import read_firmware

    _check(folder, device)
    try:
        return read_firmware(folder, device)
    except (FirmwareError, DecodeError) as exc:
        raise InputError(str(exc)) from None


def _check(folder: Path, device: str | None) -> None:
    if not (folder / "cnn.c").is_file():
        raise InputError(f"{folder}: no cnn.c (not a firmware folder)")
    if device not in (None, *(d.name for d in DEVICES)):
        raise InputError(f"--device {device}: one of {DEVICE_NAMES}")


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
    from cnnforge.targets.max7800x.firmware.inspect import as_dict, contradictions, rows

    if yaml_out is not None:
        decoded = load_network(folder, device)
        dev, image, layers = decoded.device, decoded.image, decoded.layers
        write_pair(decoded.network, decoded.plan, yaml_out, folder.resolve().name)
    else:
        dev, image, layers = load_firmware(folder, device)
    if json_out is not None:
        text = json.dumps(as_dict(dev, layers))
        if json_out == "-":
            sys.stdout.write(text + "\n")
        else:
            Path(json_out).write_text(text, encoding="utf-8")
    if json_out != "-":
        from cnnforge.targets.max7800x.firmware.inspect import COLUMNS

        table = Table(title=f"{folder} ({dev}, {len(layers)} layers)")
        for col in COLUMNS:
            table.add_column(col)
        for row in rows(layers):
            table.add_row(*row)
        console.print(table)
    problems = contradictions(dev, image, layers)
    for line in problems:
        console.print(f"contradiction: {line}", markup=False, highlight=False)
    if problems:
        raise typer.Exit(1)
