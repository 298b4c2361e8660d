"""Mapping of traced ``torch.nn`` modules to model-level ``Layer`` records (docs/internal-apis.md);
``None`` for modules that compute nothing (Dropout, Identity)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from cnnforge.errors import ModelError
from cnnforge.ir import Activation, BatchNormParams, Layer, Op, Pooling, PoolKind

#: What the frontend maps, for error hints.
SUPPORTED_HINT = (
    "supported: Conv1d/2d, ConvTranspose2d, Linear, BatchNorm, ReLU/ReLU6/Hardtanh/LeakyReLU/"
    "Sigmoid/Tanh/abs, max/avg/adaptive pooling, torch.cat, +/-/*, flatten/view, "
    "Upsample/interpolate, Dropout, Identity, F.pad/ZeroPad2d, softmax/log_softmax/argmax"
)


@dataclass(frozen=True)
class NodeInfo:
    """What a mapper knows about one traced node (shapes without the batch dimension)."""

    name: str
    module_path: str
    inputs: tuple[str, ...]
    in_shapes: tuple[tuple[int, ...], ...]
    out_shape: tuple[int, ...]

    def layer(self, op: Op, **fields: object) -> Layer:
        """A Layer with this node's name, inputs, shape and path; channels from the shapes."""
        fields.setdefault("in_channels", self.in_shapes[0][0] if self.in_shapes else 0)
        fields.setdefault("out_channels", self.out_shape[0] if self.out_shape else 0)
        return Layer(
            name=self.name,
            op=op,
            inputs=self.inputs,
            out_shape=self.out_shape,
            module_path=self.module_path,
            **fields,
        )

    def fail(self, what: str, hint: str | None = None) -> ModelError:
        """A ModelError naming this node's module path."""
        return ModelError(what, where=self.module_path or self.name, hint=hint)


def unique_name(name: str, used: set[str]) -> str:
    """``name``, or ``name_1``, ``name_2``... : the first not in ``used``."""
    candidate, i = name, 0
    while candidate in used:
        i += 1
        candidate = f"{name}_{i}"
    return candidate


def to_numpy(tensor: torch.Tensor | None) -> np.ndarray | None:
    """A parameter as a float32 array: a view of its storage when already float32 (no copy
    while capturing; ``captured.owned_arrays`` copies unless the module is handed over)."""
    if tensor is None:
        return None
    array = tensor.detach().cpu().numpy()
    return array if array.dtype == np.float32 else array.astype(np.float32)


def ntuple(value: object, n: int) -> tuple[int, ...]:
    """``2`` -> ``(2, 2)``; tuples/lists pass through as ints."""
    if isinstance(value, tuple | list):
        return tuple(int(v) for v in value)
    return (int(value),) * n  # type: ignore[call-overload]


def conv_padding(module: nn.Module, info: NodeInfo, dims: int) -> tuple[int, ...]:
    """Per-side zero padding of a conv, resolving ``'same'``/``'valid'``."""
    if getattr(module, "padding_mode", "zeros") != "zeros":
        raise info.fail(
            f"padding_mode={module.padding_mode!r} is not supported", hint="use zero padding"
        )
    padding = module.padding
    if padding == "valid":
        return (0,) * dims
    if padding == "same":
        total = [d * (k - 1) for d, k in zip(module.dilation, module.kernel_size, strict=True)]
        if any(t % 2 for t in total):
            raise info.fail("padding='same' is asymmetric here", hint="give explicit padding")
        return tuple(t // 2 for t in total)
    return ntuple(padding, dims)


def _conv_fields(module: nn.Module, info: NodeInfo, dims: int) -> dict[str, object]:
    """The Layer fields common to convolutions and transposed convolutions."""
    return {
        "in_channels": module.in_channels,
        "out_channels": module.out_channels,
        "kernel_size": tuple(module.kernel_size),
        "stride": tuple(module.stride),
        "padding": conv_padding(module, info, dims),
        "dilation": tuple(module.dilation),
        "groups": module.groups,
        "weight": to_numpy(module.weight),
        "bias": to_numpy(module.bias),
    }


def map_conv(module: nn.Module, info: NodeInfo) -> Layer:
    """Conv1d/Conv2d -> CONV1D/CONV2D (weight (out, in/g, k...))."""
    dims = len(module.kernel_size)
    if dims not in (1, 2):
        raise info.fail(f"{type(module).__name__} is not supported", hint="use Conv1d or Conv2d")
    return info.layer(Op.CONV1D if dims == 1 else Op.CONV2D, **_conv_fields(module, info, dims))


def map_conv_transpose(module: nn.Module, info: NodeInfo) -> Layer:
    """ConvTranspose2d -> CONVTRANSPOSE2D (weight (in, out/g, kh, kw), output_padding)."""
    if not isinstance(module, nn.ConvTranspose2d):
        raise info.fail(f"{type(module).__name__} is not supported", hint="use ConvTranspose2d")
    output_padding = tuple(module.output_padding)
    fields = _conv_fields(module, info, 2)
    return info.layer(Op.CONVTRANSPOSE2D, output_padding=output_padding, **fields)


def map_linear(module: nn.Linear, info: NodeInfo) -> Layer:
    """Linear -> LINEAR; only on flat (C,) inputs."""
    if len(info.in_shapes[0]) != 1:
        raise info.fail(
            f"Linear applied to a {len(info.in_shapes[0]) + 1}-d tensor",
            hint="flatten before the Linear layer (x.flatten(1) or nn.Flatten())",
        )
    return info.layer(
        Op.LINEAR,
        in_channels=module.in_features,
        out_channels=module.out_features,
        weight=to_numpy(module.weight),
        bias=to_numpy(module.bias),
    )


def map_batchnorm(module: nn.modules.batchnorm._BatchNorm, info: NodeInfo) -> Layer:
    """BatchNorm1d/2d -> BATCHNORM with running statistics (eval-mode semantics)."""
    if module.running_mean is None or module.running_var is None:
        raise info.fail(
            "BatchNorm without running statistics (track_running_stats=False)",
            hint="use track_running_stats=True so the statistics can be folded",
        )
    params = BatchNormParams(
        running_mean=to_numpy(module.running_mean),
        running_var=to_numpy(module.running_var),
        eps=float(module.eps),
        weight=to_numpy(module.weight),
        bias=to_numpy(module.bias),
    )
    return info.layer(Op.BATCHNORM, batchnorm=params)


def activation(info: NodeInfo, kind: Activation, params: tuple[float, ...] = ()) -> Layer:
    """An ACTIVATION layer of ``kind``."""
    return info.layer(Op.ACTIVATION, activation=kind, activation_params=params)


def pool_layer(
    info: NodeInfo,
    kind: PoolKind,
    size: object,
    stride: object,
    padding: object = 0,
    dilation: object = 1,
) -> Layer:
    """A POOL layer; checks that floor-mode output sizes match what PyTorch computed."""
    dims = len(info.in_shapes[0]) - 1
    if dims not in (1, 2):
        raise info.fail("pooling needs a (C, L) or (C, H, W) input")
    size_t = ntuple(size, dims)
    stride_t = ntuple(stride if stride not in (None, ()) else size, dims)
    pad_t = ntuple(padding, dims)
    pool = Pooling(kind, size_t, stride_t, ntuple(dilation, dims))
    padded = tuple(n + 2 * p for n, p in zip(info.in_shapes[0][1:], pad_t, strict=True))
    if pool.output_dims(padded) != info.out_shape[1:]:
        raise info.fail(
            "pooling with ceil_mode=True changes the output size here",
            hint="use ceil_mode=False (the accelerator drops partial windows)",
        )
    return info.layer(Op.POOL, pool=pool, padding=pad_t)


def adaptive_pool(info: NodeInfo, kind: PoolKind) -> Layer:
    """AdaptiveAvg/MaxPool with an output that divides the input: a plain pool."""
    ins, outs = info.in_shapes[0][1:], info.out_shape[1:]
    if any(i % o for i, o in zip(ins, outs, strict=True)):
        raise info.fail(
            f"adaptive pooling from {ins} to {outs} has unequal windows",
            hint="choose an output size that divides the input size",
        )
    size = tuple(i // o for i, o in zip(ins, outs, strict=True))
    return pool_layer(info, kind, size, size)


def map_upsample(module: nn.Upsample, info: NodeInfo) -> Layer:
    """Upsample -> UPSAMPLE with integer scale factors taken from the traced shapes."""
    return upsample_layer(info, module.mode)


def upsample_layer(info: NodeInfo, mode: str) -> Layer:
    """UPSAMPLE layer; the scale is derived from the shapes and must be an integer."""
    ins, outs = info.in_shapes[0][1:], info.out_shape[1:]
    if any(o % i for i, o in zip(ins, outs, strict=True)):
        raise info.fail(f"upsampling {ins} to {outs} is not by an integer factor")
    scale = tuple(o // i for i, o in zip(ins, outs, strict=True))
    return info.layer(Op.UPSAMPLE, scale_factor=scale, upsample_mode=str(mode))


def pad_layer(info: NodeInfo, pad: object, mode: str = "constant", value: object = None) -> Layer:
    """F.pad / nn.ZeroPad2d / nn.ConstantPad2d -> PAD (F.pad order); other modes: an OPAQUE row."""
    amounts = tuple(int(p) for p in pad)  # type: ignore[attr-defined]
    if mode != "constant" and any(amounts):  # padding nothing is the same in every mode
        return opaque_layer(info, f"pad: mode {mode!r}")
    return info.layer(Op.PAD, pad_amounts=amounts, pad_value=float(value or 0.0))


def softmax_layer(info: NodeInfo, dim: object, kind: str, rank: int) -> Layer:
    """softmax / log_softmax / argmax over ``dim`` (with batch) -> SOFTMAX over an axis without
    batch; over the batch dim or all elements (argmax without dim): an OPAQUE row."""
    if dim is None or int(dim) % rank == 0:  # type: ignore[call-overload]
        return opaque_layer(info, f"{kind}: over dim {dim}")
    axis = int(dim) % rank - 1  # type: ignore[call-overload]
    return info.layer(Op.SOFTMAX, axis=axis, reduce_kind=kind)


def opaque_layer(info: NodeInfo, kind: str, params: tuple[torch.Tensor, ...] = ()) -> Layer:
    """An op cnnforge cannot lower (``kind``, optionally ``": why"``), kept as an OPAQUE row with
    its parameters flattened into ``weight``, so analysis never refuses a model."""
    flat = [to_numpy(p).reshape(-1) for p in params if p is not None]
    weight = np.concatenate(flat) if flat else None
    return info.layer(Op.OPAQUE, opaque_kind=kind, weight=weight)


def map_pad(module: nn.Module, info: NodeInfo) -> Layer:
    """nn.ZeroPad1d/2d, nn.ConstantPad1d/2d -> PAD; reflection/replication pads -> OPAQUE."""
    if isinstance(module, nn.ZeroPad1d | nn.ZeroPad2d | nn.ConstantPad1d | nn.ConstantPad2d):
        return pad_layer(info, module.padding, "constant", getattr(module, "value", 0.0))
    return opaque_layer(info, f"nn.{type(module).__name__}")


def map_softmax(module: nn.Module, info: NodeInfo) -> Layer:
    """nn.Softmax / nn.LogSoftmax -> SOFTMAX (dim None: PyTorch's legacy choice, dim 1 here)."""
    kind = "log_softmax" if isinstance(module, nn.LogSoftmax) else "softmax"
    rank = len(info.in_shapes[0]) + 1
    dim = module.dim if module.dim is not None else (0 if rank in (0, 1, 3) else 1)
    return softmax_layer(info, dim, kind, rank)


def map_flatten(module: nn.Flatten, info: NodeInfo) -> Layer | None:
    """nn.Flatten(1, -1) -> FLATTEN (removed when already flat)."""
    if module.start_dim != 1 or module.end_dim != -1:
        raise info.fail("Flatten other than start_dim=1, end_dim=-1", hint="flatten to (N, -1)")
    return None if len(info.in_shapes[0]) == 1 else info.layer(Op.FLATTEN)


def _pool_module(kind: PoolKind) -> Callable[[nn.Module, NodeInfo], Layer]:
    def mapper(module: nn.Module, info: NodeInfo) -> Layer:
        if getattr(module, "return_indices", False):
            raise info.fail("pooling with return_indices=True is not supported")
        dilation = getattr(module, "dilation", 1)
        return pool_layer(info, kind, module.kernel_size, module.stride, module.padding, dilation)

    return mapper


def _fixed(kind: Activation) -> Callable[[nn.Module, NodeInfo], Layer]:
    return lambda module, info: activation(info, kind)


def _removed(module: nn.Module, info: NodeInfo) -> None:
    return None


#: Module type -> mapper; checked in order with isinstance (subclasses map like their base).
MODULE_MAPPERS: tuple[tuple[tuple[type, ...], Callable[[nn.Module, NodeInfo], Layer | None]], ...]
MODULE_MAPPERS = (
    ((nn.Conv1d, nn.Conv2d, nn.Conv3d), map_conv),
    ((nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d), map_conv_transpose),
    ((nn.Linear,), map_linear),
    ((nn.BatchNorm1d, nn.BatchNorm2d), map_batchnorm),
    ((nn.ReLU6,), _fixed(Activation.RELU6)),  # before Hardtanh: ReLU6 subclasses it
    ((nn.ReLU,), _fixed(Activation.RELU)),
    ((nn.Hardtanh,), lambda m, i: activation(i, Activation.HARDTANH, (m.min_val, m.max_val))),
    ((nn.LeakyReLU,), lambda m, i: activation(i, Activation.LEAKYRELU, (m.negative_slope,))),
    ((nn.Sigmoid,), _fixed(Activation.SIGMOID)),
    ((nn.Tanh,), _fixed(Activation.TANH)),
    ((nn.MaxPool1d, nn.MaxPool2d), _pool_module(PoolKind.MAX)),
    ((nn.AvgPool1d, nn.AvgPool2d), _pool_module(PoolKind.AVG)),
    ((nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d), lambda m, i: adaptive_pool(i, PoolKind.AVG)),
    ((nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d), lambda m, i: adaptive_pool(i, PoolKind.MAX)),
    ((nn.Upsample,), map_upsample),
    ((nn.Flatten,), map_flatten),
    ((nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Identity), _removed),
    ((nn.ZeroPad1d, nn.ZeroPad2d, nn.ConstantPad1d, nn.ConstantPad2d), map_pad),
    ((nn.ReflectionPad1d, nn.ReflectionPad2d, nn.ReplicationPad1d, nn.ReplicationPad2d), map_pad),
    ((nn.Softmax, nn.LogSoftmax), map_softmax),
)


def map_module(module: nn.Module, info: NodeInfo) -> Layer | None:
    """Map one traced leaf module; ModelError naming the module for unsupported types."""
    if hasattr(module, "cnnforge_layer"):
        layer = module.cnnforge_layer(info.name, info.inputs, info.in_shapes, info.out_shape)
        return (
            layer if layer.module_path else dataclasses.replace(layer, module_path=info.module_path)
        )
    for types, mapper in MODULE_MAPPERS:
        if isinstance(module, types):
            return mapper(module, info)
    return opaque_layer(info, f"nn.{type(module).__name__}", tuple(module.parameters()))
