"""The HLS report: resources per engine and in total beside the reference design's table, the
register map and float vs quantized agreement on the sample (docs/hls-target.md §7)."""

from __future__ import annotations

from typing import Any

from cnnforge.pipeline.state import CompileState
from cnnforge.sim.agreement import agreement
from cnnforge.targets.hls.buffer_plan import HlsPlan
from cnnforge.targets.hls.regmap import register_rows

#: The reference design's resources by module, as its HLS tool scores their area
#: (docs/hls-target.md §7).
REFERENCE_TABLE = dict(
    conv2d=6647, batchnorm=9894, maxpool=3650, transconv=7194, ROM=393216, top=423251
)
ENGINE_ORDER = ("conv2d", "transconv", "copy")
_LAYER_KEYS = ("engine", "buffer", "acc_bits", "macs", "cycles", "rom_bits")


def resources(plan: HlsPlan) -> dict[str, Any]:
    """Per engine and total: ROM bits, RAM bits per buffer, multipliers, cycles (§7)."""
    t = plan.target
    engines: dict[str, dict[str, int]] = {}
    for lp in plan.layers:
        e = engines.setdefault(
            lp.engine,
            {"layers": 0, "rom_bits": 0, "line_buffer_bits": 0, "multipliers": 0,
             "pool_comparators": 0, "macs": 0, "cycles": 0, "acc_bits": 0},
        )  # fmt: skip
        e["layers"] += 1
        e["rom_bits"] += lp.rom_bits
        e["line_buffer_bits"] = max(e["line_buffer_bits"], lp.line_buffer_bits)
        e["multipliers"] = t.macs_per_cycle if lp.engine != "copy" else 0
        e["pool_comparators"] = max(e["pool_comparators"], lp.pool_comparators)
        e["macs"] += lp.macs
        e["cycles"] += lp.cycles
        e["acc_bits"] = max(e["acc_bits"], lp.acc_bits)
    ram = {name: elements * t.activation_bits for name, elements in plan.buffers.items()}
    cycles = sum(e["cycles"] for e in engines.values()) + plan.io_cycles
    return {
        "target": t.name,
        "macs_per_cycle": t.macs_per_cycle,
        "initiation_interval": t.initiation_interval,
        "clock_mhz": t.clock_mhz,
        "engines": {k: engines[k] for k in ENGINE_ORDER if k in engines},
        "ram_bits": ram,
        "total": {
            "rom_bits": sum(e["rom_bits"] for e in engines.values()),
            "ram_bits": sum(ram.values()) + sum(e["line_buffer_bits"] for e in engines.values()),
            "multipliers": sum(e["multipliers"] for e in engines.values()),
            "cycles": cycles,
            "milliseconds": cycles / (t.clock_mhz * 1e3),
        },
        "layers": [
            {"name": lp.layer.name, **{k: getattr(lp, k) for k in _LAYER_KEYS}}
            for lp in plan.layers
        ],
    }


def agreement_rows(state: CompileState) -> list[tuple[str, str, float]]:
    """(output, argmax agreement or "-", mean |float - quantized| in LSBs) on the sample."""
    rows = agreement(state.network, state.answer, state.float_outputs, state.output_exponents)
    return [(a.name, "-" if a.argmax is None else f"{a.argmax:.4f}", a.mean_lsb) for a in rows]


def _row(*cells: object) -> str:
    return "| " + " | ".join(map(str, cells)) + " |"


def _table(head: tuple[str, ...], rows: Any) -> list[str]:
    """A markdown table: header, separator, one line per row of cells."""
    return [_row(*head), "|" + "---|" * len(head), *(_row(*cells) for cells in rows)]


def report_markdown(state: CompileState) -> str:
    """report.md for one compile."""
    plan = state.target_state.plan if state.target_state is not None else None
    net = state.network
    if plan is None or net is None:
        raise ValueError("report.md needs the HLS plan and the compiled network")
    r, t = resources(plan), plan.target
    bits = sorted({x.quant.weight_bits for x in net.layers if x.quant is not None})
    lines = [
        f"# {net.name} on {t.name} (HLS C++)",
        "",
        f"W{'/'.join(map(str, bits))}A{t.activation_bits}; {t.macs_per_cycle} MACs per cycle "
        f"per engine, II={t.initiation_interval}, {t.clock_mhz:g} MHz; {len(net.layers)} layers.",
    ]
    sections = [
        ("Resources per engine", _engine_table(r)),
        ("Activation RAM", _ram_table(r, plan)),
        ("Total", _total_lines(r, t.clock_mhz)),
        ("Beside the reference design", _reference_lines(r)),
        ("AXI-Lite register map (bundle ctrl)", _regmap_table(t)),
        ("Float vs quantized on the sample", _agreement_table(state)),
        ("Layers", _layer_table(r)),
    ]
    for title, body in sections:
        if body:
            lines += ["", f"## {title}", "", *body]
    return "\n".join(lines) + "\n"


def _engine_table(r: dict[str, Any]) -> list[str]:
    head = ("Engine", "Layers", "ROM bits", "Line buffer bits", "Multipliers")
    head += ("Pool comparators", "Acc bits", "MACs", "Cycles")
    rows = (
        (name, e["layers"], f"{e['rom_bits']:,}", f"{e['line_buffer_bits']:,}", e["multipliers"],
         e["pool_comparators"], e["acc_bits"], f"{e['macs']:,}", f"{e['cycles']:,}")
        for name, e in r["engines"].items()
    )  # fmt: skip
    return _table(head, rows)


def _ram_table(r: dict[str, Any], plan: HlsPlan) -> list[str]:
    rows = (
        (buf, f"{nbits:,}", ", ".join(n for n, b in plan.tensor_buffer.items() if b == buf))
        for buf, nbits in r["ram_bits"].items()
    )
    return _table(("Buffer", "Bits", "Tenants"), rows)


def _total_lines(r: dict[str, Any], clock_mhz: float) -> list[str]:
    total = r["total"]
    return [
        f"- ROM: {total['rom_bits']:,} bits (weights and biases)",
        f"- RAM: {total['ram_bits']:,} bits (ping, pong, skip stores, line buffers)",
        f"- Multipliers: {total['multipliers']}",
        f"- Cycles: {total['cycles']:,} (stream in/out included) = "
        f"{total['milliseconds']:.2f} ms at {clock_mhz:g} MHz",
    ]


def _reference_lines(r: dict[str, Any]) -> list[str]:
    return [
        "The reference design's figures are its HLS tool's area scores per module (batch",
        "normalization had its own module); ours are counts: multipliers, comparators, ROM and RAM",
        "bits.",
        "",
        "| | conv2d | batchnorm | maxpool | transconv | ROM | top |",
        "|---|---|---|---|---|---|---|",
        _row("reference design", *(f"{v:,}" for v in REFERENCE_TABLE.values())),
        _ours_row(r),
    ]


def _regmap_table(t: Any) -> list[str]:
    return _table(("Offset", "Register", "Description"), register_rows(t))


def _agreement_table(state: CompileState) -> list[str]:
    """Float vs quantized per output (empty: no float outputs to compare)."""
    rows = [(n, a, f"{e:.3f}") for n, a, e in agreement_rows(state)]
    return _table(("Output", "Argmax agreement", "Mean abs error (LSB)"), rows) if rows else []


def _layer_table(r: dict[str, Any]) -> list[str]:
    head = ("Layer", "Engine", "Output buffer", "Acc bits", "MACs", "Cycles", "ROM bits")
    rows = (
        (x["name"], x["engine"], x["buffer"], x["acc_bits"], f"{x['macs']:,}", f"{x['cycles']:,}",
         f"{x['rom_bits']:,}")
        for x in r["layers"]
    )  # fmt: skip
    return _table(head, rows)


def _ours_row(r: dict[str, Any]) -> str:
    e = r["engines"]

    def mults(name: str) -> str:
        return f"{e[name]['multipliers']} mult" if name in e else "-"

    pool = max((x["pool_comparators"] for x in e.values()), default=0)
    return (
        f"| cnnforge | {mults('conv2d')} | folded into conv | {pool} comparators "
        f"| {mults('transconv')} | {r['total']['rom_bits']:,} | "
        f"{r['total']['multipliers']} mult, {r['total']['ram_bits']:,} RAM bits |"
    )
