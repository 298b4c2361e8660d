"""The generic target's integer semantics: the simulator equals an int64 reference bit for bit,
and quantized networks track the float model (16-bit far closer than 8-bit)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from cnnforge.errors import SimulationError
from cnnforge.frontend import load_network
from cnnforge.ir import INPUT, Layer, Network, Op, Pooling, PoolKind
from cnnforge.sim.float_eval import run_float
from cnnforge.targets.generic.integer import (
    IntegerSemantics,
    QuantizedGeneric,
    simulate_generic,
)
from cnnforge.targets.generic.integer import (
    quantize_generic as quantize,
)
from cnnforge.targets.generic.target import GenericTarget


def reference_conv(x, w, b, stride, pad, shift, bits):
    """Direct int64 convolution (one group), shift rounding half up, saturation."""
    n, _, h, wd = x.shape
    o, _cin, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    acc = np.zeros((n, o, oh, ow), dtype=np.int64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride : i * stride + kh, j * stride : j * stride + kw]
            acc[:, :, i, j] = np.einsum("nckl,ockl->no", patch, w) + b
    y = (acc + (1 << (shift - 1))) >> shift if shift > 0 else acc << -shift
    return np.clip(y, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


@given(
    st.integers(1, 3),
    st.integers(1, 3),
    st.sampled_from([1, 3]),
    st.integers(1, 2),
    st.integers(0, 1),
    st.sampled_from([8, 16]),
    st.integers(-2, 12),
    st.integers(0, 2**31),
)
def test_conv_equals_the_int64_reference(cin, cout, k, stride, pad, bits, shift, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-(2 ** (bits - 1)), 2 ** (bits - 1), (2, cin, 6, 5))
    w = rng.integers(-(2 ** (bits - 1)), 2 ** (bits - 1), (cout, cin, k, k))
    b = rng.integers(-(2**30), 2**30, cout)
    layer = Layer(
        "c",
        Op.CONV2D,
        (INPUT,),
        (cout, 1, 1),
        in_channels=cin,
        out_channels=cout,
        kernel_size=(k, k),
        stride=(stride, stride),
        padding=(pad, pad),
        dilation=(1, 1),
    )
    net = Network("n", (cin, 6, 5), (layer,))
    sem = IntegerSemantics(act_bits=bits, weight_bits=bits)
    q = QuantizedGeneric(
        net,
        sem,
        {INPUT: 4, "c": 4 - shift + 3},
        {"c": w.astype(float)},
        {"c": b.astype(float)},
        {"c": 3},
    )
    got = simulate_generic(q, torch.as_tensor(x, dtype=torch.float64))["c"]
    want = reference_conv(x, w, b, stride, pad, shift, bits)
    assert np.array_equal(got.numpy().astype(np.int64), want)


@given(st.integers(0, 2**31), st.sampled_from([2, 3]))
def test_average_pool_rounds_half_up(seed, size):
    x = np.random.default_rng(seed).integers(-300, 300, (1, 2, 6, 6))
    pool = Layer(
        "p",
        Op.POOL,
        (INPUT,),
        (2, 6 // size, 6 // size),
        pool=Pooling(PoolKind.AVG, (size, size), (size, size)),
        padding=(0, 0),
    )
    q = QuantizedGeneric(
        Network("n", (2, 6, 6), (pool,)), IntegerSemantics(), {INPUT: 0, "p": 0}, {}, {}, {}
    )
    got = simulate_generic(q, torch.as_tensor(x, dtype=torch.float64))["p"].numpy()
    sums = x.reshape(1, 2, 6 // size, size, 6 // size, size).sum(axis=(3, 5))
    area = size * size
    assert np.array_equal(got.astype(np.int64), (2 * sums + area) // (2 * area))


@pytest.mark.parametrize(("act_bytes", "min_snr_db"), [(2, 80.0), (1, 35.0)])
def test_unet_quantized_tracks_float(act_bytes, min_snr_db):
    net = load_network("unet-voc", (3, 64, 64))
    rng = np.random.default_rng(0)
    calibration, x = rng.uniform(-1, 1, (2, 3, 64, 64)), rng.uniform(-1, 1, (1, 3, 64, 64))
    target = GenericTarget(act_bytes=act_bytes, weight_bytes=act_bytes)
    q = quantize(net, target, calibration)
    out = q.network.outputs[0]
    y = simulate_generic(q, q.to_int(x))[out]
    assert torch.equal(y, torch.round(y)) and y.abs().max() < 2 ** (8 * act_bytes - 1)
    again = simulate_generic(q, q.to_int(x))[out]
    assert torch.equal(y, again)
    ref = run_float(q.network, x)[out].double()
    err = q.to_float(out, y) - ref
    snr = 10 * np.log10(float((ref**2).sum() / (err**2).sum()))
    assert snr > min_snr_db


def test_no_integer_semantics_is_refused():
    from torch import nn

    class Sig(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            return torch.sigmoid(self.conv(x))

    from cnnforge.frontend.torch_fx import trace

    net = trace(Sig(), (3, 8, 8))
    with pytest.raises(SimulationError, match="no integer semantics"):
        quantize(net, GenericTarget(), np.zeros((1, 3, 8, 8)))


def test_budget_accuracy_line(capsys):
    from support.cli import run_cli

    code, out, _ = run_cli(
        ["budget", "unet-voc", "-d", "generic:onchip=1MiB", "--accuracy"], capsys
    )
    snr = float(re.search(r"SNR ([0-9.]+) dB", out).group(1))
    assert code == 0 and "int16 activations" in out and snr > 80
