"""Small, deterministic pieces of C text: array initializers, literals, packed weights, checksum."""

from __future__ import annotations

import numpy as np

from cnnforge.errors import EmitError

PER_LINE = 24
BYTE_TEXTS = tuple(str(v) for v in range(-128, 256))  # the decimal text of every byte value


def c_array(ctype: str, name: str, values: np.ndarray, per_line: int = PER_LINE) -> str:
    """``static const T name[N] = {...};`` with a fixed number of values per line."""
    flat = np.asarray(values).reshape(-1).astype(np.int64)
    if flat.size and flat.min() >= -128 and flat.max() <= 255:  # weights, samples: a lookup
        items = np.array(BYTE_TEXTS, dtype=object)[flat + 128]
    else:
        items = np.array([str(v) for v in flat.tolist()] or ["0"], dtype=object)
    full = items.size // per_line * per_line
    rows = items[:full].reshape(-1, per_line).tolist()
    if full < items.size:
        rows.append(items[full:].tolist())
    body = "\n".join("    " + ", ".join(row) + "," for row in rows)
    return f"static const {ctype} {name}[{items.size}] = {{\n{body}\n}};\n"


def c_string(text: str) -> str:
    """A C string literal for any text: printable ASCII kept, everything else as octal escapes."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch in '"\\?':
            out.append("\\" + ch)
        elif 32 <= byte < 127:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def c_comment(text: str) -> str:
    """Text safe inside ``/* ... */``: printable ASCII, no comment terminator."""
    safe = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in text)
    return safe.replace("*/", "* /").replace("/*", "/ *")


def pack_rows(rows: np.ndarray, bits: int, binary: bool) -> np.ndarray:
    """Pack each row of b-bit weights little-endian into whole bytes (arithmetic.md R1.2).

    Two's complement fields; binary weights store bit 1 for -1 and bit 0 for +1.
    """
    rows = np.asarray(rows, dtype=np.int64)
    codes = (rows == -1).astype(np.uint8) if binary else (rows & ((1 << bits) - 1))
    shifts = np.arange(bits, dtype=np.uint8)
    fields = (codes.astype(np.uint8)[..., None] >> shifts) & 1  # (oc, n, bits), LSB first
    flat = fields.reshape(rows.shape[0], -1)
    pad = (-flat.shape[1]) % 8
    flat = np.pad(flat, ((0, 0), (0, pad)))
    return np.packbits(flat, axis=1, bitorder="little")


def check_range(values: np.ndarray, lo: int, hi: int, what: str, where: str) -> None:
    """EmitError unless every integer lies in [lo, hi]."""
    arr = np.asarray(values)
    if arr.size and (arr.min() < lo or arr.max() > hi):
        raise EmitError(
            f"{what} out of range [{lo}, {hi}] (min {int(arr.min())}, max {int(arr.max())})",
            where=where,
        )


def fnv1a32(values: np.ndarray) -> int:
    """FNV-1a over each value as 4 little-endian bytes of its int32 (main.c's checksum)."""
    data = np.asarray(values, dtype=np.int64).astype("<i4").tobytes()
    h = 2166136261
    for byte in data:
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h
