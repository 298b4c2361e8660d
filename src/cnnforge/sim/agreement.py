"""Float vs quantized on the same sample, one rule for every report: error in 8-bit LSBs of each
output's unit (arithmetic.output_unit) and argmax agreement over channels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cnnforge.arithmetic import ACT_SCALE, output_unit
from cnnforge.ir import Network


@dataclass(frozen=True)
class Agreement:
    """How one network output's quantized values compare with the float model's."""

    name: str
    max_lsb: float  # largest |float - quantized|, in 8-bit LSBs
    mean_lsb: float  # mean |float - quantized|, in 8-bit LSBs
    argmax: float | None  # share of positions whose channel argmax agrees (None: one channel)


def output_scale(network: Network, name: str, exponent: int = 0) -> float:
    """Real value of one unit of output ``name`` (wide and calibrated outputs differ)."""
    layer = network.layer(name)
    if layer.quant is None:
        return output_unit(8, 0, False, exponent)
    return output_unit(layer.quant.weight_bits, layer.quant.output_shift, layer.wide, exponent)


def agreement(
    network: Network,
    answer: Mapping[str, np.ndarray],
    float_outputs: Mapping[str, np.ndarray],
    exponents: Mapping[str, int],
) -> list[Agreement]:
    """One row per output (by name) that the float model also produced, in the same shape."""
    rows = []
    for name, quant in sorted(answer.items()):
        fl = float_outputs.get(name)
        if fl is None or np.shape(fl) != np.shape(quant):
            continue
        fl = np.asarray(fl, dtype=np.float64)
        real = np.asarray(quant, dtype=np.float64) * output_scale(
            network, name, exponents.get(name, 0)
        )
        err = np.abs(fl - real) * ACT_SCALE
        argmax = None
        if real.ndim >= 1 and real.shape[0] > 1:
            argmax = float(np.mean(fl.argmax(axis=0) == real.argmax(axis=0)))
        rows.append(Agreement(name, float(err.max()), float(err.mean()), argmax))
    return rows
