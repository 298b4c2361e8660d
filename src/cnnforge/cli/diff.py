"""``cnnforge diff A B``: compare two sets of layer outputs; name the first layer that diverges.

A and B: two firmware folders (cnn.c, ...: the first layer and register where the networks their
set-ups configure differ, read as ``inspect`` reads them), C probe directories (``compile
--probe``), ``.npz`` archives (``sim_layers.npz``) or directories of ``.npy`` files (``simulate
--layers``, whose ``order.txt`` keeps the network's order; without one, files go alphabetically and
the output says so). Layers pair by name; when both sets come with a ``network.json`` (in or beside
them, as in a compile output directory) and one is the hardware network, the other model-level,
each hardware layer pairs with the model-level layer it computes
(``cnnforge.targets.max7800x.c.probe.pair_layers``). Exit
status 0 when every common layer is equal, 1 when one differs, 2 on bad input.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from cnnforge.cli.app import app
from cnnforge.cli.common import console
from cnnforge.errors import InputError


@app.command("diff")
def diff_command(
    a: Path = typer.Argument(..., help="First set of layer outputs."),
    b: Path = typer.Argument(..., help="Second set of layer outputs."),
    tolerance: float = typer.Option(
        0.0, "--tolerance", min=0.0, help="Allowed |a - b| (integers: keep 0; floats x128)."
    ),
    all_layers: bool = typer.Option(False, "--all", help="Show every layer, not only a summary."),
) -> None:
    """Compare layer by layer in A's order (two firmware folders: their decoded registers)."""
    firmware = [(a / "cnn.c").is_file(), (b / "cnn.c").is_file()]
    if all(firmware):
        _diff_firmware(a, b)
        return
    if any(firmware):  # one firmware folder: the other must be one too
        other, folder = (b, a) if firmware[0] else (a, b)
        what = "no such folder" if not other.exists() else "no cnn.c (not a firmware folder)"
        raise InputError(
            f"{other}: {what}", hint=f"{folder} is a firmware folder: compare it with another"
        )
    from cnnforge.targets.max7800x.c.probe import (
        compare,
        find_network,
        layer_order,
        network_pairs,
        read_layer_outputs,
    )

    pairs = network_pairs(find_network(a), find_network(b))
    result = compare(read_layer_outputs(a), read_layer_outputs(b), tolerance, pairs)
    table = Table(title=f"{a} vs {b}")
    for col in ("layer", "shape", "differing", "max |a-b|", "first at", "a", "b"):
        table.add_column(col)
    first = result.first_divergence
    for d in result.layers:
        if all_layers or not d.equal or d is result.layers[-1]:
            where = "" if d.first_index is None else str(d.first_index)
            table.add_row(
                d.layer,
                "x".join(map(str, d.shape)),
                str(d.differing),
                f"{d.max_abs:g}",
                where,
                _fmt(d.a_value),
                _fmt(d.b_value),
            )
    console.print(table)
    console.print(f"layer order: {layer_order(a)}", markup=False, highlight=False)
    for label, names in (("only in A", result.only_a), ("only in B", result.only_b)):
        if names:
            console.print(f"{label}: {', '.join(names)}", markup=False)
    if first is None:
        console.print(f"all {len(result.layers)} common layers are equal", markup=False)
        return
    console.print(
        f"first divergence: layer {first.layer} at {first.first_index}: "
        f"{_fmt(first.a_value)} vs {_fmt(first.b_value)} ({first.differing} values differ)",
        markup=False,
    )
    raise typer.Exit(1)


def _diff_firmware(a: Path, b: Path) -> None:
    """Two firmware folders (``inspect``): the first layer and register where they differ."""
    from cnnforge.cli.inspect import load_firmware
    from cnnforge.targets.max7800x.firmware.inspect import first_difference

    dev_a, _, layers_a = load_firmware(a, None)
    dev_b, _, layers_b = load_firmware(b, None)
    if dev_a != dev_b:
        console.print(f"{a} is for the {dev_a}, {b} for the {dev_b}", markup=False)
        raise typer.Exit(1)
    first = first_difference(dev_a, layers_a, layers_b)
    if first is None:
        console.print(f"the {len(layers_a)} layers are equal, register for register", markup=False)
        return
    console.print(first, markup=False, highlight=False)
    raise typer.Exit(1)


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:g}"
