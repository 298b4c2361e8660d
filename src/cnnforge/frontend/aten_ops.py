"""Mapping of ATen operators (``torch.export``'s graph) to model-level ``Layer`` records, reusing
the torch.fx mappers where the arguments match; unmapped forms stay OPAQUE rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from cnnforge.frontend import fx_functions as fxf
from cnnforge.frontend.fx_modules import (
    NodeInfo,
    activation,
    ntuple,
    pad_layer,
    to_numpy,
    upsample_layer,
)
from cnnforge.ir import Activation, BatchNormParams, Layer, Op

arg = fxf.arg


def _conv(
    info: NodeInfo,
    x: Any,
    weight: Any,
    bias: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    transposed: bool,
    output_padding: Any,
    groups: int,
) -> Layer:
    if not isinstance(weight, torch.Tensor) or weight.device.type == "meta":
        raise info.fail("convolution with a weight computed from the input")
    dims = weight.dim() - 2
    if dims not in (1, 2) or (transposed and dims != 2):
        raise info.fail(f"{dims}-d {'transposed ' if transposed else ''}convolution")
    kernel = tuple(weight.shape[2:])
    dilation_t = ntuple(dilation, dims)
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        else:
            total = [d * (k - 1) for d, k in zip(dilation_t, kernel, strict=True)]
            if any(t % 2 for t in total):
                raise info.fail("padding='same' is asymmetric here")
            padding = [t // 2 for t in total]
    groups = int(groups)
    if transposed:
        c_in, c_out = weight.shape[0], weight.shape[1] * groups
    else:
        c_in, c_out = weight.shape[1] * groups, weight.shape[0]
    fields: dict[str, Any] = {
        "in_channels": int(c_in),
        "out_channels": int(c_out),
        "kernel_size": kernel,
        "stride": ntuple(stride, dims),
        "padding": ntuple(padding, dims),
        "dilation": dilation_t,
        "groups": groups,
        "weight": to_numpy(weight),
        "bias": to_numpy(bias) if isinstance(bias, torch.Tensor) else None,
    }
    if transposed:
        return info.layer(Op.CONVTRANSPOSE2D, output_padding=ntuple(output_padding, dims), **fields)
    return info.layer(Op.CONV1D if dims == 1 else Op.CONV2D, **fields)


def _conv_nd(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    """aten.conv1d/conv2d(input, weight, bias, stride, padding, dilation, groups)."""
    a = [arg(args, kwargs, i, n, d) for i, (n, d) in enumerate(_CONV_ARGS)]
    return _conv(info, a[0], a[1], a[2], a[3], a[4], a[5], False, 0, a[6])


_CONV_ARGS = (
    ("input", None),
    ("weight", None),
    ("bias", None),
    ("stride", 1),
    ("padding", 0),
    ("dilation", 1),
    ("groups", 1),
)


def _conv_transpose(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    """aten.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dil)."""
    bias, stride = arg(args, kwargs, 2, "bias", None), arg(args, kwargs, 3, "stride", 1)
    padding, out_pad = arg(args, kwargs, 4, "padding", 0), arg(args, kwargs, 5, "output_padding", 0)
    groups, dilation = arg(args, kwargs, 6, "groups", 1), arg(args, kwargs, 7, "dilation", 1)
    return _conv(info, args[0], args[1], bias, stride, padding, dilation, True, out_pad, groups)


def _convolution(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    """aten.convolution(input, weight, bias, stride, padding, dilation, transposed, out_pad, g)."""
    return _conv(info, *args[:9])


def _linear(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    weight, bias = args[1], arg(args, kwargs, 2, "bias", None)
    if len(info.in_shapes[0]) != 1:
        raise info.fail(f"Linear applied to a {len(info.in_shapes[0]) + 1}-d tensor")
    if not isinstance(weight, torch.Tensor) or weight.device.type == "meta":
        raise info.fail("linear with a weight computed from the input")
    return info.layer(
        Op.LINEAR,
        in_channels=int(weight.shape[1]),
        out_channels=int(weight.shape[0]),
        weight=to_numpy(weight),
        bias=to_numpy(bias) if isinstance(bias, torch.Tensor) else None,
    )


def _bn(info: NodeInfo, x: Any, weight: Any, bias: Any, mean: Any, var: Any, eps: Any) -> Layer:
    if not isinstance(mean, torch.Tensor) or not isinstance(var, torch.Tensor):
        raise info.fail("batch norm without running statistics")
    params = BatchNormParams(
        running_mean=to_numpy(mean),
        running_var=to_numpy(var),
        eps=float(eps),
        weight=to_numpy(weight) if isinstance(weight, torch.Tensor) else None,
        bias=to_numpy(bias) if isinstance(bias, torch.Tensor) else None,
    )
    return info.layer(Op.BATCHNORM, batchnorm=params)


def _batch_norm(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    """aten.batch_norm(input, w, b, mean, var, training, momentum, eps, cudnn)."""
    if arg(args, kwargs, 5, "training", False):
        raise info.fail("batch norm in training mode")
    return _bn(info, *args[:5], arg(args, kwargs, 7, "eps", 1e-5))


def _bn_no_training(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    """aten._native_batch_norm_legit_no_training(input, w, b, mean, var, momentum, eps)."""
    return _bn(info, *args[:5], arg(args, kwargs, 6, "eps", 1e-5))


def _functional_batch_norm(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    """F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    on a module's own statistics (timm's BatchNormAct2d)."""
    a = [arg(args, kwargs, i, n, None) for i, n in enumerate(_F_BN_ARGS)]
    if a[5]:
        raise info.fail("batch norm in training mode")
    return _bn(info, a[0], a[3], a[4], a[1], a[2], a[7] if a[7] is not None else 1e-5)


_F_BN_ARGS = (
    "input",
    "running_mean",
    "running_var",
    "weight",
    "bias",
    "training",
    "momentum",
    "eps",
)


def _clamp(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    low, high = arg(args, kwargs, 1, "min", None), arg(args, kwargs, 2, "max", None)
    if isinstance(low, torch.Tensor) or isinstance(high, torch.Tensor):
        raise info.fail("clamp to tensor bounds")
    if low is not None and high is None and float(low) == 0.0:
        return activation(info, Activation.RELU)
    if low is None or high is None:
        raise info.fail("one-sided clamp other than at 0")
    if (float(low), float(high)) == (0.0, 6.0):
        return activation(info, Activation.RELU6)
    return activation(info, Activation.HARDTANH, (float(low), float(high)))


def _constant_pad(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
    """aten.constant_pad_nd(input, pad, value)."""
    return pad_layer(info, args[1], "constant", arg(args, kwargs, 2, "value", 0.0))


def _upsample(mode: str, corners_at: int | None) -> fxf.Mapper:
    def mapper(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> Layer:
        if corners_at is not None and arg(args, kwargs, corners_at, "align_corners", False):
            raise info.fail(f"{mode} upsampling with align_corners=True")
        return upsample_layer(info, mode)

    return mapper


def _alias(info: NodeInfo, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """Ops that compute nothing in eval mode (dropout, copies, contiguous)."""
    if info.out_shape != info.in_shapes[0]:
        raise info.fail(f"copy changes the shape {info.in_shapes[0]} to {info.out_shape}")
    return None


#: ATen op name (``overloadpacket.__name__``) -> mapper.
ATEN_MAPPERS: dict[str, fxf.Mapper] = {
    "conv1d": _conv_nd,
    "conv2d": _conv_nd,
    "conv_transpose2d": _conv_transpose,
    "convolution": _convolution,
    "_convolution": _convolution,
    "linear": _linear,
    "batch_norm": _batch_norm,
    "_native_batch_norm_legit_no_training": _bn_no_training,
    "relu": fxf.FUNCTION_MAPPERS[torch.relu],
    "relu6": lambda info, args, kwargs: activation(info, Activation.RELU6),
    "hardtanh": fxf.FUNCTION_MAPPERS[torch.nn.functional.hardtanh],
    "leaky_relu": fxf.FUNCTION_MAPPERS[torch.nn.functional.leaky_relu],
    "sigmoid": fxf.FUNCTION_MAPPERS[torch.sigmoid],
    "tanh": fxf.FUNCTION_MAPPERS[torch.tanh],
    "abs": fxf.FUNCTION_MAPPERS[torch.abs],
    "clamp": _clamp,
    "clamp_min": _clamp,
    "add": fxf.FUNCTION_MAPPERS[torch.add],
    "sub": fxf.FUNCTION_MAPPERS[torch.sub],
    "mul": fxf.FUNCTION_MAPPERS[torch.mul],
    "cat": fxf.FUNCTION_MAPPERS[torch.cat],
    "concat": fxf.FUNCTION_MAPPERS[torch.cat],
    "max_pool1d": fxf.FUNCTION_MAPPERS[torch.nn.functional.max_pool1d],
    "max_pool2d": fxf.FUNCTION_MAPPERS[torch.nn.functional.max_pool2d],
    "max_pool2d_with_indices": fxf.FUNCTION_MAPPERS[torch.nn.functional.max_pool2d],
    "avg_pool1d": fxf.FUNCTION_MAPPERS[torch.nn.functional.avg_pool1d],
    "avg_pool2d": fxf.FUNCTION_MAPPERS[torch.nn.functional.avg_pool2d],
    "adaptive_avg_pool1d": fxf.FUNCTION_MAPPERS[torch.nn.functional.adaptive_avg_pool1d],
    "adaptive_avg_pool2d": fxf.FUNCTION_MAPPERS[torch.nn.functional.adaptive_avg_pool2d],
    "_adaptive_avg_pool2d": fxf.FUNCTION_MAPPERS[torch.nn.functional.adaptive_avg_pool2d],
    "adaptive_max_pool2d": fxf.FUNCTION_MAPPERS[torch.nn.functional.adaptive_max_pool2d],
    "mean": fxf.FUNCTION_MAPPERS[torch.mean],
    "flatten": fxf.FUNCTION_MAPPERS[torch.flatten],
    "view": fxf.FUNCTION_MAPPERS[torch.reshape],
    "reshape": fxf.FUNCTION_MAPPERS[torch.reshape],
    "_unsafe_view": fxf.FUNCTION_MAPPERS[torch.reshape],
    "upsample_nearest1d": _upsample("nearest", None),
    "upsample_nearest2d": _upsample("nearest", None),
    "upsample_bilinear2d": _upsample("bilinear", 2),
    "upsample_linear1d": _upsample("linear", 2),
    "pad": fxf.FUNCTION_MAPPERS[torch.nn.functional.pad],
    "constant_pad_nd": _constant_pad,
    "softmax": fxf.FUNCTION_MAPPERS[torch.nn.functional.softmax],
    "_softmax": fxf.FUNCTION_MAPPERS[torch.nn.functional.softmax],
    "log_softmax": fxf.FUNCTION_MAPPERS[torch.nn.functional.log_softmax],
    "_log_softmax": fxf.FUNCTION_MAPPERS[torch.nn.functional.log_softmax],
    "argmax": fxf.FUNCTION_MAPPERS[torch.argmax],
    "dropout": _alias,
    "feature_dropout": _alias,
    "clone": _alias,
    "contiguous": _alias,
    "detach": _alias,
    "alias": _alias,
    "lift_fresh_copy": _alias,
    "_to_copy": _alias,
    "to": _alias,
}


#: ``torch.conv2d`` & co. called with a module's own weight (torch.fx's ``call_function``
#: targets; ``F.conv2d is torch.conv2d``): mapped like the ATen op of the same name.
WEIGHT_FUNCTIONS: dict[Any, fxf.Mapper] = {
    torch.conv1d: _conv_nd,
    torch.conv2d: _conv_nd,
    torch.conv_transpose2d: _conv_transpose,
    torch.nn.functional.linear: _linear,
    torch.nn.functional.batch_norm: _functional_batch_norm,
}
