"""The MAX78002's calcx4 and read-ahead in a plan (docs/firmware.md "calcx4, read-ahead"): turning
them on where they may go, and naming the layers that break the vendor tool's rules for them."""

from __future__ import annotations

from dataclasses import replace

from cnnforge.geometry import layer_in_channels, passes
from cnnforge.ir import Layer, Network, Op
from cnnforge.targets.max7800x.device import Max7800xDevice
from cnnforge.targets.max7800x.placement import Placement, Plan


def _block(offset: int, dev: Max7800xDevice) -> int:
    """The memory of the data-memory instance a byte offset lies in."""
    return offset // (dev.instance_bytes // dev.data_instance_blocks)


def _pixels(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape[1:]:
        n *= d
    return n


def read_ahead_conflict(network: Network, plan: Plan, index: int, dev: Max7800xDevice) -> str:
    """Why layer ``index`` cannot read ahead ('' when it can)."""
    layer, place = network.layers[index], plan.placements[index]
    operands = layer.operand_count
    in_shape = network.input_shapes(layer)[0]
    words = operands * passes(layer_in_channels(network, layer), dev) * _pixels(in_shape)
    first_in, last_in = place.in_offset, place.in_offset + 4 * words - 1
    out_words = passes(layer.out_shape[0], dev) * _pixels(layer.out_shape)
    first_out, last_out = place.out_offset, place.out_offset + 4 * out_words - 1
    if _block(first_in, dev) == _block(first_out, dev) or (
        _block(last_in, dev) == _block(last_out, dev)
    ):
        return (
            f"read-ahead: input {first_in:#x}-{last_in:#x} and output {first_out:#x}-"
            f"{last_out:#x} share a memory of the data-memory instance"
        )
    if place.streaming:
        for j in range(index):
            if plan.placements[j].streaming and _block(
                plan.placements[j].in_offset, dev
            ) == _block(place.in_offset, dev):
                return (
                    f"read-ahead: its streaming buffer at {place.in_offset:#x} shares a memory "
                    f"with layer {network.layers[j].name}'s"
                )
    return ""


def calcx4_conflict(layer: Layer) -> str:
    """Why layer ``layer`` cannot compute four output channels at once ('' when it can)."""
    if layer.groups > 1:
        return "calcx4: a depthwise convolution"
    if layer.out_shape[0] % 4:
        return f"calcx4: {layer.out_shape[0]} output channels, not a multiple of 4"
    return ""


def _calcx4_fits(layer: Layer, place: Placement, dev: Max7800xDevice) -> bool:
    """A 3x3 Conv2d on gap-free output processors from a multiple of 4 whose kernels fit the
    vendor's count in fours (the quarters then hold them all)."""
    out = place.out_processors
    first = (out & -out).bit_length() - 1
    contiguous = (out >> first) & ((out >> first) + 1) == 0
    square = layer.op is Op.CONV2D and tuple(layer.kernel_size) == (3, 3) and not layer.flatten
    channels = layer.out_shape[0]
    kernels = out.bit_count() * passes(channels, dev)
    fill = kernels <= 4 * ((channels + 3) // 4)
    return layer.has_weights and square and first % 4 == 0 and contiguous and fill


def with_speedups(
    network: Network, plan: Plan, dev: Max7800xDevice, calcx4: bool, read_ahead: bool
) -> Plan:
    """``plan`` with calcx4 and / or read-ahead on every layer that can take them (and a note
    saying which)."""
    places = list(plan.placements)
    notes = []
    if calcx4:
        on = [
            i
            for i, (x, p) in enumerate(zip(network.layers, places, strict=True))
            if not calcx4_conflict(x) and _calcx4_fits(x, p, dev)
        ]
        places = [replace(p, calcx4=i in on) for i, p in enumerate(places)]
        notes.append(
            f"--calcx4: on {len(on)} of {len(places)} layers ({_names(network, on)}); not on "
            "layers other than 3x3 Conv2d with output channels in fours on aligned processors"
        )
    if read_ahead:  # not on streaming layers: it would lengthen their buffers
        on = [
            i
            for i, (x, p) in enumerate(zip(network.layers, places, strict=True))
            if x.has_weights and not p.streaming and not read_ahead_conflict(network, plan, i, dev)
        ]
        places = [replace(p, read_ahead=i in on) for i, p in enumerate(places)]
        notes.append(
            f"--read-ahead: on {len(on)} of {len(places)} layers ({_names(network, on)}); not "
            "where input and output share a memory of the data-memory instance "
            f"({dev.instance_bytes // dev.data_instance_blocks // 1024} KiB), nor on streaming "
            "layers or layers without weights"
        )
    return replace(plan, placements=tuple(places), notes=(*plan.notes, *notes))


def _names(network: Network, on: list[int]) -> str:
    return ", ".join(network.layers[i].name for i in on) or "none"


def speedup_issues(network: Network, plan: Plan, dev: Max7800xDevice) -> list[tuple[str, str]]:
    """(layer, message) for every speed-up rule ``plan`` breaks."""
    out = []
    for i, (layer, place) in enumerate(zip(network.layers, plan.placements, strict=True)):
        if (place.calcx4 or place.read_ahead or place.tcalc) and not dev.speedups:
            out.append((layer.name, f"calcx4 / read-ahead / tcalc: not on {dev.name}"))
            continue
        why = calcx4_conflict(layer) if place.calcx4 and layer.has_weights else ""
        why = why or (read_ahead_conflict(network, plan, i, dev) if place.read_ahead else "")
        if why:
            out.append((layer.name, why))
    return out


__all__ = ["calcx4_conflict", "read_ahead_conflict", "speedup_issues", "with_speedups"]
