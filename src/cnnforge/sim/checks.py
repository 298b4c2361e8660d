"""What the simulator refuses (inputs and layers it cannot run bit-exactly), each a one-line
``SimulationError`` naming the layer with a hint (docs/hardware/arithmetic.md R1.1-R2.1)."""

from __future__ import annotations

import numpy as np
import torch

from cnnforge.arithmetic import ACT_MAX, ACT_MIN, WEIGHT_WIDTHS
from cnnforge.devices import Capabilities
from cnnforge.errors import SimulationError
from cnnforge.ir import (
    BINARY_BITS,
    HARDWARE_ACTIVATIONS,
    HARDWARE_ELTWISE,
    INPUT,
    Activation,
    Layer,
    Network,
    Op,
    PoolKind,
)
from cnnforge.ranges import RangeProblem, verify_quantized, wide_readers


def _fail(layer: Layer, what: str, hint: str | None = None) -> SimulationError:
    where = f"layer {layer.name}" + (f" ({layer.module_path})" if layer.module_path else "")
    return SimulationError(what, where=where, hint=hint)


def check_input(network: Network, x: object) -> tuple[torch.Tensor, bool]:
    """The input as an int64 (N, C, ...) tensor on its own device, and whether it came
    batched."""
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, torch.Tensor):
        raise SimulationError(f"input must be an array, not {type(x).__name__}")
    if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        raise SimulationError(
            f"input dtype {str(x.dtype).replace('torch.', '')} is not an integer type",
            hint="give int8 values in [-128, 127] (x_int = round(x * 128), "
            "docs/hardware/arithmetic.md R6.1)",
        )
    shape = tuple(network.input_shape)
    batched = tuple(x.shape[1:]) == shape and x.dim() == len(shape) + 1
    if not batched and tuple(x.shape) != shape:
        raise SimulationError(
            f"input shape {tuple(x.shape)} does not match the network input {shape}",
            hint=f"give {shape} or (N, {', '.join(map(str, shape))})",
        )
    x = x.to(torch.int64)
    if not batched:
        x = x.unsqueeze(0)
    if x.numel() and (int(x.min()) < ACT_MIN or int(x.max()) > ACT_MAX):
        raise SimulationError(
            f"input values {int(x.min())}..{int(x.max())} leave the int8 range [-128, 127]",
            hint="clip or rescale the input (docs/hardware/arithmetic.md R1.1)",
        )
    return x, batched


def check_network(network: Network, device: Capabilities | None) -> None:
    """Raise ``SimulationError`` for the first layer the simulator cannot run."""
    known = {INPUT}
    for layer in network.layers:
        missing = [n for n in layer.inputs if n not in known]
        if missing:
            raise _fail(layer, f"reads {missing[0]!r}, which is not an earlier layer")
        check_layer(layer, device)
        known.add(layer.name)
    for name in network.outputs:
        if name not in known:
            raise SimulationError(f"network output {name!r} is not a layer", where=network.name)
    _check_wide_consumers(network)


def check_layer(layer: Layer, device: Capabilities | None) -> None:
    """One layer: hardware op, operators, activation and quantized parameters."""
    if not layer.is_hardware:
        raise _fail(
            layer,
            f"model-level op {layer.label()} cannot run on the accelerator",
            "lower the network to hardware layers first (cnnforge.passes.lower)",
        )
    if device is not None and not device.supports_op(layer.op):
        raise _fail(layer, f"{device.name} has no {layer.op.value} operation")
    _check_eltwise(layer, device)
    _check_dilation(layer, device)
    if layer.activation not in HARDWARE_ACTIVATIONS:
        raise _fail(
            layer,
            f"activation {layer.activation.value} does not exist in hardware",
            "use none, relu or abs",
        )
    if layer.wide and layer.activation is not Activation.NONE:
        raise _fail(layer, "a 32-bit (wide) output cannot have an activation (R2.4)")
    if layer.op is Op.PASSTHROUGH and layer.activation is not Activation.NONE:
        raise _fail(
            layer,
            "a passthrough layer cannot have an activation (docs/hardware/network-yaml.md §3.1)",
            hint="carry it on an identity 1x1 convolution instead (passes/fuse.py does)",
        )
    if layer.has_weights:
        _check_quantized(layer, device)


def _check_dilation(layer: Layer, device: Capabilities | None) -> None:
    """Average pooling has no dilation (R3.2: max only); a device limits both
    (docs/hardware/devices.md §1)."""
    pool_dil = max(layer.pool.dilation_or_ones()) if layer.pool is not None else 1
    if pool_dil > 1 and layer.pool.kind is PoolKind.AVG:
        raise _fail(layer, f"average pooling with dilation {pool_dil}", "dilate max pooling only")
    if device is None:
        return
    if pool_dil > device.pool_dilation_max:
        raise _fail(layer, f"pool dilation {pool_dil} (at most {device.pool_dilation_max} on "
                    f"{device.name})")  # fmt: skip
    conv_dil = max(layer.dilation or (1,))
    limit = device.conv1d_dilation_max if layer.op is Op.CONV1D else device.conv2d_dilation_max
    if layer.has_weights and conv_dil > limit:
        raise _fail(layer, f"{layer.op.value} dilation {conv_dil} (at most {limit} on "
                    f"{device.name})")  # fmt: skip


def _check_eltwise(layer: Layer, device: Capabilities | None) -> None:
    if layer.eltwise is None:
        return
    ok = layer.eltwise in HARDWARE_ELTWISE
    if device is not None:
        ok = ok and device.supports_eltwise(layer.eltwise)
    if not ok:
        raise _fail(
            layer,
            f"element-wise {layer.eltwise.value} is not a hardware operator",
            "use add, sub, or, xor",
        )
    if not 2 <= layer.operand_count <= 16:
        raise _fail(layer, f"element-wise op over {layer.operand_count} operands (2..16, R4.1)")


def _check_quantized(layer: Layer, device: Capabilities | None) -> None:
    q = layer.quant
    if q is None:
        raise _fail(layer, "has float weights only", "quantize the network first")
    bits = q.weight_bits
    if bits not in WEIGHT_WIDTHS or (device is not None and not device.weight_bits_allowed(bits)):
        allowed = device.allowed_weight_bits if device is not None else WEIGHT_WIDTHS
        name = "binary" if bits == BINARY_BITS else f"{bits}-bit"
        on = f" on {device.name}" if device is not None else ""
        raise _fail(layer, f"{name} weights are not allowed{on}", f"use weight bits {allowed}")
    if device is not None and not device.supports_groups(
        layer.groups, layer.in_channels, layer.out_channels
    ):
        raise _fail(layer, f"groups={layer.groups} is not supported on {device.name}")
    for problem in verify_quantized(q, layer.wide):
        raise _range_failure(layer, problem)


def _range_failure(layer: Layer, problem: RangeProblem) -> SimulationError:
    """The simulator's wording of a ``verify_quantized`` problem."""
    if problem.field == "shift":
        return _fail(
            layer,
            f"total output shift {problem.low} is outside [{problem.lo}, {problem.hi}] (R2.1)",
            "requantize with a smaller output_shift",
        )
    if not problem.integral:
        return _fail(layer, f"quantized {problem.field} are not integers")
    return _fail(
        layer,
        f"quantized {problem.field} {problem.low}..{problem.high} leave the range {problem.span()}",
        "requantize the layer (docs/hardware/arithmetic.md R1.2, R1.5)",
    )


def _check_wide_consumers(network: Network) -> None:
    for layer, name in wide_readers(network):
        raise _fail(
            layer,
            f"reads the 32-bit (wide) output of {name!r}",
            "only network outputs may be 32-bit (docs/check.md, Rules)",
        )


def check_shape(layer: Layer, y: torch.Tensor) -> None:
    """The computed output must have the layer's recorded ``out_shape``."""
    if layer.out_shape and tuple(y.shape[1:]) != tuple(layer.out_shape):
        raise _fail(
            layer,
            f"computes shape {tuple(y.shape[1:])} but records out_shape {layer.out_shape}",
            "the network's geometry is inconsistent",
        )
