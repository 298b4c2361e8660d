"""Output shapes of common CNN layers by formula (meta kernels cost 1-2 s to warm up); anything a
formula rejects runs its meta kernel, and the eager check catches any wrong formula."""

from __future__ import annotations

import inspect
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cnnforge.frontend.affine import normalize_module

Shape = tuple[int, ...]


def module_shape(module: nn.Module, args: Sequence[Any], kwargs: dict[str, Any]) -> Shape | None:
    """The output shape of leaf ``module`` on ``args`` (one tensor), or None; exact torch classes
    only, since a subclass may compute another shape."""
    if len(args) != 1 or kwargs or not isinstance(args[0], torch.Tensor):
        return None
    x, kind = args[0], type(module)
    if kind in (nn.Conv1d, nn.Conv2d, nn.ConvTranspose1d, nn.ConvTranspose2d):
        return _conv(module, x)
    if kind is nn.Linear:
        return _linear(x, module.in_features, module.out_features)
    if kind in (nn.MaxPool1d, nn.MaxPool2d, nn.AvgPool1d, nn.AvgPool2d):
        return _module_pool(module, x)
    if kind in _ADAPTIVE:
        if getattr(module, "return_indices", False):
            return None
        return _adaptive(x, module.output_size, 1 if kind in _ADAPTIVE_1D else 2)
    if kind in (nn.Upsample, nn.UpsamplingNearest2d, nn.UpsamplingBilinear2d):
        return _interpolate(x, module.size, module.scale_factor)
    if kind is nn.GroupNorm:
        return _shape(x) if x.dim() >= 2 and x.shape[1] == module.num_channels else None
    if kind in (nn.InstanceNorm1d, nn.InstanceNorm2d):
        return _shape(x) if x.dim() >= 3 and x.shape[1] == module.num_features else None
    if kind in _SAME_SHAPE_MODULES or normalize_module(module) is not None:
        return _shape(x)
    return None


def function_shape(target: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Shape | None:
    """The output shape of ``target(*args, **kwargs)`` (a torch or operator function), or None."""
    try:
        if target in _BINARY:
            return _binary(args, kwargs)
        if target in _UNARY:
            return _unary(target, args, kwargs)
        if target in _CAT:
            return _cat(*args, **kwargs)
        if target is F.interpolate:
            bound = _INTERPOLATE.bind(*args, **kwargs)
            x, size, scale = (bound.arguments.get(k) for k in ("input", "size", "scale_factor"))
            if bound.arguments.get("recompute_scale_factor") or not isinstance(x, torch.Tensor):
                return None
            return _interpolate(x, size, scale)
    except TypeError:  # arguments that do not bind: torch's kernel says what is wrong
        return None
    return None


def _shape(x: torch.Tensor) -> Shape:
    return tuple(int(n) for n in x.shape)


def _positive(shape: Sequence[int]) -> Shape | None:
    """``shape`` when every size is at least 1 (else the meta kernel raises torch's error)."""
    return tuple(shape) if all(n >= 1 for n in shape) else None


def _ntuple(value: Any, n: int) -> tuple[int, ...] | None:
    if isinstance(value, int):
        return (value,) * n
    if isinstance(value, tuple | list) and len(value) == n:
        return tuple(value) if all(isinstance(v, int) for v in value) else None
    return None


def _conv(m: nn.Module, x: torch.Tensor) -> Shape | None:
    """PyTorch's conv / transposed conv output size, per spatial dim (docs of nn.Conv2d)."""
    n = len(m.kernel_size)
    padding = _ntuple(m.padding, n)  # 'same' / 'valid' strings: the meta kernel
    if x.dim() != n + 2 or x.shape[1] != m.in_channels or padding is None:
        return None
    sizes = []
    for i, size in enumerate(x.shape[2:]):
        k, s, p, d = m.kernel_size[i], m.stride[i], padding[i], m.dilation[i]
        if isinstance(m, nn.ConvTranspose1d | nn.ConvTranspose2d):
            sizes.append((size - 1) * s - 2 * p + d * (k - 1) + m.output_padding[i] + 1)
        else:
            sizes.append((size + 2 * p - d * (k - 1) - 1) // s + 1)
    return _positive((x.shape[0], m.out_channels, *sizes))


def _linear(x: torch.Tensor, features_in: int, features_out: int) -> Shape | None:
    if x.dim() < 1 or x.shape[-1] != features_in:
        return None
    return _positive((*x.shape[:-1], features_out))


def _module_pool(m: nn.Module, x: torch.Tensor) -> Shape | None:
    n = 1 if isinstance(m, nn.MaxPool1d | nn.AvgPool1d) else 2
    if getattr(m, "return_indices", False):
        return None
    stride = m.stride if m.stride is not None and m.stride != [] else m.kernel_size
    return _pool(x, n, m.kernel_size, stride, m.padding, getattr(m, "dilation", 1), m.ceil_mode)


def _pool(
    x: torch.Tensor, n: int, kernel: Any, stride: Any, padding: Any, dilation: Any, ceil: bool
) -> Shape | None:
    """aten pooling_output_shape: floor (or ceil, with no window starting in the right
    padding) of (size + 2 pad - dilation (kernel - 1) - 1) / stride, plus one."""
    k, s, p, d = (_ntuple(v, n) for v in (kernel, stride, padding, dilation))
    if x.dim() != n + 2 or k is None or s is None or p is None or d is None:
        return None
    if any(2 * pad > kk for pad, kk in zip(p, k, strict=True)) or min(s) < 1:
        return None  # torch refuses padding over half the kernel: its message
    sizes = []
    for size, kk, ss, pp, dd in zip(x.shape[2:], k, s, p, d, strict=True):
        out = (size + 2 * pp - dd * (kk - 1) - 1 + (ss - 1 if ceil else 0)) // ss + 1
        if ceil and (out - 1) * ss >= size + pp:
            out -= 1
        sizes.append(out)
    return _positive((*x.shape[:2], *sizes))


def _adaptive(x: torch.Tensor, output_size: Any, n: int) -> Shape | None:
    sizes = (output_size,) * n if isinstance(output_size, int) else tuple(output_size)
    if x.dim() != n + 2 or len(sizes) != n:
        return None
    out = [int(x.shape[2 + i]) if s is None else s for i, s in enumerate(sizes)]
    if not all(isinstance(s, int) for s in out):
        return None
    return _positive((*x.shape[:2], *out))


def _interpolate(x: torch.Tensor, size: Any, scale: Any) -> Shape | None:
    """F.interpolate's output size: ``size``, else floor(size * scale) per spatial dim."""
    n = x.dim() - 2
    if n not in (1, 2) or (size is None) == (scale is None):
        return None
    if size is not None:
        sizes = _ntuple(size, n)
    elif isinstance(scale, int | float):
        sizes = tuple(math.floor(float(d) * float(scale)) for d in x.shape[2:])
    elif isinstance(scale, tuple | list) and len(scale) == n:
        pairs = zip(x.shape[2:], scale, strict=True)
        sizes = tuple(math.floor(float(d) * float(f)) for d, f in pairs)
    else:
        return None
    return None if sizes is None else _positive((*x.shape[:2], *sizes))


def _binary(args: Sequence[Any], kwargs: dict[str, Any]) -> Shape | None:
    """Element-wise ops on two tensors of one shape, or a tensor and a Python number."""
    if len(args) != 2 or set(kwargs) - {"alpha"}:
        return None
    a, b = args
    tensors = [t for t in (a, b) if isinstance(t, torch.Tensor)]
    numbers = [v for v in (a, b) if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(tensors) + len(numbers) != 2 or not tensors:
        return None
    if len(tensors) == 2 and (a.shape != b.shape or a.dtype != b.dtype):
        return None  # broadcasting, type promotion: the meta kernel
    return _shape(tensors[0])


def _unary(target: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Shape | None:
    """Shape-preserving functions of one tensor whose other arguments are Python numbers."""
    if not args or not isinstance(args[0], torch.Tensor):
        return None
    rest = (*args[1:], *kwargs.values())
    if not all(v is None or isinstance(v, int | float) for v in rest):
        return None  # tensor bounds, dtypes, bad arguments: the meta kernel
    x = args[0]
    if target in _SOFTMAX:
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        if not isinstance(dim, int) or not -max(x.dim(), 1) <= dim < max(x.dim(), 1):
            return None
    if target is torch.clamp and all(v is None for v in rest):
        return None  # torch refuses a clamp without bounds
    return _shape(x)


def _cat(tensors: Any, dim: int = 0, **kwargs: Any) -> Shape | None:
    if kwargs or not isinstance(tensors, tuple | list) or not tensors:
        return None
    if not all(isinstance(t, torch.Tensor) for t in tensors) or not isinstance(dim, int):
        return None
    first = tensors[0]
    rank = first.dim()
    if rank == 0 or not -rank <= dim < rank:
        return None
    dim %= rank
    rest = [s for i, s in enumerate(first.shape) if i != dim]
    for t in tensors[1:]:
        if t.dim() != rank or t.dtype != first.dtype:
            return None
        if [s for i, s in enumerate(t.shape) if i != dim] != rest:
            return None
    total = sum(int(t.shape[dim]) for t in tensors)
    return (*_shape(first)[:dim], total, *_shape(first)[dim + 1 :])


_ADAPTIVE_1D = (nn.AdaptiveAvgPool1d, nn.AdaptiveMaxPool1d)
_ADAPTIVE = (*_ADAPTIVE_1D, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)

#: Modules whose output has their input's shape.
_SAME_SHAPE_MODULES = (
    nn.Softmax,
    nn.LogSoftmax,
    nn.Hardswish,
    nn.Hardsigmoid,
    nn.SiLU,
    nn.GELU,
    nn.ELU,
    nn.Softplus,
    nn.Mish,
)

_BINARY: frozenset[Callable[..., Any]] = frozenset(
    {operator.add, operator.sub, operator.mul, operator.truediv, operator.iadd,
     operator.isub, operator.imul, torch.add, torch.sub, torch.mul, torch.div}
)

_UNARY: frozenset[Callable[..., Any]] = frozenset(
    {torch.relu, torch.sigmoid, torch.tanh, torch.abs, torch.clamp, torch.softmax,
     torch.log_softmax, F.relu, F.relu6, F.leaky_relu, F.hardtanh, F.sigmoid, F.tanh,
     F.elu, F.silu, F.gelu, F.hardswish, F.hardsigmoid, F.softmax, F.log_softmax, F.dropout}
)

_SOFTMAX = frozenset({torch.softmax, torch.log_softmax, F.softmax, F.log_softmax})

_CAT: frozenset[Callable[..., Any]] = frozenset({torch.cat, torch.concat, torch.concatenate})

_INTERPOLATE = inspect.signature(F.interpolate)
