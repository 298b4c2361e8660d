"""Random single weight layers (conv1d, conv2d with stride, padding, dilation and groups,
transposed conv, linear) with random integer weights and shifts, and an input for them: the
cases on which every simulator engine must equal the int64 one (on the CPU and on CUDA)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from cnnforge.ir import BINARY_BITS, INPUT, Activation, Layer, Network, Op, Quantized
from support.sim_reference import int_array


@st.composite
def weight_layers(draw) -> tuple[Network, np.ndarray]:
    """(a one-layer Network, an int8-valued input batch) for a random weight op."""
    op = draw(st.sampled_from([Op.CONV2D, Op.CONV2D, Op.CONV1D, Op.CONVTRANSPOSE2D, Op.LINEAR]))
    big = draw(st.booleans())  # many input channels: the float32 sums are split in chunks
    cin = draw(st.integers(1, 300 if big else 6))
    batch = draw(st.integers(1, 3))
    if op is Op.LINEAR:
        layer, shape = _linear(draw, cin)
    elif op is Op.CONV1D:
        layer, shape = _conv(draw, op, cin, one_d=True)
    elif op is Op.CONVTRANSPOSE2D:
        layer, shape = _transposed(draw, cin)
    else:
        layer, shape = _conv(draw, op, cin, one_d=False)
    return Network("n", shape, (layer,)), int_array(draw, (batch, *shape), -128, 127)


def _quant(draw, weight_shape: tuple[int, ...], cout: int, wide: bool) -> Quantized:
    bits = draw(st.sampled_from([8, 8, 8, 4, 2, 1, BINARY_BITS]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    lo, hi = (-1, 1) if bits == BINARY_BITS else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if draw(st.booleans()):  # the range ends only: the largest sums
        w = rng.choice(np.array([lo, hi]), size=weight_shape)
    else:
        w = rng.integers(lo, hi + 1, size=weight_shape)
    if bits == BINARY_BITS:
        w = np.where(w < 0, -1, 1)
    implicit = 8 - abs(bits)
    shift = draw(st.integers(-15 - implicit, 15 - implicit))
    bias = rng.integers(-128, 128, cout) if draw(st.booleans()) else None
    return Quantized(bits, w.astype(np.int64), bias, shift)


def _finish(draw) -> tuple[bool, Activation]:
    wide = draw(st.booleans())
    act = Activation.NONE if wide else draw(st.sampled_from(list(Activation)[:3]))
    return wide, act


def _conv(draw, op: Op, cin: int, one_d: bool) -> tuple[Layer, tuple[int, ...]]:
    groups = draw(st.sampled_from([1, 1, cin] + ([2] if cin % 2 == 0 else [])))
    cout = cin if groups == cin and draw(st.booleans()) else groups * draw(st.integers(1, 3))
    k = draw(st.integers(1, 3))
    stride, dilation = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pad = draw(st.integers(0, 2))
    reach = dilation * (k - 1) + 1
    sizes = [max(reach - 2 * pad, 1) + draw(st.integers(0, 4)) for _ in range(1 if one_d else 2)]
    nd = len(sizes)
    wide, act = _finish(draw)
    quant = _quant(draw, (cout, cin // groups, *(k,) * nd), cout, wide)
    layer = Layer(
        "w", op, (INPUT,), (), in_channels=cin, out_channels=cout, kernel_size=(k,) * nd,
        stride=(stride,) * nd, padding=(pad,) * nd, dilation=(dilation,) * nd, groups=groups,
        activation=act, wide=wide, quant=quant,
    )  # fmt: skip
    return layer, (cin, *sizes)


def _transposed(draw, cin: int) -> tuple[Layer, tuple[int, ...]]:
    groups = draw(st.sampled_from([1, 1] + ([2] if cin % 2 == 0 else [])))
    cout = groups * draw(st.integers(1, 3))
    k, stride = draw(st.integers(2, 3)), draw(st.integers(1, 2))
    pad, out_pad = draw(st.integers(0, 1)), draw(st.integers(0, stride - 1))
    h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    wide, act = _finish(draw)
    quant = _quant(draw, (cin, cout // groups, k, k), cout, wide)
    layer = Layer(
        "w", Op.CONVTRANSPOSE2D, (INPUT,), (), in_channels=cin, out_channels=cout,
        kernel_size=(k, k), stride=(stride, stride), padding=(pad, pad),
        output_padding=(out_pad, out_pad), dilation=(1, 1), groups=groups, activation=act,
        wide=wide, quant=quant,
    )  # fmt: skip
    return layer, (cin, h, w)


def _linear(draw, cin: int) -> tuple[Layer, tuple[int, ...]]:
    h, w = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    cout = draw(st.integers(1, 6))
    features = cin * h * w
    wide, act = _finish(draw)
    layer = Layer(
        "w", Op.LINEAR, (INPUT,), (), in_channels=features, out_channels=cout,
        kernel_size=(1, 1), flatten=True, activation=act, wide=wide,
        quant=_quant(draw, (cout, features), cout, wide),
    )  # fmt: skip
    return layer, (cin, h, w)
