"""Figures of a plan (data-memory footprint on the words really used, kernel and bias use, cycles),
shared by the readable plan and the benchmark against hand-written plans."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from cnnforge.geometry import live_intervals, tensor_geometry
from cnnforge.ir import INPUT, Network
from cnnforge.targets.max7800x.device import Max7800xDevice, get_device
from cnnforge.targets.max7800x.kernels import bias_length, has_bias, kernel_words_placed
from cnnforge.targets.max7800x.latency import START_CYCLES
from cnnforge.targets.max7800x.masks import instances_of
from cnnforge.targets.max7800x.placement import Placement, Plan


@dataclass(frozen=True)
class PlanMetrics:
    """Side-by-side comparable numbers of one plan."""

    layers: int
    cycles: int
    time_us: float
    high_water_bytes: int  # per instance
    peak_live_bytes: int  # all instances together
    data_bytes: int  # capacity of all instances
    kernel_words: int  # 72-bit words used, all processors
    kernel_capacity: int
    kernel_max_column: int  # highest column used + 1 on any processor
    bias_entries: tuple[int, ...]  # per quadrant
    bias_capacity: int
    vendor_latency_model: bool = True  # False: the MAX78000 model used as a relative cost only

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tensor_layout(plan: Plan, name: str) -> Placement:
    """Where a tensor is written: its producer's output (the input: where layer 0 reads it)."""
    if name == INPUT:
        first = plan.placements[0]
        return Placement(INPUT, 0, first.in_processors, 0, first.in_offset)
    return plan.placement(name)


def tensor_words(
    network: Network, plan: Plan, name: str, dev: Max7800xDevice
) -> tuple[int, np.ndarray]:
    """(16-bit instance mask, word indices) a tensor occupies in each of its instances."""
    place = tensor_layout(plan, name)
    geo = tensor_geometry(network, name, dev)
    inst = instances_of(place.out_processors, dev)
    base = place.out_offset // 4
    reader = _streamed_reader(network, plan, name)
    if reader is not None:  # held in its reader's rollover buffer (plan/streaming.py)
        from cnnforge.targets.max7800x.streaming import rollover_words

        return inst, base + np.arange(rollover_words(network, plan, reader, dev))
    if name == INPUT and plan.data_format == "CHW":
        return inst, base + np.arange(-(-geo.pixels * geo.passes // 4))
    per = np.arange(geo.pixels * geo.passes)
    if geo.wide:
        words = (base + per[:, None] * 4 * (place.write_gap + 1) + np.arange(4)).ravel()
        return inst, words
    return inst, base + per * (place.write_gap + 1)


def _streamed_reader(network: Network, plan: Plan, name: str) -> int | None:
    """The streaming layer reading ``name`` when the tensor never exists whole, else None."""
    from cnnforge.targets.max7800x.streaming import streaming_prefix

    index = [INPUT, *(x.name for x in network.layers)].index(name)
    return index if index < streaming_prefix(plan) else None


def live_cells(
    network: Network, plan: Plan, step: int, words: int, dev: Max7800xDevice
) -> np.ndarray:
    """Boolean (16, words) map of the data words live at layer ``step``."""
    live = live_intervals(network)
    cells = np.zeros((16, words), dtype=bool)
    for name, (birth, death) in live.items():
        if birth <= step <= death:
            inst, idx = tensor_words(network, plan, name, dev)
            idx = idx[idx < words]
            for k in range(16):
                if inst >> k & 1:
                    cells[k, idx] = True
    return cells


def plan_metrics(network: Network, plan: Plan, device: Max7800xDevice | str) -> PlanMetrics:
    """The figures of ``plan`` on ``device`` (see the module docstring)."""
    dev = get_device(device)
    words = dev.instance_bytes // 4
    high = 0
    for name in [INPUT, *(x.name for x in network.layers)]:
        _, idx = tensor_words(network, plan, name, dev)
        high = max(high, 4 * (int(idx.max()) + 1) if idx.size else 0)
    peak = max(
        int(live_cells(network, plan, t, words, dev).sum()) * 4 for t in range(-1, len(network))
    )
    kernel, top = 0, 0
    bias = [0] * (dev.processors // dev.processors_per_quadrant)
    for layer, place in zip(network.layers, plan.placements, strict=True):
        n = kernel_words_placed(network, layer, place.out_processors, dev)
        kernel += n * place.in_processors.bit_count()
        top = max(top, (place.kernel_start or 0) + n if n else 0)
        if layer.has_weights and has_bias(layer) and place.bias_quadrant is not None:
            bias[place.bias_quadrant] += bias_length(layer, place.out_processors, dev)
    cycles = START_CYCLES + sum(p.cycles or 0 for p in plan.placements)
    capacity = sum(dev.kernel_words(p) for p in range(dev.processors))
    return PlanMetrics(
        layers=len(network),
        cycles=cycles,
        time_us=cycles / dev.cnn_clock_mhz,
        high_water_bytes=high,
        peak_live_bytes=peak,
        data_bytes=16 * dev.instance_bytes,
        kernel_words=kernel,
        kernel_capacity=capacity,
        kernel_max_column=top,
        bias_entries=tuple(bias),
        bias_capacity=dev.bias_entries_per_quadrant,
        vendor_latency_model=dev.has_latency_model,
    )


@dataclass(frozen=True)
class Latency:
    """The predicted inference time: the latency model's cycles at the CNN clock the firmware
    sets (docs/firmware.md, "Latency"), from cnn_start to the done interrupt."""

    cycles: int
    clock_mhz: float
    vendor_model: bool  # False (MAX78002): the MAX78000 model, a relative figure only
    streaming: bool  # some layers stream (their factor is calibrated on board figures)

    @property
    def time_us(self) -> float:
        return self.cycles / self.clock_mhz

    def line(self) -> str:
        """One line for the compile summary and the report."""
        how = "estimate" if self.vendor_model else "the MAX78000 model: a relative figure"
        if self.streaming:
            how += "; the FIFOs fed as fast as the accelerator reads"
        return (
            f"{self.time_us:,.1f} us at the {self.clock_mhz:g} MHz CNN clock "
            f"({self.cycles:,} cycles; {how})"
        )

    def to_dict(self) -> dict[str, Any]:
        """summary.json's record (with the line the CLI and the report show)."""
        return {**asdict(self), "time_us": round(self.time_us, 3), "text": self.line()}


def latency(network: Network, plan: Plan) -> Latency:
    """The predicted time of ``plan`` (its cycles filled in where it has none)."""
    if any(p.cycles is None for p in plan.placements):
        plan = with_cycles(network, plan)
    dev = get_device(plan.device)
    return Latency(
        cycles=START_CYCLES + sum(p.cycles or 0 for p in plan.placements),
        clock_mhz=dev.cnn_clock_mhz,
        vendor_model=dev.has_latency_model,
        streaming=any(p.streaming for p in plan.placements),
    )


def with_cycles(network: Network, plan: Plan) -> Plan:
    """``plan`` with every layer's cycle estimate filled in (for imported plans)."""
    import dataclasses

    from cnnforge.targets.max7800x.planner import placed_cycles

    dev = plan.device
    places = tuple(
        dataclasses.replace(p, cycles=placed_cycles(network, x, p, dev))
        for x, p in zip(network.layers, plan.placements, strict=True)
    )
    return dataclasses.replace(plan, placements=places)
