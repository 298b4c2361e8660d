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


def test_conv1d_takes_the_vendors_c_l_1_samples(tmp_path, capsys):
    """The vendor tool holds 1-D data as C x L x 1 (its Conv1d samples are saved so): a pair
    whose first layer is a Conv1d reads that shape as C x L, and `simulate --ai8x-yaml` takes
    such a sample, with the same output as the C x L one."""
    from support.cli import run_cli

    net = Network("c1d", (4, 32), (_conv1d("a", "input", 4, 12, 32, k=5, pad=2),))
    _roundtrip(tmp_path, net, "MAX78000")
    model = read_ai8x(tmp_path / "v.yaml", tmp_path / "v.pth.tar", (4, 32, 1), device="MAX78000")
    assert model.network.input_shape == (4, 32)
    x = RNG.integers(-128, 128, size=(4, 32))
    np.save(tmp_path / "x.npy", x[..., None])
    args = ["simulate", "--ai8x-yaml", str(tmp_path / "v.yaml"), "--ai8x-checkpoint",
            str(tmp_path / "v.pth.tar"), "--input", str(tmp_path / "x.npy")]  # fmt: skip
    code, _, err = run_cli([*args, "--output", str(tmp_path / "y.npy")], capsys)
    assert code == 0, err
    want = simulate(model.network, torch.from_numpy(x), device=None).outputs["a"].numpy()
    assert np.array_equal(np.load(tmp_path / "y.npy"), want)


_SPLIT_YAML = (
    "arch: e\ndataset: e\nlayers:\n  - processors: 0xf\n    out_offset: 0x2000\n"
    "    operation: none\n    eltwise: {op}\n    operands: {k}\n    data_format: HWC\n"
)


@pytest.mark.parametrize(("op", "k"), [("add", 2), ("sub", 2), ("xor", 4), ("add", 4)])
def test_element_wise_over_the_network_inputs_channel_groups(tmp_path, op, k):
    """Without `in_sequences` the vendor tool splits the input's channels into `operands` equal
    consecutive groups (docs/ai8x-format.md): cnnforge reads that and folds the groups."""
    (tmp_path / "v.yaml").write_text(_SPLIT_YAML.format(op=op, k=k))
    torch.save({"arch": "e", "epoch": 1, "state_dict": {}}, tmp_path / "v.pth.tar")
    shape = (4 * k, 3, 5)
    model = read_ai8x(tmp_path / "v.yaml", tmp_path / "v.pth.tar", shape, device="MAX78000")
    assert model.network.layers[0].split_operands == k
    x = RNG.integers(-128, 128, size=(4 * k, 3, 5))
    got = simulate(model.network, torch.from_numpy(x), device=None).outputs
    (y,) = (v.numpy() for v in got.values())
    groups = x.reshape(k, 4, 3, 5)
    want = groups[0]
    for g in groups[1:]:
        want = {"add": want + g, "sub": want - g, "xor": want ^ g}[op]
    want = np.clip(want, -128, 127)  # one saturation at the end (arithmetic.eltwise_fold)
    assert np.array_equal(y.reshape(want.shape), want)


@pytest.mark.parametrize("sources", ["", "    in_sequences: [-1, -1]\n"])
def test_a_first_element_wise_layers_firmware_holds_its_known_answer(tmp_path, capsys, sources):
    """`in_sequences` listing the input twice: each operand is the whole input, loaded
    interleaved; the folder reads back to its known answer. Without `in_sequences` (the input's
    channel groups) `compile` refuses in one line: its portable C has no such operands."""
    from support.cli import run_cli

    k, c = 2, 4 if sources else 8
    yaml = _SPLIT_YAML.format(op="add", k=k).replace("    data_format", sources + "    data_format")
    (tmp_path / "v.yaml").write_text(yaml)
    torch.save({"arch": "e", "epoch": 1, "state_dict": {}}, tmp_path / "v.pth.tar")
    np.save(tmp_path / "x.npy", RNG.integers(-128, 128, size=(c, 3, 5)))
    out = tmp_path / "out"
    args = ["compile", "--ai8x-yaml", str(tmp_path / "v.yaml"), "--ai8x-checkpoint",
            str(tmp_path / "v.pth.tar"), "--sample", str(tmp_path / "x.npy"), "-o",
            str(out)]  # fmt: skip
    code, _, err = run_cli(args, capsys)
    if not sources:  # the portable C has no channel-group operands yet: refused by name
        assert code == 2 and "no portable C form" in err and not out.exists(), err
        return
    assert code == 0, err
    code, text, err = run_cli(["simulate", "--firmware", str(out / "firmware")], capsys)
    assert code == 0 and "PASS" in text, text + err


def test_element_wise_over_a_layers_channel_groups_is_refused_by_name(tmp_path):
    """A split of another layer's output (written without the vendor's operand interleave) is
    not supported: one line naming the feature and the YAML line."""
    (tmp_path / "v.yaml").write_text(
        "arch: e\ndataset: e\nlayers:\n  - processors: 0xff\n    out_offset: 0x2000\n"
        "    operation: none\n    data_format: HWC\n"
        "  - processors: 0xf\n    out_offset: 0\n    operation: none\n    eltwise: add\n"
        "    operands: 2\n"
    )
    torch.save({"arch": "e", "epoch": 1, "state_dict": {}}, tmp_path / "v.pth.tar")
    with pytest.raises(ConfigError) as info:
        read_ai8x(tmp_path / "v.yaml", tmp_path / "v.pth.tar", (8, 4, 4), device="MAX78000")
    text = str(info.value)
    assert "v.yaml:12" in text and "split into 2 operands" in text and "in_sequences" in text


def test_snoop_registers_are_read_and_refused_on_the_max78000(tmp_path):
    """`snoop` (the MAX78002's data-snooping registers) changes no simulated result: read into
    the plan (the firmware writes it: test_vendor_suite's snoop case); on the MAX78000, which
    lacks them, and as a list of another length: an error naming the line."""
    net = Network("s", (4, 32), (_conv1d("a", "input", 4, 12, 32, k=5, pad=2),))
    _roundtrip(tmp_path, net, "MAX78002")
    text = (tmp_path / "v.yaml").read_text()
    (tmp_path / "v.yaml").write_text(text.replace("layers:", f"snoop: {list(range(32))}\nlayers:"))
    model = read_ai8x(tmp_path / "v.yaml", tmp_path / "v.pth.tar", (4, 32), device="MAX78002")
    assert model.plan.snoop == tuple(range(32))
    refused = r"v.yaml:\d+: `snoop` .* does not exist on the MAX78000"
    with pytest.raises(ConfigError, match=refused):
        read_ai8x(tmp_path / "v.yaml", tmp_path / "v.pth.tar", (4, 32), device="MAX78000")
    (tmp_path / "v.yaml").write_text(text.replace("layers:", "snoop: [1, 2]\nlayers:"))
    with pytest.raises(ConfigError, match="32 integers"):
        read_ai8x(tmp_path / "v.yaml", tmp_path / "v.pth.tar", (4, 32), device="MAX78002")
