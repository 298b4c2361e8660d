"""Topological orders of the steps, and the choice among them.

Three candidates: the network's own order; a greedy order that runs, among the ready steps,
the one that grows the live memory least (frees most); a depth-first order that continues
from the blob written last (finishing a branch before starting another keeps skip
connections, as in a U-Net, from waiting longer than they must). ``plan_generic`` plans each
and keeps the one that moves the fewest DDR bytes at the target's budget (then the smallest
peak), so the choice is measured, not assumed.
"""

from __future__ import annotations

from cnnforge.ir import INPUT
from cnnforge.targets.generic.steps import StepGraph


def candidate_orders(graph: StepGraph, act_bytes: int) -> dict[str, tuple[int, ...]]:
    """Name -> order (indices into ``graph.steps``), duplicates removed."""
    orders = {
        "network": tuple(range(len(graph.steps))),
        "min-memory": _greedy(graph, act_bytes, depth_first=False),
        "depth-first": _greedy(graph, act_bytes, depth_first=True),
    }
    unique: dict[tuple[int, ...], str] = {}
    for name, order in orders.items():
        unique.setdefault(order, name)
    return {name: order for order, name in unique.items()}


def _greedy(graph: StepGraph, act_bytes: int, depth_first: bool) -> tuple[int, ...]:
    steps = graph.steps
    pending = {i: {b for b in s.inputs if b != INPUT} for i, s in enumerate(steps)}
    readers: dict[str, int] = {}
    for s in steps:
        for b in set(s.inputs):
            readers[b] = readers.get(b, 0) + 1
    outputs = set(graph.outputs)
    size = {s.name: _bytes(s.out_shape, act_bytes) for s in steps}
    size[INPUT] = _bytes(graph.input_shape, act_bytes)
    done_at: dict[str, int] = {INPUT: -1}
    order: list[int] = []
    remaining = set(range(len(steps)))
    while remaining:
        ready = [i for i in remaining if not pending[i]]

        def freed(i: int) -> int:
            return sum(
                size[b] for b in set(steps[i].inputs) if readers[b] == 1 and b not in outputs
            )

        if depth_first:
            key = lambda i: (-max((done_at[b] for b in steps[i].inputs), default=-1), i)  # noqa: E731
        else:
            key = lambda i: (size[steps[i].name] - freed(i), i)  # noqa: E731
        pick = min(ready, key=key)
        order.append(pick)
        remaining.discard(pick)
        done_at[steps[pick].name] = len(order)
        for b in set(steps[pick].inputs):
            readers[b] -= 1
        for j in remaining:
            pending[j].discard(steps[pick].name)
    return tuple(order)


def _bytes(shape: tuple[int, ...], act_bytes: int) -> int:
    n = act_bytes
    for d in shape:
        n *= d
    return n
