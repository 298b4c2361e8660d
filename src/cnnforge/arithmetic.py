"""The integer semantics of the MAX78000/MAX78002 in one place (docs/hardware/arithmetic.md),
shared by the simulator, the QAT modules, quantization and the C emitter's tests."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

# A leaf: it imports nothing of cnnforge. Activations and element-wise ops are compared by their
# values ("relu", "add", ...), which the StrEnums of kinds.py equal.

#: Weight width code of binary (-1/+1) weights (R1.2); the same code as kinds.BINARY_BITS
#: (tests/core/test_arithmetic_leaf.py pins them equal).
BINARY_BITS = -1

ACT_MIN, ACT_MAX = -128, 127  # int8 activations (R1.1)
ACT_SCALE = 128  # activation v represents v / 128 (R1.1)
BIAS_SHIFT = 7  # bias enters the accumulator as b << 7 (R1.5)
BIAS_MIN, BIAS_MAX = -128, 127  # the 8-bit bias memory (R1.5)
SHIFT_MIN, SHIFT_MAX = -15, 15  # total output shift range (R2.1)
WIDE_FRACTION_BITS = 14  # wide output of 8-bit weights is Q17.14 (R1.7)
#: Identity 1x1 convolution that copies exactly: 64 * x * 2^1 / 128 = x (R2.3).
IDENTITY_WEIGHT, IDENTITY_SHIFT = 64, 1
#: Every weight width these semantics define (R1.2): the MAX parts store 8/4/2/1 (and binary),
#: an HLS target any width up to 8 (docs/hls-target.md H2); R2.1's implicit shift is 8 - |bits|.
WEIGHT_WIDTHS = (8, 7, 6, 5, 4, 3, 2, 1, BINARY_BITS)


def add_bias(acc: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``acc + (bias << 7)`` per output channel (dim 1), in the dtype of ``acc`` (R1.5)."""
    if bias is None:
        return acc
    shape = (1, -1) + (1,) * (acc.dim() - 2)
    return acc + bias.to(acc.dtype).reshape(shape) * (1 << BIAS_SHIFT)


def accumulator_bound(weights: Any, bias: Any | None = None) -> int:
    """Largest |accumulator| a layer can reach (R1.4, R1.5): the worst output channel (axis 0 of
    ``weights``) of ``sum |w| * 128 + |b| << 7``."""
    w = torch.as_tensor(np.asarray(weights)).to(torch.int64).abs()
    if w.numel() == 0:
        return 0
    worst = w.reshape(w.shape[0], -1).sum(dim=1) * -ACT_MIN
    if bias is not None:
        worst = worst + torch.as_tensor(np.asarray(bias)).to(torch.int64).abs() * (1 << BIAS_SHIFT)
    return int(worst.max())


def accumulator_bits(weights: Any, bias: Any | None = None) -> int:
    """Signed bits holding every accumulator of a layer (docs/hls-target.md H4)."""
    return accumulator_bound(weights, bias).bit_length() + 1


def implicit_shift(weight_bits: int) -> int:
    """The shift quantization adds: 8 - |bits| (R2.1); binary counts as 1 bit."""
    return 8 - abs(weight_bits)


def weight_range(weight_bits: int) -> tuple[int, int]:
    """Inclusive integer range of b-bit weights (R1.2); binary is {-1, +1}."""
    if weight_bits == BINARY_BITS:
        return -1, 1
    return -(1 << (weight_bits - 1)), (1 << (weight_bits - 1)) - 1


def right_shift(total_shift: int) -> int:
    """``k = 7 - s``: the right shift (negative: left) of an accumulator in R2.3's integer form."""
    return BIAS_SHIFT - total_shift


def round_shift(acc: torch.Tensor, total_shift: int, *, inplace: bool = False) -> torch.Tensor:
    """``floor(0.5 + acc * 2^s / 128)`` exactly (R2.3, §8.1-8.3), on int64 or on floats holding
    integers (exact in float32 while |acc| + 2^(6-s) <= 2^24); ``inplace`` for floats only."""
    if acc.is_floating_point():
        scale, offset = rounding_affine(total_shift)
        if inplace:
            return acc.mul_(scale).add_(offset).floor_()
        return torch.floor(acc * scale + offset)
    return _round_shift_int(acc, right_shift(total_shift))


def rounding_affine(total_shift: int) -> tuple[float, float]:
    """``(scale, offset)`` with ``round_shift(acc, s) == floor(acc * scale + offset)`` (R2.3);
    ``scale = 2^(s-7)`` is a power of two, so a float conv may carry both."""
    k = right_shift(total_shift)
    return 2.0**-k, (0.5 if k > 0 else 0.0)


def _round_shift_int(acc: torch.Tensor, k: int) -> torch.Tensor:
    if k > 0:
        # torch's >> on int64 is arithmetic (floors), unlike C's implementation-defined >>.
        return (acc + (1 << (k - 1))) >> k
    if k == 0:
        return acc
    return acc << (-k)


def saturate(y: torch.Tensor, lo: int = ACT_MIN, hi: int = ACT_MAX) -> torch.Tensor:
    """Clip to the int8 range (R2.3, R4.2); works on int64 and on integer-valued floats."""
    return torch.clamp(y, lo, hi)


def activate_int(y: torch.Tensor, activation: str) -> torch.Tensor:
    """Hardware activation (a ``kinds.Activation`` or its value) on saturated int8 values (R2.3:
    Abs(-128) = 127)."""
    if activation == "none":
        return y
    if activation == "relu":
        return torch.clamp(y, 0, ACT_MAX)
    if activation == "abs":
        return torch.clamp(y.abs(), 0, ACT_MAX)
    raise ValueError(f"activation {activation} does not exist in hardware")


def finish_output(
    acc: torch.Tensor, total_shift: int, activation: str, wide: bool, *, inplace: bool = False
) -> torch.Tensor:
    """Accumulator (bias included) to layer output: shift/round, saturate, activate (R2.3/R2.4);
    ``inplace=True`` (floats only) reuses ``acc``'s memory."""
    if wide:
        return acc  # no shift, rounding, clipping or activation (R2.4)
    if not (inplace and acc.is_floating_point()):
        return activate_int(saturate(round_shift(acc, total_shift)), activation)
    scale, offset = rounding_affine(total_shift)
    return finish_scaled(acc.mul_(scale).add_(offset), activation, inplace=True)


def finish_scaled(scaled: torch.Tensor, activation: str, *, inplace: bool = False) -> torch.Tensor:
    """Layer output from ``acc * scale + offset`` (``rounding_affine``, a float tensor):
    floor (the rounding of R2.3), saturate, activate. ``inplace`` overwrites ``scaled``."""
    y = scaled.floor_() if inplace else torch.floor(scaled)
    if activation == "relu":
        return y.clamp_(0, ACT_MAX)  # saturate, then ReLU: one clip to [0, 127]
    return activate_int(y.clamp_(ACT_MIN, ACT_MAX), activation)


def avgpool_divide(total: torch.Tensor, count: int, rounding: bool) -> torch.Tensor:
    """Average of ``count`` int8 values from their sum (R3.5 trunc / R3.6 half away; §8.7-8.8);
    ``total`` is int64 or an integer-valued float (exact)."""
    if rounding:
        # round half away from zero: sign(S) * floor((2|S| + n) / 2n)
        mag = (2 * total.abs() + count) // (2 * count)
        return saturate(torch.sign(total) * mag)
    mag = total.abs() // count  # truncate toward zero
    return saturate(torch.sign(total) * mag)


def eltwise_fold(op: str, operands: list[torch.Tensor], wide: bool = False) -> torch.Tensor:
    """Left fold in exact integers, one saturation at the end (R4.2); none if wide (R4.4); or/xor
    act on two's-complement patterns, so floats are folded as int64."""
    if op in ("or", "xor") and operands[0].is_floating_point():
        ints = [x.to(torch.int64) for x in operands]
        return eltwise_fold(op, ints, wide).to(operands[0].dtype)
    result = operands[0]
    for x in operands[1:]:
        if op == "add":
            result = result + x
        elif op == "sub":
            result = result - x
        elif op == "or":
            result = result | x
        elif op == "xor":
            result = result ^ x
        else:
            raise ValueError(f"element-wise {op} does not exist in hardware")
    return result if wide else saturate(result)


def quantize_activation_float(
    y: torch.Tensor, wide: bool = False, saturate: bool = True
) -> torch.Tensor:
    """Hardware rounding of a float output in units of 1/128 (R6.3 steps 8-9), no gradient;
    ``saturate=False`` leaves the clamp to the caller (QAT, after its estimator)."""
    if wide:
        scale = float(1 << WIDE_FRACTION_BITS)
        return torch.floor(y * scale + 0.5) / scale
    rounded = torch.floor(y * ACT_SCALE + 0.5)
    return (torch.clamp(rounded, ACT_MIN, ACT_MAX) if saturate else rounded) / ACT_SCALE


def shift_for_max(max_abs: float, weight_bits: int) -> int:
    """YAML/checkpoint ``output_shift`` so the largest parameter fits the b-bit range (R6.3 step 2,
    R6.6), total shift clamped to [-15, 15]; NaN/inf ``max_abs`` is a ``ValueError``."""
    if not math.isfinite(max_abs):
        raise ValueError(f"shift_for_max: the largest parameter is {max_abs}")
    shift = 0 if max_abs <= 0.0 else -math.floor(math.log2(1.0 / max_abs))
    lo = SHIFT_MIN - implicit_shift(weight_bits)
    hi = SHIFT_MAX - implicit_shift(weight_bits)
    return max(lo, min(hi, shift))


def quantize_weights(
    w: torch.Tensor,
    weight_bits: int,
    output_shift: int | None = None,
    *,
    unit: torch.Tensor | None = None,
) -> torch.Tensor:
    """Integer weights (or bias) for ``output_shift`` (R6.3 step 3 / R6.6), in float64; binary
    layers (MAX78002) take the sign, 0 -> +1. ``unit``: 2^-output_shift given instead, as a
    tensor on ``w``'s device (QAT keeps the shift there)."""
    if (output_shift is None) == (unit is None):
        raise ValueError("quantize_weights: give output_shift or unit, one of them")
    w64 = w.detach().to(torch.float64)
    if weight_bits == BINARY_BITS:
        return torch.where(w64 < 0, -1, 1).to(torch.int64)
    if output_shift is not None:
        scale: float | torch.Tensor = 2.0 ** (weight_bits - 1 - output_shift)
    else:  # powers of two both: the same product, exactly
        scale = unit * 2.0 ** (weight_bits - 1)
    scaled = torch.floor(w64 * scale + 0.5)
    lo, hi = weight_range(weight_bits)
    return torch.clamp(scaled, lo, hi).to(torch.int64)


def weight_scale(weight_bits: int, output_shift: int, wide: bool) -> float:
    """Real value of one unit of a layer's integer weights and bias, ``2^(s + 1 - |bits|)``: ``s``
    is ``output_shift`` for 8-bit outputs and 0 for wide ones (R2.4, R6.2)."""
    return 2.0 ** ((0 if wide else output_shift) + 1 - abs(weight_bits))


def dequantize_params(
    weights: Any, bias: Any | None, weight_bits: int, output_shift: int, wide: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """Float32 weights and bias with the meaning of the integer ones (``weight_scale``)."""
    scale = weight_scale(weight_bits, output_shift, wide)
    weight = (np.asarray(weights) * scale).astype(np.float32)
    return weight, None if bias is None else (np.asarray(bias) * scale).astype(np.float32)


def output_unit(weight_bits: int, output_shift: int, wide: bool, exponent: int = 0) -> float:
    """Real value of one unit of a layer's integer output (R1.1, R1.7, R6.2): ``1/128``, or
    ``2^(1 - |bits|) / 128`` when wide; times a calibrated ``2^exponent``."""
    unit = weight_scale(weight_bits, output_shift, wide) if wide else 1.0
    return unit * 2.0**exponent / ACT_SCALE


def checkpoint_bias_divisor(stored_bits: int) -> int:
    """``2^(b-1)``: a quantized checkpoint stores the bias times this; ``b`` is the checkpoint's
    ``weight_bits`` entry, 8 when absent or 0 (R1.6)."""
    return 1 << ((stored_bits or 8) - 1)


def bias_from_checkpoint(stored: Any, stored_bits: int) -> np.ndarray:
    """Bias-memory integers from a checkpoint's stored bias: ``floor(stored / 2^(b-1))`` (R1.6)."""
    divisor = float(checkpoint_bias_divisor(stored_bits))
    return np.floor(np.asarray(stored, dtype=np.float64) / divisor).astype(np.int64)


def bias_to_checkpoint(bias: Any, stored_bits: int) -> np.ndarray:
    """The stored (float32) checkpoint bias of bias-memory integers: ``b * 2^(b-1)`` (R1.6);
    ``bias_from_checkpoint`` inverts it."""
    stored = np.asarray(bias, dtype=np.int64) * checkpoint_bias_divisor(stored_bits)
    return stored.astype(np.float32)


def saturate_signed(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Clamp to the signed ``bits`` range."""
    return saturate(x, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def shift_round_half_up(x: torch.Tensor, shift: int) -> torch.Tensor:
    """``x / 2**shift`` rounded half up (``shift`` <= 0: an exact left shift)."""
    if shift <= 0:
        return x * 2 ** (-shift)
    return torch.floor((x + 2 ** (shift - 1)) / 2**shift)


def fraction_bits(max_abs: float, bits: int) -> int:
    """Fractional bits that fit ``max_abs`` in a signed ``bits`` integer."""
    if max_abs <= 0 or not math.isfinite(max_abs):
        return bits - 1
    return bits - 1 - math.ceil(math.log2(max_abs * (1 + 2.0**-20)))
