"""Mapping of traced functions and tensor methods (``F.relu``, ``torch.cat``, ``+``, ``x.view``) to
layers (docs/internal-apis.md); ``None`` where the node aliases its first input."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from cnnforge.frontend.fx_modules import (
    NodeInfo,
    activation,
    adaptive_pool,
    pad_layer,
    pool_layer,
    softmax_layer,
    upsample_layer,
)
from cnnforge.ir import Activation, EltwiseOp, Layer, Op, PoolKind

Mapper = Callable[[NodeInfo, Sequence[Any], dict[str, Any]], Layer | None]


def arg(args: Sequence[Any], kwargs: dict[str, Any], index: int, name: str, default: Any) -> Any:
    """The argument at ``index`` or keyword ``name``."""
    return args[index] if len(args) > index else kwargs.get(name, default)


def _act(kind: Activation) -> Mapper:
    return lambda info, args, kwargs: activation(info, kind)


def _hardtanh(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    low, high = arg(args, kwargs, 1, "min_val", -1.0), arg(args, kwargs, 2, "max_val", 1.0)
    return activation(info, Activation.HARDTANH, (float(low), float(high)))


def _leaky(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    slope = float(arg(args, kwargs, 1, "negative_slope", 0.01))
    return activation(info, Activation.LEAKYRELU, (slope,))


def _eltwise(op: EltwiseOp) -> Mapper:
    def mapper(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
        operands = [args[0], arg(args, kwargs, 1, "other", None)]
        if not all(isinstance(t, torch.Tensor) for t in operands):
            raise info.fail(
                f"{op.value} with a constant operand is not supported",
                hint="element-wise operations must combine two feature maps",
            )
        if kwargs.get("alpha", 1) != 1:
            raise info.fail(f"{op.value} with alpha={kwargs['alpha']} is not supported")
        if len(set(info.in_shapes)) != 1 or info.in_shapes[0] != info.out_shape:
            raise info.fail(
                f"{op.value} of shapes {' and '.join(map(str, info.in_shapes))} broadcasts",
                hint="element-wise operands must have the same shape",
            )
        return info.layer(Op.ELTWISE, eltwise=op)

    return mapper


def _cat(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    tensors = arg(args, kwargs, 0, "tensors", ())
    dim = arg(args, kwargs, 1, "dim", 0)
    rank = tensors[0].dim() if tensors else 0
    if dim % max(rank, 1) != 1:
        raise info.fail(
            f"concatenation along dim {dim} is not supported", hint="concatenate channels (dim=1)"
        )
    return info.layer(Op.CONCAT, in_channels=sum(shape[0] for shape in info.in_shapes))


def _flatten_like(info: NodeInfo) -> Layer | None:
    """A reshape: none when the shape is unchanged, FLATTEN to (N, -1), else unsupported."""
    if info.out_shape == info.in_shapes[0]:
        return None
    if info.out_shape == (math.prod(info.in_shapes[0]),):
        return info.layer(Op.FLATTEN)
    raise info.fail(
        f"reshape from {info.in_shapes[0]} to {info.out_shape} is not supported",
        hint="only flattening to (N, -1) is supported",
    )


def _reshape(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer | None:
    return _flatten_like(info)


def _pool(kind: PoolKind) -> Mapper:
    def mapper(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
        if kwargs.get("return_indices") or (kind is PoolKind.MAX and len(args) > 6 and args[6]):
            raise info.fail("pooling with return_indices=True is not supported")
        size = arg(args, kwargs, 1, "kernel_size", None)
        stride = arg(args, kwargs, 2, "stride", None)
        padding = arg(args, kwargs, 3, "padding", 0)
        dilation = arg(args, kwargs, 4, "dilation", 1) if kind is PoolKind.MAX else 1
        return pool_layer(info, kind, size, stride, padding, dilation)

    return mapper


def _adaptive(kind: PoolKind) -> Mapper:
    return lambda info, args, kwargs: adaptive_pool(info, kind)


def _interpolate(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    return upsample_layer(info, arg(args, kwargs, 3, "mode", "nearest"))


def _mean(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    """``x.mean((2, 3), keepdim=True)``: global average pooling."""
    rank = args[0].dim()
    dims = arg(args, kwargs, 1, "dim", None)
    dims = tuple(dims) if isinstance(dims, tuple | list) else (dims,)
    spatial = set(range(2, rank))
    if {d % rank for d in dims if d is not None} != spatial or not arg(
        args, kwargs, 2, "keepdim", False
    ):
        raise info.fail(
            "mean is supported only over all spatial dims with keepdim=True",
            hint="use nn.AdaptiveAvgPool2d(1) (then flatten) for global average pooling",
        )
    return adaptive_pool(info, PoolKind.AVG)


def _pad(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    mode, value = arg(args, kwargs, 2, "mode", "constant"), arg(args, kwargs, 3, "value", None)
    return pad_layer(info, arg(args, kwargs, 1, "pad", ()), mode, value)


def _softmax(kind: str) -> Mapper:
    def mapper(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
        return softmax_layer(info, arg(args, kwargs, 1, "dim", None), kind, args[0].dim())

    return mapper


def _removed(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    return None


_COMMON: dict[str, Mapper] = {
    "relu": _act(Activation.RELU),
    "relu_": _act(Activation.RELU),
    "sigmoid": _act(Activation.SIGMOID),
    "tanh": _act(Activation.TANH),
    "abs": _act(Activation.ABS),
    "add": _eltwise(EltwiseOp.ADD),
    "sub": _eltwise(EltwiseOp.SUB),
    "mul": _eltwise(EltwiseOp.MUL),
    "flatten": _reshape,
    "reshape": _reshape,
    "mean": _mean,
    "softmax": _softmax("softmax"),
    "log_softmax": _softmax("log_softmax"),
    "argmax": _softmax("argmax"),
}

#: Functions (``call_function`` targets) -> mapper.
FUNCTION_MAPPERS: dict[Any, Mapper] = {
    **{getattr(torch, k): v for k, v in _COMMON.items() if hasattr(torch, k)},
    F.relu: _act(Activation.RELU),
    F.relu6: _act(Activation.RELU6),
    F.hardtanh: _hardtanh,
    F.leaky_relu: _leaky,
    F.sigmoid: _act(Activation.SIGMOID),
    F.tanh: _act(Activation.TANH),
    operator.abs: _act(Activation.ABS),
    operator.add: _eltwise(EltwiseOp.ADD),
    operator.iadd: _eltwise(EltwiseOp.ADD),
    operator.sub: _eltwise(EltwiseOp.SUB),
    operator.isub: _eltwise(EltwiseOp.SUB),
    operator.mul: _eltwise(EltwiseOp.MUL),
    operator.imul: _eltwise(EltwiseOp.MUL),
    torch.cat: _cat,
    torch.concat: _cat,
    torch.concatenate: _cat,
    F.max_pool1d: _pool(PoolKind.MAX),
    F.max_pool2d: _pool(PoolKind.MAX),
    F.avg_pool1d: _pool(PoolKind.AVG),
    F.avg_pool2d: _pool(PoolKind.AVG),
    F.adaptive_avg_pool1d: _adaptive(PoolKind.AVG),
    F.adaptive_avg_pool2d: _adaptive(PoolKind.AVG),
    F.adaptive_max_pool1d: _adaptive(PoolKind.MAX),
    F.adaptive_max_pool2d: _adaptive(PoolKind.MAX),
    F.interpolate: _interpolate,
    F.pad: _pad,
    F.softmax: _softmax("softmax"),
    F.log_softmax: _softmax("log_softmax"),
    F.dropout: _removed,
    F.dropout1d: _removed,
    F.dropout2d: _removed,
}

#: Tensor methods (``call_method`` targets) -> mapper.
METHOD_MAPPERS: dict[str, Mapper] = {
    **_COMMON,
    "add_": _eltwise(EltwiseOp.ADD),
    "sub_": _eltwise(EltwiseOp.SUB),
    "mul_": _eltwise(EltwiseOp.MUL),
    "view": _reshape,
    "contiguous": _removed,
    "clone": _removed,
    "detach": _removed,
}


def function_mapper(target: Any) -> Mapper | None:
    """The mapper of a ``call_function`` target, or None when unsupported."""
    try:
        return FUNCTION_MAPPERS.get(target)
    except TypeError:  # unhashable target
        return None
