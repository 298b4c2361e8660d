"""A lower bound on the DDR bytes any plan of one schedule needs in a given on-chip budget.

At step k the live bytes L_k (lifetimes.py) exceed the budget B by E_k = max(0, L_k - B), so
at least E_k bytes of blobs live at k are off chip then. Relax blobs into independent bytes:
- every off-chip byte of a blob other than the input was written to DDR once: the writes are at
  least the least number of bytes whose live ranges cover every E_k;
- an off-chip byte is read back before the use that ends the stretch it was off chip in: cut
  each blob's live range at its uses (segments [produced, use 1], (use 1, use 2], ...); the
  reads are at least the least number of segment bytes covering every E_k (an output's stretch
  after its last use is free: the host reads it from DDR at the end).
Both are interval-covering problems with unit costs, solved exactly by a left-to-right sweep
that takes bytes from the covering interval that reaches furthest (the classic exchange
argument); reads + writes >= the two minima, so their sum bounds every plan from below.
"""

from __future__ import annotations

from cnnforge.ir import INPUT
from cnnforge.targets.generic.lifetimes import Lifetimes

Interval = tuple[int, int, int, bool]  # (first, last, bytes, free)


def lower_bound(life: Lifetimes, budget: int) -> int:
    """DDR bytes (read + written) that no plan of this schedule in ``budget`` can go below."""
    excess = [max(0, live - budget) for live in life.live_bytes()]
    if not any(excess):
        return 0
    writes = [(life.produced[b], life.last(b), s, b == INPUT) for b, s in life.size.items()]
    return _min_cover(writes, excess) + _min_cover(_read_segments(life), excess)


def _read_segments(life: Lifetimes) -> list[Interval]:
    segments = []
    for blob, size in life.size.items():
        start = life.produced[blob]
        for use in life.uses[blob]:
            segments.append((start, use, size, False))
            start = use + 1
        if blob in life.outputs or not life.uses[blob]:
            segments.append((start, max(start, life.last(blob)), size, True))
    return segments


def _min_cover(intervals: list[Interval], demand: list[int]) -> int:
    """Least bytes of costly intervals that, with all free ones, cover ``demand`` at each step."""
    n = len(demand)
    need = list(demand)
    for first, last, size, free in intervals:
        if free:
            for k in range(max(first, 0), min(last, n - 1) + 1):
                need[k] = max(0, need[k] - size)
    by_start: dict[int, list[list[int]]] = {}
    for first, last, size, free in intervals:
        if not free and last >= first:
            by_start.setdefault(first, []).append([last, size])
    open_: list[list[int]] = []  # [last, remaining bytes]
    ending = [0] * (n + 1)  # coverage taken, removed after its interval's last step
    covered = cost = 0
    for k in range(n):
        open_ += by_start.get(k, [])
        covered -= ending[k]
        deficit = need[k] - covered
        if deficit <= 0:
            continue
        open_.sort(key=lambda item: -item[0])
        for item in open_:
            if item[0] < k or item[1] == 0:
                continue
            take = min(item[1], deficit)
            item[1] -= take
            deficit -= take
            covered += take
            cost += take
            ending[min(item[0], n - 1) + 1] += take
            if deficit == 0:
                break
    return cost
