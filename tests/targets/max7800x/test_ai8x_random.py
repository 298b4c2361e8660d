"""Random small hardware networks (skips, concatenations, element-wise ops, multi-pass,
1-8 bit weights) written as vendor YAML + checkpoint and read back: the same network, which
simulates bit for bit like the original.

The builder and the layer helpers live in support/ai8x.py (test_golden.py uses them too).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.arithmetic import implicit_shift
from cnnforge.ir import INPUT, Activation, EltwiseOp, Network, Pooling, PoolKind
from cnnforge.passes.verify import verify
from cnnforge.sim import simulate
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.ai8x_checkpoint_writer import write_checkpoint
from cnnforge.targets.max7800x.ai8x_yaml_writer import write_yaml
from cnnforge.targets.max7800x.placement import Plan
from support.ai8x import Builder, conv, linear, passthrough, semantic_differences

# ---- the random networks --------------------------------------------------------------------

POOLS = [None, Pooling(PoolKind.MAX, (2, 2), (2, 2)), Pooling(PoolKind.AVG, (2, 2), (2, 2))]


@st.composite
def networks(draw) -> tuple[Network, Plan]:
    """2-7 layers over an input of 1-16 channels: convs, transposed convs, copies, element-wise
    ops, concatenations, an optional linear head."""
    c0 = draw(st.integers(1, 16))
    size = draw(st.sampled_from([4, 6, 8]))
    b = Builder((c0, size, size), np.random.default_rng(draw(st.integers(0, 2**16))))
    b.chw = draw(st.booleans())
    names: list[str] = []
    for i in range(draw(st.integers(2, 7))):
        names.append(_random_layer(draw, b, i, names))
    outputs = (names[-1],)
    if draw(st.booleans()) and len(names) > 2:
        outputs = (names[0], names[-1])
    if draw(st.booleans()) and math.prod(b.shape(names[-1])[1:]) <= 256:
        name = b.add(
            linear(
                b,
                "fc",
                names[-1],
                draw(st.integers(1, 20)),
                wide=draw(st.booleans()),
                bits=draw(st.sampled_from([1, 2, 4, 8])),
            )
        )
        outputs = (*outputs[:-1], name)
    return b.network(outputs=outputs)


def _random_layer(draw, b: Builder, i: int, names: list[str]) -> str:
    src = names[-1] if names else INPUT
    name = draw(st.sampled_from([f"l{i}", f"blk{i}.conv", f"Layer_{i}"]))
    shape = b.shape(src)
    kinds = ["conv", "conv", "tconv", "copy", "eltwise", "standalone", "cat"]
    kind = draw(st.sampled_from(kinds))
    same = [n for n in names if b.shape(n) == shape and n != src]
    if kind in ("eltwise", "standalone", "cat"):
        if not same:  # a skip partner of the same shape: a copy of the source
            same = [b.add(passthrough(b, f"copy{i}", (src,)), offsets=(0, 4))]
        other = draw(st.sampled_from(same))
        if kind == "cat":
            return b.add(conv(b, name, (src, other), draw(st.integers(1, 70)), k=1, pad=0))
        op = draw(st.sampled_from(list(EltwiseOp)[:4]))
        if kind == "standalone":
            return b.add(passthrough(b, name, (src, other), eltwise=op))
        return b.add(conv(b, name, (src, other), draw(st.integers(1, 40)), eltwise=op))
    pool = draw(st.sampled_from(POOLS)) if min(shape[1:]) >= 4 else None
    if kind == "copy":
        return b.add(passthrough(b, name, (src,), pool=pool), gap=draw(st.integers(0, 1)))
    bits = draw(st.sampled_from([1, 2, 4, 8]))
    lo = -15 - implicit_shift(bits)
    shift = draw(st.integers(max(lo, -4), 3))
    if kind == "tconv" and shape[1] <= 8:
        return b.add(
            conv(
                b,
                name,
                (src,),
                draw(st.integers(1, 24)),
                transpose=True,
                bits=bits,
                shift=shift,
                act=draw(st.sampled_from(list(Activation)[:3])),
            )
        )
    k = draw(st.sampled_from([1, 3]))
    return b.add(
        conv(
            b,
            name,
            (src,),
            draw(st.integers(1, 100)),
            k=k,
            pad=0 if k == 1 else 1,
            pool=pool,
            bits=bits,
            shift=shift,
            bias=draw(st.booleans()),
            act=draw(st.sampled_from(list(Activation)[:3])),
        ),
        offsets=(0, 4 * draw(st.integers(0, 3))),
    )


@settings(max_examples=120)
@given(networks())
def test_random_networks_roundtrip(tmp_path_factory, case):
    network, plan = case
    tmp = tmp_path_factory.mktemp("rt")
    write_yaml(network, plan, tmp / "n.yaml")
    write_checkpoint(network, tmp / "n.pth.tar")
    again = read_ai8x(tmp / "n.yaml", tmp / "n.pth.tar", network.input_shape, device="MAX78000")
    verify(again.network)
    assert [layer.name for layer in again.network] == [layer.name for layer in network]
    assert semantic_differences(network, again.network) == []
    assert again.plan.placements == plan.placements
    assert again.plan.data_format == plan.data_format
    x = torch.from_numpy(
        np.random.default_rng(len(network)).integers(-128, 128, size=network.input_shape)
    )
    before, after = (
        simulate(network, x, device=None).outputs,
        simulate(again.network, x, device=None).outputs,
    )
    assert list(before) == list(after)
    assert all(torch.equal(before[name], after[name]) for name in before)
