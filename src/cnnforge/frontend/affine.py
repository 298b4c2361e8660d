"""Constant arithmetic on a feature map (``a * x + b``) as an ``eps=0`` BATCHNORM layer, and
``stack`` + ``sum``/``mean`` as an N-input add; shared by the fx and export frontends."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from cnnforge.frontend.fx_modules import NodeInfo
from cnnforge.ir import BatchNormParams, EltwiseOp, Layer, Op

#: The eps that marks a BATCHNORM layer as a captured constant affine map (not a BatchNorm):
#: its numbers are constants, not parameters of the model.
CONSTANT_EPS = 0.0

#: Arithmetic op names (torch.fx targets' and ATen packets' ``__name__``, methods) -> kind.
ARITHMETIC = {
    "add": "add",
    "iadd": "add",
    "add_": "add",
    "sub": "sub",
    "isub": "sub",
    "sub_": "sub",
    "rsub": "rsub",
    "mul": "mul",
    "imul": "mul",
    "mul_": "mul",
    "truediv": "div",
    "itruediv": "div",
    "div": "div",
    "div_": "div",
}


def per_channel(value: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """``value`` (a number or a tensor broadcast onto a batch of ``shape``) as one float64
    number per channel; None when it varies over space or would change the shape."""
    t = torch.as_tensor(value, dtype=torch.float64).detach().cpu()
    full = (1, *shape)
    try:
        if torch.broadcast_shapes(t.shape, full) != full:
            return None
        expanded = t.broadcast_to(full)
    except RuntimeError:
        return None
    if len(shape) == 1:
        return expanded.reshape(-1).numpy().copy()
    index = (0, slice(None)) + (0,) * (len(shape) - 1)
    channels = expanded[index]
    view = channels.view(1, -1, *([1] * (len(shape) - 1)))
    if not torch.equal(view.broadcast_to(full), expanded):
        return None
    return channels.numpy().copy()


def affine_layer(
    info: NodeInfo, kind: str, constant: Any, feature_first: bool, alpha: Any = 1
) -> Layer | None:
    """The affine layer of ``feature <kind> constant`` (or ``constant <kind> feature``); None
    when it is not one (a constant that varies over space, division by the feature map)."""
    shape = info.in_shapes[0]
    if info.out_shape != shape or isinstance(alpha, torch.Tensor):
        return None
    v = per_channel(constant, shape)
    if v is None:
        return None
    ones = np.ones_like(v)
    alpha = float(alpha)
    if kind == "rsub":  # aten.rsub(x, c, alpha) = c - alpha * x
        kind, feature_first = "sub", False
    if kind == "mul":
        scale, shift = v, 0 * v
    elif kind == "add":
        # x + alpha * c, or c + alpha * x
        scale, shift = (ones, alpha * v) if feature_first else (alpha * ones, v)
    elif kind == "sub":
        scale, shift = (ones, -alpha * v) if feature_first else (-alpha * ones, v)
    elif kind == "div" and feature_first and np.all(v != 0):
        scale, shift = 1.0 / v, 0 * v
    else:
        return None
    return constant_affine(info, scale, shift)


def with_parameters(layer: Layer | None, params: list[torch.Tensor]) -> Layer | None:
    """``layer`` (a constant affine map) keeping the parameters its constant came from, flattened
    into ``weight``, so analyze counts them as ``sum(p.numel())`` does."""
    if layer is None or not params:
        return layer
    flat = [p.detach().cpu().to(torch.float32).reshape(-1).numpy() for p in params]
    return dataclasses.replace(layer, weight=np.concatenate(flat))


def constant_affine(info: NodeInfo, scale: np.ndarray, shift: np.ndarray) -> Layer:
    """A BATCHNORM layer computing exactly ``scale * x + shift`` per channel."""
    n = len(scale)
    params = BatchNormParams(
        running_mean=np.zeros(n, np.float32),
        running_var=np.ones(n, np.float32),
        eps=CONSTANT_EPS,
        weight=np.asarray(scale, np.float32),
        bias=np.asarray(shift, np.float32),
    )
    return info.layer(Op.BATCHNORM, batchnorm=params)


def normalize_module(module: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """``(mean, std)`` of a torchvision-style ``Normalize`` module, else None; torch.fx keeps it as
    a leaf (its forward is untraceable) and it is captured as ``(x - mean) / std``."""
    if type(module).__name__ != "Normalize" or hasattr(module, "cnnforge_layer"):
        return None
    try:
        mean = np.asarray(torch.as_tensor(module.mean, dtype=torch.float64), np.float64)
        std = np.asarray(torch.as_tensor(module.std, dtype=torch.float64), np.float64)
    except (AttributeError, TypeError, ValueError, RuntimeError):
        return None
    if mean.ndim > 1 or std.ndim > 1 or not np.all(np.isfinite(std)) or np.any(std == 0):
        return None
    return mean.reshape(-1), std.reshape(-1)


def normalize_layer(info: NodeInfo, mean: np.ndarray, std: np.ndarray) -> Layer | None:
    """The affine layer of a ``Normalize`` module on ``info``'s input; None when the numbers
    do not fit its channels."""
    channels = info.in_shapes[0][0] if info.in_shapes and info.in_shapes[0] else 0
    if info.out_shape != info.in_shapes[0] or {len(mean), len(std)} - {1, channels}:
        return None
    scale = np.broadcast_to(1.0 / std, (channels,))
    shift = np.broadcast_to(-mean / std, (channels,))
    return constant_affine(info, scale, shift)


def stack_reduce_layers(info: NodeInfo, reduce: str) -> list[Layer]:
    """``stack(features).sum(0)`` -> an N-input ADD; ``mean(0)`` -> the ADD then ``x / N``; one
    feature stacked: nothing (an alias)."""
    n = len(info.inputs)
    if n == 1:
        return []
    if reduce == "sum":
        return [info.layer(Op.ELTWISE, eltwise=EltwiseOp.ADD)]
    add_info = dataclasses.replace(info, name=f"{info.name}_sum")
    add = add_info.layer(Op.ELTWISE, eltwise=EltwiseOp.ADD)
    scale_info = dataclasses.replace(info, inputs=(add.name,), in_shapes=(info.out_shape,))
    channels = info.out_shape[0]
    scale = np.full(channels, 1.0 / n)
    return [add, constant_affine(scale_info, scale, np.zeros(channels))]
