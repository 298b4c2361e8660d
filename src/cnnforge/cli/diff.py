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
from typing import Any

import typer
from rich.table import Table

from cnnforge.cli.app import app
from cnnforge.cli.common import console


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
    from cnnforge.api import diff

    found = diff(a, b, tolerance=tolerance)
    if found.comparison is None:
        _print_firmware(found)
        return
    _print_layers(found.comparison, a, b, all_layers)
    first = found.comparison.first_divergence
    if first is None:
        console.print(f"all {len(found.comparison.layers)} common layers are equal", markup=False)
        return
    console.print(
        f"first divergence: layer {first.layer} at {first.first_index}: "
        f"{_fmt(first.a_value)} vs {_fmt(first.b_value)} ({first.differing} values differ)",
        markup=False,
    )
    raise typer.Exit(1)


def _print_layers(result: Any, a: Path, b: Path, all_layers: bool) -> None:
    """The table of layers (those that differ and the last, or ``all_layers``), A's layer
    order and the layers only one side has."""
    from cnnforge.targets.max7800x.c.probe import layer_order

    table = Table(title=f"{a} vs {b}")
    for col in ("layer", "shape", "differing", "max |a-b|", "first at", "a", "b"):
        table.add_column(col)
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


def _print_firmware(found) -> None:
    """Two firmware folders (``inspect``): the first layer and register where they differ."""
    dev_a, dev_b = found.devices
    if dev_a != dev_b:
        console.print(f"{found.a} is for the {dev_a}, {found.b} for the {dev_b}", markup=False)
        raise typer.Exit(1)
    if found.first is None:
        console.print(f"the {found.layers} layers are equal, register for register", markup=False)
        return
    console.print(found.first, markup=False, highlight=False)
    raise typer.Exit(1)


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:g}"
