"""Random small hardware networks with skips, concatenations and adds: every plan validates."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.errors import PlanError
from cnnforge.ir import INPUT, EltwiseOp, Layer, Network
from cnnforge.plan.planner import plan_network
from cnnforge.plan.validate import validate_plan
from test_plan_support import POOL2, conv, passthrough, upconv, with_weights

CHANNELS = (4, 6, 8, 12, 16, 24, 30, 32, 48, 64)
STEPS = ("conv", "conv1", "down", "up", "concat", "add", "pool")


@st.composite
def networks(draw) -> Network:
    """3..14 layers over 4x4..16x16 tensors; every multi-input layer is one the planner supports."""
    hw = draw(st.sampled_from((8, 16)))
    cin = draw(st.integers(1, 8))
    tensors: dict[str, tuple[int, int]] = {INPUT: (cin, hw)}
    layers: list[Layer] = []
    for i in range(draw(st.integers(3, 14))):
        name = f"l{i}"
        layer = _step(draw, name, draw(st.sampled_from(STEPS)), tensors, layers)
        layers.append(layer)
        tensors[name] = (layer.out_shape[0], layer.out_shape[1])
    extra = draw(st.sampled_from([x.name for x in layers]))
    outputs = tuple(dict.fromkeys((layers[-1].name, extra)))
    return Network("random", (cin, hw, hw), tuple(layers), outputs=outputs)


def _pick(draw, tensors, recent_bias: bool = True) -> str:
    names = list(tensors)
    if recent_bias and draw(st.booleans()):
        return names[-1]
    return draw(st.sampled_from(names))


def _step(draw, name: str, kind: str, tensors, layers) -> Layer:
    src = _pick(draw, tensors)
    c, hw = tensors[src]
    cout = draw(st.sampled_from(CHANNELS))
    if kind == "down" and hw >= 4:
        return conv(name, src, c, cout, hw // 2, pool=POOL2)
    if kind == "up" and hw <= 8:
        return upconv(name, src, c, cout, hw * 2)
    if kind == "pool" and hw >= 4 and src != INPUT:
        return passthrough(name, src, (c, hw // 2, hw // 2), pool=POOL2)
    if kind in ("concat", "add"):
        partners = [n for n, (c2, h2) in tensors.items() if h2 == hw and n != src]
        if partners:
            other = draw(st.sampled_from(partners))
            c2 = tensors[other][0]
            if kind == "add" and c2 == c:
                return conv(name, (src, other), c, cout, hw, eltwise=EltwiseOp.ADD)
            adjacent = c + c2 <= 64
            if kind == "concat" and (adjacent or (c == c2 and c % 4 == 0)):
                return conv(name, (src, other), c + c2, cout, hw)
    return conv(name, src, c, cout, hw, k=1 if kind == "conv1" else 3)


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

    q = quantize_network(with_weights(network), 8)
    try:
        out, _ = plan_network(q, "MAX78002")
    except PlanError:
        return
    x = torch.randint(-128, 128, (2, *network.input_shape))
    want, got = simulate(q, x).outputs, simulate(out, x).outputs
    assert all(torch.equal(want[k], got[k]) for k in want)
