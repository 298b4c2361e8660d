"""Topological orders of the steps (the network's, greedy least-growth, depth-first); the planner
measures each and keeps the best."""

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
