"""Post-training quantization of a float hardware Network (docs/quantization.md; R6.2, R6.6):
power-of-two shifts keep the float scale per layer; already quantized layers are kept."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from cnnforge.arithmetic import dequantize_params, quantize_weights, shift_for_max
from cnnforge.errors import InputError, ModelError
from cnnforge.ir import BINARY_BITS, Layer, Network, Quantized
from cnnforge.quant.scales import activation_scales

if TYPE_CHECKING:
    from cnnforge.devices import Capabilities

CLIP_METHODS = ("max", "avgmax", "stddev", "scale")
DEFAULT_BITS = 8


def quantize_network(
    network: Network,
    weight_bits: int | Mapping[str, int] = DEFAULT_BITS,
    clip: str = "max",
    *,
    device: Capabilities | None,
    **options: Any,
) -> Network:
    """Quantize every float weight layer of a hardware ``network``; ``weight_bits`` is one width or
    ``{layer: bits}``, ``clip`` picks the clipping level, ``device`` enforces widths."""
    return quantize_with_scales(network, weight_bits, clip, device=device, **options)[0]


def quantize_with_scales(
    network: Network,
    weight_bits: int | Mapping[str, int] = DEFAULT_BITS,
    clip: str = "max",
    *,
    calibration: np.ndarray | torch.Tensor | None = None,
    scale: float = 0.85,
    nstd: float = 2.0,
    device: Capabilities | None,
) -> tuple[Network, dict[str, int]]:
    """``quantize_network`` plus ``{output name: e}``: the output ``v`` means ``v * 2^e / 128``."""
    _check_network(network, clip)
    bits_of = _bits_lookup(network, weight_bits, device)
    exps = {}
    if calibration is not None:
        if any(layer.quant is not None for layer in network.layers):
            raise InputError(
                "calibration rescales every layer, but some layers are already quantized",
                hint="calibrate float networks only (QAT-trained layers keep their integers)",
            )
        exps = activation_scales(network, calibration)
    layers = []
    for layer in network.layers:
        if layer.has_weights and layer.quant is None:
            layer = _rescaled(network, layer, exps)
            layer = quantize_layer(layer, bits_of(layer), clip, scale=scale, nstd=nstd)
            if layer.wide and layer.quant.output_shift:
                exps[layer.name] = exps.get(layer.name, 0) + layer.quant.output_shift
        layers.append(layer)
    out_exps = {name: exps.get(name, 0) for name in network.outputs}
    return network.with_layers(layers), out_exps


def _check_network(network: Network, clip: str) -> None:
    if clip not in CLIP_METHODS:
        raise InputError(f"clip method {clip!r} is unknown", hint=f"use one of {CLIP_METHODS}")
    for layer in network.layers:
        if not layer.is_hardware:
            raise ModelError(
                f"layer {layer.name} ({layer.label()}) is not a hardware layer",
                where=layer.module_path or layer.name,
                hint="quantize after passes.lower.lower_to_hardware",
            )
        if layer.has_weights and layer.quant is None and layer.weight is None:
            raise ModelError(f"layer {layer.name} has no weights", where=layer.module_path)


def _bits_lookup(
    network: Network, weight_bits: int | Mapping[str, int], device: Capabilities | None
):
    """``layer -> bits``; a mapping may give a default under ``"*"`` (else 8)."""
    if isinstance(weight_bits, Mapping):
        names = {layer.name for layer in network.layers} | {"*"}
        unknown = sorted(set(weight_bits) - names)
        if unknown:
            raise InputError(
                f"weight bits given for unknown layers {unknown}",
                hint=f"layers are e.g. {[x.name for x in network.layers if x.has_weights][:4]}",
            )
    allowed = device.allowed_weight_bits if device is not None else (8, 4, 2, 1)

    def bits_of(layer: Layer) -> int:
        if isinstance(weight_bits, Mapping):
            bits = weight_bits.get(layer.name, weight_bits.get("*", DEFAULT_BITS))
        else:
            bits = weight_bits
        if bits not in allowed:
            raise InputError(
                f"{bits}-bit weights are not available",
                where=f"layer {layer.name} ({layer.module_path or layer.name})",
                hint=f"allowed: {allowed}",
            )
        return bits

    return bits_of


def _rescaled(network: Network, layer: Layer, exps: Mapping[str, int]) -> Layer:
    """Fold the input scale into the weights and divide by the output scale (calibration)."""
    if not exps:
        return layer
    e_in = max((exps.get(name, 0) for name in layer.inputs), default=0)
    e_out = exps.get(layer.name, 0)
    if e_in == 0 and e_out == 0:
        return layer
    factor = 2.0 ** (e_in - e_out)
    bias = None if layer.bias is None else layer.bias * 2.0**-e_out
    return dataclasses.replace(layer, weight=layer.weight * factor, bias=bias)


def clip_level(
    weight: np.ndarray,
    bias: np.ndarray | None,
    clip: str,
    *,
    scale: float = 0.85,
    nstd: float = 2.0,
) -> float:
    """The parameter magnitude mapped to full scale (R6.6 clip methods, as levels)."""
    w = np.asarray(weight, dtype=np.float64)
    params = np.abs(w).ravel()
    if bias is not None:
        params = np.concatenate([params, np.abs(np.asarray(bias, np.float64))])
    peak = float(params.max()) if params.size else 0.0
    if clip == "max":
        return peak
    if clip == "scale":
        return peak * scale
    per_out = w.reshape(w.shape[0], -1)
    if clip == "avgmax":
        return max(abs(float(per_out.min(1).mean())), abs(float(per_out.max(1).mean())))
    mean, std = float(w.mean()), float(w.std())
    lo, hi = max(float(w.min()), mean - nstd * std), min(float(w.max()), mean + nstd * std)
    return max(abs(lo), abs(hi))


def quantize_layer(
    layer: Layer, bits: int, clip: str = "max", *, scale: float = 0.85, nstd: float = 2.0
) -> Layer:
    """One float weight layer -> integer weights/bias and output shift (R6.6)."""
    if bits == BINARY_BITS:
        raise InputError(
            "post-training quantization to binary weights is not supported",
            where=f"layer {layer.name}",
            hint="binary layers come from QAT or a vendor checkpoint; use 1, 2, 4 or 8 bits",
        )
    weight, bias = layer.weight, layer.bias
    selection = _selection_quant(weight, bias, bits)
    if selection is not None:
        return dequantized(layer, selection)
    level = clip_level(weight, bias, clip, scale=scale, nstd=nstd)
    shift = shift_for_max(level, bits)
    w_int = quantize_weights(torch.from_numpy(np.asarray(weight)), bits, shift).numpy()
    b_int = None
    if bias is not None:
        b_int = quantize_weights(torch.from_numpy(np.asarray(bias)), bits, shift).numpy()
    return dequantized(layer, Quantized(bits, w_int, b_int, shift))


def _selection_quant(weight: np.ndarray, bias: np.ndarray | None, bits: int) -> Quantized | None:
    """Exact integers for 0/1 weights without bias (identity convs), else None: ``2^(b-2)`` with
    shift 1 reproduces the sums exactly, unlike the max rule (docs/hardware/arithmetic.md §8.20)."""
    w = np.asarray(weight)
    if bits < 2 or not np.isin(w, (0.0, 1.0)).all() or not w.any():
        return None
    if bias is not None and np.asarray(bias).any():
        return None
    zero_bias = None if bias is None else np.zeros(np.shape(bias), np.int64)
    return Quantized(bits, w.astype(np.int64) << (bits - 2), zero_bias, 1)


def dequantized(layer: Layer, quant: Quantized) -> Layer:
    """``layer`` with ``quant`` and the float weights it stands for (arithmetic.weight_scale)."""
    weight, bias = dequantize_params(
        quant.weights, quant.bias, quant.weight_bits, quant.output_shift, layer.wide
    )
    return dataclasses.replace(layer, weight=weight, bias=bias, quant=quant)
