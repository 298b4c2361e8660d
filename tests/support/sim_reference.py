"""A slow, obvious integer reference of the hardware layers, and hypothesis helpers."""

from __future__ import annotations

import dataclasses
import itertools
import math
from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

from cnnforge.ir import (
    BINARY_BITS,
    INPUT,
    Activation,
    EltwiseOp,
    Layer,
    Network,
    Op,
    PoolKind,
)


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


def int_array(draw, shape, lo: int, hi: int) -> np.ndarray:
    """Random ints with a drawn seed (hypothesis shrinks the seed, numpy draws the values)."""
    seed = draw(st.integers(0, 2**32 - 1))
    extreme = draw(st.booleans())
    rng = np.random.default_rng(seed)
    if extreme:  # the corners: only the range ends
        return rng.choice(np.array([lo, hi]), size=shape).astype(np.int64)
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64)


def with_shapes(net: Network, x: np.ndarray) -> tuple[Network, dict]:
    """Fill every out_shape from the reference, so the simulator's shape check runs too."""
    ref = run_reference(net, x, all_layers=True)
    layers = [dataclasses.replace(la, out_shape=tuple(ref[la.name].shape[1:])) for la in net]
    return net.with_layers(layers), ref
