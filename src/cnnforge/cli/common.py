"""Argument parsing helpers and consoles shared by the command modules."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from cnnforge.errors import InputError

if TYPE_CHECKING:  # numpy and torch load when a command needs them (cnnforge --help stays fast)
    import numpy as np

console = Console()
err_console = Console(stderr=True)


def parse_shape(text: str, option: str = "--input-shape") -> tuple[int, ...]:
    """``"3,64,64"`` -> ``(3, 64, 64)``; accepts ``x`` as separator too."""
    parts = [p for p in text.replace("x", ",").replace(" ", "").split(",") if p]
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise InputError(
            f"{option} {text!r} is not a list of integers", hint="write C,H,W (or C,L for 1-D)"
        ) from None
    if len(shape) not in (2, 3) or any(n <= 0 for n in shape):
        raise InputError(
            f"{option} {text!r} must be C,H,W or C,L with positive sizes",
            hint="for example --input-shape 3,64,64",
        )
    return shape


def parse_weight_bits(text: str, *, binary: bool = False) -> int | str:
    """``--weight-bits``: 8, 4, 2, 1 or ``auto``; with ``binary``, also ``-1``/``binary``.

    Case and surrounding blanks are ignored.
    """
    low = text.strip().lower()
    if low == "auto":
        return "auto"
    if binary and low in ("binary", "bin", "-1"):
        return -1
    if low in ("8", "4", "2", "1"):
        return int(low)
    allowed = "8, 4, 2, 1, binary or auto" if binary else "8, 4, 2, 1 or auto"
    raise InputError(f"--weight-bits {text!r} is not {allowed}", hint=f"use {allowed}")


def parse_bits_option(values: list[str] | None) -> int | dict[str, int]:
    """``["8"]`` -> 8; ``["4", "head=8"]`` -> ``{"*": 4, "head": 8}`` ("*": the default)."""
    default, per_layer = 8, {}
    for text in values or []:
        name, sep, raw = text.rpartition("=")
        try:
            bits = int(raw)
        except ValueError:
            raise InputError(f"--weight-bits {text!r} is not BITS or LAYER=BITS") from None
        if sep:
            per_layer[name] = bits
        else:
            default = bits
    if not per_layer:
        return default
    return {"*": default, **per_layer}


def parse_model_args(items: list[str] | None) -> dict[str, object]:
    """``["depth=4", "name=unet", "wide=true"]`` -> typed keyword arguments (no eval)."""
    out: dict[str, object] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.isidentifier():
            raise InputError(
                f"--model-arg {item!r} is not key=value", hint="e.g. --model-arg classes=21"
            )
        out[key] = _literal(raw)
    return out


def read_input_array(path: Path, option: str = "--input") -> np.ndarray:
    """An integer .npy of C,H,W / N,C,H,W (or C,L / N,C,L) values in [-128, 127], as int64."""
    import numpy as np

    from cnnforge.arithmetic import ACT_MAX, ACT_MIN

    if not path.is_file():
        raise InputError(f"{option} file not found", where=str(path))
    try:
        data = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{option} is not a readable .npy file: {exc}", where=str(path)) from None
    if not isinstance(data, np.ndarray):
        raise InputError(f"{option} must be one array (.npy), not an archive", where=str(path))
    if data.dtype.kind not in "iu":
        raise InputError(
            f"{option} has dtype {data.dtype}, not integers",
            where=str(path),
            hint="save int8 values, e.g. np.save(path, x.astype(np.int8))",
        )
    if data.ndim not in (2, 3, 4) or data.size == 0:
        raise InputError(
            f"{option} has shape {data.shape}",
            where=str(path),
            hint="give C,H,W or N,C,H,W (C,L or N,C,L for 1-D)",
        )
    lo, hi = int(data.min()), int(data.max())
    if lo < ACT_MIN or hi > ACT_MAX:
        raise InputError(
            f"{option} values span [{lo}, {hi}], outside [-128, 127]",
            where=str(path),
            hint="inputs are int8 (x_int = round(128 * x))",
        )
    return data.astype(np.int64)


def _literal(raw: str) -> object:
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            pass
    if "," in raw:
        return tuple(_literal(p) for p in raw.split(","))
    return raw
