"""The generic target's report: rich tables, JSON (``cnnforge-generic-plan/1``), and SVG/HTML
written as text (byte-identical across runs)."""

from __future__ import annotations

import html
import json
from typing import Any

from rich.table import Table

from cnnforge.analysis.render import human_bytes
from cnnforge.targets.generic.budget_plan import CurvePoint, GenericPlan

JSON_SCHEMA = "cnnforge-generic-plan/1"

#: What "ops" counts, printed with the figure so that nobody has to guess.
OPS_DEFINITION = (
    "2 x MACs of convolutions + pooling window x output elements + (operands - 1) x "
    "element-wise output elements; fully connected layers apart (fc ops = 2 x MACs); "
    "activations, folded BatchNorm, concat, flatten, upsample, pad: 0 (xfDNN's count)"
)
TRANSFER_DEFINITION = (
    "activation bytes written to DDR (spills, outputs streamed out) + read from DDR "
    "(reloads, inputs streamed in); the network input starts on chip with a copy in DDR; "
    "weights counted apart"
)
TILED_DEFINITION = (
    "fused groups of steps run on row bands: blobs read only inside a group live in line "
    "buffers (halo rows kept), whole blobs between groups on chip or in DDR; a group's "
    "weights are read once per band unless kept on chip; bound: every weight read once, and "
    "a blob larger than the budget that a step needs whole written and read once"
)


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def step_rows(plan: GenericPlan) -> list[dict[str, Any]]:
    """One dict per step in schedule order (the JSON rows; the tables print them)."""
    rows = []
    for k, (step, traffic) in enumerate(zip(plan.life.steps, plan.allocation.steps, strict=True)):
        rows.append(
            {
                "position": k,
                "name": step.name,
                "op": step.kind,
                "fused": list(step.members),
                "module_path": step.module_path,
                "inputs": list(step.inputs),
                "out_shape": list(step.out_shape),
                "macs": step.macs,
                "ops": step.ops,
                "fc_ops": step.fc_ops,
                "read_bytes": traffic.read,
                "written_bytes": traffic.written,
                "weight_ddr_bytes": plan.weight_stream_bytes(k),
                "live_bytes": traffic.live,
                "in_place": list(plan.life.inplace.get(k, ())),
                "cycles": plan.cycles(k),
                "supported": step.supported,
            }
        )
    return rows


def blob_rows(plan: GenericPlan) -> list[dict[str, Any]]:
    """One dict per blob: interval, on-chip ranges, DDR home, bytes moved."""
    return [
        {
            "name": b.name,
            "bytes": b.bytes,
            "interval": [b.produced, b.last],
            "onchip": [
                {"steps": [r.start, r.end], "offset": r.offset, "end": r.offset + b.bytes}
                for r in b.residencies
            ],
            "ddr": b.ddr,
            "written_bytes": b.written,
            "read_bytes": b.read,
        }
        for b in plan.allocation.blobs
    ]


def totals(plan: GenericPlan) -> dict[str, Any]:
    alloc = plan.allocation
    steps = plan.life.steps
    return {
        "ops": plan.ops,
        "ops_counted": OPS_DEFINITION,
        "fc_ops": plan.fc_ops,
        "macs": sum(s.macs for s in steps),
        "onchip_bytes": plan.target.onchip_bytes,
        "min_onchip_bytes_no_transfer": plan.min_memory,
        "peak_live_bytes": plan.peak_live,
        "peak_step": plan.peak_step,
        "ddr_transfer_bytes": alloc.transfer_bytes,
        "ddr_read_bytes": alloc.read_bytes,
        "ddr_written_bytes": alloc.written_bytes,
        "ddr_transfer_counted": TRANSFER_DEFINITION,
        "ddr_transfer_lower_bound": plan.lower_bound,
        "weight_ddr_bytes": plan.weight_ddr_bytes,
        "ddr_bytes_with_weights": alloc.transfer_bytes + plan.weight_ddr_bytes,
        "arena_bytes": alloc.arena,
        "cycles": sum(plan.cycles(k) for k in range(plan.life.n)),
        "unsupported": [
            {"name": s.name, "op": s.kind, "module_path": s.module_path}
            for s in plan.graph.unsupported
        ],
    }


def to_dict(plan: GenericPlan) -> dict[str, Any]:
    """The JSON document (schema ``cnnforge-generic-plan/1``)."""
    return {
        "schema": JSON_SCHEMA,
        "network": plan.graph.name,
        "input_shape": list(plan.graph.input_shape),
        "device": plan.target.name,
        "target": {k: getattr(plan.target, k) for k in vars(plan.target)},
        "schedule": plan.schedule,
        "schedules": dict(plan.schedules),
        "outputs": list(plan.graph.outputs),
        "totals": totals(plan),
        "steps": step_rows(plan),
        "blobs": blob_rows(plan),
        "curve": [
            {
                "budget": c.budget,
                "ddr_transfer_bytes": c.transfer_bytes,
                "lower_bound": c.lower_bound,
            }
            for c in plan.curve
        ],
        "tiled": tiled_dict(plan),
    }


def group_rows(plan: GenericPlan) -> list[dict[str, Any]]:
    """One dict per group of the tiled plan, in schedule order."""
    tiled = plan.tiled
    rows = []
    for k, (group, traffic) in enumerate(zip(tiled.groups, tiled.allocation.steps, strict=True)):
        bands = group.bands
        rows.append(
            {
                "position": k,
                "name": group.name,
                "steps": [s.name for s in group.steps],
                "bands": group.band_count,
                # rows per band of the group's first whole input, most rows of its output
                "band_rows": bands.band_rows(bands.external[0]) if bands else None,
                "output_band_rows": bands.band_rows(group.steps[-1].name) if bands else None,
                "line_buffer_bytes": group.line_buffer_bytes,
                "kept_weight_bytes": group.kept_weight_bytes,
                "onchip_bytes": tiled.onchip_bytes(k),
                "read_bytes": traffic.read,
                "written_bytes": traffic.written,
                "weight_ddr_bytes": group.weight_ddr_bytes,
                "extra_ops": group.extra_ops,
            }
        )
    return rows


def tiled_totals(plan: GenericPlan) -> dict[str, Any]:
    tiled, bound = plan.tiled, plan.tiled_bound
    return {
        "ddr_activation_bytes": tiled.activation_bytes,
        "ddr_read_bytes": tiled.allocation.read_bytes,
        "ddr_written_bytes": tiled.allocation.written_bytes,
        "weight_ddr_bytes": tiled.weight_bytes,
        "ddr_bytes": tiled.ddr_bytes,
        "extra_ops": tiled.extra_ops,
        "fused_groups": len(tiled.tiled),
        "lower_bound": {
            "activation_bytes": bound.activation_bytes,
            "weight_bytes": bound.weight_bytes,
            "ddr_bytes": bound.ddr_bytes,
        },
    }


def tiled_dict(plan: GenericPlan) -> dict[str, Any]:
    """The tiled plan's part of the JSON document."""
    return {
        "counted": TILED_DEFINITION,
        "totals": tiled_totals(plan),
        "groups": group_rows(plan),
        "curve": [
            {
                "budget": c.budget,
                "ddr_activation_bytes": c.tiled.activation_bytes,
                "weight_ddr_bytes": c.tiled.weight_bytes,
                "lower_bound_activation_bytes": c.tiled_bound.activation_bytes,
                "lower_bound_bytes": c.tiled_bound.ddr_bytes,
            }
            for c in plan.curve
        ],
    }


def to_json(plan: GenericPlan) -> str:
    return json.dumps(to_dict(plan), indent=1) + "\n"


def summary_lines(plan: GenericPlan) -> list[tuple[str, str]]:
    """(label, value) pairs of the totals, for printing."""
    t = totals(plan)
    unsupported = ", ".join(f"{u['name']} ({u['op']})" for u in t["unsupported"]) or "none"
    return [
        ("device", plan.target.name),
        ("schedule", f"{plan.schedule} (DDR bytes per candidate: {_candidates(plan)})"),
        ("ops", f"{t['ops']:,} [{OPS_DEFINITION}]"),
        ("fc ops", f"{t['fc_ops']:,}"),
        (
            "min on-chip memory with no DDR transfer",
            f"{t['min_onchip_bytes_no_transfer']:,} B ({human_bytes(plan.min_memory)}); "
            f"peak live {t['peak_live_bytes']:,} B at {t['peak_step']}",
        ),
        (
            f"DDR transfer bytes at {plan.target.onchip_bytes:,} B on chip",
            f"{t['ddr_transfer_bytes']:,} (read {t['ddr_read_bytes']:,}, written "
            f"{t['ddr_written_bytes']:,}); lower bound {t['ddr_transfer_lower_bound']:,} "
            f"[{TRANSFER_DEFINITION}]",
        ),
        ("weight bytes streamed from DDR", f"{t['weight_ddr_bytes']:,}"),
        _tiled_line(plan),
        ("cycles (estimate)", f"{t['cycles']:,}"),
        ("unsupported layers", unsupported),
    ]


def _tiled_line(plan: GenericPlan) -> tuple[str, str]:
    t = tiled_totals(plan)
    bound = t["lower_bound"]
    return (
        f"tiled plan at {plan.target.onchip_bytes:,} B on chip",
        f"{t['ddr_bytes']:,} DDR bytes: activations {t['ddr_activation_bytes']:,}, weights "
        f"{t['weight_ddr_bytes']:,}, extra ops {t['extra_ops']:,}, {t['fused_groups']} fused "
        f"groups; tiled bound {bound['ddr_bytes']:,} (activations "
        f"{bound['activation_bytes']:,}, weights {bound['weight_bytes']:,}); whole-blob plan "
        f"{plan.allocation.transfer_bytes + plan.weight_ddr_bytes:,} with weights "
        f"[{TILED_DEFINITION}]",
    )


def _candidates(plan: GenericPlan) -> str:
    return ", ".join(f"{name} {ddr:,}" for name, ddr in plan.schedules.items())


STEP_COLUMNS = ("#", "step", "op", "inputs", "output", "ops", "read", "written", "weights")
STEP_COLUMNS += ("live", "cycles")
_STEP_NUMBERS = ("ops", "read_bytes", "written_bytes", "weight_ddr_bytes", "live_bytes", "cycles")


def _step_cells(row: dict[str, Any]) -> list[str]:
    """The printed cells of one step row (STEP_COLUMNS)."""
    return [
        str(row["position"]),
        row["name"] + ("" if row["supported"] else " (unsupported)"),
        row["op"] + (" in place" if row["in_place"] else ""),
        ", ".join(row["inputs"]),
        _shape(tuple(row["out_shape"])),
        *(f"{row[key]:,}" for key in _STEP_NUMBERS),
    ]


def _table(title: str, columns: tuple[str, ...], left: tuple[str, ...], rows: Any) -> Table:
    """A rich table of ``columns`` (those in ``left`` left-justified) holding ``rows`` of cells."""
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col, justify="left" if col in left else "right")
    for cells in rows:
        table.add_row(*cells)
    return table


def steps_table(plan: GenericPlan) -> Table:
    title = f"{plan.graph.name}: schedule on {plan.target.name}"
    rows = map(_step_cells, step_rows(plan))
    return _table(title, STEP_COLUMNS, ("step", "op", "inputs"), rows)


BLOB_COLUMNS = ("blob", "bytes", "interval", "on chip [offset, end) @ steps", "DDR", "moved")


def _blob_cells(row: dict[str, Any]) -> list[str]:
    """The printed cells of one blob row (BLOB_COLUMNS)."""
    ranges = "; ".join(
        f"[{r['offset']:,}, {r['end']:,}) @ {r['steps'][0]}-{r['steps'][1]}" for r in row["onchip"]
    )
    return [
        row["name"],
        f"{row['bytes']:,}",
        f"{row['interval'][0]}-{row['interval'][1]}",
        ranges or "-",
        "yes" if row["ddr"] else "-",
        f"{row['written_bytes'] + row['read_bytes']:,}",
    ]


def blobs_table(plan: GenericPlan) -> Table:
    title = "blobs: live interval (steps), on-chip ranges, DDR"
    left = BLOB_COLUMNS[:1] + BLOB_COLUMNS[2:5]
    return _table(title, BLOB_COLUMNS, left, map(_blob_cells, blob_rows(plan)))


CURVE_COLUMNS = ("on-chip budget", "DDR bytes (plan)", "lower bound", "tiled: activations")
CURVE_COLUMNS += ("tiled: weights", "tiled bound")


def _curve_cells(c: CurvePoint) -> list[str]:
    """Whole-blob plan and bound (activations), tiled plan (activations, weights) and its
    bound (activations + weights) at one budget."""
    values = (c.budget, c.transfer_bytes, c.lower_bound, c.tiled.activation_bytes)
    return [f"{v:,}" for v in (*values, c.tiled.weight_bytes, c.tiled_bound.ddr_bytes)]


def curve_table(plan: GenericPlan) -> Table:
    title = (
        f"DDR bytes against the on-chip budget (whole-blob plan: weights "
        f"{plan.weight_ddr_bytes:,} more)"
    )
    return _table(title, CURVE_COLUMNS, (), map(_curve_cells, plan.curve))


GROUP_COLUMNS = ("#", "group", "steps", "bands", "band rows in/out", "line buffers")
GROUP_COLUMNS += ("kept weights", "on chip", "read", "written", "weights", "extra ops")
_GROUP_NUMBERS = ("line_buffer_bytes", "kept_weight_bytes", "onchip_bytes", "read_bytes")
_GROUP_NUMBERS += ("written_bytes", "weight_ddr_bytes", "extra_ops")


def _group_cells(row: dict[str, Any]) -> list[str]:
    return [
        str(row["position"]),
        row["name"],
        str(len(row["steps"])),
        str(row["bands"]),
        "-" if row["band_rows"] is None else f"{row['band_rows']}/{row['output_band_rows']}",
        *(f"{row[key]:,}" for key in _GROUP_NUMBERS),
    ]


def groups_table(plan: GenericPlan) -> Table:
    title = f"tiled schedule on {plan.target.name}: groups (fused groups run on row bands)"
    return _table(title, GROUP_COLUMNS, ("group",), map(_group_cells, group_rows(plan)))


_W, _H, _L, _R, _T, _B = 640, 360, 80, 20, 30, 50


#: The plotted lines: label, colour, dash, DDR bytes (activations + weights) at a curve point.
_LINES = (
    ("whole-blob plan", "#4477aa", "", lambda p, c: c.transfer_bytes + p.weight_ddr_bytes),
    ("whole-blob bound", "#4477aa", "5 3", lambda p, c: c.lower_bound + p.weight_ddr_bytes),
    ("tiled plan", "#228833", "", lambda p, c: c.tiled.ddr_bytes),
    ("tiled bound", "#cc6677", "5 3", lambda p, c: c.tiled_bound.ddr_bytes),
)


def curve_svg(plan: GenericPlan) -> str:
    """Line plot: DDR bytes (activations + weights) of both plans and both bounds against the
    budget, the target's budget marked."""
    points = plan.curve
    xmax = max(max(c.budget for c in points), plan.target.onchip_bytes, 1)
    ymax = max(max(line(plan, c) for _, _, _, line in _LINES for c in points), 1)

    def xy(budget: int, value: int) -> str:
        x = _L + (_W - _L - _R) * budget / xmax
        y = _H - _B - (_H - _T - _B) * value / ymax
        return f"{x:.1f},{y:.1f}"

    mark = xy(plan.target.onchip_bytes, 0).split(",")[0]
    mib, mb = 1 << 20, 1e6
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" font-family="sans-serif" font-size="11">',
        f'<text x="{_W / 2}" y="18" text-anchor="middle" font-size="13">'
        f"{html.escape(plan.graph.name)}: DDR bytes against the on-chip budget</text>",
        f'<line x1="{_L}" y1="{_H - _B}" x2="{_W - _R}" y2="{_H - _B}" stroke="black"/>',
        f'<line x1="{_L}" y1="{_T}" x2="{_L}" y2="{_H - _B}" stroke="black"/>',
    ]
    for i in range(5):
        budget, value = xmax * i // 4, ymax * i // 4
        x, _ = xy(budget, 0).split(",")
        _, y = xy(0, value).split(",")
        parts.append(
            f'<text x="{x}" y="{_H - _B + 15}" text-anchor="middle">{budget / mib:.2f}</text>'
        )
        parts.append(f'<text x="{_L - 5}" y="{y}" text-anchor="end">{value / mb:.1f}</text>')
    parts += [
        f'<text x="{_W / 2}" y="{_H - 12}" text-anchor="middle">on-chip budget (MiB)</text>',
        f'<text x="15" y="{_H / 2}" transform="rotate(-90 15 {_H / 2})" text-anchor="middle">'
        "DDR bytes, activations + weights (MB)</text>",
        f'<line x1="{mark}" y1="{_T}" x2="{mark}" y2="{_H - _B}" stroke="#999" '
        'stroke-dasharray="4 3"/>',
    ]
    for i, (label, colour, dash, line) in enumerate(_LINES):
        coords = " ".join(xy(c.budget, line(plan, c)) for c in points)
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"{dashes}/>'
        )
        parts.append(
            f'<text x="{_W - _R - 150}" y="{_T + 12 + 15 * i}" fill="{colour}">{label}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _html_table(columns: tuple[str, ...], rows: Any) -> str:
    """``<table>``: a header row of ``columns``, then one row per list of cells (escaped)."""
    esc = html.escape
    body = "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in r) + "</tr>" for r in rows)
    return "<table><tr>" + "".join(f"<th>{h}</th>" for h in columns) + f"</tr>{body}</table>"


def to_html(plan: GenericPlan) -> str:
    """A standalone report.html: the totals, the curve, the schedule and the blobs."""
    esc = html.escape
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in summary_lines(plan))
    title = f"{esc(plan.graph.name)} on {esc(plan.target.name)}"
    blobs = (cells[:5] for cells in map(_blob_cells, blob_rows(plan)))
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>body{{font-family:sans-serif}}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;"
        "text-align:left}</style></head><body>\n"
        f"<h1>{title}</h1>\n<section id='generic-target'>\n<h2>Generic accelerator plan</h2>\n"
        f"<table>{rows}</table>\n<h3>DDR bytes against the on-chip budget</h3>\n"
        f"{curve_svg(plan)}{_html_table(CURVE_COLUMNS, map(_curve_cells, plan.curve))}\n"
        "<h3>Tiled schedule: groups</h3>\n"
        f"{_html_table(GROUP_COLUMNS, map(_group_cells, group_rows(plan)))}\n<h3>Schedule</h3>\n"
        f"{_html_table(STEP_COLUMNS, map(_step_cells, step_rows(plan)))}\n<h3>Blobs</h3>\n"
        f"{_html_table(BLOB_COLUMNS[:5], blobs)}\n</section>\n</body></html>\n"
    )
