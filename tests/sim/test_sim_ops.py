"""Property tests: every op of the simulator equals the independent int64 reference, bit for bit.

Hypothesis draws one random hardware layer (conv1d, conv2d with dilation and groups,
convtranspose2d, linear with flatten, passthrough; pooling max/avg/stride-only before the op,
element-wise add/sub/or/xor with pool_first true/false, concatenation; relu/abs/none; weight
bits 8/4/2/1/binary; wide output; any total shift in [-15, 15]; both avg-pool modes), with
random 1x1-conv producers feeding multi-input layers, and compares both simulator engines with
``run_reference`` (tests/support/sim_reference.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.arithmetic import implicit_shift, weight_range
from cnnforge.ir import (
    BINARY_BITS,
    INPUT,
    Activation,
    EltwiseOp,
    Layer,
    Network,
    Op,
    Pooling,
    PoolKind,
    Quantized,
)
from cnnforge.sim import simulate
from support.sim_reference import int_array, with_shapes

BITS = (8, 4, 2, 1, BINARY_BITS)


def quantized(draw, shape, cout: int) -> Quantized:
    bits = draw(st.sampled_from(BITS))
    if bits == BINARY_BITS:
        w = int_array(draw, shape, 0, 1) * 2 - 1
    else:
        w = int_array(draw, shape, *weight_range(bits))
    bias = int_array(draw, (cout,), -128, 127) if draw(st.booleans()) else None
    total = draw(st.integers(-15, 15))
    return Quantized(bits, w, bias, total - implicit_shift(bits))


def producer(draw, name: str, cin: int, cout: int, nd: int) -> Layer:
    """A 1x1 conv from the input: distinct operands for multi-input layers."""
    w = int_array(draw, (cout, cin) + (1,) * nd, -128, 127)
    q = Quantized(8, w, None, draw(st.integers(-6, 0)))
    op = Op.CONV1D if nd == 1 else Op.CONV2D
    ones = (1,) * nd
    return Layer(
        name, op, (INPUT,), (), in_channels=cin, out_channels=cout, kernel_size=ones,
        stride=ones, padding=(0,) * nd, dilation=ones, quant=q,
    )  # fmt: skip


def pooling(draw, nd: int, dims: tuple[int, ...]) -> Pooling | None:
    if not draw(st.booleans()):
        return None
    kind = draw(st.sampled_from(PoolKind))
    k = draw(st.integers(1, min(4, *dims)))
    t = draw(st.integers(1, 3))
    size = (k,) * nd if nd == 1 or draw(st.booleans()) else (k, draw(st.integers(1, dims[1])))
    dil = ()
    if kind is PoolKind.MAX and draw(st.booleans()):
        dil = (2,) * nd if all(n > 2 * (s - 1) for n, s in zip(dims, size, strict=True)) else ()
    return Pooling(kind, size, (t,) * nd, dil)


def main_op(draw, op: Op, nd: int, cin: int, dims) -> dict:
    """Geometry and quantized weights of the main op (any legal PyTorch geometry)."""
    if op is Op.PASSTHROUGH:
        return dict(in_channels=cin, out_channels=cin, kernel_size=(1,) * nd)
    cout = draw(st.integers(1, 5))
    if op is Op.LINEAR:
        feats = cin * int(np.prod(dims))
        return dict(in_channels=feats, out_channels=cout, kernel_size=(1, 1), flatten=True,
                    quant=quantized(draw, (cout, feats), cout))  # fmt: skip
    groups = 1
    if draw(st.booleans()) and cin > 1:
        groups = cin
        cout = cin * draw(st.integers(1, 2)) if op is not Op.CONVTRANSPOSE2D else cin
    if op is Op.CONVTRANSPOSE2D:
        k, s = draw(st.sampled_from([(3, 2), (2, 2), (3, 1)]))
        p = draw(st.integers(0, k - 1))
        op_pad = draw(st.integers(0, s - 1))
        while p and (min(dims) - 1) * s - 2 * p + k + op_pad < 1:
            p -= 1
        return dict(in_channels=cin, out_channels=cout, kernel_size=(k, k), stride=(s, s),
                    padding=(p, p), dilation=(1, 1), output_padding=(op_pad, op_pad),
                    groups=groups,
                    quant=quantized(draw, (cin, cout // groups, k, k), cout))  # fmt: skip
    kmax = 9 if nd == 1 else 3
    k = draw(st.integers(1, kmax))
    d = draw(st.integers(1, 3))
    while d > 1 and d * (k - 1) + 1 > min(dims) + 2 * 2:
        d -= 1
    p = draw(st.integers(0, min(3, k)))
    if any(n + 2 * p < d * (k - 1) + 1 for n in dims):
        p = max(0, (d * (k - 1) + 1 - min(dims) + 1) // 2)
    s = draw(st.integers(1, 2))
    kernel = (k,) * nd
    return dict(in_channels=cin, out_channels=cout, kernel_size=kernel, stride=(s,) * nd,
                padding=(p,) * nd, dilation=(d,) * nd, groups=groups,
                quant=quantized(draw, (cout, cin // groups, *kernel), cout))  # fmt: skip


@st.composite
def single_layer_networks(draw):
    """A network whose last layer is the layer under test, plus its input batch."""
    op = draw(st.sampled_from(list(Op)[:5]))
    nd = 1 if op is Op.CONV1D or (op is Op.PASSTHROUGH and draw(st.booleans())) else 2
    c = draw(st.integers(1, 4))
    dims = tuple(draw(st.integers(2, 7)) for _ in range(nd))
    mode = draw(st.sampled_from(["plain", "concat", "eltwise"]))
    if op is Op.CONV1D and mode == "eltwise":
        mode = "plain"
    layers, inputs, cin = [], (INPUT,), c
    eltwise, pool_first = None, True
    if mode != "plain":
        k = draw(st.integers(2, 4))
        layers = [producer(draw, f"p{i}", c, c, nd) for i in range(k)]
        inputs = tuple(la.name for la in layers)
        cin = c * k if mode == "concat" else c
        if mode == "eltwise":
            eltwise = draw(st.sampled_from([e for e in EltwiseOp if e is not EltwiseOp.MUL]))
            pool_first = draw(st.booleans())
    pool = pooling(draw, nd, dims)
    pooled = pool.output_dims(dims) if pool else dims
    if pool and pool.dilation and nd == 1:  # 1-D max pooling ignores dilation (R3.7)
        pooled = dataclasses.replace(pool, dilation=()).output_dims(dims)
    geo = main_op(draw, op, nd, cin, pooled)
    wide = op is not Op.PASSTHROUGH and draw(st.booleans())
    acts = [Activation.NONE, Activation.RELU, Activation.ABS]
    act = Activation.NONE if wide else draw(st.sampled_from(acts))
    if op is Op.PASSTHROUGH:
        act = Activation.NONE
    layer = Layer("t", op, inputs, (), pool=pool, eltwise=eltwise, pool_first=pool_first,
                  activation=act, wide=wide, **geo)  # fmt: skip
    net = Network("n", (c, *dims), (*layers, layer), avg_pool_rounding=draw(st.booleans()))
    x = int_array(draw, (draw(st.integers(1, 2)), c, *dims), -128, 127)
    return net, x


@settings(max_examples=400)
@given(single_layer_networks())
def test_single_layer_equals_reference(case) -> None:
    net, x = case
    net, ref = with_shapes(net, x)
    for engine in ("fast", "float64", "int64"):
        got = simulate(net, torch.from_numpy(x), engine=engine, all_layers=True, device=None)
        for name, want in ref.items():
            assert got.layers[name].dtype == torch.int64
            assert np.array_equal(got.layers[name].numpy(), want), (engine, name)


@settings(max_examples=30)
@given(st.sampled_from([e for e in EltwiseOp if e is not EltwiseOp.MUL]), st.data())
def test_sixteen_operands(op: EltwiseOp, data) -> None:
    draw = data.draw
    layers = [producer(draw, f"p{i}", 2, 2, 2) for i in range(16)]
    layer = Layer("t", Op.PASSTHROUGH, tuple(la.name for la in layers), (), eltwise=op,
                  in_channels=2, out_channels=2, kernel_size=(1, 1))  # fmt: skip
    net = Network("n", (2, 3, 3), (*layers, layer))
    x = int_array(draw, (2, 2, 3, 3), -128, 127)
    net, ref = with_shapes(net, x)
    assert np.array_equal(simulate(net, x, device=None).outputs["t"].numpy(), ref["t"])
