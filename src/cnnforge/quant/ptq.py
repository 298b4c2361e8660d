"""Post-training quantization of a float hardware Network (docs/hardware/arithmetic.md R6.2, R6.6).

Scheme (docs/quantization.md): a float layer computes ``y = act(conv(x, w) + b)`` on data in
units where the int8 value ``v`` means ``v / 128`` (R1.1). Choosing a power of two ``2^s`` no
smaller than the layer's clipping level ``L`` and ``w_int = round(w * 2^(bits-1) / 2^s)`` (same for
the bias) gives, by R6.2, ``sim(x_int) / 128 ~= float(x_int / 128)`` with ``output_shift = s``:
the float scale is kept layer by layer and no rescaling is needed between layers.

Optional calibration (``calibration=`` int inputs): layers whose float outputs exceed the int8
range get an activation scale ``2^e`` (the output then means ``v * 2^e / 128``); the scale is
divided out of the layer's parameters and multiplied into every consumer's weights, so the
represented function is unchanged while the outputs stay inside [-1, 1). Element-wise operands
and the inputs of a pass-through share one scale. ``quantize_with_scales`` returns the scales of
the outputs; ``quantize_network`` returns only the Network.

A wide (32-bit) output ignores its ``output_shift`` (R2.4): it means ``acc * 2^(1-bits) / 128``
(Q17.14 for 8 bits, R1.7), so a wide layer quantized with shift ``s`` stands for the float layer
divided by ``2^s``: its output scale gets ``+ s``, its float weights are ``w_int * 2^(1-bits)``.

Layers that already carry ``quant`` (QAT-trained modules of cnnforge.nn, imported vendor
checkpoints) are kept as they are: this is the import path of a QAT-trained model.
"""

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
    """Quantize every float weight layer of a hardware ``network`` (see the module docstring).

    ``weight_bits``: one width for all layers or ``{layer name: bits}`` (default: key ``"*"``,
    else 8). ``clip``: how the clipping level is chosen (max, avgmax, stddev with ``nstd``,
    ``scale`` x max). ``device``: the record whose weight widths are enforced (None: any of
    8, 4, 2, 1). ``options``: those of ``quantize_with_scales`` (``calibration``, ``scale``,
    ``nstd``).
    """
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
    """Exact integers for weights that are all 0 or 1 without bias, else None.

    Such layers copy or add their inputs (the identity convolutions that fusion and
    legalization create for add+ReLU, nearest upsampling or copies). The max rule would give
    1.0 -> 2^(b-1), clipped to 2^(b-1) - 1 (docs/hardware/arithmetic.md §8.20), off by one LSB.
    Instead
    ``w_int = 2^(b-2)`` with ``output_shift = 1`` (total shift 9 - b,
    docs/hardware/arithmetic.md R2.1/R2.3) reproduces the float sums exactly: ``(x * 2^(b-2) +
    2^(b-3)) >> (b-2) == x``.
    """
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
