"""Building blocks of the QAT modules (straight-through estimators, pooling, weight/shift
quantization), arranging tensors around the rules of ``cnnforge.arithmetic``."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from cnnforge.arithmetic import (
    ACT_MAX,
    ACT_MIN,
    ACT_SCALE,
    SHIFT_MAX,
    SHIFT_MIN,
    avgpool_divide,
    implicit_shift,
    quantize_activation_float,
    quantize_weights,
    shift_for_max,
)
from cnnforge.compute import check_on_device
from cnnforge.ir import Pooling, PoolKind


def ste(x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Value ``q``, gradient of ``x`` (straight-through estimator, R6.3)."""
    return x + (q.to(x.dtype) - x).detach()


def clamp_activation(y: torch.Tensor) -> torch.Tensor:
    """The [-1, 127/128] clamp every non-wide layer output has, also in float (R6.3 step 9)."""
    return torch.clamp(y, ACT_MIN / ACT_SCALE, ACT_MAX / ACT_SCALE)


def quantize_output_ste(y: torch.Tensor, wide: bool) -> torch.Tensor:
    """QAT activation quantization floor(128 y + 0.5)/128 with a straight-through gradient; the
    clamp comes after the estimator, so saturated outputs get no gradient."""
    q = quantize_activation_float(y.detach(), wide=wide, saturate=False)
    return ste(y, q) if wide else clamp_activation(ste(y, q))


def to_int(x: torch.Tensor) -> torch.Tensor:
    """``x_int`` from ``x = x_int / 128`` (exact for such inputs), int64."""
    return torch.round(x.detach().to(torch.float64) * ACT_SCALE).to(torch.int64)


@dataclass(frozen=True)
class IntParams:
    """Integer weights/bias and the checkpoint ``output_shift`` of one layer (R6.3 steps 2-3)."""

    weight_bits: int
    weight: torch.Tensor  # int64, PyTorch layout
    bias: torch.Tensor | None  # int64, the bias-memory values (R1.5)
    output_shift: int


@dataclass(frozen=True)
class QatParams:
    """What a QAT forward uses of ``IntParams``: the integers, and ``unit`` = 2^-output_shift,
    a float, or a float64 tensor on the parameters' device (``device_unit``: never read back)."""

    weight_bits: int
    weight: torch.Tensor
    bias: torch.Tensor | None
    unit: float | torch.Tensor


def choose_shift(
    weight: torch.Tensor, bias: torch.Tensor | None, bits: int, quantile: float
) -> int:
    """Output shift from the ``quantile`` of |[w; b]| (R6.3 step 2; torch.quantile, D6)."""
    params = weight.detach().abs().flatten().to(torch.float64)
    if bias is not None:
        params = torch.cat([params, bias.detach().abs().to(torch.float64)])
    if unit_stays_on_device(weight, bias, quantile):  # the largest one
        level = float(params.max())
    else:
        level = float(torch.quantile(params, quantile))
    return shift_for_max(level, bits)


def int_params(
    weight: torch.Tensor, bias: torch.Tensor | None, bits: int, quantile: float = 1.0
) -> IntParams:
    """Quantize float parameters: shift from ``choose_shift``, integers by R6.3 step 3."""
    shift = choose_shift(weight, bias, bits, quantile)
    w_int = quantize_weights(weight, bits, shift)
    b_int = None if bias is None else quantize_weights(bias, bits, shift)
    return IntParams(bits, w_int, b_int, shift)


def effective(
    values: torch.Tensor, q: torch.Tensor, bits: int, unit: float | torch.Tensor
) -> torch.Tensor:
    """QAT weight ``q / 2^(b-1)`` (shift excluded) with a straight-through gradient; ``unit``
    is 2^-output_shift."""
    return ste(values * unit, q.to(values.dtype) / 2.0 ** (abs(bits) - 1))


def device_unit(weight: torch.Tensor, bias: torch.Tensor | None, bits: int) -> torch.Tensor:
    """2^-shift for ``choose_shift`` at quantile 1, a float64 tensor on the parameters' device,
    never read back (a read waits for the GPU at every layer of every step), in few launches.
    For the largest |[w; b]| ``m``, ``1/(2m) = f 2^e`` with f in [0.5, 1) (frexp): the shift
    ``-floor(log2(1/m))`` is ``-e`` and 2^-shift = ``(1/(2m)) / f`` exactly, equal to
    ``shift_for_max`` for every float32 ``m`` (tests/nn/test_nn_device_shift.py). A NaN or
    infinite ``m`` is its ValueError on the CPU; on a GPU an asynchronous check ends the run."""
    level = torch.linalg.vector_norm(weight.detach(), math.inf, dtype=torch.float64)
    if bias is not None:
        biggest = torch.linalg.vector_norm(bias.detach(), math.inf, dtype=torch.float64)
        level = torch.maximum(level, biggest)
    try:  # NaN < inf is false too
        check_on_device(level < math.inf, "shift_for_max: a parameter is not finite")
    except RuntimeError:  # raised at once on the CPU only, where reading the value costs nothing
        raise ValueError(f"shift_for_max: the largest parameter is {float(level)}") from None
    half = 0.5 / level  # 1/m rounded, then halved exactly
    fraction, _ = torch.frexp(half)
    lo, hi = SHIFT_MIN - implicit_shift(bits), SHIFT_MAX - implicit_shift(bits)
    unit = (half / fraction).clamp(2.0**-hi, 2.0**-lo)
    # m = 0: 1/(2m) is inf, frexp keeps it, inf/inf is NaN (clamp keeps it): shift 0
    return unit.nan_to_num(nan=1.0)


def unit_stays_on_device(weight: torch.Tensor, bias: torch.Tensor | None, quantile: float) -> bool:
    """Whether ``choose_shift`` takes the largest parameter (``device_unit`` then computes the
    shift on the device) rather than ``torch.quantile``'s value, which only the host rounds."""
    params = weight.numel() + (0 if bias is None else bias.numel())
    return quantile >= 1.0 or params > 1 << 24


def qat_params(
    weight: torch.Tensor, bias: torch.Tensor | None, bits: int, quantile: float = 1.0
) -> QatParams:
    """``int_params`` for a QAT forward, the shift left on the device where the quantile allows
    (``unit_stays_on_device``)."""
    if not unit_stays_on_device(weight, bias, quantile):
        q = int_params(weight, bias, bits, quantile)
        return QatParams(bits, q.weight, q.bias, 2.0**-q.output_shift)
    unit = device_unit(weight, bias, bits)
    w_int = quantize_weights(weight, bits, unit=unit)
    b_int = None if bias is None else quantize_weights(bias, bits, unit=unit)
    return QatParams(bits, w_int, b_int, unit)


def qat_weights(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    bits: int,
    quantile: float = 1.0,
    *,
    together: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, float | torch.Tensor]:
    """The QAT forward's weight and bias (``effective``) and its 2^-shift (``qat_params``).
    ``together`` (default: on a GPU) puts weight and bias through the rule as one tensor where
    the shift stays on the device: the same numbers element by element in half the launches,
    which pace a small model's GPU step (docs/training.md); on the CPU the extra copy costs
    more than the launches it saves."""
    if together is None:
        together = weight.device.type == "cuda"
    if (
        bias is None
        or bias.dtype != weight.dtype
        or not (together and unit_stays_on_device(weight, bias, quantile))
    ):
        q = qat_params(weight, bias, bits, quantile)
        b = None if q.bias is None else effective(bias, q.bias, bits, q.unit)
        return effective(weight, q.weight, bits, q.unit), b, q.unit
    both = torch.cat([weight.reshape(-1), bias.reshape(-1)])
    q = qat_params(both, None, bits, quantile)
    w, b = effective(both, q.weight, bits, q.unit).split([weight.numel(), bias.numel()])
    return w.view_as(weight), b.view_as(bias), q.unit


def make_pooling(
    kind: str | None,
    size: int | tuple[int, ...],
    stride: int | tuple[int, ...] | None,
    dilation: int | tuple[int, ...],
    ndim: int,
) -> Pooling | None:
    """A ``Pooling`` from module arguments (stride defaults to the size), or None."""
    if kind is None:
        return None
    sizes = _tuple(size, ndim)
    strides = sizes if stride is None else _tuple(stride, ndim)
    dilations = _tuple(dilation, ndim)
    if any(d != 1 for d in dilations) and (kind != "max" or ndim != 2 or set(sizes) != {2}):
        raise ValueError(
            "pool dilation needs 2-D max pooling with size 2 (docs/hardware/arithmetic.md D4)"
        )
    return Pooling(
        PoolKind(kind), sizes, strides, dilations if any(d != 1 for d in dilations) else ()
    )


def _tuple(value: int | tuple[int, ...], ndim: int) -> tuple[int, ...]:
    return (value,) * ndim if isinstance(value, int) else tuple(value)


def _as_2d(x: torch.Tensor, pool: Pooling) -> tuple[torch.Tensor, tuple, tuple, tuple]:
    """1-D data and pooling viewed as 2-D with a height of 1."""
    if len(pool.size) == 2:
        return x, pool.size, pool.stride, pool.dilation_or_ones()
    return x.unsqueeze(-2), (1, *pool.size), (1, *pool.stride), (1, *pool.dilation_or_ones())


def pool_float(x: torch.Tensor, pool: Pooling, qat: bool, rounding: bool) -> torch.Tensor:
    """Float pooling; in QAT the average is re-quantized as the hardware does (R3.5/R3.6)."""
    x2, size, stride, dil = _as_2d(x, pool)
    if pool.kind is PoolKind.MAX:
        y = F.max_pool2d(x2, size, stride, dilation=dil)
    else:
        y = F.avg_pool2d(x2, size, stride)
        if qat:
            y = ste(y, _round_avg(y.detach(), rounding and len(pool.size) == 2))
    return y if len(pool.size) == 2 else y.squeeze(-2)


def _round_avg(y: torch.Tensor, rounding: bool) -> torch.Tensor:
    scaled = y * ACT_SCALE
    q = torch.sign(scaled) * torch.floor(scaled.abs() + (0.5 if rounding else 0.0))
    return torch.clamp(q, ACT_MIN, ACT_MAX) / ACT_SCALE


def pool_int(x: torch.Tensor, pool: Pooling, rounding: bool) -> torch.Tensor:
    """Exact integer pooling of int64 data (R3.2-R3.7; 1-D average always truncates, R3.7)."""
    x2, size, stride, dil = _as_2d(x.to(torch.float64), pool)
    if pool.kind is PoolKind.MAX:
        y = F.max_pool2d(x2, size, stride, dilation=dil).to(torch.int64)
    else:
        total = F.avg_pool2d(x2, size, stride, divisor_override=1).to(torch.int64)
        y = avgpool_divide(total, math.prod(size), rounding and len(pool.size) == 2)
    return y if len(pool.size) == 2 else y.squeeze(-2)
