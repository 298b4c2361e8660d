"""Exact integer sums of products for the weight ops, two ways: fast float and plain int64.

``accumulate(kind, x, w, bias, geometry, engine)`` returns the accumulator of arithmetic.md
R2.3 (sum of products plus ``bias << 7``) as a tensor of integer values:

- ``engine="fast"``: PyTorch's float32 convolution / GEMM. Every product |x*w| <= 2^14 is exact
  and any partial sum stays an exactly representable integer while it is below 2^24 in
  magnitude (arithmetic.md R2.3 "Note for a fast simulator"), so the input channels are split
  into chunks whose worst case (channels x taps x max|x| x max|w| + bias + rounding room) stays
  below 2^24; the chunk results are summed in float64 (exact below 2^53). One chunk keeps the
  result in float32, where ``arithmetic.round_shift`` is still exact. Layers with groups that
  would need chunking use float64 instead.
- ``engine="float64"``: float64 convolutions without chunking (exact below 2^53); what
  ``simulate`` uses instead of ``fast`` when ``float32_is_exact()`` is false.
- ``engine="int64"``: shifted slices and ``einsum`` in int64, ConvTranspose2d done literally as
  R2.7 describes (zero-stuffing, flipped and swapped kernel). Slow; it guards the fast path in
  the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from cnnforge.arithmetic import BIAS_SHIFT, add_bias
from cnnforge.ir import Op

FLOAT32_EXACT = 1 << 24  # integers up to 2^24 are exact in float32 (R2.3 note)
ROUND_ROOM = 1 << 21  # round_shift adds 2^(k-1) with k = 7 - s <= 22 (R2.1: s >= -15)
ACT_BOUND = 128  # |x| of an int8 layer input (R1.1)


@dataclass(frozen=True)
class Geometry:
    """Convolution geometry in PyTorch terms (per-axis tuples, padding per side)."""

    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    dilation: tuple[int, ...] = ()
    output_padding: tuple[int, ...] = ()
    groups: int = 1


def accumulate(
    kind: Op,
    x: torch.Tensor,
    w: torch.Tensor,
    bias: torch.Tensor | None,
    geo: Geometry,
    engine: str = "fast",
    affine: tuple[float, float] | None = None,
) -> torch.Tensor:
    """Accumulator ``sum x*w + (bias << 7)`` of a conv/linear layer, exact (R1.4, R1.5, R2.3).

    With ``affine = (scale, offset)`` from ``arithmetic.rounding_affine`` (float engines only)
    the result is ``acc * scale + offset``, still exact: the fast path folds the power-of-two
    scale into the weights and the offset into the bias of its one float32 convolution.
    """
    if engine == "int64":
        assert affine is None, "the int64 engine returns the plain accumulator"
        return _with_bias(_int64_sum(kind, x.to(torch.int64), w.to(torch.int64), geo), bias)
    if engine == "float64":  # |acc| < 2^31 (R1.4): any float64 sum order is exact
        acc = _with_bias(_float_op(kind, x.double(), w.double(), geo), bias)
        return _apply(acc, affine)
    return _fast_sum(kind, x, w, bias, geo, affine)


def _apply(acc: torch.Tensor, affine: tuple[float, float] | None) -> torch.Tensor:
    if affine is None:
        return acc
    return acc.mul_(affine[0]).add_(affine[1])  # float64, |acc| < 2^53: exact


# ---- fast path --------------------------------------------------------------------------------


def float32_is_exact() -> bool:
    """False when PyTorch's float32 convolutions may be inexact (R2.3 note): reduced-precision
    math (TF32/bf16), or oneDNN switched off so that batches >= 16 go to NNPACK, whose
    Winograd/FFT convolutions round (seen: errors of 17 on 3x3 int8 layers)."""
    if torch.get_float32_matmul_precision() != "highest":
        return False
    onednn = torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
    nnpack_on = getattr(torch._C, "_get_nnpack_enabled", lambda: True)()
    if not onednn and torch.backends.nnpack.is_available() and nnpack_on:
        return False
    for backend in ("conv", "matmul"):
        mode = getattr(getattr(torch.backends.mkldnn, backend, None), "fp32_precision", "none")
        if mode not in ("none", "ieee"):
            return False
    return True


def _fast_sum(
    kind: Op,
    x: torch.Tensor,
    w: torch.Tensor,
    bias: torch.Tensor | None,
    geo: Geometry,
    affine: tuple[float, float] | None,
) -> torch.Tensor:
    in_axis = 0 if kind is Op.CONVTRANSPOSE2D else 1  # weight axis of the input channels
    # input channels summed into one output (conv: w is (out, in/g, k..); transposed: (in, ..))
    channels = w.shape[in_axis] // (geo.groups if kind is Op.CONVTRANSPOSE2D else 1)
    step = _channels_per_sum(x, w, bias, channels)
    if step >= channels:
        return _one_float32_sum(kind, x, w, bias, geo, affine)
    if geo.groups > 1 or step < 1:
        acc = _with_bias(_float_op(kind, x.double(), w.double(), geo), bias)
        return _apply(acc, affine)
    total = None
    for lo in range(0, channels, step):
        part = _float_op(kind, x[:, lo : lo + step].float(), _take(w, in_axis, lo, step), geo)
        total = part.double() if total is None else total + part.double()
    return _apply(_with_bias(total, bias), affine)


def _channels_per_sum(x, w, bias, channels: int) -> int:
    """Input channels per float32 sum: channels x taps x max|x| x max|w| + |bias << 7| plus the
    rounding offset must stay within 2^24. Layer inputs are int8 (|x| <= 128); the actual
    maximum of ``x`` is only computed when that bound is too coarse."""
    taps = max(1, w[0, 0].numel()) if w.dim() > 2 else 1
    bias_term = _max_abs(bias) << BIAS_SHIFT if bias is not None else 0
    room = FLOAT32_EXACT - bias_term - ROUND_ROOM
    wmax = _max_abs(w)
    if channels * taps * ACT_BOUND * wmax <= room:
        return channels
    per_channel = taps * _max_abs(x) * wmax
    return channels if per_channel == 0 else room // per_channel


def _one_float32_sum(kind, x, w, bias, geo, affine) -> torch.Tensor:
    """One float32 conv; scale (a power of two) in the weights, offset in the bias: exact."""
    scale, offset = affine or (1.0, 0.0)
    wf = w.float() * scale if scale != 1.0 else w.float()
    b = None if bias is None else bias.float() * float((1 << BIAS_SHIFT) * scale) + offset
    if b is None and offset:
        b = torch.full((_out_channels(kind, w, geo),), offset, dtype=torch.float32)
    return _float_op(kind, x.float(), wf, geo, b)


def _out_channels(kind: Op, w: torch.Tensor, geo: Geometry) -> int:
    return w.shape[1] * geo.groups if kind is Op.CONVTRANSPOSE2D else w.shape[0]


def _max_abs(t: torch.Tensor) -> int:
    if not t.numel():
        return 0
    lo, hi = torch.aminmax(t)
    return int(max(-lo, hi))


def _take(w: torch.Tensor, axis: int, lo: int, n: int) -> torch.Tensor:
    return w.narrow(axis, lo, min(n, w.shape[axis] - lo)).float()


def _with_bias(acc: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``acc + (bias << 7)`` per output channel (arithmetic.add_bias, R1.5)."""
    return add_bias(acc, bias)


def _channel_view(values: torch.Tensor, dims: int) -> torch.Tensor:
    return values.reshape(1, -1, *([1] * (dims - 2)))


def _float_op(
    kind: Op, x: torch.Tensor, w: torch.Tensor, geo: Geometry, bias: torch.Tensor | None = None
) -> torch.Tensor:
    common = dict(stride=geo.stride, padding=geo.padding, groups=geo.groups)
    if kind is Op.CONV2D:
        return F.conv2d(x, w, bias, dilation=geo.dilation, **common)
    if kind is Op.CONV1D:
        return F.conv1d(x, w, bias, dilation=geo.dilation, **common)
    if kind is Op.CONVTRANSPOSE2D:
        out_pad = geo.output_padding or 0
        return F.conv_transpose2d(
            x, w, bias, output_padding=out_pad, dilation=geo.dilation, **common
        )
    return F.linear(x, w, bias)


# ---- int64 path -------------------------------------------------------------------------------


def _int64_sum(kind: Op, x: torch.Tensor, w: torch.Tensor, geo: Geometry) -> torch.Tensor:
    if kind is Op.LINEAR:
        return torch.einsum("nf,of->no", x, w)
    if kind is Op.CONV1D:
        geo2 = Geometry(
            stride=(1, *geo.stride),
            padding=(0, *geo.padding),
            dilation=(1, *geo.dilation),
            groups=geo.groups,
        )
        return _int64_conv2d(x.unsqueeze(2), w.unsqueeze(2), geo2).squeeze(2)
    if kind is Op.CONVTRANSPOSE2D:
        return _int64_convtranspose2d(x, w, geo)
    return _int64_conv2d(x, w, geo)


def _int64_conv2d(x: torch.Tensor, w: torch.Tensor, geo: Geometry) -> torch.Tensor:
    """Direct convolution: one int64 einsum per kernel tap over shifted slices (R2.5)."""
    n, _, h, wd = x.shape
    out_ch, cg, kh, kw = w.shape
    g = geo.groups
    (sh, sw), (ph, pw), (dh, dw) = geo.stride, geo.padding, geo.dilation
    xp = F.pad(x, (pw, pw, ph, ph))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    acc = torch.zeros((n, g, out_ch // g, oh, ow), dtype=torch.int64)
    wg = w.reshape(g, out_ch // g, cg, kh, kw)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
            cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
            patch = xp[:, :, rows, cols].reshape(n, g, cg, oh, ow)
            acc += torch.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, i, j])
    return acc.reshape(n, out_ch, oh, ow)


def _int64_convtranspose2d(x: torch.Tensor, w: torch.Tensor, geo: Geometry) -> torch.Tensor:
    """R2.7: zero-stuff by the stride, pad d*(k-1)-p (plus output_padding bottom/right), then
    convolve at stride 1 with the kernel flipped in both axes and in/out swapped."""
    n, c, h, wd = x.shape
    cin, og, kh, kw = w.shape
    g = geo.groups
    (sh, sw), (ph, pw), (dh, dw) = geo.stride, geo.padding, geo.dilation
    oph, opw = geo.output_padding or (0, 0)
    stuffed = torch.zeros((n, c, (h - 1) * sh + 1, (wd - 1) * sw + 1), dtype=torch.int64)
    stuffed[:, :, ::sh, ::sw] = x
    top, left = dh * (kh - 1) - ph, dw * (kw - 1) - pw
    padded = F.pad(stuffed, (left, left + opw, top, top + oph))
    # (in, out/g, kh, kw) -> (out, in/g, kh, kw), flipped spatially
    wt = w.reshape(g, cin // g, og, kh, kw).transpose(1, 2).reshape(g * og, cin // g, kh, kw)
    wt = wt.flip(-1, -2)
    geo1 = Geometry(stride=(1, 1), padding=(0, 0), dilation=(dh, dw), groups=g)
    return _int64_conv2d(padded, wt, geo1)
