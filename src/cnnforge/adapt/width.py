"""One width multiplier for the hidden channels, followed through the traced graph.

Inputs and the channels that reach the outputs are kept; every other conv keeps the
``ceil(c * m)`` channels (a multiple of 4, for legal concatenations) with the largest L1 norms,
and every consumer keeps the matching input channels, through concatenations (offsets) and
element-wise ops (the operands must keep the same channels). The result is a copy of the user's
module with the narrowed layers set in place, weights sliced from the original (the student's
starting point for distillation).
"""

from __future__ import annotations

import copy
import math
import operator
from collections.abc import Sequence

import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp

from cnnforge.adapt.surgery import set_module
from cnnforge.errors import ModelError

Keep = tuple[int, ...]
_ELTWISE = {operator.add, operator.sub, operator.mul, torch.add, torch.sub, torch.mul}
_PASS = (nn.ReLU, nn.MaxPool2d, nn.AvgPool2d, nn.Upsample, nn.Identity, nn.Dropout, nn.Dropout2d)


def hidden_width(channels: int, multiplier: float) -> int:
    """Channels a hidden layer of ``channels`` keeps at ``multiplier`` (multiple of 4)."""
    if multiplier >= 1 or channels <= 4:
        return channels
    return min(channels, max(4, 4 * math.ceil(channels * multiplier / 4)))


def narrow(
    model: nn.Module, multiplier: float, input_shape: Sequence[int]
) -> tuple[nn.Module, dict[str, Keep]]:
    """A copy of ``model`` at ``multiplier``; the kept output channels per module path."""
    from cnnforge.frontend.torch_fx import trace_graph

    model = copy.deepcopy(model).eval()
    if multiplier >= 1:
        return model, {}
    gm = trace_graph(model)
    ShapeProp(gm).propagate(torch.zeros(1, *input_shape))
    fixed = _output_weights(gm)
    keep: dict[fx.Node, Keep | None] = {}
    done: dict[str, Keep] = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            keep[node] = _all(node)
        elif node.op == "call_module":
            keep[node] = _module(model, node, keep, fixed, multiplier, done)
        elif node.op in ("call_function", "call_method"):
            keep[node] = _function(node, keep)
        elif node.op == "output":
            for arg in _tensor_args(node):
                if keep.get(arg) not in (None, _all(arg)):
                    raise ModelError("width: an output lost channels", where=str(arg))
        else:
            keep[node] = None
    return model, done


def _channels(node: fx.Node) -> int | None:
    meta = node.meta.get("tensor_meta")
    shape = getattr(meta, "shape", None)
    return int(shape[1]) if shape is not None and len(shape) >= 2 else None


def _all(node: fx.Node) -> Keep | None:
    c = _channels(node)
    return None if c is None else tuple(range(c))


def _tensor_args(node: fx.Node) -> list[fx.Node]:
    flat: list = []
    for a in list(node.args) + list(node.kwargs.values()):
        flat.extend(a if isinstance(a, (list, tuple)) else [a])
    return [a for a in flat if isinstance(a, fx.Node)]


def _output_weights(gm: fx.GraphModule) -> set[str]:
    """Paths of the weight layers whose output channels reach a model output unchanged."""
    out: set[str] = set()
    stack = [n for n in gm.graph.nodes if n.op == "output"]
    seen: set[fx.Node] = set()
    while stack:
        node = stack.pop()
        for arg in _tensor_args(node):
            if arg in seen:
                continue
            seen.add(arg)
            if arg.op == "call_module" and _is_weight(gm.get_submodule(arg.target)):
                out.add(str(arg.target))
            else:
                stack.append(arg)
    return out


def _is_weight(m: nn.Module) -> bool:
    return isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Conv1d, nn.Linear))


def _top(weight: torch.Tensor, dim: int, count: int) -> Keep:
    norms = weight.detach().abs().transpose(0, dim).reshape(weight.shape[dim], -1).sum(1)
    return tuple(sorted(torch.argsort(norms, descending=True)[:count].tolist()))


def _module(model, node, keep, fixed, multiplier, done) -> Keep | None:
    path = str(node.target)
    m = model.get_submodule(path)
    src = keep.get(node.args[0]) if node.args else None
    if path in done:  # a module called twice must see the same channels
        return done[path]
    if isinstance(m, _PASS) or src is None:
        return src if not _is_weight(m) else _all(node)
    if isinstance(m, (nn.Conv2d, nn.Conv1d, nn.ConvTranspose2d)):
        new, out = _conv(m, src, path in fixed, multiplier)
    elif isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
        new, out = _batchnorm(m, src), src
    elif isinstance(m, nn.PReLU):
        new, out = _prelu(m, src), src
    elif len(src) == _channels(node):
        return src  # element-wise module (activation): the channels pass
    else:
        raise ModelError(f"width: cannot narrow through {type(m).__name__}", where=path)
    set_module(model, path, new)
    done[path] = out
    return out


def _conv(m: nn.Module, src: Keep, fixed: bool, multiplier: float) -> tuple[nn.Module, Keep]:
    transposed = isinstance(m, nn.ConvTranspose2d)
    new = copy.deepcopy(m)
    w = m.weight.detach()
    if m.groups == m.in_channels == m.out_channels and m.groups > 1:  # depthwise
        out = src
        new.weight = nn.Parameter(w[list(src)].clone())
        new.groups = len(src)
    elif m.groups == 1:
        count = m.out_channels if fixed else hidden_width(m.out_channels, multiplier)
        out = _top(w, 1 if transposed else 0, count)
        w = w[list(src)][:, list(out)] if transposed else w[list(out)][:, list(src)]
        new.weight = nn.Parameter(w.clone())
    else:
        raise ModelError("width: grouped convolutions are kept as they are", where=str(m))
    if m.bias is not None:
        new.bias = nn.Parameter(m.bias.detach()[list(out)].clone())
    new.in_channels, new.out_channels = len(src), len(out)
    return new, out


def _batchnorm(m: nn.Module, src: Keep) -> nn.Module:
    new = copy.deepcopy(m)
    idx = list(src)
    new.num_features = len(src)
    if m.affine:
        new.weight = nn.Parameter(m.weight.detach()[idx].clone())
        new.bias = nn.Parameter(m.bias.detach()[idx].clone())
    if m.running_mean is not None:
        new.running_mean = m.running_mean[idx].clone()
        new.running_var = m.running_var[idx].clone()
    return new


def _prelu(m: nn.PReLU, src: Keep) -> nn.Module:
    if m.num_parameters == 1:
        return m
    new = copy.deepcopy(m)
    new.weight = nn.Parameter(m.weight.detach()[list(src)].clone())
    new.num_parameters = len(src)
    return new


def _function(node: fx.Node, keep: dict) -> Keep | None:
    args = _tensor_args(node)
    if node.target in (torch.cat, torch.concat, "cat"):
        dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
        ndim = len(node.meta["tensor_meta"].shape)
        if dim % ndim == 1:
            out: list[int] = []
            offset = 0
            for a in args:
                out += [offset + i for i in keep[a]]
                offset += _channels(a)
            return tuple(out)
    keeps = {keep.get(a) for a in args if keep.get(a) is not None}
    if node.target in _ELTWISE or len(keeps) <= 1:
        if len(keeps) > 1:
            raise ModelError(
                "width: element-wise operands keep different channels", where=node.name
            )
        first = next(iter(keeps), None)
        if first is None or _channels(node) == _channels(args[0]):
            return first if _channels(node) is not None else None
    raise ModelError(f"width: cannot follow channels through {node.target}", where=node.name)
