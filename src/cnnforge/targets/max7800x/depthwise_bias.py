"""Where a depthwise convolution keeps its bias: a slice in every quadrant it spans, as the vendor's
allocator does (docs/hardware/devices.md §4, docs/firmware.md "Bias memory")."""

from __future__ import annotations

from dataclasses import dataclass, field

from cnnforge.geometry import passes, processors_per_pass
from cnnforge.targets.max7800x.device import Max7800xDevice


def _ffs(x: int) -> int:
    return (x & -x).bit_length() - 1


@dataclass(frozen=True)
class DepthwiseBias:
    """A depthwise layer's bias slices: per input quadrant the first entry its registers name, and
    per quadrant touched the first entry written and the channel of each entry (None: unused)."""

    offsets: dict[int, int] = field(default_factory=dict)
    entries: dict[int, tuple[int, list[int | None]]] = field(default_factory=dict)


class DepthwiseBiasError(ValueError):
    """The span of processors cannot be laid out (the vendor tool fails on it too)."""


def broadcast_order(p: int, per: int) -> int:
    """The processor whose channel bias entry ``p`` of a broadcast layer holds: the four
    processors of an instance read their entries in parallel (entry 1 holds processor 4's)."""
    return (p & ~(per - 1)) + (p % 4) * 4 + (p % per) // 4


def depthwise_bias(
    in_mask: int, out_mask: int, channels: int, fill: list[int], dev: Max7800xDevice
) -> DepthwiseBias:
    """The slices of a depthwise layer of ``channels`` channels on ``in_mask`` writing
    ``out_mask``, placed after ``fill`` (entries used so far per quadrant, updated here)."""
    per = dev.processors_per_quadrant
    quad = (1 << per) - 1
    broadcast = in_mask == out_mask
    out = DepthwiseBias()
    for q in range(dev.quadrants):
        if in_mask >> (per * q) & quad:
            if broadcast:
                fill[q] = (fill[q] + 3) & ~3
            out.offsets[q] = fill[q]
    span = in_mask
    if not broadcast:  # the first quadrant's processors count from its start
        first = _ffs(in_mask) // per
        span &= ~(quad << (per * first))
        span |= (in_mask & quad << (per * first)) >> (_ffs(in_mask) % per)
    start, last = _ffs(span), span.bit_length() - 1
    if broadcast:
        last = ((last + per) & ~(per - 1)) - 1
    if broadcast or len(out.offsets) > 1:  # the vendor clears the low 16 bits: processor 0
        start &= ~quad
    columns = _columns(span, start, last, channels, dev)
    order = (lambda p: broadcast_order(p, per)) if broadcast else (lambda p: p)
    for expand in range(passes(channels, dev)):
        for p in range(start, last + 1):
            q = p // per
            src = order(p) - start
            channel = columns[src] if src < len(columns) else None
            if channel is not None:
                channel += expand * processors_per_pass(channels, dev)
                channel = channel if channel < channels else None
            _, held = out.entries.setdefault(q, (fill[q], []))
            held.append(channel)
            fill[q] += 1
            if fill[q] > dev.bias_entries_per_quadrant:
                raise DepthwiseBiasError(f"quadrant {q} bias memory exhausted")
    _, held = out.entries[q]  # the last quadrant gives its trailing empty entries back
    while held and held[-1] is None:
        held.pop()
        fill[q] -= 1
    return out


def _columns(span: int, start: int, last: int, channels: int, dev: Max7800xDevice) -> list:
    """Per processor from ``start``: the channel whose bias it takes (None: a gap, inserted at the
    processor's number as the vendor does); a gap past the end fails."""
    width = processors_per_pass(channels, dev)
    columns: list[int | None] = list(range(width))
    for p in range(start, last + 1):
        if not span >> p & 1:
            if p > len(columns):
                raise DepthwiseBiasError(f"processor {p}: no bias entry can be inserted there")
            columns.insert(p, None)
    return columns
