"""``run_float`` against torch.nn: model-level layers, fused hardware layers, random chains."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.errors import SimulationError
from cnnforge.ir import (
    INPUT,
    Activation,
    BatchNormParams,
    EltwiseOp,
    Layer,
    Network,
    Op,
    Pooling,
    PoolKind,
)
from cnnforge.sim.float_eval import run_float


def close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b.to(a.dtype), rtol=1e-10, atol=1e-10)


def _np(t: torch.Tensor | None) -> np.ndarray | None:
    return None if t is None else t.detach().double().numpy().copy()


def conv_layer(name: str, inp: str, m: nn.Module, out_shape, **kw) -> Layer:
    """The model-level Layer of a torch conv / convtranspose / linear module."""
    op = {
        nn.Conv1d: Op.CONV1D,
        nn.Conv2d: Op.CONV2D,
        nn.ConvTranspose2d: Op.CONVTRANSPOSE2D,
        nn.Linear: Op.LINEAR,
    }[type(m)]
    geo = {}
    if op is not Op.LINEAR:
        geo = dict(
            kernel_size=m.kernel_size, stride=m.stride, padding=m.padding, dilation=m.dilation,
            groups=m.groups, output_padding=getattr(m, "output_padding", ()),
            in_channels=m.in_channels, out_channels=m.out_channels,
        )  # fmt: skip
    else:
        geo = dict(in_channels=m.in_features, out_channels=m.out_features)
    return Layer(name, op, (inp,), tuple(out_shape), weight=_np(m.weight), bias=_np(m.bias),
                 **geo, **kw)  # fmt: skip


def bn_layer(name: str, inp: str, m: nn.modules.batchnorm._BatchNorm, out_shape) -> Layer:
    params = BatchNormParams(_np(m.running_mean), _np(m.running_var), m.eps, _np(m.weight),
                             _np(m.bias))  # fmt: skip
    return Layer(name, Op.BATCHNORM, (inp,), tuple(out_shape), batchnorm=params)


ACTS = [
    (Activation.RELU, (), nn.ReLU()),
    (Activation.ABS, (), None),
    (Activation.RELU6, (), nn.ReLU6()),
    (Activation.HARDTANH, (-0.5, 0.75), nn.Hardtanh(-0.5, 0.75)),
    (Activation.LEAKYRELU, (0.2,), nn.LeakyReLU(0.2)),
    (Activation.SIGMOID, (), nn.Sigmoid()),
    (Activation.TANH, (), nn.Tanh()),
]


class Abs(nn.Module):
    def forward(self, x):
        return x.abs()


@st.composite
def chains(draw):
    """A random model-level chain, built twice: as torch modules and as IR layers."""
    torch.manual_seed(draw(st.integers(0, 2**31)))
    c, h = draw(st.integers(1, 4)), draw(st.integers(5, 9))
    shape, mods, layers, prev = (c, h, h), [], [], INPUT
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["conv", "convt", "bn", "act", "pool", "upsample"]))
        m, layer = _step(draw, kind, f"l{i}", prev, shape)
        shape = tuple(m.double()(torch.zeros(1, *shape, dtype=torch.float64)).shape[1:])
        layer = dataclasses.replace(layer, out_shape=shape)
        mods.append(m)
        layers.append(layer)
        prev = layer.name
    if draw(st.booleans()):
        lin = nn.Linear(int(np.prod(shape)), 3).double()
        mods += [nn.Flatten(), lin]
        layers += [
            Layer("flat", Op.FLATTEN, (prev,), (int(np.prod(shape)),)),
            conv_layer("fc", "flat", lin, (3,)),
        ]
    return nn.Sequential(*mods).double().eval(), Network("chain", (c, h, h), tuple(layers))


def _step(draw, kind: str, name: str, prev: str, shape) -> tuple[nn.Module, Layer]:
    c, h = shape[0], min(shape[1:])
    if kind == "conv":
        groups = c if draw(st.booleans()) else 1
        k = draw(st.integers(1, min(3, h)))
        m = nn.Conv2d(c, c * draw(st.integers(1, 2)) if groups > 1 else draw(st.integers(1, 4)),
                      k, draw(st.integers(1, 2)), draw(st.integers(0, 1)), groups=groups,
                      bias=draw(st.booleans())).double()  # fmt: skip
        return m, conv_layer(name, prev, m, ())
    if kind == "convt":
        m = nn.ConvTranspose2d(
            c, draw(st.integers(1, 3)), 3, 2, draw(st.integers(0, 1)), 1
        ).double()
        return m, conv_layer(name, prev, m, ())
    if kind == "bn":
        m = nn.BatchNorm2d(c, affine=draw(st.booleans())).double().eval()
        m.running_mean.uniform_(-1, 1)
        m.running_var.uniform_(0.5, 2)
        if m.affine:
            nn.init.uniform_(m.weight, -2, 2)
            nn.init.uniform_(m.bias, -1, 1)
        return m, bn_layer(name, prev, m, ())
    if kind == "act":
        act, params, m = draw(st.sampled_from(ACTS))
        layer = Layer(name, Op.ACTIVATION, (prev,), (), activation=act, activation_params=params)
        return m or Abs(), layer
    if kind == "pool" and h >= 2:
        pad = draw(st.integers(0, 1))
        if draw(st.booleans()):
            m = nn.MaxPool2d(2, draw(st.integers(1, 2)), pad)
            pool = Pooling(PoolKind.MAX, (2, 2), (m.stride,) * 2)
        else:
            m = nn.AvgPool2d(2, draw(st.integers(1, 2)), pad)
            pool = Pooling(PoolKind.AVG, (2, 2), (m.stride,) * 2)
        return m, Layer(name, Op.POOL, (prev,), (), pool=pool, padding=(pad, pad))
    m = nn.Upsample(scale_factor=2, mode="nearest")
    return m, Layer(name, Op.UPSAMPLE, (prev,), (), scale_factor=(2, 2), upsample_mode="nearest")


@settings(max_examples=60)
@given(chains())
def test_random_model_level_chains_equal_torch(case) -> None:
    model, net = case
    x = torch.randn(2, *net.input_shape, dtype=torch.float64)
    out = run_float(net, x)
    close(out[net.outputs[0]], model(x))
    assert set(run_float(net, x, all_layers=True)) == {la.name for la in net}


def test_branches_eltwise_concat_and_unbatched() -> None:
    torch.manual_seed(0)
    a, b = nn.Conv2d(3, 4, 3, padding=1).double(), nn.Conv2d(3, 4, 1).double()
    layers = [conv_layer("a", INPUT, a, (4, 6, 6)), conv_layer("b", INPUT, b, (4, 6, 6))]
    for op in (EltwiseOp.ADD, EltwiseOp.SUB, EltwiseOp.MUL):
        layers.append(Layer(op.value, Op.ELTWISE, ("a", "b", "a"), (4, 6, 6), eltwise=op))
    layers.append(Layer("cat", Op.CONCAT, ("b", "add", "a"), (12, 6, 6)))
    net = Network("br", (3, 6, 6), tuple(layers), outputs=("add", "sub", "mul", "cat"))
    x = torch.randn(3, 6, 6, dtype=torch.float64)
    ya, yb = a(x[None]), b(x[None])
    out = run_float(net, x)
    close(out["add"], (ya + yb + ya)[0])
    close(out["sub"], (ya - yb - ya)[0])
    close(out["mul"], (ya * yb * ya)[0])
    close(out["cat"], torch.cat([yb, ya + yb + ya, ya], 1)[0])


@pytest.mark.parametrize("pool_first", [True, False])
def test_fused_hardware_layer_order(pool_first: bool) -> None:
    """pool -> eltwise -> conv -> activation (pool_first=False: eltwise, then pool; R4.3)."""
    torch.manual_seed(1)
    a, b, c = (nn.Conv2d(2, 2, 1).double() for _ in range(3))
    conv = nn.Conv2d(2, 3, 3, padding=1).double()
    pool = Pooling(PoolKind.MAX, (2, 2), (2, 2))
    fused = conv_layer("f", "a", conv, (3, 3, 3), pool=pool, pool_first=pool_first,
                       eltwise=EltwiseOp.SUB, activation=Activation.ABS)  # fmt: skip
    fused = dataclasses.replace(fused, inputs=("a", "b", "c"))
    net = Network("hw", (2, 6, 6), (
        conv_layer("a", INPUT, a, (2, 6, 6)), conv_layer("b", INPUT, b, (2, 6, 6)),
        conv_layer("c", INPUT, c, (2, 6, 6)), fused))  # fmt: skip
    x = torch.randn(2, 2, 6, 6, dtype=torch.float64)
    mp = nn.MaxPool2d(2)
    mixed = mp(a(x)) - mp(b(x)) - mp(c(x)) if pool_first else mp(a(x) - b(x) - c(x))
    close(run_float(net, x)["f"], conv(mixed).abs())


def test_conv1d_bn1d_pool1d_and_hardware_passthrough() -> None:
    torch.manual_seed(2)
    conv = nn.Conv1d(3, 4, 5, padding=2, dilation=1).double()
    bn = nn.BatchNorm1d(4).double().eval()
    bn.running_var.uniform_(0.5, 2)
    pool = Pooling(PoolKind.AVG, (2,), (2,))
    layers = (
        conv_layer("c", INPUT, conv, (4, 12)),
        bn_layer("bn", "c", bn, (4, 12)),
        Layer("p", Op.PASSTHROUGH, ("bn",), (4, 6), pool=pool, kernel_size=(1,)),
        Layer("relu", Op.ACTIVATION, ("p",), (4, 6), activation=Activation.RELU),
    )
    x = torch.randn(2, 3, 12, dtype=torch.float64)
    want = torch.relu(nn.AvgPool1d(2)(bn(conv(x))))
    close(run_float(Network("c1", (3, 12), layers), x)["relu"], want)


def test_integer_input_runs_in_float64_and_float32_is_kept() -> None:
    lin = nn.Linear(4, 2).double()
    net = Network("l", (4,), (conv_layer("fc", INPUT, lin, (2,)),))
    assert run_float(net, torch.arange(4))["fc"].dtype == torch.float64
    assert run_float(net, torch.ones(3, 4, dtype=torch.float32))["fc"].dtype == torch.float32


def test_errors() -> None:
    net = Network("l", (4,), (Layer("x", Op.ELTWISE, (INPUT, INPUT), (4,), eltwise=EltwiseOp.XOR),))
    with pytest.raises(SimulationError, match="xor has no float semantics"):
        run_float(net, torch.ones(4))
    with pytest.raises(SimulationError, match="does not match"):
        run_float(net, torch.ones(5))
    bad = Network("b", (4,), (Layer("fc", Op.LINEAR, (INPUT,), (2,), in_channels=4),))
    with pytest.raises(SimulationError, match="no float weights"):
        run_float(bad, torch.ones(4))
