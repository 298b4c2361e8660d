"""Bias memory: which quadrant holds each layer's bias bytes, from which entry.

Ordinary layers keep all their bias in one quadrant among those the network uses: on the
MAX78000 flatten layers are placed first, then single-quadrant layers, then by decreasing
length; each goes to the least-filled allowed quadrant (lowest number on ties). A layer's bias
is preceded by ``first output processor % 4`` x passes unused entries. A layer whose plan names
its quadrant (YAML ``bias_group``) counts as single-quadrant and goes there. Each 8-bit entry is one
32-bit word on the bus. A streaming first layer on the MAX78000 has one more unused entry
first. Depthwise layers come before all others, in layer order, with a slice in every
quadrant of their input (targets/max7800x/depthwise_bias.py). A layer whose bias repeats an
earlier layer's reads its entries (dedup.py). Learned from the vendor tool's bias allocator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cnnforge.targets.max7800x.depthwise_bias import depthwise_bias
from cnnforge.targets.max7800x.device import get_device
from cnnforge.targets.max7800x.firmware.dedup import bias_duplicates
from cnnforge.targets.max7800x.firmware.facts import LayerFacts
from cnnforge.targets.max7800x.firmware.regmap import RegisterMap


@dataclass
class BiasLayout:
    """Per layer: (quadrant, first entry); per quadrant: the bytes to load."""

    place: dict[int, tuple[int, int]] = field(default_factory=dict)
    values: list[list[int]] = field(default_factory=lambda: [[] for _ in range(4)])
    # depthwise layers: layer index -> {quadrant: first entry} (every quadrant of its input)
    slices: dict[int, dict[int, int]] = field(default_factory=dict)


def _ffs(x: int) -> int:
    return (x & -x).bit_length() - 1


def used_quadrants(facts: list[LayerFacts]) -> list[int]:
    """Quadrants whose processors some layer reads from."""
    return [q for q in range(4) if any(f.in_map >> (16 * q) & 0xFFFF for f in facts)]


def layout(facts: list[LayerFacts], rmap: RegisterMap) -> BiasLayout:
    """Place the bias of every layer that has a non-zero one."""
    out = BiasLayout()
    fill = [0] * 4
    groups = used_quadrants(facts)
    same = bias_duplicates(facts, {f.index: _stream_skip(f, rmap) for f in facts})
    written = _depthwise([f for f in facts if f.index not in same], rmap, fill, out)
    todo = []
    for f in facts:
        if f.bias is None or not f.has_weights or f.groups > 1 or f.index in same:
            continue
        length = f.out_channels + _ffs(f.out_map) % 4 * f.out_expand + _stream_skip(f, rmap)
        todo.append((f, length))

    def allowed(f: LayerFacts) -> list[int]:
        return groups if f.bias_quadrant is None else [f.bias_quadrant]

    def key(item: tuple[LayerFacts, int]) -> int:
        f, length = item
        if rmap.flatten_bias_first and f.flatten:
            return -1
        return 0 if len(allowed(f)) == 1 else rmap.bias_entries - length

    for f, length in sorted(todo, key=key):
        # calcx4: the bias starts at a multiple of 4 (its register holds the entry / 4)
        q = min(allowed(f), key=lambda g: ((fill[g] + 3) & ~3 if f.calcx4 else fill[g], g))
        fill[q] = (fill[q] + 3) & ~3 if f.calcx4 else fill[q]
        if fill[q] + length > rmap.bias_entries:
            raise ValueError(f"layer {f.name}: bias memory exhausted")
        out.place[f.index] = (q, fill[q])
        fill[q] += length
    for q in range(4):
        out.values[q] = [0] * fill[q]
        for entry, value in written[q].items():
            out.values[q][entry] = value
    for f, _ in todo:
        q, start = out.place[f.index]
        target = start + _ffs(f.out_map) % 4 * f.out_expand + _stream_skip(f, rmap)
        for i, b in enumerate(np.asarray(f.bias).tolist()):
            out.values[q][target + i] = int(b) & 0xFF
    for index, first in same.items():  # the vendor's deduplicated bias: the first's entries
        if first in out.place:
            out.place[index] = out.place[first]
        if first in out.slices:
            out.slices[index] = out.slices[first]
    return out


def _stream_skip(f: LayerFacts, rmap: RegisterMap) -> int:
    return stream_skip(f.index, f.streaming, rmap)


def stream_skip(index: int, streaming: bool, rmap: RegisterMap) -> int:
    """1 for a streaming first layer on a part whose streaming bias reads one entry late
    (MAX78000): its bias starts an entry after its offset (a work-around of the vendor's bias
    allocator), and the hardware reads it there."""
    return int(index == 0 and streaming and not rmap.stream_bias_ok)


def _depthwise(
    facts: list[LayerFacts], rmap: RegisterMap, fill: list[int], out: BiasLayout
) -> list[dict[int, int]]:
    """Place the depthwise layers' bias slices (``out.slices``, ``fill``); per quadrant the
    bytes they write, by entry."""
    written: list[dict[int, int]] = [{} for _ in range(4)]
    dev = get_device(rmap.device)
    for f in facts:
        if f.bias is None or not f.has_weights or f.groups == 1:
            continue
        bias = np.asarray(f.bias).tolist()
        slices = depthwise_bias(f.in_map, f.out_map, f.out_channels, fill, dev)
        out.slices[f.index] = slices.offsets
        for q, (start, held) in slices.entries.items():
            for i, channel in enumerate(held):
                if channel is not None:
                    written[q][start + i] = int(bias[channel]) & 0xFF
    return written
