"""One width multiplier for the hidden channels, followed through the traced graph.

Inputs and the channels that reach the outputs are kept; every other conv gets
``ceil(c * m)`` channels (a multiple of 4, for legal concatenations; the same channels for the
same width, so residual adds match): below 1 its first ones, above 1 all of its own plus new
ones (``NEW``); every consumer takes the matching input channels, through concatenations
(offsets) and element-wise ops (the operands must keep the same channels). The result is a copy
of the user's module with the resized layers set in place, weights sliced from the original.
A new channel starts as a freshly initialised filter that its consumers read with zero weights,
so the widened model computes exactly what the original does: the student's starting point for
distillation.
"""

from __future__ import annotations

import contextlib
import copy
import math
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp

from cnnforge.adaptation.surgery import set_module
from cnnforge.errors import ModelError
from cnnforge.frontend.loading import first_line

Keep = tuple[int, ...]
#: A channel that widening added: no channel of the original computes it.
NEW = -1
_ATEN = torch.ops.aten
_ELTWISE = {operator.add, operator.sub, operator.mul, torch.add, torch.sub, torch.mul}
_ELTWISE |= {_ATEN.add.Tensor, _ATEN.sub.Tensor, _ATEN.mul.Tensor}
_PASS = (nn.ReLU, nn.MaxPool2d, nn.AvgPool2d, nn.Upsample, nn.Identity, nn.Dropout, nn.Dropout2d)


def hidden_width(channels: int, multiplier: float, cap: int | None = None) -> int:
    """Channels a hidden layer of ``channels`` has at ``multiplier`` (a multiple of 4 where it
    changes), at most ``cap`` (one processor pass: 64 on the MAX7800x) when given."""
    if channels <= 4:
        return channels
    wanted = channels if multiplier == 1 else max(4, 4 * math.ceil(channels * multiplier / 4))
    return min(wanted, cap or wanted)


@dataclass
class ChannelGraph:
    """The model's dataflow for narrowing: graph nodes in order, the module path of each node
    that calls a layer with parameters, and the weight layers whose channels reach an output."""

    nodes: list[fx.Node]
    paths: dict[fx.Node, str]
    params: set[fx.Node] = field(default_factory=set)
    fixed: set[str] = field(default_factory=set)


def channel_graph(model: nn.Module, input_shape: Sequence[int]) -> ChannelGraph:
    """torch.fx's graph of ``model``, else torch.export's (fx cannot follow MONAI's BasicUNet)."""
    from cnnforge.frontend.torch_fx import trace_graph

    model = copy.deepcopy(model).eval()
    x = torch.zeros(1, *input_shape)
    try:
        with _tensor_isinstance():
            gm = trace_graph(model)
        ShapeProp(gm).propagate(x)
        paths = {n: str(n.target) for n in gm.graph.nodes if n.op == "call_module"}
        graph = ChannelGraph(list(gm.graph.nodes), paths)
    except Exception:
        graph = _export_graph(model, x)
    graph.fixed = _output_weights(graph, model)
    return graph


def _export_graph(model: nn.Module, x: torch.Tensor) -> ChannelGraph:
    try:
        ep = torch.export.export(model, (x,), strict=False)
    except Exception as exc:
        raise ModelError(
            f"width: neither torch.fx nor torch.export follows the model ({first_line(exc)})"
        ) from None
    sig = ep.graph_signature
    owner = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
    nodes = list(ep.graph_module.graph.nodes)
    params = {n for n in nodes if n.op == "placeholder" and n.name in owner}
    paths = {}
    for n in nodes:
        used = [a for a in _tensor_args(n) if a in params]
        if n.op == "call_function" and used:
            paths[n] = owner[used[0].name].rpartition(".")[0]
    return ChannelGraph(nodes, paths, params)


def narrow(
    model: nn.Module,
    multiplier: float,
    input_shape: Sequence[int],
    cap: int | None = None,
    graph: ChannelGraph | None = None,
) -> tuple[nn.Module, dict[str, Keep]]:
    """A copy of ``model`` at ``multiplier`` (hidden layers at most ``cap`` channels) and, per
    module path, the original channel behind each output one (``NEW``); ``graph``: shared."""
    model = copy.deepcopy(model).eval()
    if multiplier == 1 and cap is None:
        return model, {}
    graph = graph or channel_graph(model, input_shape)
    keep: dict[fx.Node, Keep | None] = {}
    done: dict[str, Keep] = {}
    for node in graph.nodes:
        if node.op == "placeholder":
            keep[node] = None if node in graph.params else _all(node)
        elif node in graph.paths:
            keep[node] = _module(model, node, graph, keep, (multiplier, cap), done)
        elif node.op in ("call_function", "call_method"):
            keep[node] = _function(node, keep)
        elif node.op == "output":
            for arg in _tensor_args(node):
                if keep.get(arg) not in (None, _all(arg)):
                    raise ModelError("width: an output lost channels", where=str(arg))
        else:
            keep[node] = None
    try:
        with torch.no_grad():
            model(torch.zeros(1, *input_shape))
    except Exception as exc:
        raise ModelError(f"width: the narrowed model does not run ({first_line(exc)})") from None
    return model, done


@contextlib.contextmanager
def _tensor_isinstance() -> Iterator[None]:
    """While tracing: ``torch.jit.isinstance(proxy, torch.Tensor)`` is True (MONAI's UpCat
    concatenates its skip only behind that test; fx would drop the branch)."""
    original = torch.jit.isinstance

    def patched(obj: object, target: object) -> bool:
        if isinstance(obj, fx.Proxy):
            return target is torch.Tensor
        return original(obj, target)

    torch.jit.isinstance = patched
    try:
        yield
    finally:
        torch.jit.isinstance = original


def _channels(node: fx.Node) -> int | None:
    meta = node.meta.get("tensor_meta", node.meta.get("val"))
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


def _output_weights(graph: ChannelGraph, model: nn.Module) -> set[str]:
    """Paths of the weight layers whose output channels reach a model output unchanged."""
    out: set[str] = set()
    stack = [n for n in graph.nodes if n.op == "output"]
    seen: set[fx.Node] = set()
    while stack:
        node = stack.pop()
        for arg in _tensor_args(node):
            if arg in seen or arg in graph.params:
                continue
            seen.add(arg)
            path = graph.paths.get(arg)
            if path is not None and _is_weight(model.get_submodule(path)):
                out.add(path)
            else:
                stack.append(arg)
    return out


def _is_weight(m: nn.Module) -> bool:
    return isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Conv1d, nn.Linear))


def _first(channels: int, count: int) -> Keep:
    """The first ``count`` channels, then new ones: equal widths keep equal channels, so
    residual adds of resized tensors still add matching channels."""
    return tuple(range(min(channels, count))) + (NEW,) * max(0, count - channels)


def _take(values: torch.Tensor, dim: int, keep: Keep, fill: torch.Tensor) -> torch.Tensor:
    """``values`` indexed along ``dim`` by ``keep``; a ``NEW`` entry takes ``fill``'s slice."""
    count = values.shape[dim]
    index = torch.tensor([i if i != NEW else count + j for j, i in enumerate(keep)])
    return torch.cat([values, fill], dim).index_select(dim, index)


def _resized(shape: torch.Size, dim: int, size: int) -> tuple[int, ...]:
    return tuple(size if d == dim else n for d, n in enumerate(shape))


def _fresh(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A conv weight of ``shape`` initialised as torch initialises a new conv's."""
    new = torch.empty(shape, dtype=dtype)
    nn.init.kaiming_uniform_(new, a=math.sqrt(5))
    return new


def _module(model, node, graph, keep, width, done) -> Keep | None:
    path = graph.paths[node]
    m = model.get_submodule(path)
    fixed = graph.fixed
    src = keep.get(node.args[0]) if node.args else None
    if path in done:  # a module called twice must see the same channels
        return done[path]
    if isinstance(m, _PASS) or src is None:
        return src if not _is_weight(m) else _all(node)
    if isinstance(m, (nn.Conv2d, nn.Conv1d, nn.ConvTranspose2d)):
        new, out = _conv(m, src, path in fixed, width)
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


def _conv(m: nn.Module, src: Keep, fixed: bool, width) -> tuple[nn.Module, Keep]:
    """``m`` reading the channels ``src`` (a new input channel is read with zero weights) and
    writing its kept ones (a new output channel: a freshly initialised filter, bias 0)."""
    transposed = isinstance(m, nn.ConvTranspose2d)
    new = copy.deepcopy(m)
    w = m.weight.detach()
    if m.groups == m.in_channels == m.out_channels and m.groups > 1:  # depthwise
        out = src
        w = _take(w, 0, src, _fresh(_resized(w.shape, 0, len(src)), w.dtype))
        new.groups = len(src)
    elif m.groups == 1:
        count = m.out_channels if fixed else hidden_width(m.out_channels, *width)
        out = _first(m.out_channels, count)
        o, i = (1, 0) if transposed else (0, 1)
        w = _take(w, i, src, w.new_zeros(_resized(w.shape, i, len(src))))
        w = _take(w, o, out, _fresh(_resized(w.shape, o, len(out)), w.dtype))
    else:
        raise ModelError("width: grouped convolutions are kept as they are", where=str(m))
    new.weight = nn.Parameter(w)
    if m.bias is not None:
        b = m.bias.detach()
        new.bias = nn.Parameter(_take(b, 0, out, torch.zeros(len(out), dtype=b.dtype)))
    new.in_channels, new.out_channels = len(src), len(out)
    return new, out


def _per_channel(values: torch.Tensor, src: Keep, fill: float) -> torch.Tensor:
    """A per-channel vector at ``src`` (a new channel gets ``fill``: torch's own default)."""
    return _take(values.detach(), 0, src, torch.full((len(src),), fill, dtype=values.dtype))


def _batchnorm(m: nn.Module, src: Keep) -> nn.Module:
    new = copy.deepcopy(m)
    new.num_features = len(src)
    if m.affine:
        new.weight = nn.Parameter(_per_channel(m.weight, src, 1.0))
        new.bias = nn.Parameter(_per_channel(m.bias, src, 0.0))
    if m.running_mean is not None:
        new.running_mean = _per_channel(m.running_mean, src, 0.0)
        new.running_var = _per_channel(m.running_var, src, 1.0)
    return new


def _prelu(m: nn.PReLU, src: Keep) -> nn.Module:
    if m.num_parameters == 1:
        return m
    new = copy.deepcopy(m)
    new.weight = nn.Parameter(_per_channel(m.weight, src, 0.25))
    new.num_parameters = len(src)
    return new


def _function(node: fx.Node, keep: dict) -> Keep | None:
    args = _tensor_args(node)
    if node.target is getattr:  # x.shape (smp's decoder reads sizes): no channels
        return None
    if node.target is operator.getitem:  # one output of a tuple (export's batch norm)
        src = keep.get(args[0])
        return src if src is not None and len(src) == (_channels(node) or -1) else None
    if node.target in (torch.cat, torch.concat, "cat", _ATEN.cat.default):
        dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
        ndim = len(node.meta.get("tensor_meta", node.meta.get("val")).shape)
        if dim % ndim == 1:
            out: list[int] = []
            offset = 0
            for a in args:
                out += [offset + i if i != NEW else NEW for i in keep[a]]
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
