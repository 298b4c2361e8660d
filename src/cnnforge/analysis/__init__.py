"""Analysis of any ``Network`` (model-level, hardware, imported): params, MACs, receptive fields,
memory; ``analyze_network`` is the one entry point."""

from __future__ import annotations

from collections.abc import Mapping

from cnnforge.analysis.counting import (
    COUNT_MODES,
    float32_bytes,
    int8_layout_bytes,
    layer_macs,
    layer_params,
    param_bytes_at,
)
from cnnforge.analysis.liveness import peak_memory
from cnnforge.analysis.receptive_field import ReceptiveField, layer_field
from cnnforge.analysis.records import Analysis, LayerStats, Totals
from cnnforge.devices import Capabilities
from cnnforge.errors import InputError
from cnnforge.ir import BINARY_BITS, INPUT, Layer, Network

VALID_WEIGHT_BITS = (8, 4, 2, 1, BINARY_BITS)


def analyze_network(
    network: Network,
    device: Capabilities,
    count: str = "true",
    weight_bits: int | Mapping[str, int] = 8,
) -> Analysis:
    """Analyze ``network``: one ``LayerStats`` per layer and the ``Totals`` (batch 1); ``count`` is
    ``"true"`` or ``"thop"``, ``weight_bits`` sizes unquantized layers' parameters."""
    if count not in COUNT_MODES:
        raise InputError(f"unknown count mode {count!r}", hint="use --count true or thop")
    bits_of = _bits_lookup(weight_bits)
    fields: dict[str, ReceptiveField] = {INPUT: ReceptiveField.identity(network.input_shape[1:])}
    rows = []
    for layer in network.layers:
        fields[layer.name] = layer_field(layer, [fields[n] for n in layer.inputs])
        rows.append(_row(network, layer, fields[layer.name], count, bits_of(layer.name), device))
    return Analysis(
        network=network.name,
        input_shape=network.input_shape,
        count=count,
        weight_bits=weight_bits if isinstance(weight_bits, int) else 8,
        layers=tuple(rows),
        totals=_totals(network, rows, device),
        unused_params=network.unused_params,
    )


def _bits_lookup(weight_bits: int | Mapping[str, int]):
    per_layer = {} if isinstance(weight_bits, int) else dict(weight_bits)
    default = weight_bits if isinstance(weight_bits, int) else 8
    for bits in (default, *per_layer.values()):
        if bits not in VALID_WEIGHT_BITS:
            raise InputError(f"weight bits {bits} not supported", hint="use 8, 4, 2, 1 or -1")
    return lambda name: per_layer.get(name, default)


def _row(
    network: Network, layer: Layer, rf: ReceptiveField, count: str, bits: int, device: Capabilities
) -> LayerStats:
    in_shape = network.shape_of(layer.inputs[0]) if layer.inputs else ()
    quant_bits = layer.quant.weight_bits if layer.quant is not None else bits
    return LayerStats(
        name=layer.name,
        op=layer.label(),
        module_path=layer.module_path,
        inputs=layer.inputs,
        out_shape=layer.out_shape,
        params=layer_params(layer),
        macs=layer_macs(layer, in_shape, count),
        rf_size=rf.size,
        rf_stride=rf.stride,
        rf_offset=rf.offset,
        act_bytes_float32=float32_bytes(layer.out_shape),
        act_bytes_int8=int8_layout_bytes(layer.out_shape, device, layer.wide),
        param_bytes_float32=4 * layer_params(layer),
        param_bytes_quantized=param_bytes_at(layer, bits),
        weight_bits=quant_bits if layer.has_weights else None,
    )


def _totals(network: Network, rows: list[LayerStats], device: Capabilities) -> Totals:
    by_name = {r.name: r for r in rows}
    shape = network.input_shape

    def f32(name: str) -> int:
        return by_name[name].act_bytes_float32 if name != INPUT else float32_bytes(shape)

    def int8(name: str) -> int:
        return by_name[name].act_bytes_int8 if name != INPUT else int8_layout_bytes(shape, device)

    peak_f32, where = peak_memory(network, f32)
    peak_int8, _ = peak_memory(network, int8)
    return Totals(
        params=sum(r.params for r in rows),
        macs=sum(r.macs for r in rows),
        peak_act_bytes_float32=peak_f32,
        peak_act_bytes_int8=peak_int8,
        peak_layer=where,
        param_bytes_float32=sum(r.param_bytes_float32 for r in rows),
        param_bytes_quantized=sum(r.param_bytes_quantized for r in rows),
    )


__all__ = ["Analysis", "LayerStats", "Totals", "analyze_network"]
