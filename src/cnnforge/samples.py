"""Input arrays from .npy files: int8 values as they are, floats as ``clip(round_half_even(128 *
x), -128, 127)`` like the vendor's loaders (docs/hardware/arithmetic.md R1.1, R6.1)."""

from __future__ import annotations

import dataclasses
import errno
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cnnforge.arithmetic import ACT_MAX, ACT_MIN, ACT_SCALE
from cnnforge.errors import InputError
from cnnforge.resources import format_bytes, is_resource_error, require, resource_error, shape_text

if TYPE_CHECKING:
    from cnnforge.ir import HostInput

#: The first bytes of the files people mix up: NumPy arrays, zip archives (torch checkpoints
#: since torch 1.6, .npz), pickles (older torch checkpoints).
MAGIC = {
    b"\x93NUMPY": "a NumPy .npy array",
    b"PK\x03\x04": "a zip archive (a torch checkpoint or an .npz)",
    b"\x80": "a pickle (an old-style torch checkpoint)",
}

FLOAT_RULE = "floats are read as model-input units: x_int = clip(round(128 * x), -128, 127)"
INT_RULE = "integers must be int8 values in [-128, 127]"
#: How a network's host-side input normalization (passes/host_input.py) treats input files.
HOST_RULE = (
    "floats x (model units) are normalized on the host first, x' = (x - mean) / std (/ 2^e), "
    "then x_int = clip(round(128 * x'), -128, 127); integers are taken as the normalized input"
)


@dataclass(frozen=True)
class InputArray:
    """The int64 values read from a file, with what the conversion did (for notes and reports)."""

    values: np.ndarray
    source: str  # the file name, or "array"
    converted_from_float: bool = False
    clamped: int = 0  # float values that left [-1, 127/128] and were clamped
    floats: np.ndarray | None = None  # the floats read (model units), for a host input step
    normalized: bool = False  # the floats went through the host's input normalization

    def describe(self) -> str:
        """One phrase for notes: ``x.npy (4 samples, floats x 128)``."""
        count = self.values.shape[0] if self.values.ndim == 4 else 1
        what = f"{self.source} ({count} sample{'s' if count != 1 else ''}"
        if self.converted_from_float:
            what += ", floats normalized on the host" if self.normalized else ""
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
    _check_header(path, option)
    try:
        data = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        if is_resource_error(exc) and exc.errno not in (errno.ENOENT, errno.EACCES):
            raise resource_error(exc, str(path), "reading") from None  # out of files
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


def file_kind(path: Path) -> str | None:
    """What the file's first bytes say it is (``MAGIC``), or None (unknown or unreadable)."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError:
        return None
    return next((kind for magic, kind in MAGIC.items() if head.startswith(magic)), None)


def refuse_npy(path: Path) -> None:
    """A NumPy array given where a torch checkpoint belongs is named as such (InputError)."""
    if file_kind(path) == MAGIC[b"\x93NUMPY"]:
        raise InputError(
            "is a NumPy .npy array, not a torch checkpoint",
            where=str(path),
            hint="arrays go to --sample/--input/--calibration; give the .pth checkpoint here",
        )


def _check_header(path: Path, option: str) -> None:
    """The file is an .npy whose header's shape and dtype fit the file's size and the memory
    limit, checked before anything is allocated (a header may claim 10^12 rows)."""
    kind = file_kind(path)
    if kind is not None and not kind.startswith("a NumPy"):
        raise InputError(
            f"{option} is {kind}, not an .npy array",
            where=str(path),
            hint="give an array saved with np.save; checkpoints go to --checkpoint",
        )
    if kind is None:
        return  # np.load names what is wrong with it
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            reader = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = reader(f)
            offset = f.tell()
    except (ValueError, OSError, EOFError, TypeError, SyntaxError) as exc:
        raise InputError(
            f"{option} has a broken .npy header: {' '.join(str(exc).split())[:160]}",
            where=str(path),
            hint="save it with np.save(path, array)",
        ) from None
    if dtype.hasobject:
        return  # np.load refuses it (allow_pickle=False)
    count = math.prod(int(n) for n in shape)
    need = count * dtype.itemsize
    have = path.stat().st_size - offset
    if need > have:
        raise InputError(
            f"{option} header claims shape {shape_text(shape) or '()'} of {dtype} "
            f"({format_bytes(need)}) but the file holds {format_bytes(max(have, 0))} of data",
            where=str(path),
            hint="the file is truncated or its header was edited; save it again with np.save",
        )
    require(count * (dtype.itemsize + 16), f"{option} {shape_text(shape)}", "a smaller array")


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
    values, clamped = quantize_floats(data)
    return InputArray(values, source, converted_from_float=True, clamped=clamped, floats=data)


def quantize_floats(data: np.ndarray) -> tuple[np.ndarray, int]:
    """``clip(round_half_even(128 * x), -128, 127)`` as int64, and how many values clamped."""
    scaled = np.rint(np.asarray(data, np.float64) * ACT_SCALE)  # rint: half to even (torch.round)
    clamped = int(((scaled < ACT_MIN) | (scaled > ACT_MAX)).sum())
    return np.clip(scaled, ACT_MIN, ACT_MAX).astype(np.int64), clamped


def with_host_input(read: InputArray, step: HostInput | None, ndim: int) -> InputArray:
    """``read`` as the accelerator's input when the host normalizes it (``step``): floats are
    normalized then x 128, integers taken as normalized; without a step, as it is."""
    if step is None or read.floats is None or read.normalized:
        return read
    values, clamped = quantize_floats(step.apply(read.floats, ndim))
    return dataclasses.replace(read, values=values, clamped=clamped, normalized=True)


def _check_shape(data: np.ndarray, where: str | None, option: str) -> None:
    if data.ndim not in (2, 3, 4) or data.size == 0:
        raise InputError(
            f"{option} has shape {tuple(data.shape)}",
            where=where,
            hint="give C,H,W or N,C,H,W (C,L or N,C,L for 1-D)",
        )
