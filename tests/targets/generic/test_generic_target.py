"""The generic target: parsing, planning invariants (checked independently), the lower bound."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cnnforge.errors import InputError
from cnnforge.ir import INPUT
from cnnforge.targets.generic.bound import lower_bound
from cnnforge.targets.generic.budget_plan import plan_generic
from cnnforge.targets.generic.lifetimes import lifetimes
from cnnforge.targets.generic.memory import Allocation, allocate
from cnnforge.targets.generic.schedule import candidate_orders
from cnnforge.targets.generic.steps import Step, StepGraph
from cnnforge.targets.generic.target import (
    GenericTarget,
    format_params,
    parse_generic,
    parse_size,
)


def test_parse_generic_sizes_and_keys():
    t = parse_generic("generic:onchip=3MiB,act_bytes=2,weight_bytes=1,ddr=1GiB,inplace=0")
    assert t.onchip_bytes == 3 * 2**20 and t.act_bytes == 2 and t.weight_bytes == 1
    assert t.ddr_bytes == 2**30 and t.inplace is False
    assert parse_generic("generic") == GenericTarget()
    assert parse_generic("Generic: onchip = 5MB").onchip_bytes == 5_000_000
    assert parse_size("1.5KiB") == 1536 and parse_size("4096") == 4096
    assert parse_generic(f"generic:{format_params(t)}") == t
    recomputing = parse_generic("generic:halo=recompute")
    assert recomputing.halo == "recompute" and t.halo == "keep"
    assert parse_generic(f"generic:{format_params(recomputing)}") == recomputing


@pytest.mark.parametrize(
    "text",
    [
        "generic:onchip=3XB",
        "generic:speed=4",
        "generic:act_bytes=0",
        "generic:onchip",
        "generic:inplace=maybe",
        "generic:macs_per_cycle=-1",
        "generic:halo=maybe",
    ],
)
def test_parse_generic_rejects(text):
    with pytest.raises(InputError):
        parse_generic(text)


# ---- random step graphs ---------------------------------------------------------------------

SHAPES = ((4, 8, 8), (8, 8, 8), (16, 4, 4), (4, 16, 16))


def _step(name, kind, inputs, shape) -> Step:
    return Step(
        name=name,
        kind=kind,
        members=(name,),
        module_path=name,
        inputs=inputs,
        pointwise=inputs if kind == "add" else (),
        out_shape=shape,
        macs=0,
        ops=0,
        fc_ops=0,
        weights=0,
        has_bias=False,
        supported=True,
    )


@st.composite
def step_graphs(draw) -> StepGraph:
    n = draw(st.integers(1, 12))
    shapes = {INPUT: draw(st.sampled_from(SHAPES))}
    steps = []
    for i in range(n):
        names = [INPUT, *(s.name for s in steps)]
        first = draw(st.sampled_from(names[-3:] if draw(st.booleans()) else names))
        if draw(st.booleans()) and len(names) > 1:
            same = [b for b in names if shapes[b] == shapes[first] and b != first]
            if same:
                other = draw(st.sampled_from(same))
                steps.append(_step(f"s{i}", "add", (first, other), shapes[first]))
                shapes[f"s{i}"] = shapes[first]
                continue
        shape = draw(st.sampled_from(SHAPES))
        steps.append(_step(f"s{i}", "conv2d", (first,), shape))
        shapes[f"s{i}"] = shape
    read = {b for s in steps for b in s.inputs}
    outs = tuple(s.name for s in steps if s.name not in read) or (steps[-1].name,)
    return StepGraph("random", shapes[INPUT], tuple(steps), outs)


def check_allocation(life, alloc: Allocation) -> None:
    """Offsets inside the budget, no two live buffers overlapping, and every byte counted."""
    ranges = []
    for blob in alloc.blobs:
        for r in blob.residencies:
            assert r.offset >= 0 and r.offset + blob.bytes <= alloc.budget
            assert blob.produced <= r.start <= r.end <= blob.last
            ranges.append((blob.name, r))
    size = life.size
    for i, (a, ra) in enumerate(ranges):
        for b, rb in ranges[i + 1 :]:
            if ra.end < rb.start or rb.end < ra.start:
                continue
            if ra.offset + size[a] <= rb.offset or rb.offset + size[b] <= ra.offset:
                continue
            pair = {a, b}  # allowed: an in-place output taking its operand's buffer
            k = max(ra.start, rb.start)
            step = life.steps[k]
            assert ra.offset == rb.offset and step.name in pair, (a, b, ra, rb)
            assert (pair - {step.name}) <= set(life.inplace.get(k, ())), (a, b)
            assert min(ra.end, rb.end) == k

    plans = {x.name: x for x in alloc.blobs}

    def on_chip(blob, k):
        return any(r.start <= k <= r.end for r in plans[blob].residencies)

    def held(blob, k):  # on chip at k since before k (a reload at k reads the blob)
        p = plans[blob]
        return any(
            r.start <= k <= r.end and (r.start < k or r.start == p.produced) for r in p.residencies
        )

    reads = sum(size[b] for b, uses in life.uses.items() for k in uses if not held(b, k))
    assert reads == alloc.read_bytes
    writes = sum(
        size[b]
        for b in size
        if b != INPUT and any(not on_chip(b, k) for k in range(life.produced[b], life.last(b) + 1))
    )
    assert writes == alloc.written_bytes


@given(step_graphs(), st.integers(0, 4096), st.booleans())
def test_allocation_is_valid_and_above_the_bound(graph, budget, inplace):
    target = GenericTarget(act_bytes=1, inplace=inplace)
    for order in candidate_orders(graph, 1).values():
        life = lifetimes(graph, order, target)
        alloc = allocate(life, budget)
        check_allocation(life, alloc)
        bound = lower_bound(life, budget)
        assert 0 <= bound <= alloc.transfer_bytes
        if budget >= sum(life.size.values()):
            assert alloc.transfer_bytes == 0 and bound == 0


@given(step_graphs(), st.booleans())
def test_min_memory_needs_no_transfer_and_budget_zero_streams_everything(graph, inplace):
    target = GenericTarget(onchip_bytes=0, act_bytes=1, inplace=inplace)
    plan = plan_generic(graph, target, curve_points=4)
    life = plan.life
    assert plan.peak_live <= plan.min_memory
    assert allocate(life, plan.min_memory).transfer_bytes == 0
    assert plan.curve[-1].budget == plan.min_memory and plan.curve[-1].transfer_bytes == 0
    # Budget 0: every blob but the input written once, every use read from DDR.
    streamed = sum(life.size[b] * len(u) for b, u in life.uses.items())
    written = sum(s for b, s in life.size.items() if b != INPUT)
    assert plan.allocation.transfer_bytes == streamed + written == plan.curve[0].transfer_bytes
    if not inplace:  # the bound is exact here (in place, it credits a saving it cannot use)
        assert plan.lower_bound == plan.allocation.transfer_bytes
