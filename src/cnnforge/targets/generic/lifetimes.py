"""Blob lifetimes of a schedule: sizes, producers, uses, live bytes per step (in-place aware), the
conventions the planner (memory.py) and the bound (bound.py) share."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field

from cnnforge.ir import INPUT
from cnnforge.targets.generic.steps import Step, StepGraph
from cnnforge.targets.generic.target import GenericTarget


@dataclass(frozen=True)
class Lifetimes:
    """Everything the planner and the bound need about the blobs of one schedule."""

    steps: tuple[Step, ...]  # in schedule order
    size: dict[str, int]  # bytes of every blob
    produced: dict[str, int]  # position of the writing step (the input: 0)
    uses: dict[str, tuple[int, ...]]  # positions of the reading steps, ascending
    outputs: frozenset[str]
    inplace: dict[int, tuple[str, ...]]  # position -> operands its output may overwrite
    reads: tuple[tuple[str, ...], ...]  # position -> whole blobs it reads
    writes: tuple[tuple[str, ...], ...]  # position -> whole blobs it writes
    reserved: tuple[int, ...]  # position -> on-chip bytes not available to whole blobs
    #: (position, blob) -> bytes a read of the blob from DDR moves there, where that is not
    #: its size (a fused group recomputing halos reads some rows more than once)
    read_cost: Mapping[tuple[int, str], int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.reads)

    def last(self, blob: str) -> int:
        """Last position at which ``blob`` is live."""
        if blob in self.outputs:
            return self.n - 1
        uses = self.uses[blob]
        return uses[-1] if uses else self.produced[blob]

    def next_use(self, blob: str, position: int) -> int | None:
        """First position after ``position`` that reads ``blob`` (``n`` for an output), or None."""
        uses = self.uses[blob]
        i = bisect_right(uses, position)
        if i < len(uses):
            return uses[i]
        return self.n if blob in self.outputs else None

    def live_bytes(self) -> list[int]:
        """Bytes live at each position (an in-place output shares its operand's buffer)."""
        delta = [0] * (self.n + 1)
        for blob, size in self.size.items():
            delta[self.produced[blob]] += size
            delta[self.last(blob) + 1] -= size
        live, running = [], 0
        for k in range(self.n):
            running += delta[k]
            saving = self.size[self.writes[k][0]] if k in self.inplace else 0
            live.append(running - saving)
        return live


def lifetimes(graph: StepGraph, order: tuple[int, ...], target: GenericTarget) -> Lifetimes:
    """The lifetimes of ``graph``'s steps run in ``order`` (indices into ``graph.steps``)."""
    steps = tuple(graph.steps[i] for i in order)
    size = {INPUT: graph.elements(INPUT) * target.act_bytes}
    produced = {INPUT: 0}
    uses: dict[str, list[int]] = {INPUT: []}
    for k, step in enumerate(steps):
        size[step.name] = _elements(step) * target.act_bytes
        produced[step.name] = k
        uses[step.name] = []
    for k, step in enumerate(steps):
        for blob in dict.fromkeys(step.inputs):
            uses[blob].append(k)
    outputs = frozenset(graph.outputs)
    frozen = {b: tuple(u) for b, u in uses.items()}
    inplace = {}
    if target.inplace:
        for k, step in enumerate(steps):
            dying = tuple(
                blob
                for blob in dict.fromkeys(step.pointwise)
                if frozen[blob][-1] == k and blob not in outputs and size[blob] == size[step.name]
            )
            if dying:
                inplace[k] = dying
    reads = tuple(tuple(dict.fromkeys(step.inputs)) for step in steps)
    writes = tuple((step.name,) for step in steps)
    return Lifetimes(
        steps, size, produced, frozen, outputs, inplace, reads, writes, (0,) * len(steps)
    )


def _elements(step: Step) -> int:
    n = 1
    for d in step.out_shape:
        n *= d
    return n
