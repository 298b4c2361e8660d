"""The one way to a quantized hardware network (compile, plan, simulate, quantize): load, lower,
pick weight widths and quantize, so every command gets the same network."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cnnforge.devices import Capabilities
from cnnforge.errors import InputError
from cnnforge.ir import Network
from cnnforge.passes.target_rules import TargetRules
from cnnforge.pipeline.sources import NETWORK, ModelSource, load_limits
from cnnforge.samples import InputArray

Widths = int | str | Mapping[str, int] | None


@dataclass(frozen=True)
class QuantizedNetwork:
    """A quantized hardware network, its calibrated output scales and what calibrated it."""

    network: Network
    output_exponents: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def host_inputs(
    network: Network, calibration: InputArray | None, sample: np.ndarray | InputArray | None
) -> tuple[InputArray | None, np.ndarray | None]:
    """The calibration set and the sample as the accelerator reads them: through ``network``'s
    host input normalization when it has one (samples.with_host_input); the sample unbatched."""
    from cnnforge.samples import with_host_input

    ndim = len(network.input_shape)
    if calibration is not None:
        calibration = with_host_input(calibration, network.host_input, ndim)
    if isinstance(sample, InputArray):
        values = with_host_input(sample, network.host_input, ndim).values
        sample = values[0] if values.ndim == ndim + 1 else values
    return calibration, sample


def calibration_set(
    calibration: InputArray | None, sample: np.ndarray | None
) -> tuple[np.ndarray | None, str]:
    """The PTQ calibration inputs (N,...) and how to name them: --calibration, else the sample."""
    if calibration is not None:
        return calibration.values, f"--calibration {calibration.describe()}"
    if sample is None:
        return None, ""
    used = "the sample alone (1 sample; pass --calibration N.npy for a representative set)"
    return sample[None], used


def quantize_lowered(
    network: Network,
    device: Capabilities,
    weight_bits: int | Mapping[str, int],
    *,
    clip: str = "max",
    calibration: np.ndarray | None = None,
    used: str = "",
) -> QuantizedNetwork:
    """PTQ of a lowered ``network``'s float layers (an already quantized one is returned)."""
    from cnnforge.quant.ptq import quantize_with_scales

    if network.is_quantized:
        return QuantizedNetwork(network)
    q, exps = quantize_with_scales(
        network, weight_bits, clip, calibration=calibration, device=device
    )
    notes = [f"PTQ activation scales calibrated on {used}"] if used else []
    notes += [f"output {n} is calibrated: value x 2^{e}" for n, e in sorted(exps.items()) if e]
    return QuantizedNetwork(q, dict(exps), tuple(notes))


def quantized_network(
    source: Network,
    device: Capabilities,
    weight_bits: Widths = None,
    *,
    rules: TargetRules,
    clip: str = "max",
    calibration: InputArray | None = None,
    sample: np.ndarray | InputArray | None = None,
) -> QuantizedNetwork:
    """Lower a model-level ``source`` for ``device``, choose widths (``"auto"``: the target's
    ``rules``), quantize (calibrated)."""
    from cnnforge.passes.lower import lower_to_hardware

    lowered = lower_to_hardware(source, device).network
    calibration, sample = host_inputs(lowered, calibration, sample)
    values, used = calibration_set(calibration, sample)
    bits = _widths(lowered, device, weight_bits, rules)
    return quantize_lowered(lowered, device, bits, clip=clip, calibration=values, used=used)


def weight_widths(value: int | str | Mapping[str, int]) -> int | str | dict[str, int]:
    """A ``--weight-bits`` value as the checker and quantizer take it: a number, ``"auto"`` or
    per-layer widths (one-line InputError for other text)."""
    if isinstance(value, str) and value != "auto":
        try:
            return int(value)
        except ValueError:
            raise InputError(f"--weight-bits {value!r}", hint="use 8, 4, 2, 1 or auto") from None
    return dict(value) if isinstance(value, Mapping) else value


def _widths(
    network: Network, device: Capabilities, weight_bits: Widths, rules: TargetRules
) -> int | Mapping[str, int]:
    """``None``: the device's default width; ``"auto"``: the target's chooser; else as given."""
    if weight_bits is None:
        return int(device.default_weight_bits)
    widths = weight_widths(weight_bits)
    if widths == "auto":
        return rules.choose_weight_bits(network, device, None).bits
    return widths


def quantized_checkpoint(source: ModelSource) -> Path | None:
    """The cnnforge quantized checkpoint to take as it is: --network, or such a --checkpoint."""
    from cnnforge.checkpoint import is_quantized_checkpoint

    if source.kind == NETWORK:
        return source.network
    if source.checkpoint is not None and is_quantized_checkpoint(source.checkpoint):
        return source.checkpoint
    return None


def load_source(
    source: ModelSource,
    input_shape: tuple[int, ...] | None,
    model_args: Mapping[str, Any],
    device: Capabilities | None,
) -> tuple[Network, bool]:
    """The network of a MODEL or --network source, and whether it is a quantized checkpoint taken
    as saved; a ``device`` limits a MODEL's channels before tracing."""
    path = quantized_checkpoint(source)
    if path is not None:
        from cnnforge.checkpoint import load_quantized

        return load_quantized(path), True
    from cnnforge.frontend import load_network, untrained_note

    untrained_note(source.model, source.checkpoint, "its weights and outputs")
    limits = load_limits(device)
    network = load_network(source.model, input_shape, dict(model_args), source.checkpoint, **limits)
    return network, False


def quantized_from_source(
    source: ModelSource,
    input_shape: tuple[int, ...] | None,
    model_args: Mapping[str, Any],
    device: Capabilities,
    weight_bits: Widths = None,
    *,
    rules: TargetRules,
    clip: str = "max",
    calibration: InputArray | None = None,
    sample: np.ndarray | InputArray | None = None,
) -> QuantizedNetwork:
    """``load_source`` then, for a model, ``quantized_network`` (the commands' common path)."""
    network, quantized = load_source(source, input_shape, model_args, device)
    if quantized:
        return QuantizedNetwork(network)
    return quantized_network(
        network, device, weight_bits, rules=rules, clip=clip, calibration=calibration,
        sample=sample,
    )  # fmt: skip
