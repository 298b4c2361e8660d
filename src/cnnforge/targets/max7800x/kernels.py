"""Kernel-memory column map and bias-memory groups (docs/hardware/devices.md §3, §4).

Kernels: a layer keeps ``L`` 72-bit words (plan/kernel_words.py) in every processor of its
input mask, all from one start column that is a multiple of 4; like the vendor's allocator
the lowest free start wins; MAX78002 depthwise kernels stay inside one physical bank. Layers
with identical quantized weights on the same processors share their columns (the vendor's
``weight_source``). Bias: every layer's values sit contiguously in one quadrant's bias memory,
first-fit decreasing into the least-filled quadrant the network uses (flatten layers first on
devices that need it).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from cnnforge.errors import PlanError
from cnnforge.geometry import has_bias, main_input_shape
from cnnforge.ir import Layer, Network, Op
from cnnforge.targets.max7800x.depthwise_bias import DepthwiseBiasError, depthwise_bias
from cnnforge.targets.max7800x.device import Max7800xDevice
from cnnforge.targets.max7800x.geometry import (
    bias_entries,
    kernel_count,
    kernel_slots,
)
from cnnforge.targets.max7800x.kernel_words import layer_kernel_words as _words


def kernel_words_placed(network: Network, layer: Layer, out_mask: int, dev: Max7800xDevice) -> int:
    """72-bit words per input processor of a placed weight layer (0 without weights)."""
    if not layer.has_weights:
        return 0
    slots = kernel_slots(out_mask, dev)
    return _words(layer, dev, in_shape=main_input_shape(network, layer), out_slots=slots)


def kernels_per_processor(
    network: Network, layer: Layer, out_mask: int, dev: Max7800xDevice
) -> int:
    """kc of docs/hardware/devices.md §3 (cnnforge.geometry.kernel_count) with the budget's output
    slots."""
    if layer.op is Op.PASSTHROUGH:
        return 0
    shape = main_input_shape(network, layer)
    slots = kernel_slots(out_mask, dev)
    pixels = int(np.prod(shape[1:])) if layer.flatten and len(shape) > 1 else 1
    return kernel_count(layer, shape[0], layer.out_shape[0], slots, pixels, dev)


def _bank_edges(dev: Max7800xDevice, processor: int) -> set[int]:
    edges, pos = set(), 0
    for size in dev.kernel_banks(processor):
        pos += size
        edges.add(pos)
    return edges


def _weights_key(layer: Layer, in_mask: int, out_mask: int, words: int) -> str | None:
    q = layer.quant
    if q is None:
        return None
    w = np.ascontiguousarray(q.weights)
    digest = hashlib.sha256(w.tobytes() + str(w.shape).encode()).hexdigest()
    return f"{q.weight_bits}:{digest}:{in_mask}:{out_mask}:{words}"


@dataclass(frozen=True)
class KernelSlot:
    layer: str
    start: int
    words: int


def assign_kernels(
    network: Network, masks: dict[str, tuple[int, int]], dev: Max7800xDevice
) -> dict[str, KernelSlot]:
    """``{layer: KernelSlot}`` for every weight layer; ``masks`` is {layer: (in, out)}."""
    cap = np.array([dev.kernel_words(p) for p in range(dev.processors)])
    used = np.zeros((dev.processors, int(cap.max())), dtype=bool)
    for p in range(dev.processors):
        used[p, cap[p] :] = True
    out: dict[str, KernelSlot] = {}
    shared: dict[str, int] = {}
    todo = [x for x in network.layers if x.has_weights]
    need = {x.name: kernel_words_placed(network, x, masks[x.name][1], dev) for x in todo}
    # Largest first (words x processors): fewer holes than layer order when memory is tight.
    todo.sort(key=lambda x: -need[x.name] * masks[x.name][0].bit_count())
    for layer in todo:
        in_mask, out_mask = masks[layer.name]
        words = need[layer.name]
        key = _weights_key(layer, in_mask, out_mask, words)
        if key is not None and key in shared:
            out[layer.name] = KernelSlot(layer.name, shared[key], words)
            continue
        procs = [p for p in range(dev.processors) if in_mask >> p & 1]
        banks = dev if layer.groups > 1 else None
        start = _lowest_start(used, procs, words, dev.kernel_start_align, banks)
        if start is None:
            total = sum(need[x.name] * masks[x.name][0].bit_count() for x in todo)
            raise _kernel_error(layer, procs, words, used, (total, int(cap.sum())))
        used[procs, start : start + words] = True
        out[layer.name] = KernelSlot(layer.name, start, words)
        if key is not None:
            shared[key] = start
    return out


def _lowest_start(
    used: np.ndarray, procs: list[int], words: int, align: int, banks: Max7800xDevice | None
) -> int | None:
    """The lowest start, a multiple of ``align`` (docs/hardware/devices.md §3), of a free run of
    ``words`` columns on ``procs`` that crosses no bank edge of ``banks`` (depthwise layers)."""
    busy = used[procs].any(axis=0)
    run = np.concatenate(([0], np.cumsum(busy)))
    for start in range(0, busy.size - words + 1, align):
        if run[start + words] - run[start]:
            continue
        if banks is not None and any(
            start < edge < start + words for p in procs for edge in _bank_edges(banks, p)
        ):
            continue
        return start
    return None


def _kernel_error(
    layer: Layer, procs: list[int], words: int, used: np.ndarray, totals: tuple[int, int]
) -> PlanError:
    busy = used[procs].any(axis=0)
    free, best = 0, 0
    for b in busy:
        free = 0 if b else free + 1
        best = max(best, free)
    return PlanError(
        f"kernel memory exhausted: needs {words} words of 72 bits on each of processors "
        f"{procs[0]}-{procs[-1]}, the largest free run there is {best} "
        f"(short by {words - best} words per processor); the network needs {totals[0]} of "
        f"the device's {totals[1]} words in all",
        where=f"layer {layer.name} ({layer.module_path or layer.name})",
        hint="use lower weight bits on the largest layers (--weight-bits auto), fewer "
        "channels, or a device with more kernel memory (MAX78002)",
    )


def bias_length(layer: Layer, out_mask: int, dev: Max7800xDevice) -> int:
    """Bias entries of a layer (docs/hardware/devices.md §4, cnnforge.geometry.bias_entries)."""
    return bias_entries(layer.out_shape[0], out_mask, dev)


def assign_bias(
    network: Network, masks: dict[str, tuple[int, int]], dev: Max7800xDevice
) -> dict[str, tuple[int, int]]:
    """``{layer: (quadrant, first entry)}`` for every layer with bias
    (docs/hardware/devices.md §4)."""
    # quadrants that execute some layer (docs/hardware/devices.md §7 `bias_group`)
    used_quadrants = set()
    for in_mask, _ in masks.values():
        for q in range(dev.quadrants):
            if in_mask >> (dev.processors_per_quadrant * q) & 0xFFFF:
                used_quadrants.add(q)
    quadrants = sorted(used_quadrants) or [0]
    todo = [x for x in network.layers if x.has_weights and has_bias(x)]
    todo.sort(
        key=lambda x: (
            not (dev.bias_flatten_first and x.flatten),
            -bias_length(x, masks[x.name][1], dev),
        )
    )
    fill = depthwise_fill(network, masks, dev)
    out: dict[str, tuple[int, int]] = {}
    for layer in [x for x in todo if x.groups == 1]:
        n = bias_length(layer, masks[layer.name][1], dev)
        q = min(quadrants, key=lambda k: (fill[k], k))
        if fill[q] + n > dev.bias_entries_per_quadrant:
            raise _bias_error(layer, q, n, fill[q], dev)
        out[layer.name] = (q, fill[q])
        fill[q] += n
    return out


def depthwise_fill(
    network: Network, masks: dict[str, tuple[int, int]], dev: Max7800xDevice
) -> list[int]:
    """Bias entries per quadrant the depthwise layers take; they come first, in layer order
    (targets/max7800x/depthwise_bias.py)."""
    fill = [0] * dev.quadrants
    for layer in network.layers:
        if not (layer.has_weights and has_bias(layer) and layer.groups > 1):
            continue
        in_mask, out_mask = masks[layer.name]
        try:
            depthwise_bias(in_mask, out_mask, layer.out_shape[0], fill, dev)
        except DepthwiseBiasError as exc:
            raise PlanError(
                f"bias memory of a depthwise convolution: {exc}",
                where=f"layer {layer.name} ({layer.module_path or layer.name})",
                hint="use processors in more quadrants or fewer channels",
            ) from exc
    return fill


def _bias_error(layer: Layer, q: int, n: int, filled: int, dev: Max7800xDevice) -> PlanError:
    return PlanError(
        f"bias memory exhausted: {n} values do not fit; quadrant {q} has "
        f"{dev.bias_entries_per_quadrant - filled} of {dev.bias_entries_per_quadrant} entries left "
        f"(short by {filled + n - dev.bias_entries_per_quadrant})",
        where=f"layer {layer.name} ({layer.module_path or layer.name})",
        hint="use processors in more quadrants, fewer output channels, or MAX78002",
    )
