"""ranges.verify_quantized: the one check of weight, bias and shift ranges (R1.2, R2.1)."""

from __future__ import annotations

import numpy as np
import pytest

from cnnforge.ir import BINARY_BITS, Quantized
from cnnforge.ranges import verify_quantized


def _q(bits: int, weights, bias=None, shift: int = 0) -> Quantized:
    return Quantized(bits, np.asarray(weights), None if bias is None else np.asarray(bias), shift)


def test_in_range_gives_nothing() -> None:
    assert verify_quantized(_q(8, [-128, 127], [-128, 127]), wide=False) == ()
    assert verify_quantized(_q(4, [-8, 7]), wide=False) == ()
    assert verify_quantized(_q(BINARY_BITS, [-1, 1]), wide=False) == ()


def test_each_field_out_of_range() -> None:
    (p,) = verify_quantized(_q(4, [3, 9, -9]), wide=False)
    assert (p.field, p.lo, p.hi, p.low, p.high, p.first) == ("weights", -8, 7, -9, 9, 9)
    (p,) = verify_quantized(_q(8, [1], [200]), wide=False)
    assert (p.field, p.span()) == ("bias", "[-128, 127]")
    (p,) = verify_quantized(_q(BINARY_BITS, [1, 0]), wide=False)
    assert p.binary and p.first == 0 and p.span() == "-1/+1"
    (p,) = verify_quantized(_q(8, [1.5]), wide=False)
    assert not p.integral


def test_shift_range_except_wide() -> None:
    (p,) = verify_quantized(_q(1, [0], shift=9), wide=False)  # total 9 + 7 = 16
    assert (p.field, p.low, p.lo, p.hi) == ("shift", 16, -15, 15)
    assert verify_quantized(_q(1, [0], shift=9), wide=True) == ()  # R2.4: no shift when wide
    assert verify_quantized(_q(8, [0], shift=3), wide=False, shift_range=(-2, 2))[0].low == 3


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 0.5])
@pytest.mark.parametrize("field", ["weights", "bias"])
def test_values_that_are_not_integers_are_a_problem_not_a_crash(bad: float, field: str) -> None:
    """nan/inf/fractions (a corrupt checkpoint) are reported as data, never an int() overflow."""
    values = np.array([1.0, bad, 2.0])
    weights, bias = (values, None) if field == "weights" else (np.ones(3), values)
    (problem,) = verify_quantized(Quantized(8, weights, bias, 0), False)
    assert problem.field == field and not problem.integral
    assert np.isnan(problem.first) if np.isnan(bad) else problem.first == bad
    finite = values[np.isfinite(values)]
    assert (problem.low, problem.high) == (finite.min(), finite.max())
