"""Random small hardware networks with skips, concatenations and adds: every plan validates."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.errors import PlanError
from cnnforge.targets.max7800x.planner import plan_network
from cnnforge.targets.max7800x.validate import validate_plan
from support.plan import networks, with_weights


@settings(max_examples=120)
@given(networks(), st.sampled_from(("MAX78000", "MAX78002")))
def test_random_networks_plan_and_validate(network, device):
    try:
        out, plan = plan_network(network, device)
    except PlanError as exc:  # only a genuinely exhausted resource may stop the planner
        assert "exhausted" in exc.what or "exceed" in exc.what, exc.one_line()
        return
    assert validate_plan(out, plan, device) == ()
    assert [p.layer for p in plan.placements] == [x.name for x in out.layers]
    originals = {x.name for x in network.layers}
    assert originals <= {x.name for x in out.layers}


@settings(max_examples=40)
@given(networks(), st.integers(0, 1000), st.booleans())
def test_validator_rejects_a_moved_tensor(network, pick, move_offset):
    """Moving any consumed tensor by one word, or by one instance of processors, is caught."""
    try:
        out, plan = plan_network(network, "MAX78002")
    except PlanError:
        return
    consumed = [
        i
        for i, p in enumerate(plan.placements)
        if any(p.layer in x.inputs for x in out.layers) and p.out_processors >> 60 == 0
    ]
    if not consumed:
        return
    i = consumed[pick % len(consumed)]
    p = plan.placements[i]
    moved = (
        dataclasses.replace(p, out_offset=p.out_offset + 4)
        if move_offset
        else dataclasses.replace(p, out_processors=p.out_processors << 4)
    )
    broken = dataclasses.replace(
        plan, placements=(*plan.placements[:i], moved, *plan.placements[i + 1 :])
    )
    assert validate_plan(out, broken, "MAX78002") != ()


@settings(max_examples=25)
@given(networks())
def test_planned_network_computes_the_same(network):
    """Copies and passthroughs turned into identity convolutions change no output bit."""
    import torch

    from cnnforge.quant.ptq import quantize_network
    from cnnforge.sim import simulate

    q = quantize_network(with_weights(network), 8, device=None)
    try:
        out, _ = plan_network(q, "MAX78002")
    except PlanError:
        return
    x = torch.randint(-128, 128, (2, *network.input_shape))
    want, got = simulate(q, x, device=None).outputs, simulate(out, x, device=None).outputs
    assert all(torch.equal(want[k], got[k]) for k in want)
