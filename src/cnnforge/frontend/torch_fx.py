"""PyTorch frontend: torch.fx tracing + shape propagation -> a model-level ``Network`` whose layers
are named after their module path, so every later message points at the user's code."""

from __future__ import annotations

import dataclasses
import inspect
import operator
import re
from collections import OrderedDict
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from cnnforge.errors import InputError, ModelError
from cnnforge.frontend.affine import (
    ARITHMETIC,
    affine_layer,
    normalize_layer,
    normalize_module,
    stack_reduce_layers,
    with_parameters,
)
from cnnforge.frontend.aten_ops import WEIGHT_FUNCTIONS
from cnnforge.frontend.captured import Captured, LayerLog, leaves, owned_arrays
from cnnforge.frontend.fx_functions import METHOD_MAPPERS, function_mapper
from cnnforge.frontend.fx_modules import (
    SUPPORTED_HINT,
    NodeInfo,
    map_module,
    opaque_layer,
    unique_name,
)
from cnnforge.frontend.fx_shapes import function_shape, module_shape
from cnnforge.frontend.loading import capture_failed, first_line, load_model
from cnnforge.ir import INPUT, Layer, Network, Op

__all__ = ["capture_fx", "load_model", "trace", "trace_graph"]


class _Tracer(fx.Tracer):
    """Keeps cnnforge.nn QAT modules (anything with ``cnnforge_layer``) as leaves."""

    def __init__(self, stack_traces: bool = False) -> None:
        super().__init__()
        # on a failure only (recording imports torch._dynamo, 1-2 s): the user's file:line
        self.record_stack_traces = stack_traces

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return (
            hasattr(m, "cnnforge_layer")
            or normalize_module(m) is not None
            or super().is_leaf_module(m, module_qualified_name)
        )


def trace_graph(module: nn.Module) -> fx.GraphModule:
    """Symbolically trace ``module`` (a bare leaf is wrapped, named after its class); ModelError
    naming the user's file:line when fx cannot."""
    tracer = _Tracer()
    if tracer.is_leaf_module(module, ""):
        module = nn.Sequential(OrderedDict([(type(module).__name__.lower(), module)]))
    try:
        graph = tracer.trace(module, concrete_args=_defaults(module) or None)
    except Exception as exc:
        raise capture_failed("torch.fx cannot trace", module, exc) from None
    return fx.GraphModule(module, graph, type(module).__name__)


def _defaults(module: nn.Module) -> dict[str, Any]:
    """forward()'s parameters after the input that have defaults: traced at their defaults."""
    try:
        params = list(inspect.signature(module.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


class _ShapeRecorder(fx.Interpreter):
    """Runs the graph once, keeping each node's value and concrete arguments; with ``meta=True``
    on the meta device (shapes only; fx_shapes.py formulas for common layers)."""

    def __init__(self, gm: fx.GraphModule, meta: bool) -> None:
        super().__init__(gm)
        self.meta = meta
        self.values: dict[fx.Node, Any] = {}
        self.args: dict[fx.Node, tuple[tuple[Any, ...], dict[str, Any]]] = {}

    def run_node(self, n: fx.Node) -> Any:
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        self.args[n] = (args, kwargs)
        try:
            value = super().run_node(n)
        except Exception as exc:
            if self.meta:
                raise _MetaFailed from exc
            raise InputError(
                f"shape propagation fails at {_describe(n)}: {first_line(exc)}",
                where=_module_path(n),
                hint="check --input-shape (C,H,W or C,L) against what the model expects",
            ) from None
        self.values[n] = value
        return value

    def call_module(self, target: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        if not self.meta:
            return super().call_module(target, args, kwargs)
        module = self.fetch_attr(target)
        if isinstance(module, _SAME_SHAPE) and len(args) == 1 and not kwargs:
            bn = isinstance(module, nn.modules.batchnorm._BatchNorm)
            if not bn or args[0].shape[1] == module.num_features:
                return args[0]  # shape-preserving: skip the (slow) meta kernels
        if (shape := module_shape(module, args, kwargs)) is not None:
            return torch.empty(shape, dtype=args[0].dtype, device="meta")
        tensors = chain(module.named_parameters(), module.named_buffers())
        state = {name: t.to("meta") for name, t in tensors}
        return torch.func.functional_call(module, state, tuple(args), dict(kwargs))

    def call_function(self, target: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        if self.meta and (shape := function_shape(target, args, kwargs)) is not None:
            like = next(t for t in leaves(args) if isinstance(t, torch.Tensor))
            return torch.empty(shape, dtype=like.dtype, device="meta")
        return super().call_function(target, args, kwargs)

    def get_attr(self, target: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        value = super().get_attr(target, args, kwargs)
        return value.to("meta") if self.meta and isinstance(value, torch.Tensor) else value


#: Leaf modules whose output has their input's shape (meta propagation shortcut).
_SAME_SHAPE = (
    nn.modules.batchnorm._BatchNorm,
    nn.ReLU,
    nn.ReLU6,
    nn.Hardtanh,
    nn.LeakyReLU,
    nn.Sigmoid,
    nn.Tanh,
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.Identity,
)


class _MetaFailed(Exception):
    """Shape propagation on the meta device failed: retry with real tensors."""


def _propagate(gm: fx.GraphModule, input_shape: tuple[int, ...]) -> _ShapeRecorder:
    """Shapes of every node: on the meta device when possible, else by a real zero forward."""
    floats = (p.dtype for p in gm.parameters() if p.is_floating_point())
    dtype = next(floats, torch.get_default_dtype())
    was_training = [m.training for m in gm.modules()]
    gm.eval()
    try:
        with torch.no_grad():
            for meta in (True, False):
                recorder = _ShapeRecorder(gm, meta)
                try:
                    device = "meta" if meta else None
                    recorder.run(torch.zeros((1, *input_shape), dtype=dtype, device=device))
                    return recorder
                except _MetaFailed:
                    continue
    finally:
        for m, flag in zip(gm.modules(), was_training, strict=True):
            m.training = flag
    raise AssertionError("unreachable: the real run returns or raises")


def trace(module: nn.Module, input_shape: Sequence[int], name: str | None = None) -> Network:
    """Trace ``module`` on an input of ``input_shape`` (C,H,W or C,L) into a float Network,
    unverified (commands capture through ``frontend.capture``)."""
    return owned_arrays(capture_fx(module, input_shape, name).network)


def capture_fx(module: nn.Module, input_shape: Sequence[int], name: str | None = None) -> Captured:
    """The torch.fx capture of ``module`` with what the equivalence check needs."""
    input_shape = tuple(int(n) for n in input_shape)
    if len(input_shape) not in (2, 3) or min(input_shape) <= 0:
        raise InputError(f"input shape {input_shape} must be C,H,W or C,L with positive sizes")
    gm = trace_graph(module)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder" and not n.args]
    if len(placeholders) != 1:
        raise ModelError(
            f"forward() takes {len(placeholders)} inputs",
            where=type(module).__name__,
            hint="cnnforge compiles models with exactly one input tensor",
        )
    recorder = _propagate(gm, input_shape)
    try:
        captured = _Builder(gm, recorder).captured(name or type(module).__name__, input_shape)
    except ModelError as exc:
        raise _with_user_line(module, exc) from None
    if _Tracer().is_leaf_module(module, ""):  # traced wrapped (trace_graph): all of it is used
        captured.used_params = frozenset(name for name, _ in module.named_parameters())
    return captured


class _Builder(LayerLog):
    """Walks the traced graph in order and maps each node to a Layer (or an alias)."""

    def __init__(self, gm: fx.GraphModule, recorder: _ShapeRecorder) -> None:
        self.gm = gm
        self.modules = dict(gm.named_modules())
        self.rec = recorder
        super().__init__()
        self.constants: set[fx.Node] = set()  # tensors computed without the network input
        self.multi: set[fx.Node] = set()  # nodes whose value is a tuple of tensors
        self.paid: set[fx.Node] = set()  # tuple-valued modules whose parameters are counted
        self.stacks: dict[fx.Node, list[fx.Node]] = {}  # torch.stack of feature maps
        self.real: dict[fx.Node, Any] = {}  # real values of derived constants (weights)
        self.counted: set[str] = set()  # parameters counted by a constant affine layer

    def captured(self, name: str, input_shape: tuple[int, ...]) -> Captured:
        outputs: tuple[str, ...] = ()
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self.alias[node] = INPUT
            elif node.op == "output":
                outputs = self._outputs(node)
            elif node.target is operator.getitem and node.args[0] in self.multi:
                self._map_item(node)
            elif isinstance(self.rec.values.get(node), torch.Tensor):
                self._map(node)
            elif _tensors(self.rec.values.get(node)):
                self.multi.add(node)  # chunk/split/unbind, a module returning a tuple
            elif node.op == "call_module":
                kind = type(self.modules[node.target]).__name__
                raise self._fail(node, f"module {kind} is not supported (output not one tensor)")
        network = Network(
            name, input_shape, tuple(self.layers), outputs=tuple(dict.fromkeys(outputs))
        )
        used = frozenset(name for name, _ in self.gm.named_parameters())
        return Captured(network, outputs, self.gm, lambda x: (x,), self.given, used_params=used)

    def _outputs(self, node: fx.Node) -> tuple[str, ...]:
        names = []
        for n in self._tensor_args(node):
            if n not in self.alias or self.alias[n] == INPUT:
                raise self._fail(n, "network output is not computed from the input")
            names.append(self.alias[n])
        if not names:
            raise ModelError("forward() returns no tensor", where=type(self.gm).__name__)
        return tuple(names)

    def _map_item(self, node: fx.Node) -> None:
        """``item = multi[i]``: an OPAQUE row fed by what the tuple-valued op read."""
        source = node.args[0]
        if not any(n in self.alias for n in self._tensor_args(source)):
            self.constants.add(node)
            return
        info = self._info(node, source)
        params: tuple[torch.Tensor, ...] = ()
        if source.op == "call_module" and source not in self.paid:
            params = tuple(self.modules[source.target].parameters())
            self.paid.add(source)
        layer = opaque_layer(info, f"{_op_name(source)}[{node.args[1]}]", params)
        self.add(node, layer, info.inputs[0], given=True)

    def _map(self, node: fx.Node) -> None:
        if self._stacked(node):
            return
        sources = self._tensor_args(node)
        if not any(n in self.alias for n in sources):
            self.constants.add(node)  # computed from parameters/constants only: not a layer
            return
        info = self._info(node)
        consts = tuple(self._constant_value(n) for n in sources if n in self.constants)
        if (weighted := self._weighted(node, info, sources)) is not None:
            layer: Layer | None = weighted
        elif (affine := self._affine(node, info)) is not None:
            layer = affine
        elif consts:  # a feature map combined with a parameter tensor: no IR op takes that
            layer = opaque_layer(info, _op_name(node), consts)
        else:
            try:
                layer = self._lower(node, info)
            except ModelError as exc:  # a known op in a form the IR lacks: kept, with why
                params = self.modules[node.target].parameters() if node.op == "call_module" else ()
                layer = opaque_layer(info, f"{_op_name(node)}: {exc.what}", tuple(params))
        qat = node.op == "call_module" and hasattr(self.modules[node.target], "cnnforge_layer")
        given = layer is not None and (layer.op is Op.OPAQUE or qat)
        self.add(node, layer, info.inputs[0], given)

    def _lower(self, node: fx.Node, info: NodeInfo) -> Layer | None:
        """The mapper's Layer (None: an alias of the input); OPAQUE for unknown ops."""
        if node.op == "call_module":
            module = self.modules[node.target]
            if (constants := normalize_module(module)) is not None:
                layer = normalize_layer(info, *constants)
                return layer or opaque_layer(info, f"{_op_name(node)}: mean/std per channel")
            return map_module(module, info)
        if node.op == "call_function" and (fn := function_mapper(node.target)) is not None:
            return fn(info, *self.rec.args[node])
        if node.op == "call_method" and node.target in METHOD_MAPPERS:
            return METHOD_MAPPERS[node.target](info, *self.rec.args[node])
        return opaque_layer(info, _op_name(node))

    def _stacked(self, node: fx.Node) -> bool:
        """``torch.stack`` of same-shape maps along dim 0 and its ``sum``/``mean`` (an N-input
        add); another reader of such a stack fails. False for nodes that are neither."""
        if node.op == "call_function" and node.target is torch.stack:
            items = node.args[0] if node.args else node.kwargs.get("tensors")
            dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
            if dim != 0 or not isinstance(items, list | tuple) or not items:
                return False
            if not all(isinstance(t, fx.Node) and t in self.alias for t in items):
                return False
            if len({self._shape_of(t) for t in items}) != 1:
                return False
            self.stacks[node] = list(items)
            return True
        reads = [n for n in self._tensor_args(node) if n in self.stacks]
        if not reads:
            return False
        name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        reduce = name in ("sum", "mean") and node.args[0] in self.stacks and not keep
        if reduce and dim in (0, (0,), [0]) and len(reads) == 1 and "dtype" not in node.kwargs:
            items = self.stacks[node.args[0]]
            info = NodeInfo(
                name=unique_name(node.name, self.used),
                module_path=_module_path(node),
                inputs=tuple(self.alias[t] for t in items),
                in_shapes=tuple(self._shape_of(t) for t in items),
                out_shape=self._shape_of(node),
            )
            layers = stack_reduce_layers(info, str(name))
            self.alias[node] = info.inputs[0]
            for layer in layers:
                self.add(node, layer, info.inputs[0])
            return True
        raise self._fail(
            node,
            f"{_op_name(node)} reads a torch.stack of feature maps: only "
            "stack(features).sum(dim=0) or .mean(dim=0) (an N-input add) is supported",
        )

    def _affine(self, node: fx.Node, info: NodeInfo) -> Layer | None:
        """A feature map plus/minus/times/divided by a constant (a number, or a parameter or
        buffer that is one number per channel): a constant affine layer (frontend/affine.py)."""
        if node.op not in ("call_function", "call_method") or "rounding_mode" in node.kwargs:
            return None
        name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
        kind = ARITHMETIC.get(str(name))
        if kind is None or not node.args:
            return None
        a = node.args[0]
        b = node.args[1] if len(node.args) > 1 else node.kwargs.get("other")
        first = isinstance(a, fx.Node) and a in self.alias
        feature, other = (a, b) if first else (b, a)
        if not (isinstance(feature, fx.Node) and feature in self.alias):
            return None
        params: list[torch.Tensor] = []
        if isinstance(other, fx.Node):
            if other not in self.constants:
                return None
            params = self._parameters_of(other)
            other = self._real(other)
        elif not isinstance(other, int | float) or isinstance(other, bool):
            return None
        layer = affine_layer(info, kind, other, first, node.kwargs.get("alpha", 1))
        if layer is not None:
            self.counted.update(str(n.target) for n in _attr_sources(node.args, self.constants))
        return with_parameters(layer, params)

    def _parameters_of(self, node: fx.Node) -> list[torch.Tensor]:
        """The ``nn.Parameter``s a constant operand is computed from, not yet counted."""
        found = []
        for source in _attr_sources((node,), self.constants):
            value = self._constant_value(source)
            if isinstance(value, nn.Parameter) and str(source.target) not in self.counted:
                found.append(value)
        return found

    def _weighted(self, node: fx.Node, info: NodeInfo, sources: list[fx.Node]) -> Layer | None:
        """``F.conv2d``/``F.linear`` on parameters (or constants computed from them) as the layer
        ``nn.Conv2d``/``nn.Linear`` would give, or None when ``node`` is no such call."""
        mapper = WEIGHT_FUNCTIONS.get(node.target) if node.op == "call_function" else None
        if mapper is None or not sources or sources[0] not in self.alias:
            return None
        if any(n not in self.constants for n in sources[1:]):
            return None
        real = {n: self._real(n) for n in sources[1:]}
        stack = node.meta.get("nn_module_stack") or {}
        scope = str(next(reversed(stack))) if stack else ""
        if scope and _owns_weight(self.modules.get(scope), real.get(sources[1])):
            # a conv subclass's own forward: the layer is named after the module
            info = dataclasses.replace(info, name=unique_name(scope, self.used), module_path=scope)
        args, kwargs = fx.node.map_arg(
            (node.args, node.kwargs), lambda n: real.get(n, self.rec.values.get(n))
        )
        try:
            return mapper(info, tuple(args), dict(kwargs))
        except ModelError as exc:
            return opaque_layer(info, f"{_op_name(node)}: {exc.what}", tuple(real.values()))

    def _real(self, node: fx.Node) -> Any:
        """The real value of a constant node (shape propagation may have run on meta)."""
        if node.op == "get_attr":
            return self._constant_value(node)
        if node in self.real:
            return self.real[node]
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), self._real)
        with torch.no_grad():
            if node.op == "call_function":
                value = node.target(*args, **kwargs)
            elif node.op == "call_method":
                value = getattr(args[0], str(node.target))(*args[1:], **kwargs)
            else:
                value = self.modules[str(node.target)](*args, **kwargs)
        self.real[node] = value
        return value

    def _constant_value(self, node: fx.Node) -> torch.Tensor | None:
        """A parameter/buffer operand's real tensor (None for derived constants)."""
        if node.op != "get_attr":
            return None
        value = self.gm
        for part in str(node.target).split("."):
            value = getattr(value, part)
        return value if isinstance(value, torch.Tensor) else None

    def _info(self, node: fx.Node, reads: fx.Node | None = None) -> NodeInfo:
        """What a mapper needs; ``reads``: the node whose tensor arguments feed ``node``."""
        reads = reads or node
        sources = [n for n in self._tensor_args(reads) if n in self.alias]
        return NodeInfo(
            name=unique_name(node.target if node.op == "call_module" else node.name, self.used),
            module_path=_module_path(reads),
            inputs=tuple(self.alias[n] for n in sources),
            in_shapes=tuple(self._shape_of(n) for n in sources),
            out_shape=self._shape_of(node),
        )

    def _tensor_args(self, node: fx.Node) -> list[fx.Node]:
        """The argument nodes whose values are tensors (not sizes), in argument order (a tensor
        given twice, as in ``torch.cat((x, x), 1)``, is an input twice)."""
        found: list[fx.Node] = []
        fx.node.map_arg((node.args, node.kwargs), lambda n: found.append(n) or n)
        values = self.rec.values
        return [n for n in found if isinstance(values.get(n), torch.Tensor)]

    def _shape_of(self, node: fx.Node) -> tuple[int, ...]:
        shape = tuple(self.rec.values[node].shape)
        if len(shape) < 2 or shape[0] != 1:
            raise self._fail(node, f"{_describe(node)} gives shape {shape}: batch dim lost")
        return shape[1:]

    def _fail(self, node: fx.Node, what: str) -> ModelError:
        return ModelError(what, where=_module_path(node), hint=SUPPORTED_HINT)


def _with_user_line(module: nn.Module, exc: ModelError) -> ModelError:
    """``exc`` with the user's file:line of the node it names (``where``), found by tracing
    again with stack traces recorded."""
    try:
        graph = _Tracer(stack_traces=True).trace(module, concrete_args=_defaults(module) or None)
    except Exception:
        return exc
    for node in graph.nodes:
        if _module_path(node) == exc.where and (line := _user_line(node)):
            return ModelError(f"{exc.what} (at {line})", where=exc.where, hint=exc.hint)
    return exc


def _user_line(node: fx.Node) -> str:
    """``file.py:line`` of the user's code that made ``node`` (its first recorded frame
    outside torch), or ''."""
    skip = str(Path(torch.__file__).parent)
    for match in re.finditer(r'File "([^"]+)", line (\d+)', node.stack_trace or ""):
        if not match.group(1).startswith(skip):
            return f"{match.group(1)}:{match.group(2)}"
    return ""


def _attr_sources(args: Any, constants: set[fx.Node]) -> list[fx.Node]:
    """The ``get_attr`` nodes (parameters, buffers) that constant nodes in ``args`` read."""
    seen: dict[fx.Node, None] = {}
    todo = [n for n in leaves(args) if isinstance(n, fx.Node) and n in constants]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen[node] = None
        todo.extend(n for n in node.all_input_nodes if n in constants)
    return [n for n in seen if n.op == "get_attr"]


def _module_path(node: fx.Node) -> str:
    """The PyTorch module path of a node (``enc1.0``), or ``scope/function`` for functions."""
    if node.op == "call_module":
        return str(node.target)
    stack = node.meta.get("nn_module_stack") or {}
    scope = next(reversed(stack), "") if stack else ""
    return f"{scope}/{node.name}" if scope else node.name


def _owns_weight(module: nn.Module | None, weight: Any) -> bool:
    """``module`` holds a parameter of ``weight``'s shape (its own, or standardized)."""
    if module is None or not isinstance(weight, torch.Tensor):
        return False
    own = getattr(module, "weight", None)
    return isinstance(own, torch.Tensor) and own.shape == weight.shape


def _tensors(value: Any) -> bool:
    """A non-empty tuple/list of tensors (what chunk, split or an LSTM return)."""
    return (
        isinstance(value, tuple | list)
        and bool(value)
        and all(isinstance(v, torch.Tensor) for v in value)
    )


def _op_name(node: fx.Node) -> str:
    """``nn.GroupNorm``, ``F.hardswish``, ``torch.mul``, ``Tensor.view``: for OPAQUE rows."""
    if node.op == "call_module":
        return f"nn.{type(node.graph.owning_module.get_submodule(node.target)).__name__}"
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    target = node.target
    module = getattr(target, "__module__", "") or ""
    name = getattr(target, "__name__", str(target))
    prefix = {"torch.nn.functional": "F", "_operator": "operator"}.get(module, "torch")
    return f"{prefix}.{name}"


def _describe(node: fx.Node) -> str:
    target = node.target
    if node.op == "call_function":
        target = getattr(target, "__name__", str(target))
    elif node.op == "call_method":
        target = f"Tensor.{target}"
    elif node.op == "get_attr":
        target = f"attribute {target}"
    return f"{node.op.replace('_', ' ')} {target}" if node.op != "call_module" else str(target)
