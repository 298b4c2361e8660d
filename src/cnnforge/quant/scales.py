"""Power-of-two activation scales from calibration data (R1.1), shared where the hardware cannot
rescale (multi-input layers, pass-throughs); the network input is fixed at 0."""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from cnnforge.arithmetic import ACT_MAX, ACT_MIN, ACT_SCALE
from cnnforge.errors import InputError
from cnnforge.ir import INPUT, Network, Op


def activation_scales(network: Network, calibration: np.ndarray | torch.Tensor) -> dict[str, int]:
    """``{layer name: e}``: layer outputs are to be represented as ``y / 2^e``."""
    from cnnforge.sim.float_eval import run_float

    x = _calibration_tensor(network, calibration)
    outputs = run_float(network, x, all_layers=True)
    need = {INPUT: 0}
    for layer in network.layers:
        peak = float(outputs[layer.name].abs().max()) if layer.name in outputs else 0.0
        if not math.isfinite(peak):  # a constant or zero output is fine (peak 0 -> e = 0)
            raise InputError(
                f"the float output is {peak} on the calibration data",
                where=f"layer {layer.name}"
                + (f" ({layer.module_path})" if layer.module_path else ""),
                hint="the model computes NaN/inf here; check its weights and the calibration data",
            )
        need[layer.name] = 0 if layer.wide or peak <= 1.0 else math.ceil(math.log2(peak))
    parent = {name: name for name in need}
    for layer in network.layers:
        tied = list(layer.inputs) if len(layer.inputs) > 1 else []
        if layer.op is Op.PASSTHROUGH:
            tied = [*layer.inputs, layer.name]
        for a, b in itertools.pairwise(tied):
            _union(parent, a, b)
    group: dict[str, int] = {}
    for name, e in need.items():
        root = _find(parent, name)
        group[root] = max(group.get(root, 0), e)
    if group.get(_find(parent, INPUT), 0) != 0:
        group[_find(parent, INPUT)] = 0  # the input is given; its group cannot be rescaled
    return {name: group[_find(parent, name)] for name in need if name != INPUT}


def _calibration_tensor(network: Network, data: np.ndarray | torch.Tensor) -> torch.Tensor:
    x = torch.as_tensor(np.asarray(data))
    if x.dim() == len(network.input_shape):
        x = x.unsqueeze(0)
    if tuple(x.shape[1:]) != tuple(network.input_shape):
        raise InputError(
            f"calibration data of shape {tuple(x.shape)} does not match the input "
            f"{network.input_shape}",
            hint="give N,C,H,W (or C,H,W) int8 values",
        )
    if x.is_floating_point() and not torch.equal(x, x.round()):
        raise InputError("calibration data must hold integers in [-128, 127]")
    if x.numel() and (int(x.min()) < ACT_MIN or int(x.max()) > ACT_MAX):
        raise InputError("calibration data must hold integers in [-128, 127]")
    return x.to(torch.float64) / ACT_SCALE


def _find(parent: dict[str, str], name: str) -> str:
    while parent[name] != name:
        parent[name] = parent[parent[name]]
        name = parent[name]
    return name


def _union(parent: dict[str, str], a: str, b: str) -> None:
    parent[_find(parent, a)] = _find(parent, b)
