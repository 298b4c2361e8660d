"""The export frontend: ``torch.export.export(..., strict=False)`` -> a model-level ``Network``;
the fallback where torch.fx's symbolic trace takes a branch eager does not."""

from __future__ import annotations

import contextlib
import io
import logging
import operator
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx as fx
from torch import nn
from torch.export.graph_signature import InputKind, OutputKind

from cnnforge.errors import ModelError
from cnnforge.frontend.affine import ARITHMETIC, affine_layer, stack_reduce_layers, with_parameters
from cnnforge.frontend.aten_ops import ATEN_MAPPERS
from cnnforge.frontend.captured import Captured, LayerLog, leaves
from cnnforge.frontend.fx_modules import NodeInfo, opaque_layer, unique_name
from cnnforge.frontend.loading import capture_failed
from cnnforge.ir import INPUT, Layer, Network, Op


def export_program(module: nn.Module, x: torch.Tensor) -> torch.export.ExportedProgram:
    """``torch.export.export(module, (x,), strict=False)``; ModelError naming file:line."""
    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)  # torch logs guard warnings and prints graphs on failures
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return torch.export.export(module, (x,), strict=False)
    except Exception as exc:
        raise capture_failed("torch.export cannot capture", module, exc) from None
    finally:
        logging.disable(previous)


def capture_export(
    module: nn.Module, input_shape: Sequence[int], name: str, x: torch.Tensor | None = None
) -> Captured:
    """Export ``module`` on ``x`` (default zeros) of ``input_shape``; lower it to a Network."""
    if x is None:
        floats = (p.dtype for p in module.parameters() if p.is_floating_point())
        dtype = next(floats, torch.get_default_dtype())
        x = torch.zeros((1, *input_shape), dtype=dtype)
    program = export_program(module, x)
    return _ExportBuilder(program).captured(name, tuple(input_shape))


class _ExportBuilder(LayerLog):
    """Walks the exported graph in order and maps each ATen node to a Layer (or an alias)."""

    def __init__(self, program: torch.export.ExportedProgram) -> None:
        self.program = program
        self.graph = program.graph_module
        super().__init__()
        self.constants: dict[fx.Node, Any] = {}  # parameters, buffers and what they compute
        self.params: set[fx.Node] = set()
        self.param_names: dict[fx.Node, str] = {}  # parameter placeholder -> its module path
        self.stacks: dict[fx.Node, list[fx.Node]] = {}  # aten.stack of feature maps
        self.counted: set[fx.Node] = set()  # parameters counted by a constant affine layer

    def captured(self, name: str, input_shape: tuple[int, ...]) -> Captured:
        specs = self.program.graph_signature.input_specs
        placeholders = [n for n in self.graph.graph.nodes if n.op == "placeholder"]
        for spec, node in zip(specs, placeholders, strict=True):
            if spec.kind is InputKind.USER_INPUT:
                self.alias[node] = INPUT
            else:
                self.constants[node] = self._lifted(spec)
                if spec.kind is InputKind.PARAMETER:
                    self.params.add(node)
                    self.param_names[node] = str(spec.target)
        outputs: list[str] = []
        for node in self.graph.graph.nodes:
            if node.op == "call_function":
                self._map(node)
            elif node.op == "output":
                outputs = self._outputs(node)
        network = Network(
            name, input_shape, tuple(self.layers), outputs=tuple(dict.fromkeys(outputs))
        )
        used = frozenset(
            str(spec.target)
            for spec, node in zip(specs, placeholders, strict=True)
            if spec.kind is InputKind.PARAMETER and node.users
        )
        return Captured(
            network,
            tuple(outputs),
            self.graph,
            self._graph_args,
            self.given,
            "torch.export",
            used_params=used,
        )

    def _lifted(self, spec: Any) -> Any:
        """The real tensor behind a lifted parameter/buffer/constant placeholder."""
        target = spec.target
        if target in self.program.state_dict:
            return self.program.state_dict[target]
        return self.program.constants.get(target)

    def _graph_args(self, x: torch.Tensor) -> tuple[Any, ...]:
        args = []
        for spec in self.program.graph_signature.input_specs:
            args.append(x if spec.kind is InputKind.USER_INPUT else self._lifted(spec))
        return tuple(args)

    def _outputs(self, node: fx.Node) -> list[str]:
        specs = self.program.graph_signature.output_specs
        names = []
        for spec, value in zip(specs, leaves(node.args[0]), strict=False):
            if spec.kind is not OutputKind.USER_OUTPUT or not isinstance(value, fx.Node):
                continue
            if value not in self.alias or self.alias[value] == INPUT:
                raise ModelError("network output is not computed from the input", where=value.name)
            names.append(self.alias[value])
        if not names:
            raise ModelError("forward() returns no tensor computed from its input")
        return names

    def _map(self, node: fx.Node) -> None:
        if node.target is operator.getitem:
            self._getitem(node)
            return
        found: list[fx.Node] = []  # in argument order, a tensor given twice counted twice
        fx.node.map_arg((node.args, node.kwargs), lambda n: found.append(n) or n)
        feeds = [n for n in found if n in self.alias]
        op = getattr(getattr(node.target, "overloadpacket", None), "__name__", str(node.target))
        if self._stacked(node, op):
            return
        if not feeds:
            self._constant(node)
            return
        value = _first_tensor(node.meta.get("val"))
        if value is None:
            return  # sizes, asserts: no feature map
        info = self._info(node, feeds, value)
        inplace = op.endswith("_") and not op.startswith("_") and not op.endswith("__")
        op = op[:-1] if inplace else op  # relu_, leaky_relu_, add_: what they compute
        kind = _UPSAMPLE_NAMES.get(op, f"aten.{op}")  # one name per op, as torch.fx's
        params = tuple(self.constants[n] for n in node.all_input_nodes if n in self.params)
        mapper = ATEN_MAPPERS.get(op)
        if len(feeds) == 1 and op in ARITHMETIC and (affine := self._affine(node, info, op)):
            layer: Layer | None = affine
        elif mapper is None:
            layer = opaque_layer(info, kind, params)
        else:
            args, kwargs = self._concrete(node)
            try:
                layer = mapper(info, args, kwargs)
            except ModelError as exc:
                layer = opaque_layer(info, f"{kind}: {exc.what}", params)
        self.add(node, layer, info.inputs[0], layer is not None and layer.op is Op.OPAQUE)
        if inplace and feeds:  # later readers of the mutated tensor see the result
            self.alias[feeds[0]] = self.alias[node]

    def _stacked(self, node: fx.Node, op: str) -> bool:
        """``aten.stack`` of same-shape maps along dim 0 and its ``sum``/``mean`` (an N-input
        add); another reader of such a stack fails. False for nodes that are neither."""
        if op == "stack":
            items = node.args[0]
            dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
            if dim != 0 or not all(isinstance(t, fx.Node) and t in self.alias for t in items):
                return False
            shapes = {self._shape(t, _first_tensor(t.meta.get("val"))) for t in items}
            if len(shapes) != 1:
                return False
            self.stacks[node] = list(items)
            return True
        reads = [n for n in node.all_input_nodes if n in self.stacks]
        if not reads:
            return False
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        source = node.args[0]
        if op in ("sum", "mean") and source in self.stacks and list(dim or ()) == [0] and not keep:
            items = self.stacks[source]
            value = node.meta["val"]
            info = self._info(node, items, value)
            for layer in stack_reduce_layers(info, op):
                self.add(node, layer, info.inputs[0])
            self.alias.setdefault(node, info.inputs[0])
            return True
        raise ModelError(
            f"aten.{op} reads a torch.stack of feature maps: only stack(features).sum(dim=0) "
            "or .mean(dim=0) (an N-input add) is supported",
            where=self._info(node, [], node.meta["val"]).module_path,
        )

    def _affine(self, node: fx.Node, info: NodeInfo, op: str) -> Layer | None:
        """A feature map and a constant (a number, or one number per channel) combined by
        add/sub/mul/div: a constant affine layer (frontend/affine.py)."""
        args, kwargs = self._concrete(node)
        if len(args) < 2 or "rounding_mode" in kwargs:
            return None
        first = node.args[0] in self.alias
        other = args[1] if first else args[0]
        if isinstance(other, torch.Tensor) and other.device.type == "meta":
            return None
        layer = affine_layer(info, ARITHMETIC[op], other, first, kwargs.get("alpha", 1))
        if layer is None:
            return None
        sources = self._parameter_sources(node.args[1] if first else node.args[0])
        self.counted.update(sources)
        return with_parameters(layer, [self.constants[n] for n in sources])

    def _parameter_sources(self, value: Any) -> list[fx.Node]:
        """The parameter placeholders a constant operand is computed from, not yet counted."""
        seen: dict[fx.Node, None] = {}
        todo = [value] if isinstance(value, fx.Node) and value in self.constants else []
        while todo:
            node = todo.pop()
            if node not in seen:
                seen[node] = None
                todo.extend(n for n in node.all_input_nodes if n in self.constants)
        return [n for n in seen if n in self.params and n not in self.counted]

    def _getitem(self, node: fx.Node) -> None:
        source, index = node.args
        if source in self.alias and index == 0:
            self.alias[node] = self.alias[source]  # (output, indices/statistics...)[0]
        elif source in self.alias and isinstance(node.meta.get("val"), torch.Tensor):
            feeds = [source]  # indices, a second chunk: an OPAQUE row after element 0's layer
            info = self._info(node, feeds, node.meta["val"])
            self.add(node, opaque_layer(info, "operator.getitem"), info.inputs[0], given=True)
        elif source in self.constants:
            self.constants[node] = _index(self.constants[source], index)

    def _constant(self, node: fx.Node) -> None:
        """A node computed without the network input: evaluated for real where possible."""
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda n: self.constants.get(n))
        try:
            with torch.no_grad():
                self.constants[node] = node.target(*args, **kwargs)
        except Exception:
            self.constants[node] = node.meta.get("val")

    def _concrete(self, node: fx.Node) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Arguments with feature maps as their fake values and constants as real tensors."""

        def value(n: fx.Node) -> Any:
            return self.constants[n] if n in self.constants else n.meta.get("val")

        args, kwargs = fx.node.map_arg((node.args, node.kwargs), value)
        return tuple(args), dict(kwargs)

    def _info(self, node: fx.Node, feeds: list[fx.Node], value: torch.Tensor) -> NodeInfo:
        stack = node.meta.get("nn_module_stack") or {}
        path, cls = next(reversed(stack.values())) if stack else ("", "")
        path = str(path)
        leaf = str(cls).startswith("torch.nn.modules.") or self._own_weight(node, path)
        leaf = leaf and path not in self.used
        return NodeInfo(
            name=unique_name(path if leaf and path else node.name, self.used),
            module_path=path if leaf else (f"{path}/{node.name}" if path else node.name),
            inputs=tuple(self.alias[n] for n in feeds),
            in_shapes=tuple(self._shape(n, _first_tensor(n.meta.get("val"))) for n in feeds),
            out_shape=self._shape(node, value),
        )

    def _own_weight(self, node: fx.Node, path: str) -> bool:
        """``node`` reads the ``weight`` parameter of the module at ``path`` (a conv subclass
        with its own forward calling F.conv2d): named after that module."""
        return bool(path) and any(
            self.param_names.get(n) == f"{path}.weight" for n in node.all_input_nodes
        )

    def _shape(self, node: fx.Node, value: Any) -> tuple[int, ...]:
        if self.alias.get(node) == INPUT and value is None:
            value = node.meta.get("val")
        shape = tuple(int(s) for s in value.shape)
        if len(shape) < 2 or shape[0] != 1:
            raise ModelError(f"{node.name} gives shape {shape}: batch dim lost", where=node.name)
        return shape[1:]


#: ATen upsampling ops, named as the torch.fx frontend and check name them.
_UPSAMPLE_NAMES = {
    "upsample_nearest1d": "upsample nearest",
    "upsample_nearest2d": "upsample nearest",
    "upsample_bilinear2d": "upsample bilinear",
    "upsample_bicubic2d": "upsample bicubic",
    "upsample_linear1d": "upsample linear",
}


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, tuple | list) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    return None


def _index(value: Any, index: Any) -> Any:
    try:
        return value[index]
    except Exception:
        return None
