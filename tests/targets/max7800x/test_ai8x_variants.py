"""Layer kinds the vendor files do not exercise: conv1d (with dilation and 1-D pooling),
MAX78002 depthwise convolutions and binary weights; each through YAML + checkpoint and back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from cnnforge.errors import ConfigError
from cnnforge.ir import BINARY_BITS, Activation, Layer, Network, Op, Pooling, PoolKind
from cnnforge.ir import Quantized as Q
from cnnforge.sim import simulate
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.ai8x_checkpoint_writer import write_checkpoint
from cnnforge.targets.max7800x.ai8x_yaml_writer import write_yaml
from cnnforge.targets.max7800x.device import MAX78000, get_device
from cnnforge.targets.max7800x.placement import Placement, Plan

RNG = np.random.default_rng(7)


def _q(shape, bits=8, bias=True, shift=0):
    lo, hi = (-1, 1) if bits == BINARY_BITS else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    w = RNG.integers(lo, hi + 1, size=shape)
    if bits == BINARY_BITS:
        w = np.where(w == 0, 1, w)
    b = RNG.integers(-8, 8, size=(shape[0],)) if bias else None
    return Q(weight_bits=bits, weights=w.astype(np.int64), bias=b, output_shift=shift)


def _conv1d(name, src, cin, cout, length, k, pad, dil=1, pool=None):
    pooled = pool.output_dims((length,))[0] if pool else length
    out = pooled + 2 * pad - dil * (k - 1)
    return Layer(
        name=name,
        op=Op.CONV1D,
        inputs=(src,),
        out_shape=(cout, out),
        in_channels=cin,
        out_channels=cout,
        kernel_size=(k,),
        stride=(1,),
        padding=(pad,),
        dilation=(dil,),
        pool=pool,
        activation=Activation.RELU,
        quant=_q((cout, cin, k)),
    )


def _plan(network: Network, device: str) -> Plan:
    from cnnforge.targets.max7800x.kernel_words import processors_per_pass

    places = []
    for layer in network.layers:
        shapes = network.input_shapes(layer)
        cin = shapes[0][0] if layer.eltwise is not None else sum(s[0] for s in shapes)
        places.append(
            Placement(
                layer.name,
                (1 << processors_per_pass(cin, device=MAX78000)) - 1,
                (1 << processors_per_pass(layer.out_shape[0], device=MAX78000)) - 1,
                0,
                0x1000,
            )
        )
    return Plan(get_device(device), "HWC", tuple(places))


def _roundtrip(tmp: Path, network: Network, device: str):
    write_yaml(network, _plan(network, device), tmp / "v.yaml")
    write_checkpoint(network, tmp / "v.pth.tar")
    again = read_ai8x(tmp / "v.yaml", tmp / "v.pth.tar", network.input_shape, device=device)
    x = torch.from_numpy(RNG.integers(-128, 128, size=network.input_shape))
    dev = None if device == "MAX78000" else get_device(device)
    before = simulate(network, x, device=dev).outputs
    after = simulate(again.network, x, device=dev).outputs
    assert all(torch.equal(before[k], after[k]) for k in before)
    return again


def test_conv1d_roundtrip(tmp_path):
    pool = Pooling(PoolKind.MAX, (2,), (2,))
    a = _conv1d("a", "input", 4, 12, 32, k=5, pad=2)
    b = _conv1d("b", "a", 12, 8, 32, k=3, pad=0, dil=3, pool=pool)
    c_in = b.out_shape[0] * b.out_shape[1]
    fc = Layer(
        name="fc",
        op=Op.LINEAR,
        inputs=("b",),
        out_shape=(5,),
        in_channels=c_in,
        out_channels=5,
        kernel_size=(1, 1),
        stride=(1, 1),
        padding=(0, 0),
        dilation=(1, 1),
        flatten=True,
        quant=_q((5, c_in)),
    )
    net = Network("c1d", (4, 32), (a, b, fc))
    text_net = _roundtrip(tmp_path, net, "MAX78000").network
    assert text_net.layers[1].dilation == (3,) and text_net.layers[1].pool.size == (2,)
    text = (tmp_path / "v.yaml").read_text()
    assert "kernel_size: 5" in text and "dilation: 3" in text and "operation: conv1d" in text


def _conv3x3(name: str, cin: int, cout: int, quant: Q, groups: int = 1) -> Network:
    """A one-layer network: a 3x3 conv2d over an 8x8 input of ``cin`` channels."""
    conv = Layer(name=name, op=Op.CONV2D, inputs=("input",), out_shape=(cout, 8, 8),
                 in_channels=cin, out_channels=cout, kernel_size=(3, 3), stride=(1, 1),
                 padding=(1, 1), dilation=(1, 1), groups=groups, activation=Activation.RELU,
                 quant=quant)  # fmt: skip
    return Network(name, (cin, 8, 8), (conv,))


def test_depthwise_on_max78002_and_refused_on_max78000(tmp_path):
    again = _roundtrip(tmp_path, _conv3x3("dw", 16, 16, _q((16, 1, 3, 3)), groups=16), "MAX78002")
    assert again.network.layers[0].groups == 16
    assert "conv_groups: 16" in (tmp_path / "v.yaml").read_text()
    with pytest.raises(ConfigError, match="depthwise convolution\\) is not supported on MAX78000"):
        read_ai8x(tmp_path / "v.yaml", tmp_path / "v.pth.tar", (16, 8, 8), device="MAX78000")


def test_binary_weights_on_max78002(tmp_path):
    network = _conv3x3("bin", 16, 8, _q((8, 16, 3, 3), bits=BINARY_BITS, shift=-3))
    again = _roundtrip(tmp_path, network, "MAX78002")
    assert again.network.layers[0].quant.weight_bits == BINARY_BITS
    assert "quantization: binary" in (tmp_path / "v.yaml").read_text()
    with pytest.raises(ConfigError, match="weight width -1 is not available on MAX78000"):
        read_ai8x(tmp_path / "v.yaml", tmp_path / "v.pth.tar", (16, 8, 8), device="MAX78000")


def test_pm1_weights_keep_their_width_and_auto_binary(tmp_path):
    """+-1 weights: the vendor tool reads them as binary on MAX78002 unless `quantization` says
    otherwise, so the writer says it; without the key the importer auto-detects like the tool."""
    q = _q((8, 16, 3, 3), bits=BINARY_BITS)
    q = Q(weight_bits=8, weights=q.weights, bias=q.bias, output_shift=0)
    again = _roundtrip(tmp_path, _conv3x3("pm1", 16, 8, q), "MAX78002")
    assert again.network.layers[0].quant.weight_bits == 8
    text = (tmp_path / "v.yaml").read_text()
    assert "quantization: 8" in text
    (tmp_path / "v.yaml").write_text(text.replace("    quantization: 8\n", ""))
    auto = read_ai8x(tmp_path / "v.yaml", tmp_path / "v.pth.tar", (16, 8, 8), device="MAX78002")
    assert auto.network.layers[0].quant.weight_bits == BINARY_BITS


@pytest.mark.parametrize("pool_first", [True, False])
def test_pooled_eltwise_roundtrip(tmp_path, pool_first):
    """Element-wise with pooling, both orders (docs/hardware/arithmetic.md R4.3), standalone and in
    flight."""
    from dataclasses import replace

    from cnnforge.ir import EltwiseOp
    from support.ai8x import Builder, conv, passthrough

    b = Builder((8, 8, 8), RNG)
    b.add(passthrough(b, "a", ("input",)))
    avg, top = Pooling(PoolKind.AVG, (2, 2), (2, 2)), Pooling(PoolKind.MAX, (2, 2), (2, 2))
    s = passthrough(b, "s", ("input", "a"), pool=avg, eltwise=EltwiseOp.SUB)
    b.add(replace(s, pool_first=pool_first))
    c = conv(b, "c", ("s", "s"), 4, pool=top, eltwise=EltwiseOp.XOR)
    b.add(replace(c, pool_first=pool_first))
    again = _roundtrip(tmp_path, b.network("pe")[0], "MAX78000")
    assert [layer.pool_first for layer in again.network.layers[1:]] == [pool_first] * 2
    assert ("pool_first: false" in (tmp_path / "v.yaml").read_text()) is not pool_first


def test_avg_pool_rounding_flag(tmp_path):
    """The global rounding flag is a vendor command-line flag: a YAML comment out, an option in."""
    from dataclasses import replace

    from support.ai8x import Builder, passthrough

    b = Builder((4, 8, 8), RNG)
    b.add(passthrough(b, "p", ("input",), pool=Pooling(PoolKind.AVG, (2, 2), (2, 2))))
    network = replace(b.network("r")[0], avg_pool_rounding=True)
    write_yaml(network, _plan(network, "MAX78000"), tmp_path / "r.yaml")
    write_checkpoint(network, tmp_path / "r.pth.tar")
    assert "--avg-pool-rounding" in (tmp_path / "r.yaml").read_text()
    again = read_ai8x(
        tmp_path / "r.yaml",
        tmp_path / "r.pth.tar",
        (4, 8, 8),
        avg_pool_rounding=True,
        device="MAX78000",
    )
    assert again.network.avg_pool_rounding
    x = torch.from_numpy(RNG.integers(-128, 128, size=(4, 8, 8)))
    assert torch.equal(
        simulate(network, x, device=None).outputs["p"],
        simulate(again.network, x, device=None).outputs["p"],
    )
