"""Tiled, fused schedules (targets/generic/tiling.py, bands.py): the band-by-band integer
simulation equals the untiled one bit for bit on random chains, residual blocks, branches,
pools, transposed convolutions, upsampling and padding, for any grouping and band count; the
planner's plans keep their line buffers and whole blobs inside the budget and stay above the
tiled bound."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.errors import SimulationError
from cnnforge.frontend.torch_fx import trace
from cnnforge.targets.generic.banded import simulate_tiled
from cnnforge.targets.generic.budget_plan import plan_generic
from cnnforge.targets.generic.integer import quantize_generic, simulate_generic
from cnnforge.targets.generic.lifetimes import lifetimes
from cnnforge.targets.generic.steps import fuse_steps
from cnnforge.targets.generic.target import GenericTarget
from cnnforge.targets.generic.tiling import Tiler

# ---- random networks --------------------------------------------------------------------------


class Residual(nn.Module):
    def __init__(self, c: int, dilation: int, subtract: bool) -> None:
        super().__init__()
        self.a = nn.Conv2d(c, c, 3, padding=dilation, dilation=dilation)
        self.bn = nn.BatchNorm2d(c)
        self.b = nn.Conv2d(c, c, 3, padding=1)
        self.subtract = subtract

    def forward(self, x):
        y = self.b(torch.relu(self.bn(self.a(x))))
        return torch.relu(x - y if self.subtract else x + y)


class Branches(nn.Module):
    def __init__(self, c: int, cout: int) -> None:
        super().__init__()
        self.one = nn.Conv2d(c, cout, 1)
        self.three = nn.Conv2d(c, cout, 3, padding=1)
        self.pool = nn.MaxPool2d(3, 1, padding=1)

    def forward(self, x):
        return torch.cat([self.one(x), torch.relu(self.three(x)), self.pool(x)], 1)


def _block(kind: str, p: dict, c: int, hw: tuple[int, int]):
    """The module of one block, its output channels and (rows, columns); None: too small."""
    k, s, cout = p["k"], p["s"], p["cout"]
    if kind == "conv":
        pad, d = min(p["pad"], k // 2), p["d"]
        conv = nn.Conv2d(c, cout, k, stride=s, padding=pad, dilation=d)
        return _fitting(nn.Sequential(conv, nn.ReLU6()), cout, hw, d * (k - 1) + 1, s, pad)
    if kind in ("maxpool", "avgpool"):
        size, pad = max(k, 2), min(p["pad"], max(k, 2) // 2)
        pool = nn.MaxPool2d(size, s, pad) if kind == "maxpool" else nn.AvgPool2d(size, s, pad)
        return _fitting(pool, c, hw, size, s, pad)
    if kind == "residual" and min(hw) >= 1 + 2 * p["d"]:
        return Residual(c, p["d"], p["sub"]), c, hw
    if kind == "branches":
        return Branches(c, cout), 2 * cout + c, hw
    if kind == "transposed" and hw[0] <= 16:
        pad = min(p["pad"], 1)
        conv = nn.ConvTranspose2d(c, cout, k, stride=2, padding=pad, output_padding=p["op"])
        return conv, cout, tuple((n - 1) * 2 - 2 * pad + k + p["op"] for n in hw)
    if kind == "upsample" and hw[0] <= 16:
        return nn.Upsample(scale_factor=2, mode="nearest"), c, (2 * hw[0], 2 * hw[1])
    if kind == "pad":
        top, bottom = p["pad"], p["d"] - 1
        return nn.ZeroPad2d((1, 0, top, bottom)), c, (hw[0] + top + bottom, hw[1] + 1)
    return None


def _fitting(module, c, hw, span, stride, pad):
    out = tuple((n + 2 * pad - span) // stride + 1 for n in hw)
    return (module, c, out) if min(out) >= 2 else None


BLOCKS = ("conv", "maxpool", "avgpool", "residual", "branches", "transposed", "upsample", "pad")
PARAMS = st.fixed_dictionaries(
    {
        "k": st.sampled_from([1, 2, 3, 5]),
        "s": st.sampled_from([1, 2]),
        "pad": st.integers(0, 2),
        "d": st.sampled_from([1, 2]),
        "cout": st.integers(1, 3),
        "op": st.integers(0, 1),
        "sub": st.booleans(),
    }
)


@st.composite
def networks(draw):
    """A traced random network and its input shape."""
    c, h, w = draw(st.integers(1, 3)), draw(st.integers(5, 12)), draw(st.integers(3, 6))
    shape, modules, hw = (c, h, w), [], (h, w)
    for kind in draw(st.lists(st.sampled_from(BLOCKS), min_size=1, max_size=6)):
        made = _block(kind, draw(PARAMS), c, hw)
        if made is not None:
            module, c, hw = made
            modules.append(module)
    if not modules:
        modules.append(nn.Conv2d(c, 2, 3, padding=1))
    torch.manual_seed(draw(st.integers(0, 2**16)))
    return trace(nn.Sequential(*modules).eval(), shape), shape


@st.composite
def layouts(draw, steps):
    """Consecutive groups of the schedule: fused (tileable steps, a band count) or single."""
    layout, k = [], 0
    while k < len(steps):
        run = 0
        while k + run < len(steps) and steps[k + run].tileable:
            run += 1
        if run == 0:
            layout.append((k, k, None))
            k += 1
            continue
        count = draw(st.one_of(st.none(), st.integers(1, 9)))
        length = 1 if count is None else draw(st.integers(1, run))
        layout.append((k, k + length - 1, count))
        k += length
    return tuple(layout)


def _both(network, shape, target, plan, seed=0):
    """Integers of the untiled and the band-by-band simulation on one seeded input."""
    rng = np.random.default_rng(seed)
    q = quantize_generic(network, target, rng.uniform(-1, 1, (2, *shape)))
    x = q.to_int(rng.uniform(-1, 1, (1, *shape)))
    return simulate_generic(q, x), simulate_tiled(q, plan, x), q


def _assert_equal(untiled, tiled, q):
    assert set(q.network.outputs) <= set(tiled)
    compared = [name for name in tiled if name in untiled]
    different = [n for n in compared if not torch.equal(tiled[n], untiled[n])]
    assert different == [], different


@settings(max_examples=60)
@given(networks(), st.sampled_from([1, 2]), st.sampled_from(["keep", "recompute"]), st.data())
def test_any_grouping_and_band_count_simulates_bit_exactly(made, act_bytes, halo, data):
    network, shape = made
    target = GenericTarget(act_bytes=act_bytes, weight_bytes=act_bytes, halo=halo)
    graph = fuse_steps(network)
    life = lifetimes(graph, tuple(range(len(graph.steps))), target)
    tiler = Tiler(graph, life, target, frozenset())
    plan = tiler.measure(data.draw(layouts(life.steps)), 1 << 30)
    _assert_equal(*_both(network, shape, target, plan))


@settings(max_examples=20)
@given(networks(), st.floats(0.05, 1.0), st.booleans(), st.sampled_from(["keep", "recompute"]))
def test_planned_tilings_fit_the_budget_and_simulate_bit_exactly(made, fraction, store, halo):
    network, shape = made
    base = GenericTarget(weight_onchip_bytes=(1 << 30) if store else 0, halo=halo)
    whole = plan_generic(network, base, curve_points=2)
    target = base.with_onchip(int(whole.min_memory * fraction))
    plan = plan_generic(network, target, curve_points=2)
    tiled = plan.tiled
    for k, group in enumerate(tiled.groups):
        assert tiled.onchip_bytes(k) <= target.onchip_bytes
        assert group.weight_ddr_bytes >= sum(
            plan.weight_stream_bytes(plan.life.steps.index(s)) for s in group.steps
        )
    assert plan.tiled_bound.ddr_bytes <= tiled.ddr_bytes
    assert tiled.ddr_bytes <= plan.allocation.transfer_bytes + plan.weight_ddr_bytes
    _assert_equal(*_both(network, shape, target, tiled))


def test_a_line_buffer_smaller_than_the_band_needs_is_caught():
    network = trace(nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), nn.Conv2d(2, 2, 3)), (2, 9, 4))
    target = GenericTarget()
    graph = fuse_steps(network)
    life = lifetimes(graph, (0, 1), target)
    plan = Tiler(graph, life, target, frozenset()).measure(((0, 1, 3),), 1 << 20)
    group = plan.groups[0]
    first = graph.steps[0].name
    assert group.bands is not None
    # bands of 3 input rows; the last one flushes rows 5-8 of the first conv, 3-4 held for
    # the second conv's window
    assert group.bands.ready[first].tolist() == [1, 4, 8] and group.bands.held[first] == 6
    short = dataclasses.replace(group.bands, held={**group.bands.held, first: 5})
    broken = dataclasses.replace(plan, groups=(dataclasses.replace(group, bands=short),))
    with pytest.raises(SimulationError, match="line buffer of 6 rows, 5 planned"):
        _both(network, (2, 9, 4), target, broken)


class OneD(nn.Module):
    """1-D data (C, L): the length is the row axis; a residual block, a pool, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv1d(2, 4, 5, padding=2)
        self.b = nn.Conv1d(4, 4, 3, padding=2, dilation=2)
        self.pool = nn.MaxPool1d(3, 2, padding=1)
        self.c = nn.Conv1d(4, 3, 3, stride=2)
        self.head = nn.Linear(3 * 7, 5)

    def forward(self, x):
        y = torch.relu(self.a(x))
        y = self.pool(y + torch.relu(self.b(y)))
        return self.head(self.c(y).flatten(1))


@pytest.mark.parametrize("halo", ["keep", "recompute"])
@pytest.mark.parametrize("count", [1, 2, 5, 30])
def test_one_d_data_runs_on_bands_of_its_length(count, halo):
    torch.manual_seed(0)
    network = trace(OneD().eval(), (2, 30))
    target = GenericTarget(halo=halo)
    graph = fuse_steps(network)
    life = lifetimes(graph, tuple(range(len(graph.steps))), target)
    fused = max(k for k, s in enumerate(life.steps) if s.tileable)
    assert not life.steps[fused + 1].tileable  # the linear head reads its input whole
    layout = ((0, fused, count), *((k, k, None) for k in range(fused + 1, len(life.steps))))
    plan = Tiler(graph, life, target, frozenset()).measure(layout, 1 << 20)
    _assert_equal(*_both(network, (2, 30), target, plan))
