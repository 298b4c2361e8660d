"""The simulator as a whole: the fast path guarded against int64, networks, batches, bad input."""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.errors import SimulationError
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
from cnnforge.sim.exact import float32_is_exact
from cnnforge.targets.max7800x.device import MAX78000, MAX78002
from support.sim_reference import int_array, run_reference, with_shapes


def conv(name, inputs, cin, cout, k=3, pad=1, bits=8, shift=0, act=Activation.NONE, **kw):
    """A 2-D conv layer with random weights in the ``bits`` range (seeded by name)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    lo, hi = (-1, 1) if bits == BINARY_BITS else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    groups = kw.pop("groups", 1)
    w = rng.integers(lo, hi + 1, (cout, cin // groups, k, k))
    if bits == BINARY_BITS:
        w = np.where(w < 0, -1, 1)
    bias = kw.pop("bias", rng.integers(-128, 128, cout))
    q = Quantized(bits, w, bias, shift)
    return Layer(
        name, Op.CONV2D, tuple(inputs), kw.pop("out_shape", ()), in_channels=cin,
        out_channels=cout, kernel_size=(k, k), stride=(1, 1), padding=(pad, pad),
        dilation=(1, 1), groups=groups, activation=act, quant=q, **kw,
    )  # fmt: skip


def extreme(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).choice(np.array([-128, 127]), size=shape)


# ---- the fast path (float32 in chunks) equals int64 and the reference ----------------------


def _weights_extreme(layer: Layer, seed: int) -> Layer:
    q = layer.quant
    w = np.random.default_rng(seed).choice(np.array([-128, 127]), size=q.weights.shape)
    return dataclasses.replace(layer, quant=dataclasses.replace(q, weights=w))


@pytest.mark.parametrize(
    ("cin", "groups", "shift", "wide"),
    [
        (300, 1, -15, False),  # chunks summed in float64
        (300, 1, 15, False),
        (130, 1, 0, True),
        (600, 2, -10, False),  # groups: float64
        (99, 1, -15, False),  # one float32 sum at the 2^24 bound, scale 2^-22 in the weights
        (99, 1, 15, False),  # ... scale 2^8
        (99, 1, 7, False),
    ],
)
def test_chunked_conv_equals_int64(cin: int, groups: int, shift: int, wide: bool) -> None:
    layer = _weights_extreme(
        conv("big", [INPUT], cin, 2 * groups, shift=shift, wide=wide, groups=groups), 1
    )
    net = Network("n", (cin, 4, 4), (layer,))
    x = extreme((2, cin, 4, 4))
    fast = simulate(net, x, device=None).outputs["big"]
    assert torch.equal(fast, simulate(net, x, engine="int64", device=None).outputs["big"])
    assert torch.equal(fast, simulate(net, x, engine="float64", device=None).outputs["big"])
    assert np.array_equal(fast.numpy(), run_reference(net, x)["big"])


def test_chunked_linear_and_convtranspose_equal_int64() -> None:
    w = extreme((5, 16384), 2)
    q = Quantized(8, w, None, 0)
    lin = Layer("fc", Op.LINEAR, (INPUT,), (5,), in_channels=16384, out_channels=5,
                kernel_size=(1, 1), flatten=True, wide=True, quant=q)  # fmt: skip
    wt = extreme((400, 2, 3, 3), 3)
    up = Layer("up", Op.CONVTRANSPOSE2D, (INPUT,), (2, 4, 4), in_channels=400, out_channels=2,
               kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1),
               dilation=(1, 1), quant=Quantized(8, wt, None, -8))  # fmt: skip
    for layer, shape in ((lin, (1024, 4, 4)), (up, (400, 2, 2))):
        net = Network("n", shape, (layer,))
        x = extreme((2, *shape), 4)
        fast = simulate(net, x, device=None).outputs[layer.name]
        assert torch.equal(fast, simulate(net, x, engine="int64", device=None).outputs[layer.name])
        assert np.array_equal(fast.numpy(), run_reference(net, x)[layer.name])


def test_reduced_precision_float32_falls_back_exactly() -> None:
    layer = _weights_extreme(conv("c", [INPUT], 200, 4), 5)
    net = Network("n", (200, 5, 5), (layer,))
    x = extreme((1, 200, 5, 5), 6)
    want = simulate(net, x, engine="int64", device=None).outputs["c"]
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        assert not float32_is_exact()
        assert torch.equal(simulate(net, x, device=None).outputs["c"], want)
    finally:
        torch.set_float32_matmul_precision(before)
    assert float32_is_exact()


def test_nnpack_instead_of_onednn_falls_back_exactly() -> None:
    """Without oneDNN, PyTorch sends float32 batches >= 16 to NNPACK (Winograd: inexact)."""
    layer = _weights_extreme(conv("c", [INPUT], 99, 8), 7)
    net = Network("n", (99, 12, 12), (layer,))
    x = extreme((16, 99, 12, 12), 8)
    want = simulate(net, x, engine="int64", device=None).outputs["c"]
    with torch.backends.mkldnn.flags(enabled=False):
        assert not float32_is_exact() or not torch.backends.nnpack.is_available()
        assert torch.equal(simulate(net, x, device=None).outputs["c"], want)


# ---- random multi-layer networks with skips, concatenations and element-wise layers ---------


@st.composite
def random_networks(draw):
    c0 = draw(st.integers(1, 4))
    dims = (draw(st.integers(3, 6)), draw(st.integers(3, 6)))
    tensors = [(INPUT, c0, dims)]
    layers: list[Layer] = []
    for i in range(draw(st.integers(1, 6))):
        name = f"l{i}"
        kind = draw(st.sampled_from(["conv", "concat", "eltwise", "inflight", "pool"]))
        same = [t for t in tensors if t[2] == tensors[-1][2]]
        picks = draw(st.lists(st.sampled_from(same), min_size=1, max_size=3))
        layer, out = _random_layer(draw, name, kind, picks, tensors[-1])
        layers.append(layer)
        tensors.append(out)
    net = Network("rand", (c0, *dims), tuple(layers), avg_pool_rounding=draw(st.booleans()))
    outputs = tuple(dict.fromkeys([layers[-1].name, draw(st.sampled_from(layers)).name]))
    net = dataclasses.replace(net, outputs=outputs)
    return net, int_array(draw, (draw(st.integers(1, 3)), c0, *dims), -128, 127)


def _random_layer(draw, name, kind, picks, last):
    dims = last[2]
    act = draw(st.sampled_from([Activation.NONE, Activation.RELU, Activation.ABS]))
    shift = draw(st.integers(-8, 2))
    if kind == "pool" and min(dims) < 2:
        kind = "conv"
    if kind == "conv" or (kind == "concat" and len(picks) == 1):
        cout = draw(st.integers(1, 5))
        return conv(name, [last[0]], last[1], cout, shift=shift, act=act), (name, cout, dims)
    if kind == "concat":
        cin = sum(t[1] for t in picks)
        cout = draw(st.integers(1, 5))
        names = [t[0] for t in picks]
        return conv(name, names, cin, cout, shift=shift, act=act), (name, cout, dims)
    if kind == "pool":
        pool = Pooling(draw(st.sampled_from(PoolKind)), (2, 2), (draw(st.integers(1, 2)),) * 2)
        out = pool.output_dims(dims)
        layer = Layer(name, Op.PASSTHROUGH, (last[0],), (), in_channels=last[1],
                      out_channels=last[1], kernel_size=(1, 1), pool=pool)  # fmt: skip
        return layer, (name, last[1], out)
    same = [t for t in picks if t[1] == last[1]] + [last]
    names = tuple(t[0] for t in same)
    if len(names) == 1:
        names = names * 2
    op = draw(st.sampled_from([EltwiseOp.ADD, EltwiseOp.SUB, EltwiseOp.OR, EltwiseOp.XOR]))
    if kind == "eltwise":
        layer = Layer(name, Op.PASSTHROUGH, names, (), eltwise=op, in_channels=last[1],
                      out_channels=last[1], kernel_size=(1, 1))  # fmt: skip
        return layer, (name, last[1], dims)
    cout = draw(st.integers(1, 4))
    layer = conv(name, names, last[1], cout, shift=shift, act=act, eltwise=op)
    return layer, (name, cout, dims)


@settings(max_examples=200)
@given(random_networks())
def test_random_networks_equal_reference(case) -> None:
    net, x = case
    net, ref = with_shapes(net, x)
    got = simulate(net, torch.from_numpy(x), all_layers=True, device=None)
    assert set(got.layers) == {la.name for la in net}
    for name, want in ref.items():
        assert np.array_equal(got.layers[name].numpy(), want), name
    for name in net.outputs:
        assert torch.equal(got.outputs[name], got.layers[name])
    alone = simulate(net, x[-1], device=None)  # unbatched: the batch's last sample on its own
    for name in net.outputs:
        assert torch.equal(alone.outputs[name], got.outputs[name][-1])


# ---- specific semantics ------------------------------------------------------------------------


def _pool_net(kind, size, stride, dilation=(), shape=(1, 9), rounding=True) -> Network:
    pool = Pooling(kind, size, stride, dilation)
    layer = Layer("p", Op.PASSTHROUGH, (INPUT,), (), in_channels=1, out_channels=1,
                  kernel_size=(1,) * len(size), pool=pool)  # fmt: skip
    return Network("n", shape, (layer,), avg_pool_rounding=rounding)


def test_one_d_pooling_quirks() -> None:
    """R3.7: 1-D average pooling truncates even in rounding mode; max ignores dilation."""
    x = np.array([[[-3, -2, 1, 1, -2, 0, 5, 0, 9]]])
    avg = simulate(_pool_net(PoolKind.AVG, (2,), (2,)), x, device=None).outputs["p"]
    assert avg.tolist() == [[[-2, 1, -1, 2]]]  # -5/2 -> -2, 2/2, -2/2, 5/2 -> 2 (trunc)
    avg2d = simulate(
        _pool_net(PoolKind.AVG, (1, 2), (1, 2), shape=(1, 1, 9)), x[:, :, None], device=None
    )
    assert avg2d.outputs["p"].flatten().tolist() == [-3, 1, -1, 3]  # rounding away in 2-D
    mx = simulate(_pool_net(PoolKind.MAX, (2,), (1,), (3,)), x, device=None).outputs["p"]
    assert mx.flatten().tolist() == [-2, 1, 1, 1, 0, 5, 5, 9]  # windows of 2 adjacent


def test_stride_only_pooling_subsamples() -> None:  # R3.3, §8.10
    x = np.arange(-40, 41).reshape(1, 1, 9, 9)
    y = simulate(_pool_net(PoolKind.MAX, (1, 1), (4, 4), shape=(1, 9, 9)), x, device=None).outputs[
        "p"
    ]
    assert torch.equal(y, torch.from_numpy(x[:, :, ::4, ::4]))


def test_standalone_wide_eltwise_does_not_saturate() -> None:  # R4.4
    a = conv("a", [INPUT], 1, 1, k=1, pad=0, shift=7, bias=None)
    a = dataclasses.replace(
        a, quant=dataclasses.replace(a.quant, weights=np.full((1, 1, 1, 1), 127))
    )
    add = Layer("s", Op.PASSTHROUGH, ("a", "a", "a"), (), eltwise=EltwiseOp.ADD, wide=True,
                in_channels=1, out_channels=1, kernel_size=(1, 1))  # fmt: skip
    net = Network("n", (1, 1, 1), (a, add))
    assert simulate(net, np.full((1, 1, 1), 100), device=None).outputs["s"].item() == 381


def test_unbatched_numpy_int8_input_and_all_layers() -> None:
    c1 = conv("c1", [INPUT], 2, 3, act=Activation.RELU, shift=-4)
    c2 = conv("c2", ["c1", INPUT], 5, 2, shift=-6, wide=True)
    net = Network("n", (2, 5, 5), (c1, c2))
    x = np.random.default_rng(0).integers(-128, 128, (2, 5, 5)).astype(np.int8)
    one = simulate(net, x, all_layers=True, device=None)
    assert one.outputs["c2"].shape == (2, 5, 5) and one.layers["c1"].shape == (3, 5, 5)
    batch = simulate(net, torch.from_numpy(np.stack([x, x])), device=None)
    assert batch.outputs["c2"].shape == (2, 2, 5, 5) and batch.layers is None
    assert torch.equal(batch.outputs["c2"][1], one.outputs["c2"])
    assert one.outputs["c2"].dtype == torch.int64


# ---- bad input: SimulationError naming the layer ---------------------------------------------

NET = Network("n", (2, 4, 4), (conv("c", [INPUT], 2, 2),))
X = np.zeros((1, 2, 4, 4), dtype=np.int64)


def _layer_net(**changes) -> Network:
    layer = NET.layers[0]
    q = changes.pop("quant", {})
    quant = None if q is None else dataclasses.replace(layer.quant, **q)
    layer = dataclasses.replace(layer, quant=quant, **changes)
    return NET.with_layers([layer])


@pytest.mark.parametrize(
    ("x", "match"),
    [
        (X.astype(np.float32), "not an integer type"),
        (X.astype(bool), "not an integer type"),
        (np.zeros((1, 3, 4, 4), np.int64), r"shape \(1, 3, 4, 4\) does not match"),
        (np.zeros((2, 4, 4, 1), np.int64), "does not match"),
        (X + 128, "leave the int8 range"),
        (X - 129, "leave the int8 range"),
        ([[1, 2]], "must be an array"),
    ],
)
def test_bad_input(x, match) -> None:
    with pytest.raises(SimulationError, match=match):
        simulate(NET, x, device=None)


@pytest.mark.parametrize(
    ("net", "kwargs", "match"),
    [
        (_layer_net(op=Op.BATCHNORM), {}, "model-level op batchnorm"),
        (_layer_net(quant=None), {}, "float weights only"),
        (_layer_net(quant=dict(weight_bits=9)), {}, "9-bit weights are not allowed"),
        (
            _layer_net(quant=dict(weight_bits=3)),
            {"device": MAX78000},
            "3-bit weights are not allowed on MAX78000",
        ),
        (
            _layer_net(quant=dict(weight_bits=BINARY_BITS, weights=np.ones((2, 2, 3, 3)))),
            {"device": MAX78000},
            "binary weights are not allowed on MAX78000",
        ),
        (_layer_net(quant=dict(weight_bits=4)), {}, "weights .* leave the range"),
        (_layer_net(quant=dict(bias=np.array([200, 0]))), {}, "bias 0..200 leave"),
        (_layer_net(quant=dict(output_shift=16)), {}, "total output shift 16"),
        (_layer_net(wide=True, activation=Activation.RELU), {}, "cannot have an activation"),
        (_layer_net(activation=Activation.RELU6), {}, "relu6 does not exist"),
        (_layer_net(eltwise=EltwiseOp.MUL, inputs=(INPUT, INPUT)), {}, "mul is not a hardware"),
        (_layer_net(inputs=("nope",)), {}, "reads 'nope'"),
        (_layer_net(out_shape=(2, 3, 3)), {}, r"computes shape \(2, 4, 4\)"),
        (_layer_net(groups=2), {"device": MAX78000}, "groups=2 is not supported"),
        (_layer_net(dilation=(2, 2)), {"device": MAX78002}, "conv2d dilation 2 .at most 1"),
        (
            _layer_net(pool=Pooling(PoolKind.MAX, (2, 2), (1, 1), (2, 2))),
            {"device": MAX78000},
            "pool dilation 2 .at most 1 on MAX78000",
        ),
        (
            _layer_net(pool=Pooling(PoolKind.AVG, (2, 2), (1, 1), (2, 2))),
            {},
            "average pooling with dilation 2",
        ),
        (_layer_net(quant=dict(weights=np.zeros((2, 3, 3, 3)))), {}, "cannot compute this layer"),
        (NET, {"engine": "gpu"}, "unknown engine"),
    ],
)
def test_bad_network(net, kwargs, match) -> None:
    with pytest.raises(SimulationError, match=match) as info:
        simulate(net, X, **{"device": None, **kwargs})
    if "engine" not in kwargs:
        assert "layer c" in info.value.one_line()


def test_wide_output_feeding_a_layer_is_refused() -> None:
    a = conv("a", [INPUT], 2, 2, wide=True)
    b = conv("b", ["a"], 2, 2)
    with pytest.raises(SimulationError, match="reads the 32-bit"):
        simulate(Network("n", (2, 4, 4), (a, b)), X, device=None)


def test_binary_weights_run_on_max78002() -> None:
    layer = conv("c", [INPUT], 2, 2, bits=BINARY_BITS, shift=-7)
    net = Network("n", (2, 4, 4), (layer,))
    x = extreme((1, 2, 4, 4))
    got = simulate(net, x, device=MAX78002).outputs["c"]
    assert np.array_equal(got.numpy(), run_reference(net, x)["c"])


def test_cli_reports_a_bad_layer_in_one_line(tmp_path, capsys) -> None:
    """``cnnforge simulate`` turns the SimulationError into one line and exit status 2."""
    from cnnforge.checkpoint import save_quantized
    from cnnforge.cli import main

    save_quantized(_layer_net(quant=dict(output_shift=16)), tmp_path / "n.pth")
    np.save(tmp_path / "x.npy", np.full((2, 4, 4), 100))
    args = ["simulate", "--network", str(tmp_path / "n.pth"), "--input", str(tmp_path / "x.npy")]
    with pytest.raises(SystemExit) as info:
        main([*args, "--output", str(tmp_path / "y.npy")])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "layer c: total output shift 16" in err
    assert not (tmp_path / "y.npy").exists()
