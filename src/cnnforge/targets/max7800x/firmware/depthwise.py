"""The depthwise fields of a convolution's registers (``groups`` > 1: each input channel its own
kernels; the MAX78002).

A depthwise layer whose output processors are its input processors runs in broadcast mode (layer
control bit 29); otherwise each quadrant writes its channels' results at its own place (the
write pointer per quadrant, a time-slot step of 4 instances). The time slots count the
quadrant's channels (broadcast: up to 4 per processor group); post-processing bits 30 and 24 are
on, and with bias each quadrant of the input reads its own slice (bias.py,
targets/max7800x/depthwise_bias.py). Learned from the vendor tool's backend
(the time-slot count, write pointer, time-slot offset, layer control, output channel and
post-processing registers) and checked word for word on the host against the vendor's
firmware (tests/data/firmware_state/depthwise-*.npz).
"""

from __future__ import annotations

from cnnforge.targets.max7800x.firmware.facts import LayerFacts
from cnnforge.targets.max7800x.firmware.regmap import RegisterMap, put


def _ffs(x: int) -> int:
    return (x & -x).bit_length() - 1


def broadcast(f: LayerFacts) -> bool:
    """A depthwise layer whose output processors are its input processors."""
    return f.in_map == f.out_map


def depthwise_refusal(f: LayerFacts) -> str:
    """Why the writer cannot write this depthwise layer yet ('' when it can, or when the layer
    is not depthwise)."""
    if f.groups <= 1:
        return ""
    if f.groups != f.in_channels or f.groups != f.out_channels:
        return "a grouped convolution that is not depthwise"
    if f.flatten:  # the vendor tool refuses it
        return "a depthwise convolution that flattens"
    return ""


def _timeslots(f: LayerFacts, groups: list[int]) -> int:
    width = 32 if f.wide else 8
    best = 0
    for q in groups:
        pop = (f.in_map >> (16 * q) & 0xFFFF).bit_count()
        if broadcast(f):
            best = max(best, (min(pop - 1, 3) + 1) * (width // 8) - 1)
        else:
            best = max(best, (pop * width + 7) // 8 - 1)
    return best


def _write_pointer(f: LayerFacts, q: int, rmap: RegisterMap) -> int:
    """Without broadcast: the first output processor of this quadrant's channels."""
    first = _ffs(f.in_map) // 16
    if q < first:
        return 0
    target = (q - first) * 16 + _ffs(f.out_map)
    if q != first:
        target -= _ffs(f.in_map) % 16
    return f.out_offset // 4 | (target // 4) << rmap.write_ptr_shift


def depthwise_values(
    f: LayerFacts,
    q: int,
    groups: list[int],
    values: list[tuple[str, int, str]],
    rmap: RegisterMap,
    bias: dict[int, int] | None = None,
) -> list[tuple[str, int, str]]:
    """``values`` (registers.py's for quadrant ``q``) with the depthwise fields; ``bias``: the
    layer's first bias entry per quadrant (bias.py), each quadrant reads its own slice
    (broadcast: the entry / 4, four entries read at once)."""
    if f.groups <= 1:
        return values
    slots = _timeslots(f, groups)
    out = []
    for name, value, meaning in values:
        if name == "oned":
            value = value & ~0xF | slots
        elif name == "ochan":
            value = (slots + 1) * f.in_expand - 1
        elif name == "wptr_toffs":
            value = 0 if broadcast(f) else rmap.instance_words * 4
        elif name == "wptr_base" and not broadcast(f):
            value = _write_pointer(f, q, rmap)
        elif name == "lctl" and broadcast(f):
            value |= 1 << 29
        elif name == "post":
            value |= put("depthwise", 1) | put("timeslot_enable", 1)
            if bias and q in bias:
                entry = bias[q] // 4 if broadcast(f) else bias[q]
                value |= put("bias_enable", 1) | put("bias_offset", entry)
        out.append((name, value, meaning + (", depthwise" if name == "post" else "")))
    return out
