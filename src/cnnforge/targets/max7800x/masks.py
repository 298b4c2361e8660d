"""Processor masks: every group of tensors on a processor range from a multiple of 4, placed at the
start that keeps its busiest resource least loaded (docs/hardware/devices.md §3, §6)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cnnforge.errors import PlanError
from cnnforge.geometry import TensorGeometry, tensor_geometry
from cnnforge.ir import INPUT, Network, Op
from cnnforge.targets.max7800x.device import Max7800xDevice
from cnnforge.targets.max7800x.groups import Group, GroupKind, is_copy
from cnnforge.targets.max7800x.kernel_words import layer_kernel_words, main_input_shape

ALIGN = 4  # unit starts are multiples of 4 processors (docs/hardware/devices.md §6)
CHW_MAX_CHANNELS = 16  # one channel per data-memory instance (docs/hardware/devices.md §2 "CHW")


@dataclass(frozen=True)
class Unit:
    """A group with its parts' processor offsets inside the unit and its lifetime."""

    group: Group
    offsets: tuple[int, ...]  # first processor of each part, relative to the unit start
    widths: tuple[int, ...]  # processors of each part
    width: int
    birth: int
    death: int


def mask_runs(mask: int, dev: Max7800xDevice) -> list[tuple[int, int]]:
    """Runs of consecutive set bits of a processor mask: [(first processor, count), ...]."""
    runs: list[tuple[int, int]] = []
    for proc in range(dev.processors):
        if mask >> proc & 1:
            if runs and runs[-1][0] + runs[-1][1] == proc:
                runs[-1] = (runs[-1][0], runs[-1][1] + 1)
            else:
                runs.append((proc, 1))
    return runs


def make_unit(
    network: Network, group: Group, live: dict[str, tuple[int, int]], dev: Max7800xDevice
) -> Unit:
    """The unit of ``group``: adjacent parts side by side, interleaved parts on one range."""
    widths = tuple(tensor_geometry(network, p, dev).processors for p in group.parts)
    if group.kind is GroupKind.ADJACENT:
        # Parts start on instance boundaries: a part of 4k+r channels leaves a hole rather than
        # share an instance whose words the next part's writes would overwrite
        # (docs/hardware/devices.md §2).
        steps = [w + (-w % ALIGN) for w in widths]
        offsets = tuple(sum(steps[:i]) for i in range(len(widths)))
        width = offsets[-1] + widths[-1]
    else:
        offsets = (0,) * len(widths)
        width = max(widths)
    return Unit(
        group=group,
        offsets=offsets,
        widths=widths,
        width=width,
        birth=min(live[p][0] for p in group.parts),
        death=max(live[p][1] for p in group.parts),
    )


def range_mask(start: int, width: int) -> int:
    """``width`` processors from ``start``."""
    return ((1 << width) - 1) << start


def instances_of(mask: int, dev: Max7800xDevice) -> int:
    """16-bit mask of the data-memory instances a processor mask touches."""
    out = 0
    per = dev.processors_per_instance
    for k in range(dev.processors // per):
        if (mask >> (per * k)) & 0xF:
            out |= 1 << k
    return out


def choose_data_format(network: Network, dev: Max7800xDevice) -> str:
    """CHW when the input is too large for HWC and CHW can carry it, else HWC
    (docs/hardware/devices.md §2)."""
    geo = tensor_geometry(network, INPUT, dev)
    readers = [i for i, x in enumerate(network.layers) if INPUT in x.inputs]
    hwc_bytes = 4 * geo.pixels * geo.passes
    chw_ok = (
        readers == [0]
        and network.layers[0].inputs == (INPUT,)
        and geo.channels <= CHW_MAX_CHANNELS
        and geo.pixels <= dev.instance_bytes
    )
    return "CHW" if chw_ok and hwc_bytes > dev.instance_bytes else "HWC"


def chw_mask(channels: int, dev: Max7800xDevice) -> int:
    """CHW input: channel c on processor 4c (one per instance, docs/hardware/devices.md §6)."""
    return sum(1 << (dev.processors_per_instance * c) for c in range(channels))


class _Loads:
    """Running estimates of data words per (instance, time) and kernel words per processor."""

    def __init__(self, network: Network, dev: Max7800xDevice) -> None:
        steps = len(network.layers) + 2
        self.dev = dev
        self.data = np.zeros((dev.processors // dev.processors_per_instance, steps), dtype=np.int64)
        self.kern = np.zeros(dev.processors, dtype=np.int64)
        self.cap = np.array([dev.kernel_words(p) for p in range(dev.processors)], dtype=np.int64)
        self.words = dev.instance_bytes // 4

    def cost(
        self, spans: list[tuple[int, int, int, int]], kern: list[tuple[int, int]]
    ) -> tuple[float, float, float]:
        """Worst relative load after adding ``spans`` (mask, birth, death, words) and kernels:
        (worst of both, worst kernel, worst data)."""
        data = kernel = 0.0
        for mask, birth, death, words in spans:
            for k in _bits(instances_of(mask, self.dev)):
                peak = self.data[k, birth + 1 : death + 2].max(initial=0) + words
                data = max(data, peak / self.words)
        for mask, words in kern:
            procs = list(_bits(mask))
            kernel = max(kernel, float(((self.kern[procs] + words) / self.cap[procs]).max()))
        return round(max(data, kernel), 9), round(kernel, 9), round(data, 9)

    def add(self, spans: list[tuple[int, int, int, int]], kern: list[tuple[int, int]]) -> None:
        for mask, birth, death, words in spans:
            for k in _bits(instances_of(mask, self.dev)):
                self.data[k, birth + 1 : death + 2] += words
        for mask, words in kern:
            self.kern[list(_bits(mask))] += words


def _bits(mask: int):
    p = 0
    while mask:
        if mask & 1:
            yield p
        mask >>= 1
        p += 1


def assign_masks(
    network: Network,
    groups: tuple[Group, ...],
    live: dict[str, tuple[int, int]],
    dev: Max7800xDevice,
    data_format: str,
    policy: str = "low",
) -> dict[str, int]:
    """``{tensor: processor mask}`` for every tensor; ``policy`` breaks ties between equal starts:
    ``low``, ``high`` or ``long-high`` (long-lived tensors high)."""
    units = sorted((make_unit(network, g, live, dev) for g in groups), key=lambda u: u.birth)
    readers = _kernel_readers(network, dev)
    loads = _Loads(network, dev)
    for unit in units:  # full-width units have no choice: their kernels load every processor
        if unit.width == dev.processors:
            loads.add([], _demand(network, unit, 0, readers, live, dev)[1])
    masks: dict[str, int] = {}
    for unit in units:
        if unit.group.parts == (INPUT,) and data_format == "CHW":
            masks[INPUT] = chw_mask(tensor_geometry(network, INPUT, dev).channels, dev)
            continue
        high = policy == "high" or (policy == "long-high" and unit.death - unit.birth > 2)
        start = _best_start(network, unit, masks, readers, loads, live, high, dev)
        spans, kern = _demand(network, unit, start, readers, live, dev)
        loads.add(spans, [] if unit.width == dev.processors else kern)
        for part, off, width in zip(unit.group.parts, unit.offsets, unit.widths, strict=True):
            masks[part] = range_mask(start + off, width)
    return masks


def _kernel_readers(network: Network, dev: Max7800xDevice) -> dict[str, list[int]]:
    """Kernel words per input processor of every layer that reads a tensor, by tensor."""
    out: dict[str, list[int]] = {}
    for layer in network.layers:
        if not layer.has_weights:
            continue
        words = layer_kernel_words(layer, dev, in_shape=main_input_shape(network, layer))
        words += -words % 4  # starts are multiples of 4 (docs/hardware/devices.md §3)
        key = layer.inputs[0] if len(layer.inputs) == 1 else "|".join(layer.inputs)
        out.setdefault(key, []).append(words)
    return out


def _demand(
    network: Network,
    unit: Unit,
    start: int,
    readers: dict[str, list[int]],
    live: dict[str, tuple[int, int]],
    dev: Max7800xDevice,
) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, int]]]:
    spans, kern = [], []
    for part, off, width in zip(unit.group.parts, unit.offsets, unit.widths, strict=True):
        geo: TensorGeometry = tensor_geometry(network, part, dev)
        mask = range_mask(start + off, width)
        spans.append((mask, live[part][0], live[part][1], geo.words))
        kern.extend((mask, w) for w in readers.get(part, ()))
    joined = "|".join(unit.group.parts)
    kern.extend((range_mask(start, unit.width), w) for w in readers.get(joined, ()))
    return spans, kern


def _best_start(
    network: Network,
    unit: Unit,
    masks: dict[str, int],
    readers: dict[str, list[int]],
    loads: _Loads,
    live: dict[str, tuple[int, int]],
    high: bool,
    dev: Max7800xDevice,
) -> int:
    if unit.group.parts == (INPUT,):
        return 0  # the input from processor 0, as the vendor loads it: quadrant 0 is used (§7)
    pinned = _pinned_start(network, unit, masks, dev)
    if pinned is not None:
        return pinned
    best: tuple[float, float, float, int] | None = None
    for start in range(0, dev.processors - unit.width + 1, ALIGN):
        spans, kern = _demand(network, unit, start, readers, live, dev)
        cost = (*loads.cost(spans, kern), -start if high else start)
        if best is None or cost < best:
            best = cost
    if best is None:
        raise PlanError(f"{unit.width} processors do not fit in {dev.processors}")
    return abs(best[-1])


def _pinned_start(
    network: Network, unit: Unit, masks: dict[str, int], dev: Max7800xDevice
) -> int | None:
    """The start that puts a passthrough's output on its input processors, if any part needs it."""
    for part, off in zip(unit.group.parts, unit.offsets, strict=True):
        if part == INPUT:
            continue
        layer = network.layer(part)
        if layer.op is not Op.PASSTHROUGH:
            continue
        in_mask = 0
        for name in layer.inputs:
            in_mask |= masks.get(name, 0)
        if layer.eltwise is not None:
            in_mask = masks.get(layer.inputs[0], 0)
        if not in_mask:
            continue
        start = (in_mask & -in_mask).bit_length() - 1 - off
        if start >= 0 and start + unit.width <= dev.processors and start % ALIGN == 0:
            return start
        # Otherwise the planner turns the passthrough into a 1x1 identity convolution.
    return _reverse_pin(network, unit, masks, dev)


def _reverse_pin(
    network: Network, unit: Unit, masks: dict[str, int], dev: Max7800xDevice
) -> int | None:
    """A unit read by a single-input passthrough whose output is already placed (its consumer
    was laid out first) must sit on that output's processors."""
    for part, off in zip(unit.group.parts, unit.offsets, strict=True):
        for reader in network.layers:
            placed = masks.get(reader.name, 0)
            if reader.op is not Op.PASSTHROUGH or reader.inputs != (part,) or not placed:
                continue
            if is_copy(reader):
                continue
            start = (placed & -placed).bit_length() - 1 - off
            if start >= 0 and start + unit.width <= dev.processors and start % ALIGN == 0:
                return start
    return None


__all__ = [
    "Unit",
    "assign_masks",
    "choose_data_format",
    "instances_of",
    "mask_runs",
    "range_mask",
]
