"""What every C/C++ emitter with a known-answer self-test shares: deterministic C text pieces,
the FNV-1a checksum, the flat sample and known-answer vectors, running a built test."""

from __future__ import annotations

import math
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cnnforge.errors import EmitError, InputError
from cnnforge.ir import Network

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
    """Pack each row of b-bit two's-complement weights little-endian into bytes (R1.2); binary
    weights store bit 1 for -1 and bit 0 for +1."""
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


FNV_OFFSET = 0x811C9DC5
FNV_PRIME = 0x01000193


def fnv1a32(values: np.ndarray) -> int:
    """FNV-1a over each value's 4 little-endian int32 bytes (main.c's checksum), computed without a
    per-byte Python loop: the low-byte recurrence is solved one bit plane at a time."""
    data = np.asarray(values, dtype=np.int64).astype("<i4").reshape(-1).view(np.uint8)
    n = data.size
    if n == 0:
        return FNV_OFFSET
    low = np.zeros(n, dtype=np.uint8)  # the state's low byte before each byte, bit by bit
    for i in range(8):
        x = low ^ data  # bit i: the byte's (low has bits below i only)
        flips = ((x ^ (x & ((1 << i) - 1)) * np.uint8(FNV_PRIME & 0xFF)) >> i) & 1
        low[0] |= FNV_OFFSET & (1 << i)
        low[1:] |= (_running_xor(flips[:-1]) ^ (FNV_OFFSET >> i & 1)) << i
    delta = (low ^ data).astype(np.int32) - low  # (l ^ b) - l, two's complement mod 2**32
    total = int((delta.view(np.uint32) * _powers(FNV_PRIME, n)[::-1]).sum(dtype=np.uint32))
    return (FNV_OFFSET * pow(FNV_PRIME, n, 1 << 32) + total) & 0xFFFFFFFF


def _running_xor(bits: np.ndarray) -> np.ndarray:
    """Inclusive running XOR of a 0/1 uint8 array, 64 bits per machine word (one ufunc
    ``accumulate`` over every byte costs ~5 ms for a known answer)."""
    packed = np.packbits(bits, bitorder="little")
    words = np.zeros(-(-packed.size // 8), dtype="<u8")
    words.view(np.uint8)[: packed.size] = packed
    for shift in (1, 2, 4, 8, 16, 32):  # within each word: bit j = XOR of bits 0..j
        words ^= words << np.uint64(shift)
    carry = np.bitwise_xor.accumulate(words >> np.uint64(63))  # parity up to each word
    words[1:] ^= carry[:-1] * np.uint64(0xFFFFFFFFFFFFFFFF)
    return np.unpackbits(words.view(np.uint8), bitorder="little")[: bits.size]


def _powers(base: int, n: int) -> np.ndarray:
    """``base**1 .. base**n`` mod 2**32 (uint32 arithmetic wraps), in blocks of 1024."""
    block = np.cumprod(np.full(1024, base, dtype=np.uint32))
    steps = np.ones(-(-n // 1024), dtype=np.uint32)  # (base**1024)**j
    steps[1:] = np.cumprod(np.full(steps.size - 1, block[-1], dtype=np.uint32))
    return (steps[:, None] * block[None, :]).reshape(-1)[:n]


def sample_vector(network: Network, sample_in: np.ndarray) -> np.ndarray:
    """The sample as the flat int8 CHW vector the C reads; InputError naming both shapes."""
    arr = np.asarray(sample_in)
    shape = tuple(network.input_shape)
    if arr.shape not in (shape, (1, *shape)):
        raise InputError(
            f"sample shape {arr.shape} does not match the model input {shape}",
            hint=f"give an array of shape {shape} (or {(1, *shape)})",
        )
    check_range(arr, -128, 127, "sample values", "sample input")
    return arr.reshape(-1).astype(np.int64)


def output_vector(
    network: Network, sample_out: Mapping[str, np.ndarray] | np.ndarray
) -> np.ndarray:
    """The known answer: every network output flattened (CHW), concatenated in order."""
    if not isinstance(sample_out, Mapping):
        if len(network.outputs) != 1:
            raise EmitError("one array given for a network with several outputs")
        sample_out = {network.outputs[0]: sample_out}
    parts = []
    for name in network.outputs:
        expected = math.prod(network.shape_of(name))
        value = np.asarray(sample_out[name]).reshape(-1).astype(np.int64)
        if value.size != expected:
            raise EmitError(f"known answer of {name} has {value.size} values, not {expected}")
        parts.append(value)
    return np.concatenate(parts)


@dataclass(frozen=True)
class RunResult:
    """The self-test's verdict and its output line(s)."""

    passed: bool
    output: str
    returncode: int


def run_exe(exe: Path, args: tuple[str, ...] = (), *, timeout: float = 600.0) -> RunResult:
    """Run a self-test executable; PASS means exit status 0 and a PASS line."""
    proc = subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    text = (proc.stdout + proc.stderr).strip()
    passed = proc.returncode == 0 and text.startswith("PASS")
    return RunResult(passed, text, proc.returncode)
