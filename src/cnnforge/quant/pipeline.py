"""From a PyTorch model to a quantized hardware Network: frontend -> lowering -> PTQ.

Shared by ``cnnforge quantize`` and ``cnnforge simulate``; layers of cnnforge.nn QAT modules keep
their own integers (the QAT import path), float layers are quantized post-training.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cnnforge.ir import Network
from cnnforge.quant.ptq import quantize_with_scales

if TYPE_CHECKING:
    from cnnforge.devices import Device


def quantize_model(
    spec: str,
    input_shape: tuple[int, ...],
    model_args: Mapping[str, object] | None = None,
    checkpoint: Path | None = None,
    *,
    device: Device | None = None,
    weight_bits: int | Mapping[str, int] = 8,
    clip: str = "max",
    calibration: np.ndarray | None = None,
) -> tuple[Network, dict[str, int]]:
    """Load ``spec`` (frontend), lower it and quantize it; also ``{output: e}`` (ptq.py)."""
    from cnnforge.frontend import load_network

    network = load_network(spec, input_shape, dict(model_args or {}), checkpoint)
    return quantize_lowered(
        network, device=device, weight_bits=weight_bits, clip=clip, calibration=calibration
    )


def quantize_lowered(
    network: Network,
    *,
    device: Device | None = None,
    weight_bits: int | Mapping[str, int] = 8,
    clip: str = "max",
    calibration: np.ndarray | None = None,
) -> tuple[Network, dict[str, int]]:
    """Lower a model-level ``network`` (passes.lower), quantize it; also ``{output: e}``."""
    from cnnforge.passes.lower import lower_to_hardware

    lowered = lower_to_hardware(network, device).network
    return quantize_with_scales(lowered, weight_bits, clip, calibration=calibration, device=device)
