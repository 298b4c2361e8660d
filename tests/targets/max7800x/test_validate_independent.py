"""The validator sizes kernels and bias from the spec itself, so a planner sizing bug is caught.

Each test breaks one of the planner's own sizing helpers (plan/kernels.py) on purpose; the
planner then builds a plan that its helpers accept, and ``validate_plan``, which derives the
sizes from docs/hardware/devices.md §3/§4 through cnnforge.geometry, must report it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from cnnforge.ir import INPUT, Layer, Network, Op
from cnnforge.targets import max7800x as plan_package
from cnnforge.targets.max7800x import kernels
from cnnforge.targets.max7800x.device import MAX78000
from cnnforge.targets.max7800x.planner import plan_network
from cnnforge.targets.max7800x.validate import spec_kernel_words, validate_plan


def _conv(name: str, source: str, cin: int, cout: int, k: int = 3) -> Layer:
    return Layer(
        name=name,
        op=Op.CONV2D,
        inputs=(source,),
        out_shape=(cout, 8, 8),
        in_channels=cin,
        out_channels=cout,
        kernel_size=(k, k),
        stride=(1, 1),
        padding=(k // 2, k // 2),
        dilation=(1, 1),
    )


def _network() -> Network:
    layers = (
        _conv("l0", INPUT, 16, 64),
        _conv("l1", "l0", 64, 64),
        _conv("l2", "l1", 64, 10, k=1),
    )
    return Network("three", (16, 8, 8), layers)


def _rules(issues) -> set[str]:
    return {x.rule for x in issues}


def test_the_honest_plan_validates():
    net, plan = plan_network(_network(), "MAX78000")
    assert validate_plan(net, plan, "MAX78000") == ()
    for layer, place in zip(net.layers, plan.placements, strict=True):
        assert place.kernel_words == spec_kernel_words(net, layer, place.out_processors, MAX78000)


def test_undersized_kernels_from_a_planner_bug_are_caught(monkeypatch):
    """The planner's word count says 1 word per layer; the spec says 9 / 64 / 8."""
    monkeypatch.setattr(kernels, "_words", lambda *args, **kwargs: 1)
    net, plan = plan_network(_network(), "MAX78000")
    assert all(p.kernel_words == 1 for p in plan.placements)  # the planner is fooled
    rules = _rules(validate_plan(net, plan, "MAX78000"))
    assert "kernel-words" in rules


def test_kernel_columns_over_capacity_are_caught():
    net, plan = plan_network(_network(), "MAX78000")
    cap = MAX78000.kernel_words(1)
    places = tuple(
        dataclasses.replace(p, kernel_start=cap - 4) if p.layer == "l1" else p
        for p in plan.placements
    )
    bad = dataclasses.replace(plan, placements=places)
    assert "kernel-memory" in _rules(validate_plan(net, bad, "MAX78000"))


def test_overlapping_bias_from_a_planner_bug_is_caught(monkeypatch):
    """The planner's bias length says 1 entry per layer: the layers' bias entries overlap."""
    monkeypatch.setattr(kernels, "bias_length", lambda *args: 1)
    layers = [_conv("l0", INPUT, 16, 64)] + [
        _conv(f"l{i}", f"l{i - 1}", 64, 64) for i in (1, 2, 3, 4, 5)
    ]
    net = Network("six", (16, 8, 8), tuple(layers))  # six biased layers in four quadrants
    with_bias = tuple(dataclasses.replace(x, bias=_zeros(x.out_channels)) for x in net.layers)
    net = dataclasses.replace(net, layers=with_bias)
    net, plan = plan_network(net, "MAX78000")
    assert "bias-overlap" in _rules(validate_plan(net, plan, "MAX78000"))


def _zeros(n: int) -> np.ndarray:
    return np.zeros(n, dtype=np.float32)


def test_the_validator_imports_no_planner_sizing():
    """plan/validate.py asks cnnforge.geometry, not plan/kernels.py or plan/kernel_words.py."""
    from pathlib import Path

    text = Path(plan_package.__file__).with_name("validate.py").read_text("utf-8")
    assert "cnnforge.targets.max7800x.kernels" not in text
    assert "cnnforge.targets.max7800x.kernel_words" not in text
