"""The integer semantics against docs/hardware/arithmetic.md: §7 worked examples, §8 edge cases.

Every comparison is exact. The float-valued forms used by the fast simulator are checked against
the int64 forms with hypothesis over the whole range where the simulator uses them.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from cnnforge.arithmetic import (
    activate_int,
    avgpool_divide,
    eltwise_fold,
    finish_output,
    implicit_shift,
    quantize_weights,
    round_shift,
    saturate,
    shift_for_max,
    weight_range,
)
from cnnforge.ir import BINARY_BITS, Activation, EltwiseOp


def t(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def definition(acc: int, s: int) -> int:
    """R2.3 by its definition: floor(0.5 + acc * 2^s / 128), in exact rationals."""
    return math.floor(Fraction(1, 2) + Fraction(acc) * Fraction(2) ** s / 128)


# ---- §7 worked examples ------------------------------------------------------------------------

X_A = [[12, -7, 100], [-128, 55, 3], [27, 90, -64]]
W_A = [[5, -3, 17], [2, 127, -128], [-9, 0, 44]]


def _example_a_acc() -> int:
    acc = sum(x * w for xr, wr in zip(X_A, W_A, strict=True) for x, w in zip(xr, wr, strict=True))
    return acc + (-20 << 7)


def test_example_a() -> None:
    acc = _example_a_acc()
    assert acc - (-20 << 7) == 5067 and acc == 2507
    assert finish_output(t(acc), 1, Activation.RELU, False).tolist() == [39]
    assert finish_output(t(acc), 3, Activation.NONE, False).tolist() == [127]  # 157 -> clip
    assert round_shift(t(acc), 3).tolist() == [157]
    assert finish_output(t(acc), -3, Activation.NONE, False).tolist() == [2]
    assert finish_output(t(acc), 1, Activation.NONE, True).tolist() == [2507]  # wide: Q17.14


def test_example_a_through_the_simulator_layer() -> None:
    from cnnforge.ir import INPUT, Layer, Network, Op, Quantized
    from cnnforge.sim import simulate

    q = Quantized(8, torch.tensor(W_A).reshape(1, 1, 3, 3).numpy(), t(-20).numpy(), 1)
    layer = Layer(
        "a", Op.CONV2D, (INPUT,), (1, 1, 1), in_channels=1, out_channels=1, kernel_size=(3, 3),
        stride=(1, 1), padding=(0, 0), dilation=(1, 1), activation=Activation.RELU, quant=q,
    )  # fmt: skip
    net = Network("a", (1, 3, 3), (layer,))
    for engine in ("fast", "int64"):
        out = simulate(net, torch.tensor(X_A).reshape(1, 3, 3), engine=engine, device=None)
        assert out.outputs["a"].flatten().tolist() == [39]


def test_example_b_negative_tie_and_abs() -> None:
    acc = sum(x * w for x, w in zip([3, -1, 2, 0], [-3, 1, -1, 5], strict=True))
    assert acc == -12
    s = 0 + implicit_shift(4)
    assert s == 4
    assert round_shift(t(acc), s).tolist() == [-1]  # -1.5 -> -1, not -2
    acts = (Activation.NONE, Activation.RELU, Activation.ABS)
    got = [finish_output(t(acc), s, a, False).item() for a in acts]
    assert got == [-1, 0, 1]


@pytest.mark.parametrize(
    ("window", "trunc", "rounded"),
    [([-3, -2, 0, 0], -1, -1), ([1, 1, 0, 0], 0, 1), ([-2, 0, 0, 0], 0, -1), ([5, 0, 0, 0], 1, 1)],
)
def test_example_c_avgpool(window, trunc, rounded) -> None:
    total = t(sum(window))
    assert avgpool_divide(total, 4, rounding=False).item() == trunc
    assert avgpool_divide(total, 4, rounding=True).item() == rounded
    ftotal = total.float()
    assert avgpool_divide(ftotal, 4, rounding=False).item() == trunc
    assert avgpool_divide(ftotal, 4, rounding=True).item() == rounded


# ---- §8 edge cases -----------------------------------------------------------------------------


def test_rounding_table_half_toward_plus_infinity() -> None:
    # §8.1 at k = 1 (s = 6): acc/2 for acc = -5, -3, -1, 1, 3, 5 -> -2.5, -1.5, -0.5, 0.5 ...
    assert round_shift(t(-5, -3, -1, 1, 3, 5), 6).tolist() == [-2, -1, 0, 1, 2, 3]
    assert round_shift(t(-5, -3, -1, 1, 3, 5).double(), 6).tolist() == [-2, -1, 0, 1, 2, 3]


def test_right_shift_floors_negative() -> None:  # §8.2
    assert round_shift(t(-129, -128, -127), 0).tolist() == [-1, -1, -1]
    assert round_shift(t(-193, -192, -191), 0).tolist() == [-2, -1, -1]


def test_shift_above_seven_shifts_left() -> None:  # §8.3
    assert round_shift(t(3, -3), 9).tolist() == [12, -12]
    assert round_shift(t(3, -3), 7).tolist() == [3, -3]
    assert round_shift(t(3, -3).float(), 9).tolist() == [12, -12]


def test_bias_before_shift_and_saturation_before_activation() -> None:  # §8.4, §8.5
    acc = t(0) + (1 << 7)  # bias 1 alone; s = 0 -> 1
    assert finish_output(acc, 0, Activation.NONE, False).item() == 1
    assert finish_output(t(-500 * 128), 0, Activation.ABS, False).item() == 127
    assert activate_int(t(-128), Activation.ABS).item() == 127
    assert saturate(t(-129, 128, 5)).tolist() == [-128, 127, 5]


def test_wide_output_untouched() -> None:  # §8.6
    acc = t(123456789, -98765)
    assert finish_output(acc, -15, Activation.NONE, True).tolist() == acc.tolist()


def test_avgpool_truncates_and_rounds_away() -> None:  # §8.7, §8.8
    assert avgpool_divide(t(-5, -3, 3, 5), 4, False).tolist() == [-1, 0, 0, 1]
    assert avgpool_divide(t(-2, 2, -6, 6), 4, True).tolist() == [-1, 1, -2, 2]


def test_eltwise_saturates_once() -> None:  # §8.11
    ops = [t(127), t(127), t(-128)]
    assert eltwise_fold(EltwiseOp.ADD, ops).item() == 126
    assert eltwise_fold(EltwiseOp.SUB, [t(-128), t(127), t(127)]).item() == -128
    assert eltwise_fold(EltwiseOp.ADD, [t(127), t(127)], wide=True).item() == 254
    assert eltwise_fold(EltwiseOp.XOR, [t(-1), t(5)]).item() == -6
    assert eltwise_fold(EltwiseOp.OR, [t(-128), t(3)]).item() == -125
    floats = [t(-1).float(), t(5).float()]
    assert eltwise_fold(EltwiseOp.XOR, floats).item() == -6.0


def test_weight_ranges_and_implicit_shift() -> None:  # §8.15, R1.2, R2.1
    assert [weight_range(b) for b in (8, 4, 2, 1)] == [(-128, 127), (-8, 7), (-2, 1), (-1, 0)]
    assert weight_range(BINARY_BITS) == (-1, 1)
    assert [implicit_shift(b) for b in (8, 4, 2, 1, BINARY_BITS)] == [0, 4, 6, 7, 7]


def test_power_of_two_max_clips() -> None:  # §8.20
    w = torch.tensor([0.5, -0.25, 0.125])
    shift = shift_for_max(0.5, 8)
    assert shift == -1
    assert quantize_weights(w, 8, shift).tolist() == [127, -64, 32]


def test_shift_for_max_keeps_total_in_range() -> None:
    assert shift_for_max(1e-9, 8) == -15 and shift_for_max(1e9, 8) == 15
    assert shift_for_max(1e-9, 1) == -22 and shift_for_max(1e9, 4) == 11


# ---- properties ------------------------------------------------------------------------------


@given(st.integers(-(1 << 31), 1 << 31), st.integers(-15, 15))
def test_round_shift_is_the_definition(acc: int, s: int) -> None:
    assert round_shift(t(acc), s).item() == definition(acc, s)
    assert round_shift(t(acc).double(), s).item() == definition(acc, s)


@given(st.integers(-(1 << 24), 1 << 24), st.integers(-15, 15))
def test_float32_round_shift_exact_within_the_simulator_bound(acc: int, s: int) -> None:
    """float32 is exact where sim.exact uses it: |acc| + 2^(6-s) <= 2^24, and beyond int8 the
    saturation hides any difference (R2.3 note)."""
    k = 7 - s
    if k > 0 and abs(acc) + (1 << (k - 1)) > 1 << 24:
        return
    got = saturate(round_shift(torch.tensor([float(acc)]), s)).item()
    assert got == max(-128, min(127, definition(acc, s)))


@given(st.lists(st.integers(-128, 127), min_size=1, max_size=256), st.booleans())
def test_avgpool_divide_float_equals_int(values: list[int], rounding: bool) -> None:
    n = len(values)
    total = sum(values)
    expect = int(Fraction(total, n))  # trunc toward zero
    if rounding:
        m = Fraction(total, n)
        expect = math.floor(m + Fraction(1, 2)) if m >= 0 else math.ceil(m - Fraction(1, 2))
    assert avgpool_divide(t(total), n, rounding).item() == expect
    assert avgpool_divide(torch.tensor([float(total)]), n, rounding).item() == expect
