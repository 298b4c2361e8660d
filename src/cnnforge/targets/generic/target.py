"""A generic CNN accelerator as data: an on-chip budget, DDR behind it, an engine's throughput.

FPGA overlays and NPUs (Xilinx's xfDNN is the anchor) have no fixed grid of processors: their
on-chip SRAM is a budget that activation blobs share, DDR holds what does not fit, and weights
stream from DDR unless a weight store keeps them. ``--device generic`` (or
``generic:onchip=3MiB,act_bytes=2,...``) names one; ``parse_generic`` reads the text.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from cnnforge.errors import InputError

PREFIX = "generic"

#: Size suffixes: binary (KiB, MiB, GiB) and decimal (KB, MB, GB); ``k``/``m``/``g`` are binary.
_UNITS = {
    "": 1,
    "b": 1,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "k": 1 << 10,
    "m": 1 << 20,
    "g": 1 << 30,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
}


@dataclass(frozen=True)
class GenericTarget:
    """One generic accelerator: memories in bytes, element widths, throughput per cycle."""

    onchip_bytes: int = 3 << 20  # activation SRAM shared by all live blobs
    ddr_bytes: int = 4 << 30  # external memory for spilled blobs and weights
    act_bytes: int = 2  # bytes per activation element (xfDNN: 16-bit)
    weight_bytes: int = 2  # bytes per weight (and per bias)
    weight_onchip_bytes: int = 0  # weight store: layers whose weights fit stay resident
    macs_per_cycle: int = 1024  # multiply-accumulates per cycle of the engine
    ddr_bytes_per_cycle: int = 64  # DDR bandwidth
    inplace: bool = True  # an element-wise op may write over an operand it reads last
    halo: str = "keep"  # fused bands: halo rows kept in line buffers, or "recompute"d

    @property
    def name(self) -> str:
        return f"{PREFIX}:{format_params(self)}"

    def with_onchip(self, onchip_bytes: int) -> GenericTarget:
        return dataclasses.replace(self, onchip_bytes=int(onchip_bytes))


#: Parameter names of the ``generic:`` text -> dataclass fields (sizes take units).
_KEYS = {
    "onchip": "onchip_bytes",
    "ddr": "ddr_bytes",
    "act_bytes": "act_bytes",
    "weight_bytes": "weight_bytes",
    "weight_onchip": "weight_onchip_bytes",
    "macs_per_cycle": "macs_per_cycle",
    "ddr_bytes_per_cycle": "ddr_bytes_per_cycle",
    "inplace": "inplace",
    "halo": "halo",
}
HALOS = ("keep", "recompute")
_SIZES = frozenset({"onchip", "ddr", "weight_onchip"})


def parse_size(text: str, key: str = "size") -> int:
    """``3MiB`` -> 3145728, ``5MB`` -> 5000000, ``4096`` -> 4096, ``1.5MiB`` -> 1572864."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise InputError(
            f"{key}={text!r} is not a size", hint="write bytes, or e.g. 3MiB, 512KiB, 5MB"
        )
    return round(float(match.group(1)) * _UNITS[unit])


def parse_generic(text: str) -> GenericTarget:
    """``generic`` or ``generic:onchip=3MiB,act_bytes=2`` -> a ``GenericTarget``."""
    head, _, tail = text.strip().partition(":")
    if head.lower() != PREFIX:
        raise InputError(f"{text!r} is not a generic target", hint="e.g. generic:onchip=3MiB")
    values: dict[str, object] = {}
    for item in filter(None, (p.strip() for p in tail.split(","))):
        key, sep, raw = (s.strip() for s in item.partition("="))
        if not sep or key.lower() not in _KEYS:
            raise InputError(
                f"--device {text!r}: {item!r} is not KEY=VALUE with a known key",
                hint="keys: " + ", ".join(_KEYS),
            )
        key = key.lower()
        values[_KEYS[key]] = _value(key, raw)
    target = GenericTarget(**values)  # type: ignore[arg-type]
    for field in ("act_bytes", "weight_bytes", "macs_per_cycle", "ddr_bytes_per_cycle"):
        if getattr(target, field) <= 0:
            raise InputError(f"--device {text!r}: {field} must be positive")
    return target


def _value(key: str, raw: str) -> int | bool | str:
    if key in _SIZES:
        return parse_size(raw, key)
    if key == "halo":
        if raw.lower() not in HALOS:
            raise InputError(f"halo={raw!r} is not one of {', '.join(HALOS)}")
        return raw.lower()
    if key == "inplace":
        if raw.lower() not in ("0", "1", "true", "false", "yes", "no"):
            raise InputError(f"inplace={raw!r} is not 0 or 1")
        return raw.lower() in ("1", "true", "yes")
    if not raw.isdigit():
        raise InputError(f"{key}={raw!r} is not a positive integer")
    return int(raw)


def format_params(target: GenericTarget) -> str:
    """The ``KEY=VALUE,...`` text that ``parse_generic`` reads back to ``target``."""
    parts = []
    for key, field in _KEYS.items():
        value = getattr(target, field)
        if key == "halo" and value == "keep":
            continue  # the default: device names read as before
        parts.append(f"{key}={int(value) if isinstance(value, bool) else value}")
    return ",".join(parts)
