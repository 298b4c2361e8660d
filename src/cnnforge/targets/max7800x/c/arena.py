"""Static arena layout of the generated C: buffers live from writer to last reader (step -1 loads
the input) get first-fit constant offsets; overlapping lifetimes never share bytes."""

from __future__ import annotations

from dataclasses import dataclass

ALIGN = 4  # every buffer starts on a 32-bit boundary (wide outputs are int32)


@dataclass(frozen=True)
class Buffer:
    """A tensor of ``size`` bytes, written at step ``start`` and last read at step ``end``."""

    name: str
    size: int
    start: int
    end: int

    def overlaps_in_time(self, other: Buffer) -> bool:
        """Both are live at some step."""
        return self.start <= other.end and other.start <= self.end


@dataclass(frozen=True)
class Arena:
    """Offsets per buffer (same order as the buffers given) and the total size in bytes."""

    offsets: tuple[int, ...]
    size: int


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _first_fit(size: int, taken: list[tuple[int, int]]) -> int:
    """Lowest aligned offset where ``size`` bytes avoid every (offset, size) in ``taken``."""
    offset = 0
    for start, length in sorted(taken):
        if offset + size <= start:
            break
        offset = max(offset, _align(start + length))
    return offset


def allocate(buffers: list[Buffer]) -> Arena:
    """First-fit in order of definition (then size, largest first): deterministic and compact."""
    order = sorted(range(len(buffers)), key=lambda i: (buffers[i].start, -buffers[i].size, i))
    offsets = [0] * len(buffers)
    placed: list[int] = []
    for i in order:
        buf = buffers[i]
        taken = [(offsets[j], buffers[j].size) for j in placed if buffers[j].overlaps_in_time(buf)]
        offsets[i] = _first_fit(buf.size, taken)
        placed.append(i)
    size = max((offsets[i] + buffers[i].size for i in range(len(buffers))), default=0)
    return Arena(tuple(offsets), _align(max(size, 1)))


def check_arena(buffers: list[Buffer], arena: Arena) -> None:
    """Assert the allocation invariant: buffers live at the same time never overlap in bytes."""
    for i, a in enumerate(buffers):
        for j in range(i + 1, len(buffers)):
            b = buffers[j]
            if not a.overlaps_in_time(b) or a.size == 0 or b.size == 0:
                continue
            oa, ob = arena.offsets[i], arena.offsets[j]
            assert oa + a.size <= ob or ob + b.size <= oa, (a, b)
