"""report.html: one self-contained page (inline SVG figures) describing a compile: analysis, check,
plan, cycles, float vs quantized outputs, the C build."""

from __future__ import annotations

import dataclasses
import math
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from cnnforge.arithmetic import ACT_SCALE
from cnnforge.devices import Capabilities
from cnnforge.ir import INPUT, Network
from cnnforge.outputs import atomic_output_file
from cnnforge.pipeline.state import CompileState
from cnnforge.sim.agreement import agreement, output_scale
from cnnforge.targets.max7800x import report_figures as figs
from cnnforge.targets.max7800x.device import Max7800xDevice
from cnnforge.targets.max7800x.masks import mask_runs
from cnnforge.targets.max7800x.placement import Placement, Plan
from cnnforge.targets.max7800x.state import own

WORD_BYTES = 4


def _template() -> jinja2.Template:
    folder = resources.files("cnnforge.targets.max7800x")
    text = folder.joinpath("report.html.j2").read_text("utf-8")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(text)


def analysis_rows(network: Network, dev: Capabilities) -> list[dict[str, Any]]:
    """The analysis table (analysis.analyze_network) as plain rows."""
    from cnnforge.analysis import analyze_network

    result = analyze_network(network, dev)
    return [
        {
            "name": s.name,
            "op": s.op,
            "shape": "x".join(map(str, s.out_shape)),
            "params": s.params,
            "macs": s.macs,
            "bits": s.weight_bits or "",
            "act": s.act_bytes_int8,
            "rf": "x".join(f"{float(v):g}" for v in s.rf_size),
        }
        for s in result.layers
    ]


def plan_rows(network: Network, plan: Plan) -> list[dict[str, Any]]:
    """One row per placement: masks, offsets, kernels, bias, cycles (estimated when the plan,
    e.g. an imported one, has none: the planner's latency model)."""
    from cnnforge.targets.max7800x.planner import placed_cycles

    rows = []
    dev = plan.device
    for layer, p in zip(network.layers, plan.placements, strict=True):
        if p.cycles is None:
            p = dataclasses.replace(p, cycles=placed_cycles(network, layer, p, dev))
        rows.append(
            {
                "name": layer.name,
                "in_procs": p.in_processors.bit_count(),
                "out_procs": p.out_processors.bit_count(),
                "in_mask": f"0x{p.in_processors:016x}",
                "out_mask": f"0x{p.out_processors:016x}",
                "in_off": f"0x{p.in_offset:04x}",
                "out_off": f"0x{p.out_offset:04x}",
                "kernel": _kernel_text(p),
                "bias": "" if p.bias_quadrant is None else f"q{p.bias_quadrant}@{p.bias_offset}",
                "cycles": p.cycles if p.cycles is not None else "",
            }
        )
    return rows


def _kernel_text(p: Placement) -> str:
    if p.kernel_start is None:
        return ""
    return f"{p.kernel_start}..{p.kernel_start + p.kernel_words - 1}"


def memory_map(network: Network, plan: Plan) -> str:
    """Data memory (bytes per instance) over the layer order: where each output lives, when."""
    from cnnforge.geometry import live_intervals, tensor_geometry

    live = live_intervals(network)
    rects, top = [], 1
    for i, (layer, p) in enumerate(zip(network.layers, plan.placements, strict=True)):
        size = tensor_geometry(network, layer.name, plan.device).words * WORD_BYTES
        first, last = live[layer.name]
        last = min(last, len(network.layers) - 1)
        rects.append((first - 0.4, p.out_offset, last - first + 0.8, size, i))
        top = max(top, p.out_offset + size)
    limits = (-1.0, float(len(network.layers)), 0.0, float(top) * 1.05)
    title = "data memory map (output tensors over their lifetime)"
    return figs.rect_map(rects, "layer index", "byte offset in each instance", title, limits)


def kernel_map(plan: Plan) -> str | None:
    """Kernel memory: columns used by each layer on each processor."""
    rects, top = [], 1
    dev = plan.device
    for i, p in enumerate(plan.placements):
        if p.kernel_start is None or not p.kernel_words:
            continue
        for first, count in mask_runs(p.in_processors, dev):
            rects.append((first, p.kernel_start, count, p.kernel_words, i))
        top = max(top, p.kernel_start + p.kernel_words)
    if not rects:
        return None
    return figs.rect_map(
        rects, "processor", "kernel word", "kernel map", (0, dev.processors, 0, top * 1.05)
    )


def output_figures(state: CompileState) -> list[dict[str, str]]:
    """Float vs quantized for each network output the float model also produced."""
    out = []
    for name, quant in sorted(state.answer.items()):
        fl = state.float_outputs.get(name)
        if fl is None or fl.shape != quant.shape:
            continue
        spatial = quant.ndim == 3 and quant.shape[0] > 1 and math.prod(quant.shape[1:]) > 1
        if spatial:
            fig = figs.masks_figure(fl, quant, state.sample)
        else:  # both in 8-bit LSBs of the float value
            fig = figs.scatter_figure(fl, quant * _unit(state, name) * ACT_SCALE)
        out.append({"name": name, "uri": fig})
    return out


def _plan_section(state: CompileState) -> dict[str, Any] | None:
    plan, network = own(state).plan, state.network
    if plan is None or network is None or len(plan.placements) != len(network.layers):
        return None
    rows = plan_rows(network, plan)
    names = [r["name"] for r in rows]
    procs = plan.device.processors
    util = [100.0 * r["in_procs"] / procs for r in rows]
    cycles = [float(r["cycles"] or 0) for r in rows]
    return {
        "device": plan.device.name,
        "data_format": plan.data_format,
        "rows": rows,
        "memory_map": memory_map(network, plan),
        "kernel_map": kernel_map(plan),
        "utilization": figs.bar_figure(names, util, f"% of {procs} processors", "input processors"),
        "cycles": figs.bar_figure(names, cycles, "cycles", "cycle estimate per layer"),
        "total_cycles": int(sum(cycles)),
        "clock_text": _clock_text(plan.device, sum(cycles)),
    }


def _clock_text(device: Max7800xDevice, cycles: float) -> str:
    """``= 1.23 ms at 50 MHz`` from the device's CNN clock, or nothing."""
    hz = device.clock_hz
    if not hz:
        return ""
    return f"= {cycles / hz * 1e3:.3f} ms at {hz / 1e6:g} MHz"


def report_context(state: CompileState, summary: dict[str, Any]) -> dict[str, Any]:
    """Everything the template shows, from a compile state and its ``summary`` facts (the
    caller's: pipeline.state.summary), so the report never imports the pipeline."""
    network = state.network
    if network is None:
        raise ValueError("report.html needs the compiled network")
    return {
        "title": f"cnnforge report: {network.name}",
        "summary": summary,
        "input_shape": "x".join(map(str, network.input_shape)),
        "analysis": analysis_rows(network, state.device),
        "rewrites": [r.to_dict() for r in state.rewrites],
        "violations": [v.to_dict() for v in state.violations],
        "plan": _plan_section(state),
        "outputs": output_figures(state),
        "agreement": _agreement(state),
        "inputs_of": {x.name: ", ".join(x.inputs) for x in network.layers},
        "input_name": INPUT,
    }


def _unit(state: CompileState, name: str) -> float:
    """Real value of one unit of output ``name`` (wide and calibrated outputs differ)."""
    return output_scale(state.network, name, state.output_exponents.get(name, 0))


def _agreement(state: CompileState) -> list[dict[str, Any]]:
    rows = []
    for a in agreement(state.network, state.answer, state.float_outputs, state.output_exponents):
        row = {"name": a.name, "max": f"{a.max_lsb:.2f}", "mean": f"{a.mean_lsb:.3f}"}
        if a.argmax is not None:
            row["argmax"] = f"{a.argmax * 100:.2f}%"
        rows.append(row)
    return rows


def write_report(state: CompileState, path: Path, summary: dict[str, Any]) -> Path:
    """Render report.html for a finished compile state and its summary facts (atomically)."""
    html = _template().render(report_context(state, summary))
    with atomic_output_file(Path(path)) as tmp:
        tmp.write_text(html, "utf-8")
        tmp.chmod(0o644)  # mkstemp creates 0600; the report is meant to be shared
    return Path(path)
