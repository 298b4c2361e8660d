"""Exact legal rewrites (passes/legalize.py), each proven on random weights and sizes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.frontend.torch_fx import trace
from cnnforge.ir import Layer, Network, Op, Pooling, PoolKind
from cnnforge.passes.legalize import legalize, legalize_with_log
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.passes.verify import verify
from support.fuse_reference import conv2d, convtranspose, run

SMALL = settings(max_examples=25)


def _x(shape, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape))


def _assert_same(a: Network, b: Network, x: torch.Tensor) -> None:
    ya, yb = run(a, x), run(b, x)
    for u, v in zip(ya.values(), yb.values(), strict=True):
        assert u.shape == v.shape
        torch.testing.assert_close(u, v, rtol=1e-5, atol=1e-9)


@SMALL
@given(
    cin=st.integers(1, 6),
    cout=st.integers(1, 6),
    h=st.integers(1, 7),
    w=st.integers(1, 7),
    seed=st.integers(0, 2**16),
)
def test_convtranspose_k2_equals_embedded_k3(cin, cout, h, w, seed) -> None:
    up = convtranspose("up", "input", (cin, h, w), cout, seed=seed)
    net = Network("n", (cin, h, w), (up,))
    new, log = legalize_with_log(net)
    verify(new)
    t = new.layer("up")
    assert (t.kernel_size, t.stride, t.padding, t.output_padding) == (
        (3, 3),
        (2, 2),
        (1, 1),
        (1, 1),
    )
    # docs/hardware/unet.md §1.1.3: w3[:, :, 1:3, 1:3] = w2 and zeros elsewhere
    assert np.array_equal(t.weight[:, :, 1:3, 1:3], up.weight)
    assert not t.weight[:, :, 0, :].any() and not t.weight[:, :, :, 0].any()
    assert [r.rule for r in log] == ["convtranspose-k2"]
    x = _x((2, cin, h, w), seed)
    _assert_same(net, new, x)
    # and directly against PyTorch's k=2 layer
    direct = F.conv_transpose2d(x, torch.from_numpy(up.weight).double(), stride=2)
    torch.testing.assert_close(run(new, x)["up"], direct, rtol=1e-5, atol=1e-9)


@SMALL
@given(
    h=st.integers(3, 12),
    w=st.integers(3, 12),
    k=st.sampled_from([1, 3]),
    stride=st.integers(2, 3),
    then_conv=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_stride_becomes_subsampling(h, w, k, stride, then_conv, seed) -> None:
    c1 = conv2d("c1", "input", (3, h, w), 4, k=k, pad=k // 2, stride=stride, seed=seed)
    layers = [c1]
    if then_conv:
        layers.append(conv2d("c2", "c1", c1.out_shape, 5, seed=seed + 1))
    net = Network("n", (3, h, w), tuple(layers))
    new, log = legalize_with_log(net)
    verify(new)
    assert new.layer("c1").stride == (1, 1)
    assert [r.rule for r in log] == ["stride-to-pool"]
    if then_conv:
        assert [x.name for x in new] == ["c1", "c2"]
        assert new.layer("c2").pool.size == (1, 1)
    else:
        assert [x.op for x in new] == [Op.CONV2D, Op.PASSTHROUGH]
        assert new.outputs == ("c1.subsample",)
    _assert_same(net, new, _x((2, 3, h, w), seed))


@SMALL
@given(half=st.integers(2, 8), pad=st.integers(0, 1), seed=st.integers(0, 2**16))
def test_conv_k2_stride2_becomes_3x3(half, pad, seed) -> None:
    size = 2 * half - 2 * pad  # (size + 2p - 1) is odd: stride 2 drops the extra row
    c1 = conv2d("c1", "input", (2, size, size + 2), 3, k=2, pad=pad, stride=2, seed=seed)
    net = Network("n", (2, size, size + 2), (c1,))
    new, log = legalize_with_log(net)
    verify(new)
    assert new.layer("c1").kernel_size == (3, 3) and new.layer("c1").padding == (pad + 1,) * 2
    assert [r.rule for r in log] == ["conv-k2-to-k3", "stride-to-pool"]
    _assert_same(net, new, _x((2, 2, size, size + 2), seed))


def test_conv_k2_declined_where_not_exact() -> None:
    c1 = conv2d("c1", "input", (2, 7, 7), 3, k=2, pad=0, stride=2)  # 7 - 1 = 6 is even
    net = legalize(Network("n", (2, 7, 7), (c1,)))
    assert net.layer("c1").kernel_size == (2, 2)


@SMALL
@given(
    kernel=st.sampled_from(
        [((1, 3), (0, 1)), ((3, 1), (1, 0)), ((1, 1), (1, 1)), ((1, 3), (1, 1))]
    ),
    h=st.integers(1, 8),
    seed=st.integers(0, 2**16),
)
def test_kernel_embedded_in_3x3(kernel, h, seed) -> None:
    k, pad = kernel
    c1 = conv2d("c1", "input", (3, h, h + 1), 2, k=k, pad=pad, seed=seed)
    net = Network("n", (3, h, h + 1), (c1,))
    new, log = legalize_with_log(net)
    verify(new)
    assert new.layer("c1").kernel_size == (3, 3)
    assert [r.rule for r in log] == ["kernel-embed-3x3"]
    _assert_same(net, new, _x((2, 3, h, h + 1), seed))


def test_linear_on_1x1_data_drops_flatten() -> None:
    rng = np.random.default_rng(0)
    c1 = conv2d("c1", "input", (3, 3, 3), 8, pad=0)
    fc = Layer(
        "fc",
        Op.LINEAR,
        inputs=("c1",),
        out_shape=(4,),
        module_path="fc",
        in_channels=8,
        out_channels=4,
        kernel_size=(1, 1),
        flatten=True,
        weight=rng.standard_normal((4, 8)).astype(np.float32),
    )
    net = Network("n", (3, 3, 3), (c1, fc))
    new, log = legalize_with_log(net)
    assert not new.layer("fc").flatten and [r.rule for r in log] == ["linear-1x1-flatten"]
    _assert_same(net, new, _x((2, 3, 3, 3)))


def test_legal_network_is_unchanged() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    net = Network("n", (3, 8, 8), (c1, replace(conv2d("c2", "c1", (4, 8, 8), 4), module_path="x")))
    new, log = legalize_with_log(net)
    assert log == () and new.layers == net.layers


@SMALL
@given(c=st.integers(1, 5), h=st.integers(1, 6), w=st.integers(1, 6))
def test_nearest_upsample_becomes_identity_transposed_conv(c, h, w) -> None:
    up = Layer(
        "up",
        Op.UPSAMPLE,
        inputs=("input",),
        out_shape=(c, 2 * h, 2 * w),
        module_path="up",
        scale_factor=(2, 2),
        upsample_mode="nearest",
    )
    net = Network("n", (c, h, w), (up,))
    new, log = legalize_with_log(net)
    verify(new)
    assert new.layer("up").op is Op.CONVTRANSPOSE2D and [r.rule for r in log] == [
        "upsample-nearest"
    ]
    x = _x((2, c, h, w))
    assert torch.equal(run(new, x)["up"], run(net, x)["up"])  # exact: x * 1.0 + zeros


@SMALL
@given(k=st.sampled_from([18, 20, 32, 64]), extra=st.integers(0, 5), seed=st.integers(0, 99))
def test_large_max_pool_is_split(k, extra, seed) -> None:
    size = k + extra
    c1 = conv2d("c1", "input", (2, size, size), 3, seed=seed)
    head = replace(
        conv2d("c2", "c1", (3, 1, 1), 2, k=1, pad=0, seed=seed + 1),
        pool=Pooling(PoolKind.MAX, (k, k), (k, k)),
    )
    net = Network("n", (2, size, size), (c1, head))
    new, log = legalize_with_log(net)
    verify(new)
    assert [r.rule for r in log] == ["split-maxpool"]
    assert all(max(x.pool.size) <= 16 for x in new if x.pool is not None)
    _assert_same(net, new, _x((2, 2, size, size), seed))


def test_conv1d_stride_becomes_subsampling() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv1d(3, 4, 5, stride=2, padding=2),
        torch.nn.ReLU(),
        torch.nn.MaxPool1d(2),
        torch.nn.Conv1d(4, 2, 3, stride=3, padding=1),
    ).eval()
    lowered = lower_to_hardware(trace(model, (3, 40)), device=None)
    verify(lowered.network)
    assert [r.rule for r in lowered.rewrites].count("stride-to-pool") == 2
    assert all(x.stride == (1,) for x in lowered.network if x.op is Op.CONV1D)
    x = _x((2, 3, 40))
    (got,) = run(lowered.network, x).values()
    with torch.no_grad():
        torch.testing.assert_close(got, model.double()(x), rtol=1e-5, atol=1e-9)
