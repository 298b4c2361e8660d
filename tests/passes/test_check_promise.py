"""``cnnforge check`` is a promise: exit 0 (``fits``) implies ``cnnforge plan`` places the
network (lower -> quantize -> plan_and_validate), on random networks of skips, unequal
concatenations, adds and pools, big enough to exhaust data and kernel memory now and then."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.errors import PlanError
from cnnforge.ir import INPUT, EltwiseOp, Layer, Network
from cnnforge.passes.check import check_report
from cnnforge.quant.ptq import quantize_network
from cnnforge.targets.max7800x.device import get_device
from cnnforge.targets.max7800x.plan_flow import plan_and_validate
from support.plan import POOL2, conv, passthrough, pick, upconv, with_weights
from support.targets import rules_of

CHANNELS = (3, 4, 8, 12, 16, 20, 32, 48, 64, 96, 128)
STEPS = ("conv", "conv1", "down", "up", "concat", "add", "pool")


@st.composite
def networks(draw) -> Network:
    """2..12 hardware layers over 8x8..32x32 tensors; concatenations of any channel counts."""
    hw = draw(st.sampled_from((8, 16, 32)))
    cin = draw(st.integers(1, 4))
    tensors: dict[str, tuple[int, int]] = {INPUT: (cin, hw)}
    layers: list[Layer] = []
    for i in range(draw(st.integers(2, 12))):
        name = f"l{i}"
        layer = _step(draw, name, draw(st.sampled_from(STEPS)), tensors)
        layers.append(layer)
        tensors[name] = (layer.out_shape[0], layer.out_shape[1])
    return with_weights(Network("random", (cin, hw, hw), tuple(layers)), draw(st.integers(0, 99)))


def _step(draw, name: str, kind: str, tensors) -> Layer:
    src = pick(draw, tensors)
    c, hw = tensors[src]
    cout = draw(st.sampled_from(CHANNELS))
    if kind == "down" and hw >= 4:
        return conv(name, src, c, cout, hw // 2, pool=POOL2)
    if kind == "up" and hw <= 16:
        return upconv(name, src, c, cout, hw * 2)
    if kind == "pool" and hw >= 4 and src != INPUT:
        return passthrough(name, src, (c, hw // 2, hw // 2), pool=POOL2)
    partners = [n for n, (_, h2) in tensors.items() if h2 == hw and n not in (src, INPUT)]
    if kind in ("concat", "add") and partners:
        other = draw(st.sampled_from(partners))
        c2 = tensors[other][0]
        if kind == "add" and c2 == c:
            return conv(name, (src, other), c, cout, hw, eltwise=EltwiseOp.ADD)
        if kind == "concat":
            return conv(name, (src, other), c + c2, cout, hw)
    return conv(name, src, c, cout, hw, k=1 if kind == "conv1" else 3)


@settings(max_examples=40, deadline=None)
@given(networks(), st.sampled_from(("MAX78000", "MAX78002")), st.sampled_from((8, 4, "auto")))
def test_check_fits_implies_plan_succeeds(network, device, bits):
    dev = get_device(device)
    report = check_report(network, dev, bits, rules=rules_of(dev))
    if not report.fits:
        assert all(v.hint or v.rule == "placement" for v in report.violations)
        return
    quantized = quantize_network(report.network, report.weight_bits, device=dev)
    try:
        plan_and_validate(quantized, dev)
    except PlanError as exc:  # pragma: no cover - the property's counterexample
        raise AssertionError(f"check said fits, plan failed: {exc.one_line()}") from None


def test_a_placement_failure_is_a_violation():
    """Wide tensors that each fit an instance but cannot all live together: only the planner
    sees it, and check says so instead of promising a fit."""
    layers = (
        conv("a", INPUT, 3, 64, 64),
        conv("b", "a", 64, 64, 64),
        conv("c", "b", 64, 64, 64),
        conv("d", ("c", "a"), 128, 8, 64),
    )
    net = with_weights(Network("skip", (3, 64, 64), layers))
    report = check_report(net, get_device("MAX78000"), 8, rules=rules_of(get_device("MAX78000")))
    assert not report.fits
    assert [v.rule for v in report.violations] == ["placement"]
