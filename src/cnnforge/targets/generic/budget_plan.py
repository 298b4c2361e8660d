"""Planning a float network for a generic accelerator: the schedule moving the fewest DDR bytes,
whole-blob and tiled, with bounds and the curve over budgets (docs/generic-target.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from cnnforge.ir import Network
from cnnforge.targets.generic.bound import lower_bound
from cnnforge.targets.generic.lifetimes import Lifetimes, lifetimes
from cnnforge.targets.generic.memory import Allocation, allocate
from cnnforge.targets.generic.schedule import candidate_orders
from cnnforge.targets.generic.steps import StepGraph, fuse_steps
from cnnforge.targets.generic.target import GenericTarget
from cnnforge.targets.generic.tiling import TiledBound, TiledPlan, Tiler, keep_largest

CURVE_POINTS = 24


@dataclass(frozen=True)
class CurvePoint:
    """DDR bytes of the plan, and the lower bound, in one on-chip budget."""

    budget: int
    transfer_bytes: int
    lower_bound: int
    tiled: TiledPlan  # fused groups on row bands
    tiled_bound: TiledBound


@dataclass(frozen=True)
class GenericPlan:
    """Everything the report shows (report.py renders it as text, JSON, SVG and HTML)."""

    target: GenericTarget
    graph: StepGraph
    schedule: str  # name of the chosen order
    schedules: dict[str, int]  # every candidate order -> its DDR bytes at the budget
    life: Lifetimes
    allocation: Allocation  # at target.onchip_bytes
    lower_bound: int  # at target.onchip_bytes
    min_memory: int  # least budget with no DDR transfer (offsets included)
    peak_live: int  # largest live bytes of a step (min_memory >= peak_live)
    peak_step: str
    weight_resident: frozenset[str]  # steps whose weights stay in the weight store
    curve: tuple[CurvePoint, ...]
    tiled: TiledPlan  # the same schedule in fused groups on row bands, at the budget
    tiled_bound: TiledBound

    @property
    def ops(self) -> int:
        return sum(s.ops for s in self.life.steps)

    @property
    def fc_ops(self) -> int:
        return sum(s.fc_ops for s in self.life.steps)

    def weight_stream_bytes(self, position: int) -> int:
        step = self.life.steps[position]
        if step.name in self.weight_resident:
            return 0
        return step.weights * self.target.weight_bytes

    @property
    def weight_ddr_bytes(self) -> int:
        return sum(self.weight_stream_bytes(k) for k in range(self.life.n))

    def cycles(self, position: int) -> int:
        """max(compute, DDR) cycles of a step: MAC-equivalents (ops / 2) vs bytes moved."""
        step, traffic = self.life.steps[position], self.allocation.steps[position]
        compute = math.ceil((step.ops + step.fc_ops) / 2 / self.target.macs_per_cycle)
        moved = traffic.read + traffic.written + self.weight_stream_bytes(position)
        return max(compute, math.ceil(moved / self.target.ddr_bytes_per_cycle))


def plan_generic(
    network: Network | StepGraph, target: GenericTarget, curve_points: int = CURVE_POINTS
) -> GenericPlan:
    """Plan ``network`` (a model-level or hardware float network) for ``target``."""
    graph = network if isinstance(network, StepGraph) else fuse_steps(network)
    budget = target.onchip_bytes
    tried: dict[str, tuple[tuple[int, int], Lifetimes, Allocation]] = {}
    for name, order in candidate_orders(graph, target.act_bytes).items():
        life = lifetimes(graph, order, target)
        alloc = allocate(life, budget)
        tried[name] = ((alloc.transfer_bytes, max(life.live_bytes(), default=0)), life, alloc)
    schedule = min(tried, key=lambda n: tried[n][0])
    _, life, alloc = tried[schedule]
    live = life.live_bytes()
    peak = max(live, default=0)
    peak_step = life.steps[live.index(peak)].name if live else ""
    roomy = allocate(life, max(sum(life.size.values()), 1))
    min_memory = _least_free_budget(life, peak, roomy.arena)
    resident = _resident_weights(graph, target)
    tiler = Tiler(graph, life, target, resident)
    curve = _curve(life, tiler, min_memory, budget, curve_points)
    at_budget = [c.tiled for c in curve if c.budget == budget]
    tiled = at_budget[0] if at_budget else tiler.plan(budget, [c.tiled.layout for c in curve])
    return GenericPlan(
        target=target,
        graph=graph,
        schedule=schedule,
        schedules={n: t[0][0] for n, t in tried.items()},
        life=life,
        allocation=alloc,
        lower_bound=lower_bound(life, budget),
        min_memory=min_memory,
        peak_live=peak,
        peak_step=peak_step,
        weight_resident=resident,
        curve=curve,
        tiled=tiled,
        tiled_bound=tiler.bound(budget),
    )


def _least_free_budget(life: Lifetimes, peak: int, arena: int) -> int:
    """The least budget in [peak, arena] that plans with no transfer (offsets included)."""
    lo, hi = peak, arena
    while lo < hi:
        mid = (lo + hi) // 2
        if allocate(life, mid).transfer_bytes == 0:
            hi = mid
        else:
            lo = mid + 1
    return hi


def _curve(
    life: Lifetimes, tiler: Tiler, top: int, budget: int, points: int
) -> tuple[CurvePoint, ...]:
    budgets = {top * i // max(points - 1, 1) for i in range(points)} | {top}
    if budget <= top:
        budgets.add(budget)
    out: list[CurvePoint] = []
    for b in sorted(budgets):  # a layout that fits a smaller budget is tried at larger ones
        whole = allocate(life, b)
        tiled = tiler.plan(b, [out[-1].tiled.layout] if out else [], whole)
        out.append(CurvePoint(b, whole.transfer_bytes, lower_bound(life, b), tiled, tiler.bound(b)))
    return tuple(out)


def _resident_weights(graph: StepGraph, target: GenericTarget) -> frozenset[str]:
    """Steps whose weights stay in the weight store (largest, then by name, while they fit)."""
    steps = sorted(graph.steps, key=lambda s: s.name)
    need = [s.weights * target.weight_bytes for s in steps]
    return frozenset(steps[i].name for i in keep_largest(need, target.weight_onchip_bytes))
