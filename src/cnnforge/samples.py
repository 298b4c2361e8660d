"""Input arrays from .npy files (samples, simulator inputs, calibration sets), in one place.

The accelerator reads int8 activations that stand for Q7 fractions ``v / 128`` (arithmetic.md
R1.1). A file may hold those integers directly, or floats in the model's own input units; floats
are converted with ``clip(round_half_even(128 * x), -128, 127)``, the rule the vendor's data
loaders use (arithmetic.md §6, R6.1: ``torch.round`` is half to even) so the float model fed
``x_int / 128`` and the hardware fed ``x_int`` see the same input.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cnnforge.arithmetic import ACT_MAX, ACT_MIN, ACT_SCALE
from cnnforge.errors import InputError

FLOAT_RULE = "floats are read as model-input units: x_int = clip(round(128 * x), -128, 127)"
INT_RULE = "integers must be int8 values in [-128, 127]"


@dataclass(frozen=True)
class InputArray:
    """The int64 values read from a file, with what the conversion did (for notes and reports)."""

    values: np.ndarray
    source: str  # the file name, or "array"
    converted_from_float: bool = False
    clamped: int = 0  # float values that left [-1, 127/128] and were clamped

    def describe(self) -> str:
        """One phrase for notes: ``x.npy (4 samples, floats x 128)``."""
        count = self.values.shape[0] if self.values.ndim == 4 else 1
        what = f"{self.source} ({count} sample{'s' if count != 1 else ''}"
        if self.converted_from_float:
            what += ", floats x 128"
            if self.clamped:
                what += f", {self.clamped} values clamped"
        return what + ")"


def load_input_array(path: Path | np.ndarray, option: str = "--input") -> InputArray:
    """Read an .npy file (or take an array) of C,H,W / N,C,H,W (C,L / N,C,L) values as int8."""
    if isinstance(path, np.ndarray):
        return _convert(path, "array", option)
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{option} file not found", where=str(path), hint="give an .npy file")
    try:
        data = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(
            f"{option} is not a readable .npy file: {' '.join(str(exc).split())}",
            where=str(path),
            hint="save it with np.save(path, array)",
        ) from None
    if not isinstance(data, np.ndarray):
        raise InputError(
            f"{option} must be one array (.npy), not an archive",
            where=str(path),
            hint="save one array with np.save",
        )
    return _convert(data, str(path), option)


def _convert(data: np.ndarray, source: str, option: str) -> InputArray:
    where = source if source != "array" else None
    if data.dtype.kind in "iu":
        _check_shape(data, where, option)
        lo, hi = int(data.min()), int(data.max())
        if lo < ACT_MIN or hi > ACT_MAX:
            raise InputError(
                f"{option} has dtype {data.dtype} with values in [{lo}, {hi}]",
                where=where,
                hint=f"{INT_RULE}; {FLOAT_RULE}",
            )
        return InputArray(data.astype(np.int64), source)
    if data.dtype.kind != "f":
        raise InputError(
            f"{option} has dtype {data.dtype}, not integers or floats",
            where=where,
            hint=f"{INT_RULE}; {FLOAT_RULE}",
        )
    _check_shape(data, where, option)
    if not np.isfinite(data).all():
        raise InputError(
            f"{option} has dtype {data.dtype} with NaN or infinite values",
            where=where,
            hint=FLOAT_RULE,
        )
    scaled = np.rint(data.astype(np.float64) * ACT_SCALE)  # rint: half to even, as torch.round
    clamped = int(((scaled < ACT_MIN) | (scaled > ACT_MAX)).sum())
    values = np.clip(scaled, ACT_MIN, ACT_MAX).astype(np.int64)
    return InputArray(values, source, converted_from_float=True, clamped=clamped)


def _check_shape(data: np.ndarray, where: str | None, option: str) -> None:
    if data.ndim not in (2, 3, 4) or data.size == 0:
        raise InputError(
            f"{option} has shape {tuple(data.shape)}",
            where=where,
            hint="give C,H,W or N,C,H,W (C,L or N,C,L for 1-D)",
        )
