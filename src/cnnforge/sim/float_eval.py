"""The float semantics of ANY ``Network`` (model level, hardware, or a mix), to prove rewrites
exact and collect activation ranges; OPAQUE layers' values must be ``given``."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from cnnforge.errors import SimulationError
from cnnforge.geometry import last_use
from cnnforge.ir import (
    INPUT,
    Activation,
    EltwiseOp,
    HostInput,
    Layer,
    Network,
    Op,
    Pooling,
    PoolKind,
)
from cnnforge.sim.checks import check_shape
from cnnforge.sim.ops import operands


def run_float(
    network: Network,
    x: torch.Tensor | np.ndarray,
    *,
    all_layers: bool = False,
    given: Mapping[str, torch.Tensor] | None = None,
    host: bool | None = None,
) -> dict[str, torch.Tensor]:
    """Float outputs of ``network`` on ``x`` by name (every layer if asked); ``host`` applies the
    host steps, ``given`` holds the values of layers not to compute (OPAQUE ones)."""
    given = given or {}
    x = torch.as_tensor(x)
    if not x.is_floating_point():
        x = x.to(torch.float64)
    batched = x.dim() == len(network.input_shape) + 1
    if not batched and tuple(x.shape) != tuple(network.input_shape):
        raise SimulationError(
            f"input shape {tuple(x.shape)} does not match the network input "
            f"{tuple(network.input_shape)}"
        )
    host = not all_layers if host is None else host
    values = {INPUT: x if batched else x.unsqueeze(0)}
    if host and network.host_input is not None:  # passes/host_input.py
        values[INPUT] = host_input_float(network.host_input, values[INPUT])
    # Unless every layer is asked for, a value is dropped after its last reader: freed memory
    # is reused, where fresh allocations (page faults) cost a third of a ResNet-50 evaluation.
    last = {} if all_layers else last_use(network)
    with torch.no_grad():
        for i, layer in enumerate(network.layers):
            xs = [values[n] for n in layer.inputs]
            if layer.name in given:
                y = given[layer.name].to(xs[0].dtype)
            else:
                y = _hardware(layer, xs) if layer.is_hardware else _model_level(layer, xs)
            check_shape(layer, y)
            values[layer.name] = y
            del xs
            for name in dict.fromkeys(layer.inputs):
                if last.get(name, len(network.layers)) <= i:
                    del values[name]
    names = [layer.name for layer in network.layers] if all_layers else list(network.outputs)
    if host:  # what the host computes after the accelerator (passes/host_ops.py)
        for name, kind in zip(network.outputs, network.host_reduce, strict=False):
            values[name] = host_reduce_float(kind, values[name])
    return {n: values[n] if batched else values[n][0] for n in names}


def host_input_float(step: HostInput, x: torch.Tensor) -> torch.Tensor:
    """The host's input normalization on a batch ``x`` (N, C, ...): ``x * scale + offset``
    per channel (with its ``2^-exponent``), in ``x``'s dtype."""
    a, b = step.columns(x.dim() - 1)
    return x * torch.from_numpy(a).to(x.dtype) + torch.from_numpy(b).to(x.dtype)


#: The ``host_reduce`` suffix of an argmax that keeps the channel axis (size 1).
KEEPDIM = ":keepdim"


def host_reduce_float(kind: str, x: torch.Tensor) -> torch.Tensor:
    """A ``Network.host_reduce`` step on a batched output ``x`` (N, C, ...), over channels."""
    if not kind:
        return x
    if kind == "log_softmax":
        return torch.log_softmax(x, 1)
    if kind.startswith("argmax"):
        return torch.argmax(x, 1, keepdim=kind.endswith(KEEPDIM)).to(x.dtype)
    return torch.softmax(x, 1)


def _param(layer: Layer, value: np.ndarray | None, like: torch.Tensor) -> torch.Tensor | None:
    if value is None:
        return None
    return torch.from_numpy(np.asarray(value)).to(like.dtype)


def pool_float(x: torch.Tensor, pool: Pooling, padding: tuple[int, ...] = ()) -> torch.Tensor:
    """PyTorch max/avg pooling (floor mode, zero padding counted in averages)."""
    nd = x.dim() - 2
    pad = tuple(padding) or (0,) * nd
    if pool.kind is PoolKind.MAX:
        fn = F.max_pool1d if nd == 1 else F.max_pool2d
        return fn(x, pool.size, pool.stride, pad, pool.dilation_or_ones())
    fn = F.avg_pool1d if nd == 1 else F.avg_pool2d
    return fn(x, pool.size, pool.stride, pad)


def activate_float(x: torch.Tensor, activation: Activation, params=()) -> torch.Tensor:
    """Every activation of the IR, PyTorch's definitions (hardtanh (min, max), leaky (slope,))."""
    if activation is Activation.NONE:
        return x
    if activation is Activation.RELU:
        return torch.relu(x)
    if activation is Activation.ABS:
        return torch.abs(x)
    if activation is Activation.RELU6:
        return torch.clamp(x, 0.0, 6.0)
    if activation is Activation.HARDTANH:
        lo, hi = params if params else (-1.0, 1.0)
        return torch.clamp(x, lo, hi)
    if activation is Activation.LEAKYRELU:
        return F.leaky_relu(x, params[0] if params else 0.01)
    if activation is Activation.SIGMOID:
        return torch.sigmoid(x)
    return torch.tanh(x)


def eltwise_float(layer: Layer, xs: list[torch.Tensor]) -> torch.Tensor:
    """Left fold of add/sub/mul (R4.2 without saturation); or/xor have no float meaning."""
    xs = operands(layer, xs)
    out = xs[0]
    for x in xs[1:]:
        if layer.eltwise is EltwiseOp.ADD:
            out = out + x
        elif layer.eltwise is EltwiseOp.SUB:
            out = out - x
        elif layer.eltwise is EltwiseOp.MUL:
            out = out * x
        else:
            raise SimulationError(
                f"element-wise {layer.eltwise} has no float semantics",
                where=f"layer {layer.name}",
                hint="simulate the quantized network instead",
            )
    return out


def main_op_float(layer: Layer, x: torch.Tensor) -> torch.Tensor:
    """The conv/linear op with float weights (PyTorch layouts); passthrough is the identity."""
    if layer.op is Op.PASSTHROUGH:
        return x
    w, b = _param(layer, layer.weight, x), _param(layer, layer.bias, x)
    if w is None:
        raise SimulationError(
            "has no float weights", where=f"layer {layer.name}", hint="give the float model"
        )
    n = len(layer.kernel_size) or 1
    stride = tuple(layer.stride) or (1,) * n
    padding = tuple(layer.padding) or (0,) * n
    dilation = tuple(layer.dilation) or (1,) * n
    if layer.op is Op.CONV2D:
        return F.conv2d(x, w, b, stride, padding, dilation, layer.groups)
    if layer.op is Op.CONV1D:
        return F.conv1d(x, w, b, stride, padding, dilation, layer.groups)
    if layer.op is Op.CONVTRANSPOSE2D:
        out_pad = tuple(layer.output_padding) or (0,) * n
        return F.conv_transpose2d(x, w, b, stride, padding, out_pad, layer.groups, dilation)
    if layer.flatten or all(d == 1 for d in x.shape[2:]):
        x = x.reshape(x.shape[0], -1)
    return F.linear(x, w, b)


def _hardware(layer: Layer, xs: list[torch.Tensor]) -> torch.Tensor:
    if layer.pool is not None and layer.pool_first:
        xs = [pool_float(x, layer.pool) for x in xs]
    if layer.eltwise is not None:
        x = eltwise_float(layer, xs)
    else:
        x = torch.cat(xs, dim=1) if len(xs) > 1 else xs[0]
    if layer.pool is not None and not layer.pool_first:
        x = pool_float(x, layer.pool)
    if layer.flatten:
        x = x.reshape(x.shape[0], -1)
    return activate_float(main_op_float(layer, x), layer.activation, layer.activation_params)


def _batchnorm(layer: Layer, x: torch.Tensor) -> torch.Tensor:
    bn = layer.batchnorm
    if bn is None:
        raise SimulationError("batchnorm layer without statistics", where=f"layer {layer.name}")
    mean, var = _param(layer, bn.running_mean, x), _param(layer, bn.running_var, x)
    gamma, beta = _param(layer, bn.weight, x), _param(layer, bn.bias, x)
    return F.batch_norm(x, mean, var, gamma, beta, training=False, eps=bn.eps)


def _softmax(layer: Layer, x: torch.Tensor) -> torch.Tensor:
    """softmax / log_softmax / argmax over ``layer.axis`` (without batch); argmax's indices come
    back in ``x``'s float dtype, keeping the dimension only when the output shape has it."""
    dim = layer.axis + 1
    if layer.reduce_kind == "log_softmax":
        return torch.log_softmax(x, dim)
    if layer.reduce_kind == "argmax":
        keep = len(layer.out_shape) == x.dim() - 1
        return torch.argmax(x, dim, keepdim=keep).to(x.dtype)
    return torch.softmax(x, dim)


def _model_level(layer: Layer, xs: list[torch.Tensor]) -> torch.Tensor:
    x = xs[0]
    if layer.op is Op.BATCHNORM:
        return _batchnorm(layer, x)
    if layer.op is Op.ACTIVATION:
        return activate_float(x, layer.activation, layer.activation_params)
    if layer.op is Op.POOL:
        assert layer.pool is not None
        return pool_float(x, layer.pool, layer.padding)
    if layer.op is Op.ELTWISE:
        return eltwise_float(layer, xs)
    if layer.op is Op.CONCAT:
        return torch.cat(xs, dim=1)
    if layer.op is Op.FLATTEN:
        return x.reshape(x.shape[0], -1)
    if layer.op is Op.UPSAMPLE:
        scale = tuple(float(s) for s in layer.scale_factor)
        return F.interpolate(x, scale_factor=scale, mode=layer.upsample_mode or "nearest")
    if layer.op is Op.PAD:
        return F.pad(x, layer.pad_amounts, value=layer.pad_value)
    if layer.op is Op.SOFTMAX:
        return _softmax(layer, x)
    raise SimulationError(f"no float semantics for op {layer.op}", where=f"layer {layer.name}")


#: Two float results agree when max |got - want| <= TOLERANCE * max(1, max |want|): float32
#: round-off of reordered sums (BatchNorm folding, fused stages) stays far below this.
TOLERANCE = 1e-4

#: The seed of the random input the equivalence checks run on.
CHECK_SEED = 0


def float_difference(got: torch.Tensor, want: torch.Tensor) -> str | None:
    """Why ``got`` is not ``want`` up to float round-off, or None; NaN and infinities must sit at
    the same elements."""
    want = want.detach()
    if tuple(got.shape) != tuple(want.shape):
        return f"shape {tuple(got.shape)} vs {tuple(want.shape)}"
    if not want.numel():
        return None
    want = want.to(got.dtype)
    finite = torch.isfinite(want)
    if not torch.equal(finite, torch.isfinite(got)) or not torch.equal(
        torch.isnan(want), torch.isnan(got)
    ):
        return "NaN/infinity at different elements"
    if not torch.equal(got[~finite & ~torch.isnan(want)], want[~finite & ~torch.isnan(want)]):
        return "infinities of different signs"
    if not bool(finite.any()):
        return None
    scale = max(1.0, float(want[finite].abs().max()))
    diff = float((got[finite] - want[finite]).abs().max())
    if not diff <= TOLERANCE * scale:
        return f"max |difference| {diff:.3g} at scale {scale:.3g}"
    return None
