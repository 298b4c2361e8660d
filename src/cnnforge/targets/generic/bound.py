"""A lower bound on the DDR bytes any plan of one schedule needs in an on-chip budget: two exact
interval-covering sweeps over the bytes live beyond the budget (writes and reads)."""

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
