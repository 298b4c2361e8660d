"""An independent check of any plan, ours or imported: static rules per layer
(docs/hardware/devices.md §7), then a word-level run (wordsim.py) -> a tuple of ``Issue``."""

from __future__ import annotations

import math

import numpy as np

from cnnforge.errors import PlanError
from cnnforge.geometry import has_bias, layer_in_geometry, main_input_shape, tensor_geometry
from cnnforge.ir import Layer, Network, Op
from cnnforge.targets.max7800x.depthwise_bias import DepthwiseBiasError, depthwise_bias
from cnnforge.targets.max7800x.device import Max7800xDevice, get_device
from cnnforge.targets.max7800x.geometry import (
    bias_entries,
    kernel_count,
    kernel_slots,
    packed_kernel_words,
)
from cnnforge.targets.max7800x.issues import Issue
from cnnforge.targets.max7800x.placement import Placement, Plan
from cnnforge.targets.max7800x.speedups import speedup_issues
from cnnforge.targets.max7800x.streaming import streaming_issues
from cnnforge.targets.max7800x.wordsim import simulate_words


def validate_plan(
    network: Network,
    plan: Plan,
    device: Max7800xDevice | str,
    allow_overlap: bool = False,
    in_place: bool = True,
) -> tuple[Issue, ...]:
    """Every rule ``plan`` breaks on ``device`` (empty when valid); ``in_place=False`` also reports
    proven-safe overwrites of a layer's own input (as the vendor without ``--overlap-data``)."""
    dev = get_device(device)
    issues = _structure(network, plan, dev)
    if issues:
        return tuple(issues)
    if plan.fifo or any(p.streaming for p in plan.placements):
        stream = streaming_issues(network, plan, plan.device)
        issues.extend(Issue(network.layers[x.index].name, x.rule, x.message) for x in stream)
    for i, (layer, place) in enumerate(zip(network.layers, plan.placements, strict=True)):
        issues.extend(_layer_issues(network, plan, i, layer, place, dev))
    issues.extend(Issue(name, "speedups", why) for name, why in speedup_issues(network, plan, dev))
    issues.extend(_kernel_issues(network, plan, dev))
    issues.extend(_bias_issues(network, plan, dev))
    if not issues or all(x.rule in ("kernel-memory", "bias-memory") for x in issues):
        overlap = allow_overlap or plan.allow_overlap
        issues.extend(simulate_words(network, plan, dev, overlap, in_place))
    return tuple(issues)


def raise_on_issues(issues: tuple[Issue, ...], what: str = "the plan") -> None:
    """Turn the first issue into a ``PlanError`` (the CLI's one line), counting the rest."""
    if issues:
        first = issues[0]
        more = f" (and {len(issues) - 1} more issues)" if len(issues) > 1 else ""
        raise PlanError(
            f"{what} breaks a placement rule: {first.message} [{first.rule}]{more}",
            where=f"layer {first.layer}",
            hint="run `cnnforge plan --validate-only` to list every issue",
        )


def _structure(network: Network, plan: Plan, dev: Max7800xDevice) -> list[Issue]:
    if len(plan.placements) != len(network.layers):
        message = f"{len(plan.placements)} placements for {len(network.layers)} layers"
        return [Issue(network.name, "structure", message)]
    out = [
        Issue(layer.name, "structure", f"the placement is for {place.layer!r}")
        for layer, place in zip(network.layers, plan.placements, strict=True)
        if place.layer != layer.name
    ]
    if len(network.layers) > dev.max_layers:
        message = f"{len(network.layers)} layers exceed {dev.max_layers} on {dev.name}"
        out.append(Issue(network.name, "layer-count", message))
    used = 0
    for place in plan.placements:
        used |= place.in_processors | place.out_processors
    if not used & 0xFFFF:
        out.append(Issue(network.name, "quadrant-0", "no layer uses quadrant 0 (processors 0-15)"))
    return out


def _layer_issues(
    network: Network, plan: Plan, i: int, layer: Layer, place: Placement, dev: Max7800xDevice
) -> list[Issue]:
    """The static rules of one layer (docs/hardware/devices.md §6 memory and masks, §7 the vendor's
    checks)."""
    chw = i == 0 and plan.data_format == "CHW"
    found = _mask_issues(network, layer, place, dev, chw) + _memory_issues(
        network, layer, place, dev, chw
    )
    return [Issue(layer.name, rule, message) for rule, message in found]


def _mask_issues(
    network: Network, layer: Layer, place: Placement, dev: Max7800xDevice, chw: bool
) -> list[tuple[str, str]]:
    out = []
    pairs = (
        ("processors", place.in_processors, layer_in_geometry(network, layer, dev)),
        ("output_processors", place.out_processors, tensor_geometry(network, layer.name, dev)),
    )
    for key, mask, geo in pairs:
        if not 0 < mask < 1 << dev.processors:
            out.append(("mask-range", f"`{key}` {mask:#x} is not a non-zero 64-bit mask"))
        elif mask.bit_count() != geo.processors:
            message = (
                f"{geo.channels} channels need {geo.processors} processors per pass "
                f"({geo.passes} pass(es)) but `{key}` {mask:#018x} has {mask.bit_count()}"
            )
            out.append(("processor-count", message))
    if chw and any((place.in_processors >> (4 * k) & 0xF).bit_count() > 1 for k in range(16)):
        message = f"CHW input needs one processor per instance, not {place.in_processors:#x}"
        out.append(("chw-mask", message))
    if layer.groups > 1:  # depthwise alignment (docs/hardware/devices.md §6)
        first_out = (place.out_processors & -place.out_processors).bit_length() - 1
        first_in = (place.in_processors & -place.in_processors).bit_length() - 1
        spans = (place.in_processors >> first_in).bit_length() + first_in % 16 > 16
        if first_out % 4 or (spans and first_in % 4):
            out.append(("depthwise-mask", "depthwise masks must start at a multiple of 4"))
    masks = place.in_processors, place.out_processors
    if layer.op is Op.PASSTHROUGH and not passthrough_masks_ok(*masks, dev):
        message = (
            f"output map {place.out_processors:#018x} is not the input map "
            f"{place.in_processors:#018x} packed per quadrant"
        )
        out.append(("passthrough-mask", message))
    return out


def _memory_issues(
    network: Network, layer: Layer, place: Placement, dev: Max7800xDevice, chw: bool
) -> list[tuple[str, str]]:
    out = []
    geo_in = layer_in_geometry(network, layer, dev)
    geo_out = tensor_geometry(network, layer.name, dev)
    for key, off in (("in_offset", place.in_offset), ("out_offset", place.out_offset)):
        if off < 0 or off % 4:
            out.append(("offset-align", f"`{key}` {off:#x} is not a non-negative multiple of 4"))
    operands = layer.operand_count
    in_bytes = geo_in.pixels * geo_in.passes * operands * (1 if chw else 4)
    end = dev.instance_bytes
    if place.in_offset + in_bytes > end and not place.streaming:  # streaming: streaming.py
        message = f"input of {in_bytes} bytes at {place.in_offset:#x} passes the instance end"
        out.append(("input-bounds", f"{message} {end:#x}"))
    out_bytes = out_span(geo_out.pixels, geo_out.passes, place.write_gap, layer.wide)
    last = layer.name in network.outputs
    if place.out_offset + out_bytes > end and (not place.streaming or last):
        message = f"output of {out_bytes} bytes at {place.out_offset:#x} passes the instance end"
        out.append(("output-bounds", f"{message} {end:#x}"))
    if geo_out.passes * (place.write_gap + 1) > 1 << dev.write_ptr_inc_bits:
        message = (
            f"{geo_out.passes} output passes x (write_gap "
            f"{place.write_gap} + 1) exceed {1 << dev.write_ptr_inc_bits}"
        )
        out.append(("write-gap", message))
    if any(name != "input" and network.layer(name).wide for name in layer.inputs):
        out.append(("wide-input", "reads a 32-bit (wide) output; only 8-bit data can be read"))
    return out


def out_span(pixels: int, out_passes: int, gap: int, wide: bool) -> int:
    """Bytes from ``out_offset`` to the end of the last word written (docs/hardware/devices.md
    §2)."""
    if wide:
        return 4 * ((pixels * out_passes - 1) * 4 * (gap + 1) + 4)
    return 4 * ((pixels * out_passes - 1) * (gap + 1) + 1)


def passthrough_masks_ok(in_mask: int, out_mask: int, dev: Max7800xDevice) -> bool:
    """Per quadrant, the output bits are the input bits packed (docs/hardware/devices.md §6)."""
    for q in range(dev.quadrants):
        a = in_mask >> (dev.processors_per_quadrant * q) & 0xFFFF
        b = out_mask >> (dev.processors_per_quadrant * q) & 0xFFFF
        if a.bit_count() != b.bit_count():
            return False
        if b and (b >> ((b & -b).bit_length() - 1)) + 1 & (b >> ((b & -b).bit_length() - 1)):
            return False
    return True


def spec_kernel_words(network: Network, layer: Layer, out_mask: int, dev: Max7800xDevice) -> int:
    """72-bit kernel words per input processor of a placed weight layer, derived from
    docs/hardware/devices.md §3 and the output mask (not the planner's helpers)."""
    shape = main_input_shape(network, layer)
    flat = layer.flatten
    ksize = 1 if flat or not layer.kernel_size else math.prod(layer.kernel_size)
    pixels = math.prod(shape[1:]) if flat else 1
    slots = kernel_slots(out_mask, dev)
    kc = kernel_count(layer, shape[0], layer.out_shape[0], slots, pixels, dev)
    bits = layer.quant.weight_bits if layer.quant is not None else dev.default_weight_bits
    return packed_kernel_words(kc, ksize, bits, dev)


def _kernel_issues(network: Network, plan: Plan, dev: Max7800xDevice) -> list[Issue]:
    """Kernel columns in range and never shared by two different layers (or allocatable)."""
    out: list[Issue] = []
    taken: dict[int, list[tuple[int, int, str]]] = {}
    for layer, place in zip(network.layers, plan.placements, strict=True):
        if layer.has_weights:
            found = _kernel_columns(network, plan, layer, place, taken, dev)
            out.extend(Issue(layer.name, rule, message) for rule, message in found)
    return out


def _kernel_columns(
    network: Network,
    plan: Plan,
    layer: Layer,
    place: Placement,
    taken: dict[int, list[tuple[int, int, str]]],
    dev: Max7800xDevice,
) -> list[tuple[str, str]]:
    """One weight layer's kernel columns: sized, aligned, in range and not shared (or allocated
    the vendor's way); they join ``taken`` (processor -> columns held)."""
    out = []
    words = spec_kernel_words(network, layer, place.out_processors, dev)
    procs = [p for p in range(dev.processors) if place.in_processors >> p & 1]
    start = place.kernel_start
    if start is None:
        start = _greedy_start(taken, procs, words, dev)
        if start is None:
            message = f"{words} words per processor do not fit on {procs[0]}-{procs[-1]}"
            return [("kernel-memory", f"kernel memory exhausted: {message}")]
    else:
        if place.kernel_words < words:
            message = (
                f"the plan keeps {place.kernel_words} kernel words per processor, "
                f"docs/hardware/devices.md §3 gives {words} for these masks"
            )
            out.append(("kernel-words", message))
        if start % dev.kernel_start_align:
            message = f"kernel start {start} is not a multiple of {dev.kernel_start_align}"
            out.append(("kernel-align", message))
    over = [p for p in procs if start + words > dev.kernel_words(p)]
    if over:
        message = (
            f"columns {start}..{start + words} pass "
            f"the capacity of processor {over[0]} ({dev.kernel_words(over[0])})"
        )
        out.append(("kernel-memory", message))
    out.extend(_kernel_clash(network, layer, procs, start, words, taken, plan))
    for p in procs:
        taken.setdefault(p, []).append((start, start + words, layer.name))
    return out


def _kernel_clash(network, layer, procs, start, words, taken, plan) -> list[tuple[str, str]]:
    for p in procs:
        for a, b, other in taken.get(p, ()):
            overlap = a < start + words and start < b
            if overlap and not _same_kernels(plan, layer, network.layer(other)):
                message = (
                    f"kernel columns {start}..{start + words}"
                    f" of processor {p} overlap layer {other}'s {a}..{b}"
                )
                return [("kernel-overlap", message)]
    return []


def _same_kernels(plan: Plan, a: Layer, b: Layer) -> bool:
    """Two layers may share columns when they hold identical quantized weights there."""
    pa, pb = plan.placement(a.name), plan.placement(b.name)
    fields = ("kernel_start", "kernel_words", "in_processors")
    if any(getattr(pa, f) != getattr(pb, f) for f in fields) or a.quant is None or b.quant is None:
        return False
    return a.quant.weight_bits == b.quant.weight_bits and np.array_equal(
        a.quant.weights, b.quant.weights
    )


def _greedy_start(taken, procs, words, dev: Max7800xDevice) -> int | None:
    """The vendor's allocator for plans without a kernel map: the lowest free aligned start."""
    cap = min(dev.kernel_words(p) for p in procs)
    start = 0
    while start + words <= cap:
        clash = [
            b for p in procs for a, b, _ in taken.get(p, ()) if a < start + words and start < b
        ]
        if not clash:
            return start
        start = max(clash) + (-max(clash)) % dev.kernel_start_align
    return None


def _bias_issues(network: Network, plan: Plan, dev: Max7800xDevice) -> list[Issue]:
    """Bias entries inside one quadrant, never shared; plans without offsets are allocated."""
    out: list[Issue] = []
    quadrants = dev.quadrants
    spans: list[list[tuple[int, int, str]]] = [[] for _ in range(quadrants)]
    fill = [0] * quadrants
    out += _depthwise_bias_issues(network, plan, dev, spans, fill)
    for layer, place in zip(network.layers, plan.placements, strict=True):
        if not (layer.has_weights and has_bias(layer)) or layer.groups > 1:
            continue
        n = bias_entries(layer.out_shape[0], place.out_processors, dev)
        q = place.bias_quadrant
        if q is None:
            q = min(range(quadrants), key=lambda k: (fill[k], k))
        if not 0 <= q < quadrants:
            out.append(Issue(layer.name, "bias-group", f"bias quadrant {q} does not exist"))
            continue
        start = fill[q] if place.bias_offset is None else place.bias_offset
        entries = f"bias entries {start}..{start + n}"
        clash = [name for a, b, name in spans[q] if a < start + n and start < b]
        if clash:
            message = f"{entries} of quadrant {q} overlap layer {clash[0]}'s"
            out.append(Issue(layer.name, "bias-overlap", message))
        if start + n > dev.bias_entries_per_quadrant:
            message = f"{entries} pass the {dev.bias_entries_per_quadrant} of quadrant {q}"
            out.append(Issue(layer.name, "bias-memory", message))
        spans[q].append((start, start + n, layer.name))
        fill[q] = max(fill[q], start + n)
    return out


def _depthwise_bias_issues(
    network: Network,
    plan: Plan,
    dev: Max7800xDevice,
    spans: list[list[tuple[int, int, str]]],
    fill: list[int],
) -> list[Issue]:
    """The depthwise layers' bias slices, first and in layer order (targets/max7800x/
    depthwise_bias.py): their spans and ``fill`` per quadrant, an issue where they do not fit."""
    out: list[Issue] = []
    for layer, place in zip(network.layers, plan.placements, strict=True):
        if not (layer.has_weights and has_bias(layer) and layer.groups > 1):
            continue
        try:
            slices = depthwise_bias(
                place.in_processors, place.out_processors, layer.out_shape[0], fill, dev
            )
        except DepthwiseBiasError as exc:
            out.append(Issue(layer.name, "bias-memory", f"depthwise bias: {exc}"))
            continue
        for k, (start, held) in slices.entries.items():
            spans[k].append((start, start + len(held), layer.name))
    return out


__all__ = ["Issue", "passthrough_masks_ok", "raise_on_issues", "spec_kernel_words", "validate_plan"]
