"""Exact integer sums of products for the weight ops (docs/hardware/arithmetic.md R2.3): float32
in chunks below 2^24 (``fast``/``gemm``), ``float64``, or plain ``int64`` that guards them."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from cnnforge.arithmetic import BIAS_SHIFT, add_bias
from cnnforge.compute import CPU, float32_matmul_exact, nnpack_enabled
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
    """Accumulator ``sum x*w + (bias << 7)`` of a conv/linear layer, exact (R1.4, R1.5, R2.3);
    with ``affine`` (float engines) ``acc * scale + offset``, folded into the conv."""
    if engine == "int64":
        assert affine is None, "the int64 engine returns the plain accumulator"
        return _with_bias(_int64_sum(kind, x.to(torch.int64), w.to(torch.int64), geo), bias)
    gemm = engine == "gemm" or x.is_cuda
    if engine == "float64":  # |acc| < 2^31 (R1.4): any float64 sum order is exact
        acc = _with_bias(_float_op(kind, x.double(), w.double(), geo, gemm=gemm), bias)
        return _apply(acc, affine)
    return _fast_sum(kind, x, w, bias, geo, affine, gemm)


def _apply(acc: torch.Tensor, affine: tuple[float, float] | None) -> torch.Tensor:
    if affine is None:
        return acc
    return acc.mul_(affine[0]).add_(affine[1])  # float64, |acc| < 2^53: exact


def float32_is_exact(device: torch.device = CPU) -> bool:
    """False when float32 sums of products on ``device`` may be inexact (R2.3 note): TF32/bf16,
    or NNPACK's Winograd/FFT convolutions on the CPU when oneDNN is off."""
    if device.type == "cuda":
        return float32_matmul_exact(device)
    try:
        if torch.get_float32_matmul_precision() != "highest":
            return False
    except RuntimeError:  # precision flags set through both of torch's APIs: cannot tell
        return False
    onednn = torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
    if not onednn and torch.backends.nnpack.is_available() and nnpack_enabled():
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
    gemm: bool,
) -> torch.Tensor:
    in_axis = 0 if kind is Op.CONVTRANSPOSE2D else 1  # weight axis of the input channels
    # input channels summed into one output (conv: w is (out, in/g, k..); transposed: (in, ..))
    channels = w.shape[in_axis] // (geo.groups if kind is Op.CONVTRANSPOSE2D else 1)
    step = _channels_per_sum(x, w, bias, channels)
    if step >= channels:
        return _one_float32_sum(kind, x, w, bias, geo, affine, gemm)
    if geo.groups > 1 or step < 1:
        acc = _with_bias(_float_op(kind, x.double(), w.double(), geo, gemm=gemm), bias)
        return _apply(acc, affine)
    total = None
    for lo in range(0, channels, step):
        chunk, wk = x[:, lo : lo + step].float(), _take(w, in_axis, lo, step)
        part = _float_op(kind, chunk, wk, geo, gemm=gemm)
        total = part.double() if total is None else total + part.double()
    return _apply(_with_bias(total, bias), affine)


def _channels_per_sum(x, w, bias, channels: int) -> int:
    """Input channels per float32 sum so that the worst case (channels x taps x max|x| x max|w| +
    bias + rounding) stays within 2^24."""
    taps = max(1, w[0, 0].numel()) if w.dim() > 2 else 1
    bias_term = _max_abs(bias) << BIAS_SHIFT if bias is not None else 0
    room = FLOAT32_EXACT - bias_term - ROUND_ROOM
    wmax = _max_abs(w)
    if channels * taps * ACT_BOUND * wmax <= room:
        return channels
    per_channel = taps * _max_abs(x) * wmax
    return channels if per_channel == 0 else room // per_channel


def _one_float32_sum(kind, x, w, bias, geo, affine, gemm: bool) -> torch.Tensor:
    """One float32 conv; scale (a power of two) in the weights, offset in the bias: exact."""
    scale, offset = affine or (1.0, 0.0)
    wf = w.float() * scale if scale != 1.0 else w.float()
    b = None if bias is None else bias.float() * float((1 << BIAS_SHIFT) * scale) + offset
    if b is None and offset:
        out = _out_channels(kind, w, geo)
        b = torch.full((out,), offset, dtype=torch.float32, device=x.device)
    return _float_op(kind, x.float(), wf, geo, b, gemm=gemm)


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
    kind: Op,
    x: torch.Tensor,
    w: torch.Tensor,
    geo: Geometry,
    bias: torch.Tensor | None = None,
    *,
    gemm: bool = False,
) -> torch.Tensor:
    """The op's float sums of products: PyTorch's convolution, or with ``gemm`` unfold and one
    matrix product (the form that is exact whatever algorithm the library picks)."""
    if gemm:
        return _gemm_op(kind, x, w, geo, bias)
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


#: Bytes of unfolded input one matrix product may take (larger batches go in slices).
UNFOLD_BYTES = 1 << 28


def _gemm_op(
    kind: Op, x: torch.Tensor, w: torch.Tensor, geo: Geometry, bias: torch.Tensor | None
) -> torch.Tensor:
    """Sums of products as matrix products (``engine="gemm"``); the transposed conv as the stride-1
    conv of the zero-stuffed input (R2.7)."""
    if kind is Op.LINEAR:
        y = torch.matmul(x, w.t())
        return y if bias is None else y + bias
    if kind is Op.CONV1D:
        return _gemm_conv2d(x.unsqueeze(2), w.unsqueeze(2), _as_2d(geo), bias).squeeze(2)
    if kind is Op.CONVTRANSPOSE2D:
        padded, flipped, geo1 = _transposed_as_conv(x, w, geo)
        return _gemm_conv2d(padded, flipped, geo1, bias)
    return _gemm_conv2d(x, w, geo, bias)


def _gemm_conv2d(
    x: torch.Tensor, w: torch.Tensor, geo: Geometry, bias: torch.Tensor | None
) -> torch.Tensor:
    """Conv2d as unfold and one matrix product per group, the batch in slices of at most
    ``UNFOLD_BYTES`` of columns."""
    n, c, h, wd = x.shape
    out_ch, cg, kh, kw = w.shape
    g = geo.groups
    (sh, sw), (ph, pw), (dh, dw) = geo.stride, geo.padding, geo.dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    wg = w.reshape(g, out_ch // g, cg * kh * kw)
    per_image = c * kh * kw * oh * ow * x.element_size()
    step = max(1, UNFOLD_BYTES // max(per_image, 1))
    parts = []
    for lo in range(0, n, step):
        cols = F.unfold(x[lo : lo + step], (kh, kw), geo.dilation, geo.padding, geo.stride)
        cols = cols.reshape(cols.shape[0], g, cg * kh * kw, oh * ow)
        parts.append(torch.matmul(wg, cols).reshape(-1, out_ch, oh, ow))
    y = parts[0] if len(parts) == 1 else torch.cat(parts)
    return y if bias is None else y + _channel_view(bias, 4)


def _as_2d(geo: Geometry) -> Geometry:
    """A 1-D geometry as the 2-D one of height 1."""
    return Geometry(
        stride=(1, *geo.stride),
        padding=(0, *geo.padding),
        dilation=(1, *geo.dilation),
        groups=geo.groups,
    )


def _transposed_as_conv(
    x: torch.Tensor, w: torch.Tensor, geo: Geometry
) -> tuple[torch.Tensor, torch.Tensor, Geometry]:
    """R2.7: the input zero-stuffed by the stride and padded, the kernel flipped with in/out
    swapped; a stride-1 conv of these is the transposed convolution."""
    n, c, h, wd = x.shape
    cin, og, kh, kw = w.shape
    g = geo.groups
    (sh, sw), (ph, pw), (dh, dw) = geo.stride, geo.padding, geo.dilation
    oph, opw = geo.output_padding or (0, 0)
    stuffed = x.new_zeros((n, c, (h - 1) * sh + 1, (wd - 1) * sw + 1))
    stuffed[:, :, ::sh, ::sw] = x
    top, left = dh * (kh - 1) - ph, dw * (kw - 1) - pw
    padded = F.pad(stuffed, (left, left + opw, top, top + oph))
    # (in, out/g, kh, kw) -> (out, in/g, kh, kw), flipped spatially
    wt = w.reshape(g, cin // g, og, kh, kw).transpose(1, 2).reshape(g * og, cin // g, kh, kw)
    geo1 = Geometry(stride=(1, 1), padding=(0, 0), dilation=(dh, dw), groups=g)
    return padded, wt.flip(-1, -2), geo1


def _int64_sum(kind: Op, x: torch.Tensor, w: torch.Tensor, geo: Geometry) -> torch.Tensor:
    if kind is Op.LINEAR:
        return torch.einsum("nf,of->no", x, w)
    if kind is Op.CONV1D:
        return _int64_conv2d(x.unsqueeze(2), w.unsqueeze(2), _as_2d(geo)).squeeze(2)
    if kind is Op.CONVTRANSPOSE2D:
        return _int64_conv2d(*_transposed_as_conv(x, w, geo))
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
    acc = torch.zeros((n, g, out_ch // g, oh, ow), dtype=torch.int64, device=x.device)
    wg = w.reshape(g, out_ch // g, cg, kh, kw)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
            cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
            patch = xp[:, :, rows, cols].reshape(n, g, cg, oh, ow)
            acc += torch.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, i, j])
    return acc.reshape(n, out_ch, oh, ow)
