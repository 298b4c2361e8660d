"""The readable plan: plan.json, plan.md (per-layer table, utilization, cycles) and matplotlib maps
of data memory per layer, kernels, and the timeline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cnnforge.geometry import live_intervals
from cnnforge.ir import INPUT, Network
from cnnforge.targets.max7800x.device import Max7800xDevice, get_device
from cnnforge.targets.max7800x.groups import is_copy
from cnnforge.targets.max7800x.masks import mask_runs
from cnnforge.targets.max7800x.metrics import PlanMetrics, tensor_words
from cnnforge.targets.max7800x.placement import Plan

PLAN_SCHEMA = "cnnforge-plan/1"
_PLACEMENT_KEYS = ("in_offset", "out_offset", "write_gap", "kernel_start", "kernel_words")
_PLACEMENT_KEYS += ("bias_quadrant", "bias_offset", "cycles")


def plan_dict(network: Network, plan: Plan, metrics: PlanMetrics) -> dict[str, Any]:
    """plan.json: the placements (masks as hex), the metrics and the notes."""
    layers = [
        {
            "layer": p.layer,
            "op": layer.label(),
            "inputs": list(layer.inputs),
            "out_shape": list(layer.out_shape),
            "copy": is_copy(layer),
            "processors": f"0x{p.in_processors:016x}",
            "output_processors": f"0x{p.out_processors:016x}",
            **{key: getattr(p, key) for key in _PLACEMENT_KEYS},
        }
        for layer, p in zip(network.layers, plan.placements, strict=True)
    ]
    return {
        "schema": PLAN_SCHEMA,
        "network": network.name,
        "device": plan.device.name,
        "data_format": plan.data_format,
        "allow_overlap": plan.allow_overlap,
        "metrics": metrics.to_dict(),
        "notes": list(plan.notes),
        "layers": layers,
    }


def write_plan_json(network: Network, plan: Plan, metrics: PlanMetrics, path: Path) -> None:
    path.write_text(json.dumps(plan_dict(network, plan, metrics), indent=1) + "\n", "utf-8")


def _procs(mask: int, dev: Max7800xDevice) -> str:
    """``0-27,32-35`` for a mask."""
    return ",".join(f"{a}-{a + n - 1}" if n > 1 else str(a) for a, n in mask_runs(mask, dev))


def plan_markdown(network: Network, plan: Plan, metrics: PlanMetrics, wall_s: float) -> str:
    """plan.md: the per-layer table, utilization and the cycle estimate."""
    m = metrics
    dev = plan.device
    lines = [
        f"# Plan of {network.name} on {plan.device.name}",
        "",
        f"Input data format {plan.data_format}; {m.layers} hardware layers; planned in "
        f"{wall_s:.2f} s.",
        "",
        "| # | layer | op | inputs | out shape | processors | output processors | in_offset "
        "| out_offset | gap | kernel cols | bias | cycles |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, (layer, p) in enumerate(zip(network.layers, plan.placements, strict=True)):
        kern = f"{p.kernel_start}+{p.kernel_words}" if p.kernel_start is not None else "-"
        bias = f"q{p.bias_quadrant}@{p.bias_offset}" if p.bias_quadrant is not None else "-"
        op = layer.label() + (" (copy)" if is_copy(layer) else "")
        lines.append(
            f"| {i} | {layer.name} | {op} | {', '.join(layer.inputs)} | "
            f"{'x'.join(map(str, layer.out_shape))} | {_procs(p.in_processors, dev)} | "
            f"{_procs(p.out_processors, dev)} | 0x{p.in_offset:04x} | 0x{p.out_offset:04x} | "
            f"{p.write_gap} | {kern} | {bias} | {p.cycles if p.cycles is not None else '-'} |"
        )
    lines += [
        "",
        "## Utilization",
        "",
        f"- data memory: highest byte used {m.high_water_bytes} of "
        f"{m.data_bytes // 16} per instance; peak live {m.peak_live_bytes} of {m.data_bytes} "
        f"bytes ({100 * m.peak_live_bytes / m.data_bytes:.1f} %)",
        f"- kernel memory: {m.kernel_words} of {m.kernel_capacity} 72-bit words "
        f"({100 * m.kernel_words / m.kernel_capacity:.1f} %), highest column {m.kernel_max_column}",
        f"- bias memory per quadrant: {', '.join(map(str, m.bias_entries))} of "
        f"{m.bias_capacity} entries",
        f"- estimated cycles: {m.cycles} ({m.time_us:.1f} us at the default CNN clock; "
        + (
            "the vendor's latency model)"
            if m.vendor_latency_model
            else "the MAX78000 model as a relative cost: the vendor has none for this device)"
        ),
        "",
        "Pictures: `memory/layerNN_<name>.png` (data memory during each layer), `kernels.png`, "
        "`timeline.png` (processors per layer; data memory x time).",
    ]
    if plan.notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in plan.notes)]
    return "\n".join(lines) + "\n"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _text(title: str) -> str:
    """A title matplotlib shows as written: ``$`` would start math text."""
    return title.replace("$", r"\$")


def memory_map_png(
    network: Network,
    plan: Plan,
    device: Max7800xDevice | str,
    index: int,
    path: Path,
    fig: Any = None,
) -> None:
    """Data memory during layer ``index``: every live tensor as boxes per instance."""
    plt = _pyplot()
    dev = get_device(device)
    layer = network.layers[index]
    live = live_intervals(network)
    own = fig is None
    fig = fig or plt.figure(figsize=(8, 4.5))
    fig.clear()
    ax = fig.add_subplot()
    colors = plt.get_cmap("tab20")
    for k, (name, (birth, death)) in enumerate(live.items()):
        if not birth <= index <= death:
            continue
        inst, idx = tensor_words(network, plan, name, dev)
        if not idx.size:
            continue
        lo, hi = 4 * int(idx.min()), 4 * (int(idx.max()) + 1)
        role = name == layer.name or name in layer.inputs
        style = dict(color=colors(k % 20), alpha=0.8 if role else 0.35, lw=1.2)
        for i in range(16):
            if inst >> i & 1:
                ax.add_patch(
                    plt.Rectangle((i, lo), 0.9, hi - lo, ec="black" if role else "none", **style)
                )
        first = (inst & -inst).bit_length() - 1
        ax.text(first + 0.05, lo, name if name != INPUT else "input", fontsize=6, va="bottom")
    ax.set(xlim=(0, 16), ylim=(0, dev.instance_bytes), ylabel="byte offset")
    ax.set_xlabel("data-memory instance (processors 4k..4k+3)")
    ax.set_title(_text(f"layer {index}: {layer.name} ({layer.label()}) - live data"), fontsize=9)
    fig.savefig(path, dpi=72)
    if own:
        plt.close(fig)


def kernel_map_png(network: Network, plan: Plan, device: Max7800xDevice | str, path: Path) -> None:
    """Kernel memory: each layer's columns on its input processors."""
    plt = _pyplot()
    dev = get_device(device)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    colors = plt.get_cmap("tab20")
    for k, p in enumerate(plan.placements):
        if p.kernel_start is None or not p.kernel_words:
            continue
        bars = [(q, 0.9) for q in range(dev.processors) if p.in_processors >> q & 1]
        ax.broken_barh(bars, (p.kernel_start, p.kernel_words), color=colors(k % 20))
        first = (p.in_processors & -p.in_processors).bit_length() - 1
        ax.text(first, p.kernel_start, p.layer, fontsize=5, va="bottom")
    ax.set(xlim=(0, dev.processors), ylim=(0, max(dev.kernel_words_large, dev.kernel_words_small)))
    ax.set(xlabel="processor", ylabel="kernel column (72-bit words)")
    ax.set_title(_text(f"{network.name}: kernel memory on {plan.device.name}"), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def timeline_png(network: Network, plan: Plan, device: Max7800xDevice | str, path: Path) -> None:
    """Two views over the layer order: processors read/written, and data memory x time."""
    plt = _pyplot()
    dev = get_device(device)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7))
    colors = plt.get_cmap("tab20")
    for i, p in enumerate(plan.placements):
        for mask, shade, dx in ((p.in_processors, 0.35, 0.0), (p.out_processors, 0.9, 0.45)):
            runs = [(q, 1) for q in range(dev.processors) if mask >> q & 1]
            top.broken_barh(
                [(r, w) for r, w in runs], (i + dx - 0.5, 0.45), color=colors(i % 20), alpha=shade
            )
    top.set(
        ylabel="layer (light: reads, dark: writes)", xlim=(0, dev.processors), xlabel="processor"
    )
    top.invert_yaxis()
    top.set_title(_text(f"{network.name} on {plan.device.name}: processors per layer"), fontsize=9)
    for k, (name, (birth, death)) in enumerate(live_intervals(network).items()):
        _, idx = tensor_words(network, plan, name, dev)
        if idx.size:
            lo, hi = 4 * int(idx.min()), 4 * (int(idx.max()) + 1)
            end = min(death, len(network) - 1) + 0.5
            bottom.broken_barh(
                [(lo, hi - lo)], (birth - 0.5, end - birth + 0.5), color=colors(k % 20), alpha=0.5
            )
    bottom.set(xlim=(0, dev.instance_bytes), ylabel="layer (live tensors)")
    bottom.set_xlabel("byte offset (every instance the tensor uses)")
    bottom.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


def write_report(
    network: Network,
    plan: Plan,
    device: Max7800xDevice | str,
    metrics: PlanMetrics,
    folder: Path,
    wall_s: float,
) -> None:
    """plan.json, plan.md, memory/*.png and kernels.png into ``folder``."""
    write_plan_json(network, plan, metrics, folder / "plan.json")
    (folder / "plan.md").write_text(plan_markdown(network, plan, metrics, wall_s), "utf-8")
    maps = folder / "memory"
    maps.mkdir(exist_ok=True)
    plt = _pyplot()
    fig = plt.figure(figsize=(8, 4.5))
    for i, layer in enumerate(network.layers):
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in layer.name)[:64]
        memory_map_png(network, plan, device, i, maps / f"layer{i:02d}_{safe}.png", fig)
    plt.close(fig)
    kernel_map_png(network, plan, device, folder / "kernels.png")
    timeline_png(network, plan, device, folder / "timeline.png")
