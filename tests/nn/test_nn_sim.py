"""QAT modules in quantized evaluation equal the simulator bit for bit (hypothesis).

Single layers: every op, pooling mode, activation, weight width, wide output, bias, and weights
scaled over 2^-18..2^6 so the output shift sweeps its range. Identity (nn/layers.py):
``module(x_int / 128) * 128 == sim(x_int)`` (wide: ``* 2^(1 - bits)``, Q17.14 for 8 bits
whatever the output shift, docs/hardware/arithmetic.md R1.7).
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, reject, settings
from hypothesis import strategies as st

import cnnforge.nn as qnn
from cnnforge.ir import INPUT, Layer, Network, Op, Quantized
from cnnforge.sim import simulate

BITS = st.sampled_from([1, 2, 4, 8])
ACTS = st.sampled_from(["none", "relu", "abs"])
POOLS = st.sampled_from([None, "max", "avg"])


def _randomize(module: torch.nn.Module, seed: int, log_scale: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 2.0**log_scale)


def _check(module, x_int: torch.Tensor, rounding: bool = False, n_inputs: int = 1) -> None:
    """Run module (quantized) and the simulator on the module's layer; compare exactly."""
    qnn.set_quantized_eval(module, avg_pool_rounding=rounding)
    xs = list(x_int) if n_inputs > 1 else [x_int]
    try:
        got = module(*[x.to(torch.float32) / 128 for x in xs])
    except RuntimeError:  # pooling/kernel larger than the drawn input: not a configuration
        reject()
    names = tuple(f"in{i}" for i in range(n_inputs)) if n_inputs > 1 else (INPUT,)
    in_shape = tuple(xs[0].shape[1:])
    layer = module.cnnforge_layer("l", names, (in_shape,) * n_inputs, tuple(got.shape[1:]))
    if n_inputs > 1:  # operands come from pass-through copies of one concatenated input
        net, x = _multi_input_network(layer, xs, rounding)
    else:
        net, x = Network("t", in_shape, (layer,), avg_pool_rounding=rounding), xs[0]
    expected = simulate(net, x, device=None).outputs["l"]
    factor = 128.0
    if layer.wide:
        q = layer.quant
        factor = 128.0 * 2.0 ** (abs(q.weight_bits) - 1)
    got_int = got.double() * factor
    assert torch.equal(got_int, got_int.round()), "module output is not on the integer grid"
    assert torch.equal(got_int.to(torch.int64), expected.to(torch.int64))


def _multi_input_network(layer: Layer, xs: list[torch.Tensor], rounding: bool):
    """The operands as channel slices of one input, picked by 1x1 selector convolutions
    (weight 1, output_shift 7: y = acc exactly, docs/hardware/arithmetic.md R2.3)."""
    c, dims = xs[0].shape[1], tuple(xs[0].shape[2:])
    n, ndim = len(xs), len(dims)
    ops = []
    for i in range(n):
        w = np.zeros((c, c * n) + (1,) * ndim, dtype=np.int64)
        for k in range(c):
            w[(k, i * c + k) + (0,) * ndim] = 1
        ops.append(
            Layer(
                name=f"in{i}",
                op=Op.CONV2D if ndim == 2 else Op.CONV1D,
                inputs=(INPUT,),
                out_shape=(c, *dims),
                in_channels=c * n,
                out_channels=c,
                kernel_size=(1,) * ndim,
                stride=(1,) * ndim,
                padding=(0,) * ndim,
                dilation=(1,) * ndim,
                weight=w.astype(np.float32),
                bias=None,
                quant=Quantized(8, w, None, 7),
            )
        )
    net = Network("t", (c * n, *dims), (*ops, layer), avg_pool_rounding=rounding)
    return net, torch.cat(xs, dim=1)


@settings(max_examples=900)
@given(
    kind=st.sampled_from(["conv2d", "conv2d", "convt", "dw"]),
    cin=st.integers(1, 4),
    cout=st.integers(1, 4),
    k=st.sampled_from([1, 3]),
    pad=st.integers(0, 2),
    bits=BITS,
    act=ACTS,
    wide=st.booleans(),
    bias=st.booleans(),
    pool=POOLS,
    pool_size=st.integers(1, 3),
    pool_stride=st.integers(1, 3),
    rounding=st.booleans(),
    log_scale=st.integers(-18, 6),
    seed=st.integers(0, 2**20),
    hw=st.tuples(st.integers(4, 7), st.integers(4, 7)),
)
def test_conv2d_family_matches_simulator(
    kind,
    cin,
    cout,
    k,
    pad,
    bits,
    act,
    wide,
    bias,
    pool,
    pool_size,
    pool_stride,
    rounding,
    log_scale,
    seed,
    hw,
):
    act = "none" if wide else act
    opts = dict(
        pool=pool,
        pool_size=pool_size,
        pool_stride=pool_stride,
        activation=act,
        wide=wide,
        weight_bits=bits,
    )
    if kind == "convt":
        module = qnn.ConvTranspose2d(cin, cout, 3, 2, min(pad, 1), 1, bias=bias, **opts)
    elif kind == "dw":
        module = qnn.Conv2d(cin, cin, 3, padding=min(pad, 1), groups=cin, bias=bias, **opts)
    else:
        module = qnn.Conv2d(cin, cout, k, padding=min(pad, k // 2 + 1), bias=bias, **opts)
    _randomize(module, seed, log_scale)
    x = torch.randint(-128, 128, (2, cin, *hw), generator=torch.Generator().manual_seed(seed))
    _check(module, x, rounding)


@settings(max_examples=450)
@given(
    cin=st.integers(1, 4),
    cout=st.integers(1, 4),
    k=st.integers(1, 5),
    pad=st.integers(0, 3),
    bits=BITS,
    act=ACTS,
    wide=st.booleans(),
    bias=st.booleans(),
    pool=POOLS,
    pool_size=st.integers(1, 3),
    pool_stride=st.integers(1, 3),
    log_scale=st.integers(-18, 6),
    seed=st.integers(0, 2**20),
    length=st.integers(6, 12),
)
def test_conv1d_matches_simulator(
    cin, cout, k, pad, bits, act, wide, bias, pool, pool_size, pool_stride, log_scale, seed, length
):
    act = "none" if wide else act
    module = qnn.Conv1d(
        cin,
        cout,
        k,
        padding=min(pad, k - 1),
        bias=bias,
        pool=pool,
        pool_size=pool_size,
        pool_stride=pool_stride,
        activation=act,
        wide=wide,
        weight_bits=bits,
    )
    _randomize(module, seed, log_scale)
    x = torch.randint(-128, 128, (2, cin, length), generator=torch.Generator().manual_seed(seed))
    _check(module, x)


@settings(max_examples=350)
@given(
    fin=st.integers(1, 16),
    fout=st.integers(1, 8),
    flatten=st.booleans(),
    bits=BITS,
    act=ACTS,
    wide=st.booleans(),
    bias=st.booleans(),
    log_scale=st.integers(-18, 6),
    seed=st.integers(0, 2**20),
)
def test_linear_matches_simulator(fin, fout, flatten, bits, act, wide, bias, log_scale, seed):
    act = "none" if wide else act
    shape = (2, 2, 2, 2) if flatten else (2, fin)
    features = 8 if flatten else fin
    module = qnn.Linear(
        features, fout, bias=bias, flatten=flatten, activation=act, wide=wide, weight_bits=bits
    )
    _randomize(module, seed, log_scale)
    x = torch.randint(-128, 128, shape, generator=torch.Generator().manual_seed(seed))
    if not flatten:  # a linear layer on 1x1 data: C,1,1 input (docs/hardware/arithmetic.md R2.8)
        x = x.reshape(2, fin, 1, 1)
        module = _FlatInput(module)
    _check(module, x)


class _FlatInput(torch.nn.Module):
    """Feeds (N, C, 1, 1) data to a non-flattening Linear (how the hardware sees it)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x.flatten(1))

    def cnnforge_layer(self, name, inputs, in_shapes, out_shape):
        return self.inner.cnnforge_layer(name, inputs, in_shapes, out_shape)


@settings(max_examples=300)
@given(
    op=st.sampled_from([qnn.Add, qnn.Sub, qnn.Or, qnn.Xor]),
    n=st.integers(2, 4),
    c=st.integers(1, 3),
    pool=POOLS,
    pool_size=st.integers(1, 3),
    pool_stride=st.integers(1, 3),
    pool_first=st.booleans(),
    rounding=st.booleans(),
    seed=st.integers(0, 2**20),
)
def test_eltwise_matches_simulator(
    op, n, c, pool, pool_size, pool_stride, pool_first, rounding, seed
):
    module = op(pool=pool, pool_size=pool_size, pool_stride=pool_stride, pool_first=pool_first)
    gen = torch.Generator().manual_seed(seed)
    xs = torch.randint(-128, 128, (n, 2, c, 5, 5), generator=gen)
    _check(module, xs, rounding, n_inputs=n)


@settings(max_examples=150)
@given(
    kind=st.sampled_from(["max", "avg"]),
    size=st.integers(1, 4),
    stride=st.integers(1, 4),
    ndim=st.sampled_from([1, 2]),
    rounding=st.booleans(),
    dil=st.booleans(),
    seed=st.integers(0, 2**20),
)
def test_pool_matches_simulator(kind, size, stride, ndim, rounding, dil, seed):
    dilation = 2 if dil and kind == "max" and ndim == 2 else 1
    size = 2 if dilation == 2 else size
    module = qnn.Pool(kind, size, stride, dilation=dilation, ndim=ndim)
    shape = (2, 3, 9, 8) if ndim == 2 else (2, 3, 11)
    x = torch.randint(-128, 128, shape, generator=torch.Generator().manual_seed(seed))
    _check(module, x, rounding)
