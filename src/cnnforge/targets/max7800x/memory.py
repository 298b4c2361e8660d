"""Data-memory offsets by liveness, largest unit first at the lowest offset that fits: no two live
tensors share a word (docs/hardware/devices.md §6)."""

from __future__ import annotations

from dataclasses import dataclass

from cnnforge.errors import PlanError
from cnnforge.geometry import tensor_geometry
from cnnforge.ir import INPUT, Network
from cnnforge.targets.max7800x.device import Max7800xDevice
from cnnforge.targets.max7800x.groups import GroupKind
from cnnforge.targets.max7800x.inplace import in_place_words
from cnnforge.targets.max7800x.masks import Unit, instances_of


@dataclass(frozen=True)
class Rect:
    """One tensor's footprint: instances (16-bit mask) x bytes x layer interval."""

    tensor: str
    instances: int
    birth: int
    death: int
    span: int  # bytes from the unit's base offset
    partner: str = ""  # the input this tensor may overwrite in place (plan/inplace.py)
    trail: int = 0  # bytes the output must start below that input

    def conflicts(self, other: Rect, base: int, other_base: int) -> bool:
        """True when both are live at once on a shared instance with overlapping bytes."""
        if self.partner == other.tensor and other_base - base >= self.trail:
            return False
        if other.partner == self.tensor and base - other_base >= other.trail:
            return False
        return (
            bool(self.instances & other.instances)
            and self.birth <= other.death
            and other.birth <= self.death
            and base < other_base + other.span
            and other_base < base + self.span
        )


def tensor_span(network: Network, name: str, data_format: str, dev: Max7800xDevice) -> int:
    """Bytes a tensor occupies in each of its instances, without gaps
    (docs/hardware/devices.md §2)."""
    geo = tensor_geometry(network, name, dev)
    if name == INPUT and data_format == "CHW":
        return 4 * -(-geo.pixels * geo.passes // 4)
    return 4 * geo.words


def unit_rects(
    network: Network,
    unit: Unit,
    masks: dict[str, int],
    live: dict[str, tuple[int, int]],
    data_format: str,
    dev: Max7800xDevice,
    in_place: bool = True,
    spans: dict[str, int] | None = None,
) -> tuple[Rect, ...]:
    """The rectangles of a unit's parts relative to its base offset (``in_place``: with the partners
    each may overwrite; ``spans``: streamed tensors' smaller buffers)."""
    k = len(unit.group.parts) if unit.group.kind is GroupKind.INTERLEAVED else 1
    spans = spans or {}
    return tuple(
        Rect(
            tensor=p,
            instances=instances_of(masks[p], dev),
            birth=live[p][0],
            death=live[p][1],
            span=spans[p] if p in spans else tensor_span(network, p, data_format, dev) * k,
            **(_in_place(network, p, live, data_format, spans, dev) if k == 1 and in_place else {}),
        )
        for p in unit.group.parts
    )


def _in_place(
    network: Network,
    name: str,
    live: dict[str, tuple[int, int]],
    data_format: str,
    spans: dict[str, int],
    dev: Max7800xDevice,
) -> dict[str, object]:
    """The partner input a tensor may overwrite in place, and by how far it must trail it."""
    if name == INPUT or name in spans or network.layer(name).inputs[0] in spans:
        return {}
    layer = network.layer(name)
    words = in_place_words(network, layer, dev)
    source = layer.inputs[0]
    if words is None or live[source][1] != live[name][0]:
        return {}
    if source == INPUT and data_format == "CHW":
        return {}
    return {"partner": source, "trail": 4 * words}


def assign_offsets(
    network: Network,
    units: list[Unit],
    masks: dict[str, int],
    live: dict[str, tuple[int, int]],
    dev: Max7800xDevice,
    data_format: str,
    in_place: bool = False,
    spans: dict[str, int] | None = None,
) -> dict[str, int]:
    """``{tensor: out offset}`` (bytes), or ``PlanError``; ``in_place``: proven in-place layers may
    overwrite their dying input (asked only when nothing else fits)."""
    rects = [unit_rects(network, u, masks, live, data_format, dev, in_place, spans) for u in units]
    by_size = sorted(range(len(units)), key=lambda i: _size_key(rects[i], units[i]))
    by_size_late = sorted(
        range(len(units)), key=lambda i: (_size_key(rects[i], units[i])[0], -units[i].birth)
    )
    by_birth = sorted(range(len(units)), key=lambda i: (units[i].birth, i))
    best: dict[int, int] | None = None
    for order in (by_size, by_size_late, by_birth, by_birth[::-1]):
        bases = _place(order, rects, dev.instance_bytes)
        if bases is not None and (best is None or _top(bases, rects) < _top(best, rects)):
            best = bases
    if best is None:
        unbounded = [_place(order, rects, 1 << 40) for order in (by_size, by_birth)]
        top = min(_top(b, rects) for b in unbounded if b is not None)
        raise _exhausted(network, rects, dev, top)
    out: dict[str, int] = {}
    for i, unit in enumerate(units):
        step = 4 if unit.group.kind is GroupKind.INTERLEAVED else 0
        for j, part in enumerate(unit.group.parts):
            out[part] = best[i] + step * j
    return out


def _size_key(rects: tuple[Rect, ...], unit: Unit) -> tuple[int, int, int]:
    span = max(r.span * bin(r.instances).count("1") for r in rects)
    return (-span, -(unit.death - unit.birth), unit.birth)


def _top(bases: dict[int, int], rects: list[tuple[Rect, ...]]) -> int:
    return max(bases[i] + r.span for i in bases for r in rects[i])


def _place(order: list[int], rects: list[tuple[Rect, ...]], limit: int) -> dict[int, int] | None:
    placed: list[tuple[Rect, int]] = []
    bases: dict[int, int] = {}
    for i in order:
        mine = rects[i]
        near = [
            (r, b)
            for r, b in placed
            if any(
                m.instances & r.instances and m.birth <= r.death and r.birth <= m.death
                for m in mine
            )
        ]
        candidates = sorted(
            c for c in {0, *_candidates(mine, near, limit)} if c >= 0 and c % 4 == 0
        )
        base = next((c for c in candidates if _fits(mine, c, near, limit)), None)
        if base is None:
            return None
        bases[i] = base
        placed.extend((m, base) for m in mine)
    return bases


def _candidates(mine: tuple[Rect, ...], near: list[tuple[Rect, int]], limit: int) -> set[int]:
    """Ends of nearby tensors, the top of memory and in-place positions next to partners."""
    out = {b + r.span for r, b in near}
    out.update(limit - m.span for m in mine)
    for m in mine:
        out.update(b - m.trail for r, b in near if r.tensor == m.partner)
        out.update(b + r.trail for r, b in near if r.partner == m.tensor)
    return {c - c % 4 for c in out}


def _fits(mine: tuple[Rect, ...], base: int, near: list[tuple[Rect, int]], limit: int) -> bool:
    if any(base + m.span > limit for m in mine):
        return False
    return not any(m.conflicts(r, base, b) for m in mine for r, b in near)


def _exhausted(
    network: Network, rects: list[tuple[Rect, ...]], dev: Max7800xDevice, top: int
) -> PlanError:
    """Which layer needs the most data memory in one instance, and by how much it is short
    (``top``: the highest byte the best arrangement found would need)."""
    steps = range(-1, len(network.layers) + 1)
    worst = (0, 0, 0)
    for t in steps:
        for k in range(16):
            need = sum(
                r.span
                for rs in rects
                for r in rs
                if r.instances >> k & 1 and r.birth <= t <= r.death
            )
            worst = max(worst, (need, t, k))
    need, t, k = worst
    layer = network.layers[max(0, min(t, len(network.layers) - 1))]
    short = max(need, top) - dev.instance_bytes
    return PlanError(
        f"data memory exhausted on {dev.name}: at layer {layer.name} the live tensors need "
        f"{need} bytes in instance {k}; the best arrangement found needs {top} of the "
        f"{dev.instance_bytes} bytes per instance (short by {short} bytes)",
        where=f"layer {layer.name} ({layer.module_path or layer.name})",
        hint="reduce the input size or the channels, fold the input (space-to-depth), "
        "or use a device with more data memory (MAX78002)",
    )
