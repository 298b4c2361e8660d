"""The legal rewrites end to end in the bit-exact simulator: a quantized layer rewritten by
legalize computes, in integers, exactly what the original PyTorch operation computes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.arithmetic import finish_output
from cnnforge.ir import Activation, Network, Quantized
from cnnforge.passes.legalize import legalize_with_log
from cnnforge.passes.verify import verify
from cnnforge.sim import simulate
from support.fuse_reference import conv2d, convtranspose

SMALL = settings(max_examples=20)


def _quantize(layer, rng, shift: int, bias: bool):
    w = rng.integers(-128, 128, size=layer.weight.shape)
    b = rng.integers(-128, 128, size=layer.out_channels) if bias else None
    q = Quantized(weight_bits=8, weights=w, bias=b, output_shift=shift)
    return replace(layer, quant=q, bias=None)


def _reference(acc: torch.Tensor, q: Quantized, act: Activation) -> torch.Tensor:
    """R2.3 on an exact accumulator (bias << 7 added), by arithmetic.py."""
    if q.bias is not None:
        acc = acc + (torch.from_numpy(q.bias).reshape(1, -1, 1, 1) << 7)
    return finish_output(acc, q.total_shift, act, wide=False)


@SMALL
@given(
    cin=st.integers(1, 4),
    cout=st.integers(1, 4),
    h=st.integers(1, 5),
    w=st.integers(1, 5),
    shift=st.integers(-3, 2),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_convtranspose_k2_rewrite_is_bit_exact(cin, cout, h, w, shift, bias, seed) -> None:
    rng = np.random.default_rng(seed)
    up = _quantize(convtranspose("up", "input", (cin, h, w), cout, seed=seed), rng, shift, bias)
    net, log = legalize_with_log(Network("n", (cin, h, w), (up,)))
    verify(net)
    assert [r.rule for r in log] == ["convtranspose-k2"]
    x = torch.from_numpy(rng.integers(-128, 128, size=(2, cin, h, w)))
    got = simulate(net, x, device=None).outputs["up"]
    # PyTorch's k=2, s=2 transposed conv on the integers is the exact accumulator
    acc = F.conv_transpose2d(x.double(), torch.from_numpy(up.quant.weights).double(), stride=2)
    expected = _reference(acc.round().long(), up.quant, Activation.NONE)
    assert torch.equal(got, expected)


@SMALL
@given(
    half=st.integers(2, 5),
    k=st.sampled_from([2, 3]),
    shift=st.integers(-3, 2),
    seed=st.integers(0, 2**16),
)
def test_strided_conv_rewrite_is_bit_exact(half, k, shift, seed) -> None:
    rng = np.random.default_rng(seed)
    size = 2 * half
    pad = 0 if k == 2 else 1
    c = conv2d("c", "input", (3, size, size), 4, k=k, pad=pad, stride=2, seed=seed)
    c = _quantize(c, rng, shift, True)
    c = replace(c, activation=Activation.RELU)
    net, _ = legalize_with_log(Network("n", (3, size, size), (c,)))
    verify(net)
    x = torch.from_numpy(rng.integers(-128, 128, size=(2, 3, size, size)))
    (got,) = simulate(net, x, device=None).outputs.values()
    acc = F.conv2d(x.double(), torch.from_numpy(c.quant.weights).double(), stride=2, padding=pad)
    expected = _reference(acc.round().long(), c.quant, Activation.RELU)
    assert torch.equal(got, expected)
