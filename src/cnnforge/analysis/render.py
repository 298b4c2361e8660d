"""Presenting an ``Analysis`` as JSON, Markdown or a rich table; binary units printed as
``KB``/``MB``, receptive fields as ``size/stride/offset`` (``6x6 /2 @1.5``)."""

from __future__ import annotations

import json
from fractions import Fraction

from rich.table import Table

from cnnforge.analysis.records import Analysis, LayerStats, number

COLUMNS = (
    "layer",
    "op",
    "output",
    "params",
    "MACs",
    "RF size",
    "RF stride",
    "RF offset",
    "act f32",
    "act int8",
    "param f32",
    "param q",
)


def human_bytes(n: int) -> str:
    """``1536`` -> ``1.50 KB`` (binary units: KB = 1024 B)."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1024
        if value < 1024 or unit == "TB":
            return f"{value:.2f} {unit}"
    raise AssertionError("unreachable")


def _axes(values: tuple[Fraction, ...]) -> str:
    return "x".join(f"{number(v):g}" for v in values) or "-"


def _cells(s: LayerStats) -> list[str]:
    return [
        s.name,
        s.op,
        "x".join(map(str, s.out_shape)),
        f"{s.params:,}",
        f"{s.macs:,}",
        _axes(s.rf_size),
        _axes(s.rf_stride),
        _axes(s.rf_offset),
        human_bytes(s.act_bytes_float32),
        human_bytes(s.act_bytes_int8),
        human_bytes(s.param_bytes_float32),
        human_bytes(s.param_bytes_quantized),
    ]


def totals_lines(a: Analysis) -> list[tuple[str, str]]:
    """(label, value) pairs of the totals, for printing."""
    t = a.totals
    macs = "MACs (thop count)" if a.count == "thop" else "MACs"
    return [
        ("parameters", f"{t.params:,}"),
        (macs, f"{t.macs:,}"),
        (
            "peak activation memory (batch 1)",
            f"{human_bytes(t.peak_act_bytes_float32)} float32, "
            f"{human_bytes(t.peak_act_bytes_int8)} int8 layout (at {t.peak_layer})",
        ),
        (
            "parameter memory",
            f"{human_bytes(t.param_bytes_float32)} float32, "
            f"{human_bytes(t.param_bytes_quantized)} at {a.weight_bits}-bit weights",
        ),
        *([("unused", a.unused_line())] if a.unused_params else []),
    ]


def to_json(a: Analysis) -> str:
    """The JSON document of docs/analyze-json.md."""
    return json.dumps(a.to_dict(), indent=1) + "\n"


def to_markdown(a: Analysis) -> str:
    """A Markdown report: title, the per-layer table, the totals."""
    shape = "x".join(map(str, a.input_shape))
    lines = [f"# {a.network} (input {shape})", "", "| " + " | ".join(COLUMNS) + " |"]
    lines.append("|" + "---|" * len(COLUMNS))
    lines += ["| " + " | ".join(_cells(s)) + " |" for s in a.layers]
    lines += ["", "| total | |", "|---|---|"]
    lines += [f"| {label} | {value} |" for label, value in totals_lines(a)]
    return "\n".join(lines) + "\n"


def to_table(a: Analysis) -> Table:
    """A rich table of the layers, totals in the caption."""
    table = Table(title=f"{a.network} (input {'x'.join(map(str, a.input_shape))})")
    for col in COLUMNS:
        numeric = col not in ("layer", "op", "output")
        table.add_column(col, justify="right" if numeric else "left", overflow="fold")
    for s in a.layers:
        table.add_row(*_cells(s))
    return table
