"""The hardware ranges of a quantized layer, checked in one place (docs/hardware/arithmetic.md
R1.2, R1.5, R2.1, R2.4); each caller turns a problem into its own error."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cnnforge.arithmetic import BIAS_MAX, BIAS_MIN, SHIFT_MAX, SHIFT_MIN, weight_range
from cnnforge.ir import BINARY_BITS, Layer, Network, Quantized


@dataclass(frozen=True)
class RangeProblem:
    """One quantized parameter (``field``) outside its range ``lo``..``hi``: the extremes found,
    the ``first`` bad value, whether all were ``integral``, and ``binary`` (-1/+1) weights."""

    field: str
    lo: int
    hi: int
    low: int | float
    high: int | float
    first: int | float
    integral: bool = True
    binary: bool = False

    def span(self) -> str:
        """The allowed range as text: ``[lo, hi]``, or ``-1/+1`` for binary weights."""
        return "-1/+1" if self.binary else f"[{self.lo}, {self.hi}]"


def verify_quantized(
    quant: Quantized, wide: bool, *, shift_range: tuple[int, int] = (SHIFT_MIN, SHIFT_MAX)
) -> tuple[RangeProblem, ...]:
    """The out-of-range problems of weights, bias and (unless ``wide``, R2.4) the total shift; an
    empty tuple when all are in range."""
    problems = []
    binary = quant.weight_bits == BINARY_BITS
    lo, hi = weight_range(quant.weight_bits)
    problem = _values("weights", quant.weights, lo, hi, binary)
    if problem is not None:
        problems.append(problem)
    if quant.bias is not None:
        problem = _values("bias", quant.bias, BIAS_MIN, BIAS_MAX, False)
        if problem is not None:
            problems.append(problem)
    total = quant.total_shift
    if not wide and not shift_range[0] <= total <= shift_range[1]:
        problems.append(RangeProblem("shift", *shift_range, total, total, total))
    return tuple(problems)


def _values(field: str, values, lo: int, hi: int, binary: bool) -> RangeProblem | None:
    arr = np.asarray(values)
    if arr.size == 0:
        return None
    finite = np.isfinite(arr) if arr.dtype.kind in "fc" else np.ones(arr.shape, dtype=bool)
    whole = finite & (arr == np.round(arr)) if arr.dtype.kind in "fc" else finite
    bad = ~whole | (arr < lo) | (arr > hi) | (binary & (arr == 0))
    if not bad.any():
        return None
    seen = arr[finite] if finite.any() else arr  # min/max of what can be compared
    low, high = _number(seen.min()), _number(seen.max())
    first = _number(arr[bad].flat[0])
    return RangeProblem(field, lo, hi, low, high, first, bool(whole.all()), binary)


def _number(value: np.generic) -> int | float:
    """An integer when the value is one (for messages), else the float itself (nan, inf, 0.5)."""
    x = value.item()
    return int(x) if isinstance(x, int) or (np.isfinite(x) and x == round(x)) else float(x)


def wide_readers(network: Network) -> list[tuple[Layer, str]]:
    """``(reader, wide layer name)`` for every layer input that is a 32-bit (wide) output."""
    wide = {layer.name for layer in network.layers if layer.wide}
    return [(layer, name) for layer in network.layers for name in layer.inputs if name in wide]
