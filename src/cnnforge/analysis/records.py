"""Typed records of an analysis and their stable JSON form (docs/analyze-json.md)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

JSON_SCHEMA = "cnnforge-analysis/1"


@dataclass(frozen=True)
class LayerStats:
    """One row of the analysis table."""

    name: str
    op: str  # Layer.label(): conv2d, maxpool, relu, add ...
    module_path: str
    inputs: tuple[str, ...]
    out_shape: tuple[int, ...]
    params: int
    macs: int
    rf_size: tuple[Fraction, ...]
    rf_stride: tuple[Fraction, ...]
    rf_offset: tuple[Fraction, ...]
    act_bytes_float32: int
    act_bytes_int8: int
    param_bytes_float32: int
    param_bytes_quantized: int
    weight_bits: int | None  # None for layers without weights


@dataclass(frozen=True)
class Totals:
    """Whole-network figures (batch 1)."""

    params: int
    macs: int
    peak_act_bytes_float32: int
    peak_act_bytes_int8: int
    peak_layer: str  # the layer at which the float32 peak occurs ("input" before any)
    param_bytes_float32: int
    param_bytes_quantized: int


@dataclass(frozen=True)
class Analysis:
    """The analysis of one network: rows in layer order and totals."""

    network: str
    input_shape: tuple[int, ...]
    count: str  # "true" or "thop"
    weight_bits: int
    layers: tuple[LayerStats, ...]
    totals: Totals
    #: ``(module path, numel)`` of the module's parameters forward() does not use.
    unused_params: tuple[tuple[str, int], ...] = ()

    def unused_line(self, shown: int = 3) -> str:
        """The line "N parameters (M tensors) of the module are not used by forward: a, b, ..."
        ('' when all are used)."""
        if not self.unused_params:
            return ""
        n = sum(size for _, size in self.unused_params)
        modules = list(dict.fromkeys(p.rpartition(".")[0] or p for p, _ in self.unused_params))
        more = ", ..." if len(modules) > shown else ""
        return (
            f"{n:,} parameters ({len(self.unused_params)} tensors) of the module are not used "
            f"by forward: {', '.join(modules[:shown])}{more}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (schema ``cnnforge-analysis/1``)."""
        return {
            "schema": JSON_SCHEMA,
            "network": self.network,
            "input_shape": list(self.input_shape),
            "count": self.count,
            "weight_bits": self.weight_bits,
            "layers": [_row(s) for s in self.layers],
            "totals": dict(vars(self.totals)),
            "unused_parameters": {
                "params": sum(size for _, size in self.unused_params),
                "tensors": [path for path, _ in self.unused_params],
            },
        }


def number(value: Fraction) -> int | float:
    """An exact fraction as an int when whole, else a float."""
    return int(value) if value.denominator == 1 else float(value)


def _row(s: LayerStats) -> dict[str, Any]:
    row = dict(vars(s))
    row["inputs"] = list(s.inputs)
    row["out_shape"] = list(s.out_shape)
    for key in ("rf_size", "rf_stride", "rf_offset"):
        row[key] = [number(v) for v in row[key]]
    return row
