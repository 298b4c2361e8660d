"""An independent, straightforward int64 reference of a hardware layer, and its self-checks.

Written from ../shared/spec/arithmetic.md without the simulator's code or cnnforge.arithmetic:
numpy int64 and Python rationals, one output position at a time, ConvTranspose2d by its
scatter definition (not the zero-stuffing of R2.7). The simulator's property tests compare
against ``run_reference``.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cnnforge.ir import BINARY_BITS, INPUT, Activation, EltwiseOp, Layer, Network, Op, PoolKind


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny convolutions: thread hand-offs on a busy 2-core host cost 100x the work."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _finish_one(acc: int, s: int, act: Activation) -> int:
    y = math.floor(Fraction(1, 2) + Fraction(acc) * Fraction(2) ** s / 128)  # R2.3
    y = max(-128, min(127, y))
    if act is Activation.RELU:
        return max(0, y)
    if act is Activation.ABS:
        return min(127, abs(y))
    return y


def _avg_one(total: int, n: int, rounding: bool) -> int:
    m = Fraction(total, n)
    if not rounding:
        return int(m)  # truncation toward zero (R3.5)
    return math.floor(m + Fraction(1, 2)) if m >= 0 else math.ceil(m - Fraction(1, 2))  # R3.6


def ref_pool(x: np.ndarray, layer: Layer, rounding: bool) -> np.ndarray:
    """Pooling per R3.1-R3.7: windows at r*t + i*d, no padding; 1-D quirks of R3.7."""
    pool = layer.pool
    nd = x.ndim - 2
    size, stride = pool.size, pool.stride
    dil = (1,) * nd if nd == 1 else pool.dilation_or_ones()
    if nd == 1:
        rounding = False
    if all(k == 1 for k in size):
        return x[(slice(None), slice(None), *(slice(None, None, t) for t in stride))]
    dims = [
        (n - d * (k - 1) - 1) // t + 1
        for n, k, t, d in zip(x.shape[2:], size, stride, dil, strict=True)
    ]
    out = np.zeros(x.shape[:2] + tuple(dims), dtype=np.int64)
    for pos in itertools.product(*(range(n) for n in dims)):
        elems = []
        for tap in itertools.product(*(range(k) for k in size)):
            idx = tuple(p * t + i * d for p, t, i, d in zip(pos, stride, tap, dil, strict=True))
            elems.append(x[(slice(None), slice(None), *idx)])
        stack = np.stack(elems)
        if pool.kind is PoolKind.MAX:
            out[(slice(None), slice(None), *pos)] = stack.max(0)
        else:
            sums = stack.sum(0)
            avg = [_avg_one(int(v), len(elems), rounding) for v in sums.flat]
            out[(slice(None), slice(None), *pos)] = np.array(avg).reshape(sums.shape)
    return out


def ref_combine(layer: Layer, xs: list[np.ndarray]) -> np.ndarray:
    if layer.eltwise is None:
        return np.concatenate(xs, axis=1)
    out = xs[0].copy()
    for x in xs[1:]:
        out = {
            EltwiseOp.ADD: lambda a, b: a + b,
            EltwiseOp.SUB: lambda a, b: a - b,
            EltwiseOp.OR: np.bitwise_or,
            EltwiseOp.XOR: np.bitwise_xor,
        }[layer.eltwise](out, x)
    if layer.wide and layer.op is Op.PASSTHROUGH:
        return out
    return np.clip(out, -128, 127)  # R4.2, R4.4


def ref_conv(x: np.ndarray, w: np.ndarray, layer: Layer) -> np.ndarray:
    """Direct convolution, one output position at a time (R2.5, R2.6), any rank."""
    nd = x.ndim - 2
    k, s = layer.kernel_size, layer.stride or (1,) * nd
    p, d = layer.padding or (0,) * nd, layer.dilation or (1,) * nd
    g = layer.groups
    xp = np.pad(x, [(0, 0), (0, 0), *((q, q) for q in p)])
    dims = [
        (n + 2 * q - dd * (kk - 1) - 1) // ss + 1
        for n, q, dd, kk, ss in zip(x.shape[2:], p, d, k, s, strict=True)
    ]
    cout, cg = w.shape[0], w.shape[1]
    out = np.zeros((x.shape[0], cout, *dims), dtype=np.int64)
    for pos in itertools.product(*(range(n) for n in dims)):
        window = xp[
            (
                slice(None),
                slice(None),
                *(
                    slice(q * ss, q * ss + dd * (kk - 1) + 1, dd)
                    for q, ss, dd, kk in zip(pos, s, d, k, strict=True)
                ),
            )
        ]
        for o in range(cout):
            grp = o // (cout // g)
            part = window[:, grp * cg : (grp + 1) * cg]
            out[(slice(None), o, *pos)] = (part * w[o][None]).reshape(x.shape[0], -1).sum(1)
    return out


def ref_convtranspose(x: np.ndarray, w: np.ndarray, layer: Layer) -> np.ndarray:
    """PyTorch's scatter definition: out[i*s - p + ki*d] += x[i] * w[ki] (compare R2.7)."""
    n, cin, h, wd = x.shape
    (kh, kw), (sh, sw) = layer.kernel_size, layer.stride
    (ph, pw), (dh, dw) = layer.padding, layer.dilation or (1, 1)
    oph, opw = layer.output_padding or (0, 0)
    g = layer.groups
    og = w.shape[1]
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    ow = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    out = np.zeros((n, og * g, oh, ow), dtype=np.int64)
    for c, i, j, ki, kj in itertools.product(range(cin), range(h), range(wd), range(kh), range(kw)):
        r, col = i * sh - ph + ki * dh, j * sw - pw + kj * dw
        if 0 <= r < oh and 0 <= col < ow:
            grp = c // (cin // g)
            out[:, grp * og : (grp + 1) * og, r, col] += (
                x[:, c, i, j][:, None] * w[c, :, ki, kj][None]
            )
    return out


def ref_layer(layer: Layer, xs: list[np.ndarray], rounding: bool) -> np.ndarray:
    """One hardware layer, in the order pool -> combine -> op -> finish (R4.3)."""
    if layer.pool is not None and layer.pool_first:
        xs = [ref_pool(x, layer, rounding) for x in xs]
    x = ref_combine(layer, xs) if len(xs) > 1 else xs[0]
    if layer.pool is not None and not layer.pool_first:
        x = ref_pool(x, layer, rounding)
    if layer.op is Op.PASSTHROUGH:
        return x
    q = layer.quant
    w = np.asarray(q.weights, dtype=np.int64)
    if layer.op is Op.LINEAR:
        acc = x.reshape(x.shape[0], -1) @ w.T
    elif layer.op is Op.CONVTRANSPOSE2D:
        acc = ref_convtranspose(x, w, layer)
    else:
        acc = ref_conv(x, w, layer)
    if q.bias is not None:
        b = np.asarray(q.bias, dtype=np.int64) * 128  # R1.5
        acc = acc + b.reshape((1, -1) + (1,) * (acc.ndim - 2))
    if layer.wide:
        return acc
    s = q.output_shift + 8 - (1 if q.weight_bits == BINARY_BITS else q.weight_bits)
    flat = [_finish_one(int(a), s, layer.activation) for a in acc.flat]
    return np.array(flat, dtype=np.int64).reshape(acc.shape)


def run_reference(network: Network, x: np.ndarray, all_layers: bool = False) -> dict:
    """Every output (or every layer) of ``network`` on the batched int input ``x``."""
    values = {INPUT: np.asarray(x, dtype=np.int64)}
    for layer in network.layers:
        xs = [values[n] for n in layer.inputs]
        values[layer.name] = ref_layer(layer, xs, network.avg_pool_rounding)
    names = [la.name for la in network.layers] if all_layers else network.outputs
    return {n: values[n] for n in names}


# ---- self-checks against PyTorch on small exact cases ----------------------------------------


def _layer(op: Op, **kw) -> Layer:
    return Layer("l", op, **kw)


def test_ref_conv_matches_torch_float64() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (2, 4, 6, 7))
    w = rng.integers(-128, 128, (6, 2, 3, 3))
    layer = _layer(
        Op.CONV2D, kernel_size=(3, 3), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2
    )
    got = ref_conv(x, w, layer)
    want = F.conv2d(
        torch.tensor(x).double(), torch.tensor(w).double(), None, (2, 1), (1, 2), (1, 2), 2
    )
    assert np.array_equal(got, want.long().numpy())


def test_ref_convtranspose_matches_torch_float64() -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (1, 4, 3, 4))
    w = rng.integers(-128, 128, (4, 3, 3, 3))
    layer = _layer(
        Op.CONVTRANSPOSE2D,
        kernel_size=(3, 3),
        stride=(2, 2),
        padding=(1, 1),
        output_padding=(1, 1),
        groups=2,
    )
    got = ref_convtranspose(x, w, layer)
    want = F.conv_transpose2d(torch.tensor(x).double(), torch.tensor(w).double(), None, 2, 1, 1, 2)
    assert np.array_equal(got, want.long().numpy())


def test_ref_conv1d_matches_torch_float64() -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, (2, 3, 17))
    w = rng.integers(-8, 8, (5, 3, 4))
    layer = _layer(Op.CONV1D, kernel_size=(4,), stride=(2,), padding=(3,), dilation=(3,))
    got = ref_conv(x, w, layer)
    want = F.conv1d(torch.tensor(x).double(), torch.tensor(w).double(), None, 2, 3, 3)
    assert np.array_equal(got, want.long().numpy())
