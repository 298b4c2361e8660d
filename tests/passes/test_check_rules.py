"""Device rules that plain PyTorch models cannot reach (quantized, wide, passthrough, multi-pass
element-wise...): hand-built hardware networks, one per rule, checked with check_network."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from cnnforge.ir import (
    BINARY_BITS,
    Activation,
    EltwiseOp,
    Layer,
    Network,
    Op,
    Pooling,
    PoolKind,
    Quantized,
)
from cnnforge.passes.check import check_network
from cnnforge.targets.max7800x.device import MAX78000, MAX78002
from support.fuse_reference import conv2d
from support.targets import rules_of


def _q(layer: Layer, bits: int = 8, shift: int = 0) -> Layer:
    w = np.ones(layer.weight.shape, dtype=np.int64) * (1 if bits == BINARY_BITS else 0)
    return replace(layer, quant=Quantized(bits, w, None, shift))


def _one(layer: Layer, shape) -> Network:
    return Network("n", shape, (layer,))


def _passthrough(name, inputs, shape, **kw) -> Layer:
    n = len(shape) - 1
    return Layer(
        name,
        Op.PASSTHROUGH,
        inputs=inputs,
        out_shape=shape,
        module_path=name,
        in_channels=shape[0],
        out_channels=shape[0],
        kernel_size=(1,) * n,
        stride=(1,) * n,
        padding=(0,) * n,
        dilation=(1,) * n,
        **kw,
    )


def _linear(name, inp, fin, fout, flatten=False) -> Layer:
    return Layer(
        name,
        Op.LINEAR,
        inputs=(inp,),
        out_shape=(fout,),
        module_path=name,
        in_channels=fin,
        out_channels=fout,
        kernel_size=(1, 1),
        flatten=flatten,
        weight=np.zeros((fout, fin), dtype=np.float32),
    )


def _conv1d(k: int, d: int, cin: int = 4, pad: int = 0, length: int = 64) -> Layer:
    return Layer(
        "c",
        Op.CONV1D,
        out_shape=(4, length + 2 * pad - d * (k - 1)),
        module_path="c",
        in_channels=cin,
        out_channels=4,
        kernel_size=(k,),
        stride=(1,),
        padding=(pad,),
        dilation=(d,),
        weight=np.zeros((4, cin, k), dtype=np.float32),
    )


def _net_output_shift():
    return _one(_q(conv2d("c", "input", (3, 8, 8), 4), 8, 20), (3, 8, 8)), MAX78000


def _net_binary():
    return _one(_q(conv2d("c", "input", (3, 8, 8), 4), BINARY_BITS), (3, 8, 8)), MAX78000


def _net_wide_activation():
    c = replace(conv2d("c", "input", (3, 8, 8), 4), wide=True, activation=Activation.RELU)
    return _one(c, (3, 8, 8)), MAX78000


def _net_wide_inner():
    c1 = replace(conv2d("c1", "input", (3, 8, 8), 4), wide=True)
    return Network("n", (3, 8, 8), (c1, conv2d("c2", "c1", (4, 8, 8), 4))), MAX78000


def _net_passthrough_activation():
    return _one(_passthrough("p", ("input",), (3, 8, 8), activation=Activation.RELU), (3, 8, 8)), (
        MAX78000
    )


def _eltwise_conv(device, bias=True, channels=128):
    a = conv2d("a", "input", (3, 4, 4), channels, k=1, pad=0)
    b = conv2d("b", "input", (3, 4, 4), channels, k=1, pad=0, seed=1)
    d = conv2d("d", "input", (3, 4, 4), channels, k=1, pad=0, seed=2)
    c = replace(
        conv2d("c", "a", (channels, 4, 4), 8, bias=bias),
        inputs=("a", "b", "d"),
        eltwise=EltwiseOp.ADD,
    )
    return Network("n", (3, 4, 4), (a, b, d, c)), device


def _net_linear_out():
    return _one(_linear("fc", "input", 16, 2000), (16,)), MAX78000


def _net_flatten_chw():
    return _one(_linear("fc", "input", 128 * 144, 10, flatten=True), (128, 12, 12)), MAX78000


def _net_bias_memory():
    layers, prev, shape = [], "input", (3, 2, 2)
    for i in range(5):
        layer = conv2d(f"c{i}", prev, shape, 500, k=1, pad=0, seed=i)
        layers.append(layer)
        prev, shape = layer.name, layer.out_shape
    return Network("n", (3, 2, 2), tuple(layers)), MAX78000


def _net_pool_dilation():
    c = replace(
        conv2d("c", "input", (3, 8, 8), 4),
        pool=Pooling(PoolKind.MAX, (2, 2), (2, 2), (2, 2)),
        out_shape=(4, 3, 3),
    )
    return _one(c, (3, 8, 8)), MAX78000


def _net_pool_after_eltwise():
    a = conv2d("a", "input", (3, 8, 8), 4)
    b = conv2d("b", "input", (3, 8, 8), 4, seed=1)
    d = conv2d("d", "input", (3, 8, 8), 4, seed=2)
    c = replace(
        conv2d("c", "a", (4, 4, 4), 4),
        inputs=("a", "b", "d"),
        eltwise=EltwiseOp.ADD,
        pool=Pooling(PoolKind.MAX, (2, 2), (2, 2)),
        pool_first=False,
    )
    return Network("n", (3, 8, 8), (a, b, d, c)), MAX78000


def _net_big_layer():
    return _one(conv2d("c", "input", (1024, 2, 2), 1024), (1024, 2, 2)), MAX78000


CASES = {
    "output-shift": _net_output_shift,
    "weight-bits": _net_binary,
    "wide-output": _net_wide_activation,
    "wide-output-inner": _net_wide_inner,
    "passthrough-activation": _net_passthrough_activation,
    "eltwise-passes": lambda: _eltwise_conv(MAX78000),
    "linear-out": _net_linear_out,
    "flatten-chw": _net_flatten_chw,
    "bias-memory": _net_bias_memory,
    "dilation": lambda: (_one(_conv1d(5, 3), (4, 64)), MAX78000),
    "pad": lambda: (_one(_conv1d(3, 1, cin=100, pad=1), (100, 64)), MAX78002),
    "pool-dilation": _net_pool_dilation,
    "operands": _net_pool_after_eltwise,
    "kernel-memory": _net_big_layer,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rule(case: str) -> None:
    network, device = CASES[case]()
    rule = case.removesuffix("-inner").removesuffix("-bias")
    violations = check_network(network, device, rules=rules_of(device))
    assert rule in [v.rule for v in violations], violations
    v = next(v for v in violations if v.rule == rule)
    assert v.layer and v.module_path and v.actual and v.limit


@pytest.mark.parametrize("channels", [16, 128])
def test_eltwise_in_a_conv_with_bias_is_refused_on_the_max78002(channels: int) -> None:
    """The vendor tool refuses it for one pass and for several alike."""
    network, _ = _eltwise_conv(MAX78002, channels=channels)
    violations = check_network(network, MAX78002, rules=rules_of(MAX78002))
    assert [v.rule for v in violations] == ["eltwise-conv-bias"], violations
    on_max78000 = check_network(network, MAX78000, rules=rules_of(MAX78000))
    assert "eltwise-conv-bias" not in [v.rule for v in on_max78000]


def test_legal_counterparts_pass() -> None:
    assert not check_network(
        _eltwise_conv(MAX78002, bias=False)[0], MAX78002, rules=rules_of(MAX78002)
    )
    c = conv2d("c", "input", (3, 8, 8), 4)
    assert not check_network(
        _one(_q(c, BINARY_BITS), (3, 8, 8)), MAX78002, rules=rules_of(MAX78002)
    )
    assert not check_network(_one(_q(c, 4, 3), (3, 8, 8)), MAX78000, rules=rules_of(MAX78000))
    assert not check_network(_one(_conv1d(3, 5), (4, 64)), MAX78000, rules=rules_of(MAX78000))
    assert not check_network(_net_pool_dilation()[0], MAX78002, rules=rules_of(MAX78002))


@pytest.mark.parametrize(
    ("kind", "needle"),
    [
        ("nn.GroupNorm", "BatchNorm2d"),
        ("aten.instance_norm", "BatchNorm2d"),
        ("nn.InstanceNorm2d", "BatchNorm2d"),
        ("F.hardswish", "use ReLU"),
        ("aten.hardswish_", "use ReLU"),
        (
            "aten.upsample_bilinear2d: bilinear upsampling with align_corners=True",
            "ConvTranspose2d",
        ),
        ("operator.mul: mul of shapes (8, 4, 4) and (1, 4, 4) broadcasts", "products"),
        ("torch.cumsum", "compute it on the host"),
    ],
)
def test_opaque_ops_get_a_replacement_hint(kind: str, needle: str) -> None:
    from cnnforge.passes.check_rules import opaque_hint

    assert needle in opaque_hint(kind)
