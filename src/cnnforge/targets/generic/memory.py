"""Allocation of blobs into an on-chip budget, spilling to DDR by furthest next use (Belady), then
first-fit offsets in the best of a few orders (docs/generic-target.md "The model")."""

from __future__ import annotations

from dataclasses import dataclass, field

from cnnforge.ir import INPUT
from cnnforge.targets.generic.lifetimes import Lifetimes


@dataclass
class _Buffer:
    """One on-chip residency (an in-place chain of blobs shares one)."""

    size: int
    start: int
    end: int = -1  # last position it holds data; -1 while open
    blobs: list[str] = field(default_factory=list)
    offset: int = 0


@dataclass(frozen=True)
class Residency:
    """A blob on chip at ``offset`` from position ``start`` through ``end``."""

    start: int
    end: int
    offset: int


@dataclass(frozen=True)
class BlobPlan:
    """Where one blob lives: its on-chip residencies and whether it has a DDR home."""

    name: str
    bytes: int
    produced: int
    last: int
    residencies: tuple[Residency, ...]
    ddr: bool  # a DDR copy exists at some point (spilled, streamed out, or the input)
    written: int  # bytes written to DDR for it
    read: int  # bytes read back from DDR for it


@dataclass(frozen=True)
class StepTraffic:
    """Bytes one step moves between chip and DDR (activations only)."""

    read: int
    written: int
    live: int  # bytes live at this step (what a budget with no transfer needs)


@dataclass(frozen=True)
class Allocation:
    """The outcome of planning one schedule into one budget."""

    budget: int
    arena: int  # highest on-chip byte used (offsets + sizes)
    steps: tuple[StepTraffic, ...]
    blobs: tuple[BlobPlan, ...]
    forced: int  # buffers pushed off chip by fragmentation

    @property
    def read_bytes(self) -> int:
        return sum(s.read for s in self.steps)

    @property
    def written_bytes(self) -> int:
        return sum(s.written for s in self.steps)

    @property
    def transfer_bytes(self) -> int:
        return self.read_bytes + self.written_bytes


def allocate(life: Lifetimes, budget: int) -> Allocation:
    """Plan ``life``'s blobs into ``budget`` bytes; offsets fit the budget (rerun if needed)."""
    forced: set[tuple[str, int]] = set()
    for _ in range(4 * (len(life.size) + 1)):
        run = _Run(life, budget, forced)
        run.execute()
        limits = [_limit(life, budget, b) for b in run.buffers]
        arena = _place(run.buffers, limits)
        over = [b for b, top in zip(run.buffers, limits, strict=True) if b.offset + b.size > top]
        if not over:
            return run.result(arena, len(forced))
        for buf in over:
            forced.add((buf.blobs[0], buf.start))
    raise AssertionError("allocation did not converge")  # each round forces a new buffer


class _Run:
    """One pass of Belady planning over the schedule (mutable scratch, local to ``allocate``)."""

    def __init__(self, life: Lifetimes, budget: int, forced: set[tuple[str, int]]) -> None:
        self.life, self.budget, self.forced = life, budget, forced
        self.onchip: dict[str, _Buffer] = {}
        self.in_ddr: set[str] = {INPUT}  # the input arrives through DDR: a clean copy
        self.buffers: list[_Buffer] = []
        self.read = [0] * life.n
        self.written = [0] * life.n
        self.blob_read: dict[str, int] = dict.fromkeys(life.size, 0)
        self.blob_written: dict[str, int] = dict.fromkeys(life.size, 0)

    def used(self) -> int:
        return sum(b.size for b in {id(b): b for b in self.onchip.values()}.values())

    def _open(self, blob: str, position: int) -> None:
        buf = _Buffer(self.life.size[blob], position, blobs=[blob])
        self.buffers.append(buf)
        self.onchip[blob] = buf

    def _close(self, blob: str, end: int) -> None:
        buf = self.onchip.pop(blob)
        if buf.blobs[-1] == blob:
            buf.end = end

    def _write(self, blob: str, position: int) -> None:
        if blob not in self.in_ddr:
            self.in_ddr.add(blob)
            self.written[position] += self.life.size[blob]
            self.blob_written[blob] += self.life.size[blob]

    def execute(self) -> None:
        life = self.life
        if life.size[INPUT] <= self.room(0) and (INPUT, 0) not in self.forced:
            self._open(INPUT, 0)
        for k, reads in enumerate(life.reads):
            demands = []
            for blob in reads:
                if blob not in self.onchip:  # streamed from DDR
                    cost = life.read_cost.get((k, blob), life.size[blob])
                    self.read[k] += cost
                    self.blob_read[blob] += cost
                    nxt = life.next_use(blob, k)
                    if nxt is not None:
                        demands.append((nxt, 1, blob))
            for blob in life.writes[k]:
                nxt = life.next_use(blob, k)
                demands.append((k if nxt is None else nxt, 0, blob))
            for nxt, _, blob in sorted(demands):
                self._demand(k, blob, nxt, reads)
            for blob in (*reads, *life.writes[k]):
                if blob in self.onchip and life.last(blob) == k:
                    self._close(blob, k)
        for blob in list(self.onchip):
            self._close(blob, life.n - 1)

    def room(self, k: int) -> int:
        """On-chip bytes whole blobs may use at position ``k``."""
        return self.budget - self.life.reserved[k]

    def _demand(self, k: int, blob: str, nxt: int, reads: tuple[str, ...]) -> None:
        """Room for ``blob`` (step k's output, or a reloaded input) or DDR for it."""
        life = self.life
        is_output = blob in life.writes[k]
        dying = life.inplace.get(k, ()) if is_output else ()
        operand = next((b for b in dying if b in self.onchip), None)
        if operand is not None and (blob, k) not in self.forced:
            buf = self.onchip.pop(operand)  # the output overwrites its operand in place
            buf.blobs.append(blob)
            self.onchip[blob] = buf
            return
        size = life.size[blob]
        victims = [] if (blob, k) in self.forced else self._victims(k, nxt, size, reads)
        if victims is None or (blob, k) in self.forced:
            if is_output:
                self._write(blob, k)  # produced straight into DDR
            return
        for victim in victims:
            self._write(victim, k)
            self._close(victim, k - 1)
        self._open(blob, k)
        if not is_output:
            self.in_ddr.add(blob)  # reloaded: its DDR copy stays valid

    def _victims(self, k: int, nxt: int, size: int, reads: tuple[str, ...]) -> list[str] | None:
        """Blobs to evict (furthest next use first) to fit ``size`` bytes, or None."""
        free = self.room(k) - self.used()
        if free >= size:
            return []
        life = self.life
        candidates = []
        for blob, buf in self.onchip.items():
            if blob in reads or (buf.start == k and blob != INPUT):
                continue
            later = life.next_use(blob, k - 1)
            later = life.n + 1 if later is None else later
            if later > nxt:
                candidates.append((later, buf.size, blob))
        chosen = []
        for _, bsize, blob in sorted(candidates, reverse=True):
            chosen.append(blob)
            free += bsize
            if free >= size:
                return chosen
        return None

    def result(self, arena: int, forced: int) -> Allocation:
        life = self.life
        live = life.live_bytes()
        residencies: dict[str, list[Residency]] = {b: [] for b in life.size}
        for buf in self.buffers:
            for blob in dict.fromkeys(buf.blobs):
                start = max(buf.start, life.produced[blob])
                end = min(buf.end, life.last(blob))
                if end >= start:
                    residencies[blob].append(Residency(start, end, buf.offset))
        blobs = tuple(
            BlobPlan(
                name=b,
                bytes=life.size[b],
                produced=life.produced[b],
                last=life.last(b),
                residencies=tuple(residencies[b]),
                ddr=b in self.in_ddr,
                written=self.blob_written[b],
                read=self.blob_read[b],
            )
            for b in life.size
        )
        steps = tuple(StepTraffic(self.read[k], self.written[k], live[k]) for k in range(life.n))
        return Allocation(self.budget, arena, steps, blobs, forced)


def _limit(life: Lifetimes, budget: int, buf: _Buffer) -> int:
    """The highest end offset ``buf`` may have: the budget less what its positions reserve."""
    end = buf.end if buf.end >= buf.start else life.n - 1
    return budget - max(life.reserved[buf.start : end + 1], default=0)


#: Orders in which buffers are given offsets; the one giving the smallest arena is kept.
_PLACEMENT_ORDERS = (
    lambda b: (-b.size, b.start),  # greedy by size (TFLite)
    lambda b: (b.start, -b.size),  # by first use
    lambda b: (-b.end, -b.size),  # by last use, latest first
    lambda b: (-(b.end - b.start + 1) * b.size, b.start),  # by area
)


def _place(buffers: list[_Buffer], limits: list[int]) -> int:
    """Offsets by first fit over time-overlapping buffers, the best of a few orders (fewest buffers
    above their limits, then the smaller arena); the arena."""
    uniform = len(set(limits)) <= 1
    orders = _PLACEMENT_ORDERS
    if not uniform:
        top = dict(zip(map(id, buffers), limits, strict=True))
        orders = (*orders, lambda b: (top[id(b)], -b.size, b.start))
    best: tuple[tuple[int, int], list[int]] | None = None
    for key in orders:
        offsets = _first_fit(buffers, key)
        arena = max((o + b.size for o, b in zip(offsets, buffers, strict=True)), default=0)
        over = (
            0
            if uniform
            else sum(o + b.size > t for o, b, t in zip(offsets, buffers, limits, strict=True))
        )
        if best is None or (over, arena) < best[0]:
            best = ((over, arena), offsets)
    assert best is not None
    for offset, buf in zip(best[1], buffers, strict=True):
        buf.offset = offset
    return max((o + b.size for o, b in zip(best[1], buffers, strict=True)), default=0)


def _first_fit(buffers: list[_Buffer], key) -> list[int]:
    offsets = [0] * len(buffers)
    placed: list[int] = []
    for i in sorted(range(len(buffers)), key=lambda i: key(buffers[i])):
        buf = buffers[i]
        busy = sorted(
            (offsets[j], offsets[j] + buffers[j].size)
            for j in placed
            if buffers[j].start <= buf.end and buf.start <= buffers[j].end
        )
        offset = 0
        for lo, hi in busy:
            if lo - offset >= buf.size:
                break
            offset = max(offset, hi)
        offsets[i] = offset
        placed.append(i)
    return offsets
