"""Tiled, fused schedules: groups of steps run on row bands under the on-chip budget, chosen by
dynamic programming over the schedule (docs/generic-target.md "Tiled, fused schedules")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from cnnforge.ir import INPUT
from cnnforge.targets.generic.bands import Bands, BandWalk, blob_rows, recompute
from cnnforge.targets.generic.lifetimes import Lifetimes
from cnnforge.targets.generic.memory import Allocation, allocate
from cnnforge.targets.generic.rows import chain_first, chain_last
from cnnforge.targets.generic.steps import Step, StepGraph
from cnnforge.targets.generic.target import GenericTarget

MAX_GROUP_STEPS = 32  # longest fused group considered (ResNet-50's layer1 is 15 steps)
RECOMPUTE_GROUP_STEPS = 12  # halo=recompute: each longer group is walked again, so fewer
#: DDR bytes counted per byte that a group's whole blobs exceed the budget by: written and
#: read (2), or 1 for a blob that one spill covers across several groups; both are tried.
OVERFLOW_COSTS = (2, 1)


@dataclass(frozen=True)
class Group:
    """Consecutive schedule positions ``first``..``last`` run together."""

    first: int
    last: int
    steps: tuple[Step, ...]
    bands: Bands | None  # None: one step on whole blobs
    kept: frozenset[str]  # steps whose weights stay on chip for the group's bands
    weight_ddr_bytes: int  # weights read from DDR per inference
    line_buffer_bytes: int
    kept_weight_bytes: int
    extra_ops: int = 0  # halo rows computed again (none when line buffers keep them)
    #: whole blob -> bytes the group reads of it from DDR when it is there (halos read again)
    read_bytes: Mapping[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        if len(self.steps) == 1:
            return self.steps[0].name
        return f"{self.steps[0].name}..{self.steps[-1].name}"

    @property
    def band_count(self) -> int:
        return 1 if self.bands is None else self.bands.count

    @property
    def reserved(self) -> int:
        return self.line_buffer_bytes + self.kept_weight_bytes


@dataclass(frozen=True)
class TiledPlan:
    """Groups, their lifetimes (one position per group) and the allocation of whole blobs."""

    budget: int
    groups: tuple[Group, ...]
    life: Lifetimes
    allocation: Allocation

    @property
    def activation_bytes(self) -> int:
        return self.allocation.transfer_bytes

    @property
    def weight_bytes(self) -> int:
        return sum(g.weight_ddr_bytes for g in self.groups)

    @property
    def ddr_bytes(self) -> int:
        return self.activation_bytes + self.weight_bytes

    @property
    def extra_ops(self) -> int:
        return sum(g.extra_ops for g in self.groups)

    @property
    def tiled(self) -> tuple[Group, ...]:
        return tuple(g for g in self.groups if g.bands is not None)

    @property
    def layout(self) -> Layout:
        return tuple((g.first, g.last, g.bands and g.bands.count) for g in self.groups)

    def onchip_bytes(self, position: int) -> int:
        """Whole blobs on chip at group ``position`` (an in-place output sharing its operand's
        buffer counted once) plus what the group reserves."""
        buffers = {
            (r.offset, b.bytes)
            for b in self.allocation.blobs
            for r in b.residencies
            if r.start <= position <= r.end
        }
        return sum(size for _, size in buffers) + self.groups[position].reserved


Layout = tuple[tuple[int, int, int | None], ...]  # (first, last, band count or None) per group


@dataclass(frozen=True, eq=False)
class _Candidates:
    """The fused groups ending at one position, as arrays (the planner's DP is vectorised)."""

    first: np.ndarray
    count: np.ndarray
    line_buffer_bytes: np.ndarray
    whole_bytes: np.ndarray  # whole blobs live during the group
    weight_bytes: np.ndarray  # the group's weights, once
    reread_bytes: np.ndarray  # halo=recompute: input rows read again, if read from DDR


class Tiler:
    """The candidate groups of one schedule (budget-free) and the plan for a budget."""

    def __init__(
        self, graph: StepGraph, life: Lifetimes, target: GenericTarget, resident: frozenset[str]
    ) -> None:
        self.life, self.target, self.resident = life, target, resident
        self.shapes = {INPUT: graph.input_shape, **{s.name: s.out_shape for s in graph.steps}}
        self.rows, self.row_bytes = blob_rows(self.shapes, target.act_bytes)
        self.live = life.live_bytes()
        self.recomputes = target.halo == "recompute"
        self._longest = RECOMPUTE_GROUP_STEPS if self.recomputes else MAX_GROUP_STEPS
        self._bands: dict[tuple[int, int, int], Bands] = {}
        self._whole: dict[int, dict[int, int]] = {}
        self.candidates = self._candidates()

    def weight_bytes(self, step: Step) -> int:
        return 0 if step.name in self.resident else step.weights * self.target.weight_bytes

    def _candidates(self) -> dict[int, _Candidates]:
        """End position -> every fused group ending there (shortest, fewest bands first)."""
        rows: dict[int, list[tuple[int, int, int, int, int, int]]] = {}
        steps = self.life.steps
        weights = [self.weight_bytes(s) for s in steps]
        for first in range(self.life.n - 1, -1, -1):
            if not steps[first].tileable:
                continue
            whole = self._whole_bytes(first)
            for count in self._band_counts(steps[first]):
                walker = BandWalk(count, self.rows, self.row_bytes)
                walker.add(steps[first])
                for last in range(first + 1, min(first + self._longest, self.life.n)):
                    if not steps[last].tileable:
                        break
                    walker.add(steps[last])
                    lines, again = walker.line_buffer_bytes, 0
                    if self.recomputes:
                        group = steps[first : last + 1]
                        bands = recompute(walker.freeze(), group, self.rows, self.row_bytes)
                        lines, again = bands.line_buffer_bytes, self._reread(bands)
                    w = sum(weights[first : last + 1])
                    found = (first, count, lines, whole[last], w, again)
                    rows.setdefault(last, []).append(found)
        return {
            last: _Candidates(*np.array(found, dtype=np.int64).T) for last, found in rows.items()
        }

    def _reread(self, bands: Bands) -> int:
        """Bytes of whole inputs read more than once (halos recomputed)."""
        return sum((n - self.rows[b]) * self.row_bytes[b] for b, n in bands.read_rows.items())

    def _band_counts(self, step: Step) -> list[int]:
        """2, 4, 8, ... bands up to the rows of the step's inputs."""
        rows = max(self.rows[b] for b in step.inputs)
        return [1 << e for e in range(1, max(1, rows.bit_length()))]

    def _whole_bytes(self, first: int) -> dict[int, int]:
        """Last position -> bytes of the whole blobs live in a group from ``first`` to it."""
        if first not in self._whole:
            self._whole[first] = self._whole_from(first)
        return self._whole[first]

    def _whole_from(self, first: int) -> dict[int, int]:
        life, out = self.life, {}
        total = 0
        spans = [(b, life.produced[b], life.last(b)) for b in life.size]
        for blob, start, end in spans:
            if start <= first <= end:
                total += life.size[blob]
        ending: dict[int, int] = {}
        starting: dict[int, int] = {}
        for blob, start, end in spans:
            if start > first:
                starting[start] = starting.get(start, 0) + life.size[blob]
            if start >= first and blob != INPUT and blob not in life.outputs:
                ending[end] = ending.get(end, 0) + life.size[blob]  # internal once it ends
        for last in range(first, life.n):
            total += starting.get(last, 0) if last > first else 0
            total -= ending.get(last, 0)
            out[last] = total
        return out

    def bound(self, budget: int) -> TiledBound:
        """Weights read once; a blob larger than ``budget`` that some step needs whole is
        written to DDR once (unless it is the input, which starts there) and read once."""
        weights = sum(self.weight_bytes(s) for s in self.life.steps)
        activations = 0
        for blob, size in self.life.size.items():
            if size <= budget:
                continue
            if blob == INPUT:
                activations += size
            elif self._whole_only(blob, budget):
                activations += size + (size if self.life.uses[blob] else 0)
        return TiledBound(activations, weights)

    def _whole_only(self, blob: str, budget: int) -> bool:
        """True when ``blob`` cannot live in line buffers only: a network output, touched by a step
        reading whole blobs, or needing more rows per output row than ``budget`` holds."""
        life = self.life
        producer = life.steps[life.produced[blob]]
        if blob in life.outputs or not producer.tileable:
            return True
        for k in life.uses[blob]:
            stages = life.steps[k].stages
            if stages is None:
                return True
            out = np.arange(self.rows[life.steps[k].name])
            span = int(np.max(chain_last(stages, out) - chain_first(stages, out))) + 1
            if span * self.row_bytes[blob] > budget:
                return True
        return False

    def plan(
        self, budget: int, hints: Sequence[Layout] = (), untiled: Allocation | None = None
    ) -> TiledPlan:
        """The best measured plan (DDR bytes, then activation bytes) of the DP's groups, the untiled
        groups and the ``hints`` (layouts chosen for other budgets)."""
        singles = tuple((k, k, None) for k in range(self.life.n))
        layouts = [self._choose(budget, cost) for cost in OVERFLOW_COSTS]
        best = None
        for layout in dict.fromkeys((singles, *layouts, *hints)):
            if not self._fits(layout, budget):
                continue
            if layout == singles and untiled is not None:
                groups = tuple(self._group(k, k, None, budget) for k in range(self.life.n))
                plan = TiledPlan(budget, groups, self.life, untiled)
            else:
                plan = self.measure(layout, budget)
            if best is None or (plan.ddr_bytes, plan.activation_bytes) < (
                best.ddr_bytes,
                best.activation_bytes,
            ):
                best = plan
        assert best is not None
        return best

    def _fits(self, layout: Layout, budget: int) -> bool:
        """Every fused group's line buffers fit ``budget``."""
        return all(
            count is None or self._walk(first, last, count).line_buffer_bytes <= budget
            for first, last, count in layout
        )

    def _choose(self, budget: int, overflow_cost: int) -> Layout:
        """Groups minimising weight bytes + ``overflow_cost`` x overflow (module docstring);
        the weights a group keeps are counted as if any bytes of them could stay."""
        n, steps = self.life.n, self.life.steps
        cost = np.zeros(n + 1)
        choice: list[tuple[int, int, int | None]] = [(0, 0, None)] * (n + 1)
        for last in range(n):
            over = max(0, self.live[last] - budget)
            cost[last + 1] = cost[last] + self.weight_bytes(steps[last]) + overflow_cost * over
            choice[last + 1] = (last, last, None)
            found = self.candidates.get(last)
            if found is None:
                continue
            used = found.whole_bytes + found.line_buffer_bytes
            streamed = np.maximum(0, found.weight_bytes - np.maximum(0, budget - used))
            over = np.maximum(0, used - budget)
            value = (
                cost[found.first]
                + found.weight_bytes
                + (found.count - 1) * streamed
                + overflow_cost * over
                + np.where(over > 0, found.reread_bytes, 0)  # inputs likely read from DDR
            )
            value[found.line_buffer_bytes > budget] = np.inf
            pick = int(np.argmin(value))
            if value[pick] < cost[last + 1]:
                cost[last + 1] = value[pick]
                choice[last + 1] = (int(found.first[pick]), last, int(found.count[pick]))
        layout = []
        end = n
        while end > 0:
            layout.append(choice[end])
            end = choice[end][0]
        return tuple(layout[::-1])

    def measure(self, layout: Layout, budget: int) -> TiledPlan:
        """The plan of the groups ``layout`` names, allocated into ``budget``."""
        groups = [self._group(first, last, count, budget) for first, last, count in layout]
        life = group_lifetimes(self.life, groups)
        return TiledPlan(budget, tuple(groups), life, allocate(life, budget))

    def _walk(self, first: int, last: int, count: int) -> Bands:
        key = (first, last, count)
        if key not in self._bands:
            walker = BandWalk(count, self.rows, self.row_bytes)
            steps = self.life.steps[first : last + 1]
            for step in steps:
                walker.add(step)
            bands = walker.freeze()
            if self.recomputes:
                bands = recompute(bands, steps, self.rows, self.row_bytes)
            self._bands[key] = bands
        return self._bands[key]

    def _group(self, first: int, last: int, count: int | None, budget: int) -> Group:
        steps = self.life.steps[first : last + 1]
        weights = [self.weight_bytes(s) for s in steps]
        if count is None:
            return Group(first, last, steps, None, frozenset(), sum(weights), 0, 0)
        bands = self._walk(first, last, count)
        whole = self._whole_bytes(first)[last]
        kept = keep_largest(weights, max(0, budget - whole - bands.line_buffer_bytes))
        kept_bytes = sum(weights[i] for i in kept)
        ddr = kept_bytes + (sum(weights) - kept_bytes) * count
        names = frozenset(steps[i].name for i in kept)
        extra = sum(s.ops * bands.extra_rows.get(s.name, 0) // self.rows[s.name] for s in steps)
        read = {b: n * self.row_bytes[b] for b, n in bands.read_rows.items()}
        lines = bands.line_buffer_bytes
        return Group(first, last, steps, bands, names, ddr, lines, kept_bytes, extra, read)


def keep_largest(weights: Sequence[int], room: int) -> list[int]:
    """Indices of the weights that fit in ``room`` bytes, largest first (ties in order)."""
    kept = []
    for i in sorted(range(len(weights)), key=lambda i: -weights[i]):
        if 0 < weights[i] <= room:
            kept.append(i)
            room -= weights[i]
    return kept


def group_lifetimes(life: Lifetimes, groups: Sequence[Group]) -> Lifetimes:
    """Lifetimes with one position per group: the whole blobs each reads and writes (a blob
    read only inside the group writing it lives in line buffers, never whole)."""
    at = {k: g for g, group in enumerate(groups) for k in range(group.first, group.last + 1)}
    produced = {b: at[p] for b, p in life.produced.items()}
    reads = tuple(
        tuple(dict.fromkeys(b for s in g.steps for b in s.inputs if b == INPUT or produced[b] < i))
        for i, g in enumerate(groups)
    )
    uses: dict[str, list[int]] = {b: [] for b in life.size}
    for g, blobs in enumerate(reads):
        for blob in blobs:
            uses[blob].append(g)
    whole = [b for b in life.size if b == INPUT or b in life.outputs or uses[b]]
    kept = set(whole)
    writes = tuple(tuple(s.name for s in g.steps if s.name in kept) for g in groups)
    inplace = {at[k]: ops for k, ops in life.inplace.items() if groups[at[k]].bands is None}
    return Lifetimes(
        steps=(),
        size={b: life.size[b] for b in whole},
        produced={b: produced[b] for b in whole},
        uses={b: tuple(uses[b]) for b in whole},
        outputs=life.outputs,
        inplace=inplace,
        reads=reads,
        writes=writes,
        reserved=tuple(g.reserved for g in groups),
        read_cost={(i, b): n for i, g in enumerate(groups) for b, n in g.read_bytes.items()},
    )


@dataclass(frozen=True)
class TiledBound:
    """DDR bytes no tiled plan goes below: weights once, and the whole blobs that cannot stay
    on chip written and read once."""

    activation_bytes: int
    weight_bytes: int

    @property
    def ddr_bytes(self) -> int:
        return self.activation_bytes + self.weight_bytes
