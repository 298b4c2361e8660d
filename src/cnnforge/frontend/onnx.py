"""ONNX in: a ``.onnx`` file (shapes by ONNX inference at ``-i``) to the same model-level
``Network`` as the PyTorch path; ops the device lacks become OPAQUE layers that ``check`` names."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from cnnforge.errors import InputError, ModelError
from cnnforge.ir import (
    INPUT,
    Activation,
    BatchNormParams,
    EltwiseOp,
    Layer,
    Network,
    Op,
    Pooling,
    PoolKind,
)

_ACTIVATIONS = {
    "Relu": Activation.RELU,
    "Sigmoid": Activation.SIGMOID,
    "Tanh": Activation.TANH,
    "Abs": Activation.ABS,
}
_ELTWISE = {"Add": EltwiseOp.ADD, "Sub": EltwiseOp.SUB, "Mul": EltwiseOp.MUL}
_PASS = frozenset({"Identity", "Dropout"})
#: The ``_Importer`` method mapping each ONNX op (activations and element-wise ops aside).
_MAPPERS = {
    "Conv": "_conv",
    "ConvTranspose": "_conv",
    "BatchNormalization": "_batchnorm",
    "LeakyRelu": "_leaky_relu",
    "Clip": "_clip",
    "MaxPool": "_pool",
    "AveragePool": "_pool",
    "GlobalAveragePool": "_global_pool",
    "GlobalMaxPool": "_global_pool",
    "Concat": "_concat",
    "Resize": "_resize",
    "Upsample": "_resize",
    "Gemm": "_linear",
    "MatMul": "_linear",
    "Flatten": "_flatten",
    "Reshape": "_flatten",
    "Pad": "_pad",
    "Softmax": "_softmax",
    "LogSoftmax": "_softmax",
}


def is_onnx_spec(spec: str) -> bool:
    """True when a MODEL argument names an ONNX file."""
    return str(spec).lower().endswith(".onnx")


def load_onnx(path: str | Path, input_shape: Sequence[int] | None) -> Network:
    """Read ``path``, map its graph to a model-level float ``Network`` and check that network
    against onnxruntime on a seeded input (frontend/onnx_check.py): a mismatch is an error."""
    from cnnforge.frontend.onnx_check import check_against_onnxruntime

    network, tensors = read_onnx(path, input_shape)
    check_against_onnxruntime(Path(path), network, tensors)
    return network


def read_onnx(
    path: str | Path, input_shape: Sequence[int] | None
) -> tuple[Network, dict[str, str]]:
    """The unchecked import of ``load_onnx`` and, per layer, the ONNX tensor it computes (for
    the equivalence check against onnxruntime, which feeds OPAQUE layers their values)."""
    import onnx

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such ONNX file")
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # protobuf DecodeError and friends: truncated or not ONNX
        raise InputError(
            f"{path}: not a readable ONNX model ({type(exc).__name__})",
            hint="the file is truncated or not ONNX; export it again",
        ) from None
    importer = _Importer(model, path)
    network = importer.network(input_shape)
    return network, dict(importer.tensor_of)


class _Importer:
    """Maps the nodes of one ONNX graph, in order, to ``Layer`` records."""

    def __init__(self, model: Any, path: Path) -> None:
        self.model, self.path = model, path
        graph = model.graph
        if not graph.node:
            raise InputError(f"{path}: the ONNX graph has no nodes")
        self.const: dict[str, np.ndarray] = {}
        for init in graph.initializer:
            self.const[init.name] = _array(init)
        # Constants that are the model's parameters (initializers and what is folded from them),
        # not values the exporter wrote (a non-affine norm's ones and zeros, shapes).
        self.params: set[str] = set(self.const)
        self.tensor_of: dict[str, str] = {}  # layer name -> the ONNX tensor it computes
        self.skip: set[int] = set()  # nodes taken into a pattern's layer (GroupNorm)
        inputs = [i for i in graph.input if i.name not in self.const]
        if len(inputs) != 1:
            raise ModelError(
                f"the graph takes {len(inputs)} inputs",
                where=str(path),
                hint="cnnforge compiles models with exactly one input tensor",
            )
        self.input = inputs[0]
        self.alias: dict[str, str] = {self.input.name: INPUT}
        self.layers: list[Layer] = []
        self.names: set[str] = {INPUT}
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.readers: dict[str, int] = {}
        for node in graph.node:
            for name in node.input:
                self.readers[name] = self.readers.get(name, 0) + 1
        for out in graph.output:
            self.readers[out.name] = self.readers.get(out.name, 0) + 1

    def _infer(self, input_shape: Sequence[int] | None) -> tuple[int, ...]:
        import onnx

        dims = self.input.type.tensor_type.shape.dim
        declared = [d.dim_value if d.HasField("dim_value") else None for d in dims]
        if input_shape is None:
            if len(declared) < 3 or any(d is None for d in declared[1:]):
                raise InputError(
                    f"{self.path}: the input {self.input.name!r} has dynamic sizes {declared}",
                    hint="give --input-shape C,H,W",
                )
            shape = tuple(int(d) for d in declared[1:])
        else:
            shape = tuple(int(n) for n in input_shape)
            fixed = declared[1:]
            if len(fixed) != len(shape) or any(
                d not in (None, 0, s) for d, s in zip(fixed, shape, strict=True)
            ):
                raise InputError(
                    f"{self.path}: --input-shape {shape} does not match the model's input "
                    f"{declared}",
                    hint="leave -i out, or give the model's own C,H,W",
                )
        if declared and declared[0] not in (None, 0, 1):
            raise InputError(f"{self.path}: batch size {declared[0]}", hint="export with batch 1")
        for d, n in zip(dims, (1, *shape), strict=True):
            d.Clear()
            d.dim_value = n
        try:
            inferred = onnx.shape_inference.infer_shapes(self.model, data_prop=True)
        except Exception as exc:
            raise ModelError(
                f"ONNX shape inference failed: {str(exc).splitlines()[0][:200]}",
                where=str(self.path),
            ) from None
        for info in (*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input):
            tdims = info.type.tensor_type.shape.dim
            if all(d.HasField("dim_value") for d in tdims):
                self.shapes[info.name] = tuple(int(d.dim_value) for d in tdims)
        return shape

    def _shape(self, tensor: str, node: Any) -> tuple[int, ...]:
        shape = self.shapes.get(tensor)
        if shape is None:
            raise ModelError(
                f"the shape of {tensor!r} is unknown after shape inference",
                where=self._where(node),
                hint="export with static shapes, or give --input-shape",
            )
        if not shape or shape[0] != 1:
            raise ModelError(
                f"{tensor!r} has shape {shape}: batch dim lost", where=self._where(node)
            )
        return shape[1:]

    def network(self, input_shape: Sequence[int] | None) -> Network:
        import onnx

        for node in self.model.graph.node:
            domain = node.domain or ""
            if domain not in ("", "ai.onnx") or not onnx.defs.has(node.op_type, domain):
                raise ModelError(
                    f"unknown ONNX op {domain + '.' if domain else ''}{node.op_type}",
                    where=self._where(node),
                    hint="only standard ONNX operators can be imported",
                )
        nodes = self._fold_constants()
        self.reader_nodes: dict[str, list[Any]] = {}
        for node in nodes:
            for name in dict.fromkeys(node.input):
                self.reader_nodes.setdefault(name, []).append(node)
        shape = self._infer(input_shape)
        for node in nodes:
            self._node(node)
        outputs = []
        for out in self.model.graph.output:
            if out.name not in self.alias:
                raise ModelError(
                    f"graph output {out.name!r} is not a feature map", where=str(self.path)
                )
            outputs.append(self.alias[out.name])
        return Network(
            self.path.stem, shape, tuple(self.layers), outputs=tuple(dict.fromkeys(outputs))
        )

    def _where(self, node: Any) -> str:
        return f"{self.path.name}: node {node.name or node.op_type}"

    def _fold_constants(self) -> list[Any]:
        """Turn nodes computing on constants only into initializers (so shape inference sees
        them); return the nodes left, in order."""
        from onnx import numpy_helper

        left, folded = [], []
        for node in self.model.graph.node:
            if node.op_type == "Constant":
                self.const[node.output[0]] = _constant(node)
            elif all(name in self.const for name in node.input if name):
                self._fold(node)
            else:
                left.append(node)
                continue
            folded += [o for o in node.output if o in self.const]
        if folded:
            graph = self.model.graph
            graph.initializer.extend(numpy_helper.from_array(self.const[n], n) for n in folded)
            del graph.node[:]
            graph.node.extend(left)
        return left

    def _node(self, node: Any) -> None:
        if id(node) in self.skip:
            return
        op = node.op_type
        data = [t for t in node.input if t and t in self.alias]
        if op in ("Shape", "Size") and data:  # static after shape inference: a constant
            self.const[node.output[0]] = self._shape_value(node, data[0], _attributes(node))
            return
        if not data and all(t in self.const for t in node.input if t):
            self._fold(node)  # size arithmetic on a Shape's value
            return
        if not data:
            raise ModelError(f"{op} reads no feature map", where=self._where(node))
        if op in _PASS:
            self.alias[node.output[0]] = self.alias[data[0]]
            return
        if op in ("Mul", "Div") and self._scale_batchnorm(node, data):
            return
        if op == "Reshape" and self._group_norm(node, data):
            return
        layer = self._map(node, op, data)
        self._add(node, layer)

    def _fold(self, node: Any) -> None:
        """A node on constants only (shape arithmetic of an unfolded export): evaluate it with
        ONNX's reference implementation."""
        from onnx.reference import ReferenceEvaluator

        feeds = {name: self.const[name] for name in node.input if name}
        try:
            results = ReferenceEvaluator(node).run(None, feeds)
        except Exception as exc:
            raise ModelError(
                f"{node.op_type} on constants cannot be evaluated ({type(exc).__name__})",
                where=self._where(node),
                hint="export with constant folding on (do_constant_folding=True)",
            ) from None
        for name, value in zip(node.output, results, strict=False):
            self.const[name] = np.asarray(value)
            if any(t in self.params for t in node.input):
                self.params.add(name)

    def _scale_batchnorm(self, node: Any, data: list[str]) -> bool:
        """Fold ``bn(y) * c`` or ``bn(y) / c`` (c a constant scalar) into the BatchNorm's gamma and
        beta, as cnnforge.nn's ``bn(y) / 4`` (R6.5); True when done."""
        constants = [t for t in node.input if t in self.const]
        if (
            len(data) != 1
            or len(constants) != 1
            or (node.op_type == "Div" and data[0] != node.input[0])
        ):
            return False
        value = np.asarray(self.const[constants[0]], dtype=np.float64)
        layer = self.layers[-1] if self.layers else None
        if (
            value.size != 1
            or not np.isfinite(value).all()
            or float(value.reshape(())) == 0.0
            or layer is None
            or layer.op is not Op.BATCHNORM
            or self.alias[data[0]] != layer.name
            or self.readers.get(data[0], 0) != 1
        ):
            return False
        c = float(value.reshape(()))
        factor = 1.0 / c if node.op_type == "Div" else c
        bn = layer.batchnorm
        assert bn is not None
        ones = np.ones_like(np.asarray(bn.running_mean, dtype=np.float32))
        gamma = ones if bn.weight is None else np.asarray(bn.weight)
        beta = 0 * ones if bn.bias is None else np.asarray(bn.bias)
        scaled = replace(
            bn, weight=(gamma * factor).astype(gamma.dtype), bias=(beta * factor).astype(beta.dtype)
        )
        self.layers[-1] = replace(layer, batchnorm=scaled)
        self.alias[node.output[0]] = layer.name
        self.tensor_of[layer.name] = node.output[0]
        return True

    def _sole_reader(self, tensor: str, op: str) -> Any | None:
        readers = self.reader_nodes.get(tensor, [])
        if len(readers) != 1 or readers[0].op_type != op or self.readers.get(tensor, 0) != 1:
            return None
        return readers[0]

    def _group_norm(self, node: Any, data: list[str]) -> bool:
        """torch's ``nn.GroupNorm`` export (Reshape -> InstanceNormalization -> Reshape -> Mul ->
        Add) as one OPAQUE ``onnx.GroupNormalization`` row with gamma and beta; True if found."""
        norm = self._sole_reader(node.output[0], "InstanceNormalization")
        back = norm and self._sole_reader(norm.output[0], "Reshape")
        if back is None or len(data) != 1 or set(norm.input[1:]) & self.params:
            return False
        x_shape = self.shapes.get(data[0])
        if x_shape is None or self.shapes.get(back.output[0]) != x_shape:
            return False
        chain, last, params = [norm, back], back.output[0], []
        for op in ("Mul", "Add"):
            step = self._sole_reader(last, op)
            other = step and [t for t in step.input if t != last]
            if not other or len(other) != 1 or other[0] not in self.params:
                break
            value = self.const[other[0]]
            if value.size != x_shape[1] or self.shapes.get(step.output[0]) != x_shape:
                break
            chain.append(step)
            params.append(value.reshape(-1))
            last = step.output[0]
        layer = self._layer(
            back,
            Op.OPAQUE,
            data,
            opaque_kind="onnx.GroupNormalization",
            weight=np.concatenate(params).astype(np.float32) if params else None,
        )
        layer = replace(layer, out_shape=self._shape(last, back))
        self.skip.update(id(n) for n in chain)
        self._add(back, layer, last)
        return True

    def _add(self, node: Any, layer: Layer, output: str | None = None) -> None:
        output = output or node.output[0]
        self.layers.append(layer)
        self.names.add(layer.name)
        self.alias[output] = layer.name
        self.tensor_of[layer.name] = output

    def _name(self, node: Any) -> str:
        base = _module_path(node)
        name, i = base, 0
        while name in self.names:
            i += 1
            name = f"{base}_{i}"
        return name

    def _layer(self, node: Any, op: Op, data: list[str], **fields: Any) -> Layer:
        in_shape = self._shape(data[0], node)
        out_shape = self._shape(node.output[0], node)
        fields.setdefault("in_channels", in_shape[0])
        fields.setdefault("out_channels", out_shape[0] if out_shape else 0)
        return Layer(
            name=self._name(node),
            op=op,
            inputs=tuple(self.alias[t] for t in data),
            out_shape=out_shape,
            module_path=_module_path(node),
            **fields,
        )

    def _shape_value(self, node: Any, tensor: str, attrs: dict) -> np.ndarray:
        full = (1, *self._shape(tensor, node))
        if node.op_type == "Size":
            return np.array(math.prod(full), dtype=np.int64)
        start, end = attrs.get("start", 0), attrs.get("end", len(full))
        return np.array(full[start:end], dtype=np.int64)

    def _opaque(self, node: Any, data: list[str]) -> Layer:
        """An OPAQUE row; its floating-point constant inputs are kept (flattened) as its
        parameters, so parameter counts stay exact as on the PyTorch path (``opaque_layer``)."""
        params = [
            self.const[t].reshape(-1)
            for t in node.input
            if t in self.params and np.issubdtype(self.const[t].dtype, np.floating)
        ]
        weight = np.concatenate(params).astype(np.float32) if params else None
        return self._layer(node, Op.OPAQUE, data, opaque_kind=f"onnx.{node.op_type}", weight=weight)

    def _constant_input(self, node: Any, index: int, what: str) -> np.ndarray | None:
        if index >= len(node.input) or not node.input[index]:
            return None
        name = node.input[index]
        if name not in self.const:
            raise ModelError(
                f"the {what} of {node.op_type} is not a constant", where=self._where(node)
            )
        return self.const[name]

    def _map(self, node: Any, op: str, data: list[str]) -> Layer:
        attrs = _attributes(node)
        if op in _ACTIVATIONS:
            return self._layer(node, Op.ACTIVATION, data, activation=_ACTIVATIONS[op])
        if op in _ELTWISE:
            return self._eltwise(node, data, attrs)
        handler = _MAPPERS.get(op)
        return (
            self._opaque(node, data)
            if handler is None
            else getattr(self, handler)(node, data, attrs)
        )

    def _batchnorm(self, node: Any, data: list[str], attrs: dict) -> Layer:
        scale, bias, mean, var = (self._constant_input(node, i, "statistics") for i in (1, 2, 3, 4))
        if not {node.input[1], node.input[2]} & self.params:  # exporter's ones/zeros
            scale = bias = None  # a non-affine BatchNorm, as on the PyTorch path
        params = BatchNormParams(mean, var, float(attrs.get("epsilon", 1e-5)), scale, bias)
        return self._layer(node, Op.BATCHNORM, data, batchnorm=params)

    def _leaky_relu(self, node: Any, data: list[str], attrs: dict) -> Layer:
        slope = (float(attrs.get("alpha", 0.01)),)
        return self._layer(
            node, Op.ACTIVATION, data, activation=Activation.LEAKYRELU, activation_params=slope
        )

    def _global_pool(self, node: Any, data: list[str], attrs: dict) -> Layer:
        dims = self._shape(data[0], node)[1:]
        kind = PoolKind.AVG if node.op_type == "GlobalAveragePool" else PoolKind.MAX
        return self._layer(
            node, Op.POOL, data, pool=Pooling(kind, dims, dims), padding=(0,) * len(dims)
        )

    def _concat(self, node: Any, data: list[str], attrs: dict) -> Layer:
        if _axis(attrs.get("axis", 1), len(self._shape(data[0], node)) + 1) != 1:
            return self._opaque(node, data)
        return self._layer(node, Op.CONCAT, data)

    def _eltwise(self, node: Any, data: list[str], attrs: dict) -> Layer:
        if len(data) != 2 or self._shape(data[0], node) != self._shape(data[1], node):
            return self._opaque(node, data)
        return self._layer(node, Op.ELTWISE, data, eltwise=_ELTWISE[node.op_type])

    def _flatten(self, node: Any, data: list[str], attrs: dict) -> Layer:
        out = self._shape(node.output[0], node)
        if len(out) != 1 or (node.op_type == "Flatten" and attrs.get("axis", 1) != 1):
            return self._opaque(node, data)
        return self._layer(node, Op.FLATTEN, data)

    def _softmax(self, node: Any, data: list[str], attrs: dict) -> Layer:
        axis = _axis(attrs.get("axis", -1), len(self._shape(data[0], node)) + 1) - 1
        kind = "softmax" if node.op_type == "Softmax" else "log_softmax"
        return self._layer(node, Op.SOFTMAX, data, axis=axis, reduce_kind=kind)

    def _conv(self, node: Any, data: list[str], attrs: dict) -> Layer:
        transposed = node.op_type == "ConvTranspose"
        weight = self._constant_input(node, 1, "weight")
        bias = self._constant_input(node, 2, "bias")
        assert weight is not None
        dims = weight.ndim - 2
        if (
            dims not in (1, 2)
            or (transposed and dims != 2)
            or attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID")
        ):
            return self._opaque(node, data)
        pads = _symmetric(attrs.get("pads", [0] * 2 * dims), self._where(node))
        groups = int(attrs.get("group", 1))
        out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
        fields: dict[str, Any] = {
            "in_channels": weight.shape[0] if transposed else weight.shape[1] * groups,
            "out_channels": out_channels,
            "kernel_size": tuple(weight.shape[2:]),
            "stride": tuple(attrs.get("strides", [1] * dims)),
            "padding": pads,
            "dilation": tuple(attrs.get("dilations", [1] * dims)),
            "groups": groups,
            "weight": weight.astype(np.float32),
            "bias": None if bias is None else bias.astype(np.float32),
        }
        if transposed:
            fields["output_padding"] = tuple(attrs.get("output_padding", [0] * dims))
            return self._layer(node, Op.CONVTRANSPOSE2D, data, **fields)
        return self._layer(node, Op.CONV1D if dims == 1 else Op.CONV2D, data, **fields)

    def _clip(self, node: Any, data: list[str], attrs: dict) -> Layer:
        lo = self._constant_input(node, 1, "minimum")
        hi = self._constant_input(node, 2, "maximum")
        low = float(lo) if lo is not None else float(attrs.get("min", -math.inf))
        high = float(hi) if hi is not None else float(attrs.get("max", math.inf))
        if (low, high) == (0.0, 6.0):
            return self._layer(node, Op.ACTIVATION, data, activation=Activation.RELU6)
        if low == 0.0 and high == math.inf:
            return self._layer(node, Op.ACTIVATION, data, activation=Activation.RELU)
        return self._layer(
            node, Op.ACTIVATION, data, activation=Activation.HARDTANH, activation_params=(low, high)
        )

    def _pool(self, node: Any, data: list[str], attrs: dict) -> Layer:
        size = tuple(attrs["kernel_shape"])
        n = len(size)
        kind = PoolKind.MAX if node.op_type == "MaxPool" else PoolKind.AVG
        pads = _symmetric(attrs.get("pads", [0] * 2 * n), self._where(node))
        if kind is PoolKind.AVG and any(pads) and not attrs.get("count_include_pad", 0):
            return self._opaque(node, data)  # PyTorch's default divides by the padded window
        pool = Pooling(
            kind, size, tuple(attrs.get("strides", [1] * n)), tuple(attrs.get("dilations", [1] * n))
        )
        in_dims = self._shape(data[0], node)[1:]
        padded = tuple(d + 2 * p for d, p in zip(in_dims, pads, strict=True))
        if pool.output_dims(padded) != self._shape(node.output[0], node)[1:]:
            raise ModelError(
                "pooling with ceil_mode=1 changes the output size here",
                where=self._where(node),
                hint="export with ceil_mode=False (the accelerator drops partial windows)",
            )
        return self._layer(node, Op.POOL, data, pool=pool, padding=pads)

    def _resize(self, node: Any, data: list[str], attrs: dict) -> Layer:
        in_dims = self._shape(data[0], node)[1:]
        out_dims = self._shape(node.output[0], node)[1:]
        if len(in_dims) != len(out_dims) or any(
            o % i for i, o in zip(in_dims, out_dims, strict=True)
        ):
            return self._opaque(node, data)
        mode = str(attrs.get("mode", "nearest"))
        if mode == "linear":
            mode = "bilinear" if len(in_dims) == 2 else "linear"
        elif mode != "nearest":
            return self._opaque(node, data)
        scale = tuple(o // i for i, o in zip(in_dims, out_dims, strict=True))
        return self._layer(node, Op.UPSAMPLE, data, scale_factor=scale, upsample_mode=mode)

    def _linear(self, node: Any, data: list[str], attrs: dict) -> Layer:
        weight = self._constant_input(node, 1, "weight")
        if weight is None or weight.ndim != 2 or len(self._shape(data[0], node)) != 1:
            return self._opaque(node, data)
        if node.op_type == "Gemm":
            if attrs.get("transA", 0) or float(attrs.get("alpha", 1.0)) != 1.0:
                return self._opaque(node, data)
            weight = weight if attrs.get("transB", 0) else weight.T
            bias = self._constant_input(node, 2, "bias")
            if bias is not None:
                beta = float(attrs.get("beta", 1.0))
                bias = np.broadcast_to(bias * beta, (weight.shape[0],)).copy()
        else:
            weight, bias = weight.T, None
        return self._layer(
            node,
            Op.LINEAR,
            data,
            in_channels=weight.shape[1],
            out_channels=weight.shape[0],
            weight=np.ascontiguousarray(weight, dtype=np.float32),
            bias=None if bias is None else np.ascontiguousarray(bias, dtype=np.float32),
        )

    def _pad(self, node: Any, data: list[str], attrs: dict) -> Layer:
        pads = self._constant_input(node, 1, "pads")
        pads = [int(p) for p in (pads if pads is not None else attrs.get("pads", []))]
        value = self._constant_input(node, 2, "value")
        rank = len(pads) // 2
        if (
            (str(attrs.get("mode", "constant")) != "constant" and any(pads))
            or rank < 3
            or any(pads[:2])
            or any(pads[rank : rank + 2])
        ):
            return self._opaque(node, data)
        begins, ends = pads[2:rank], pads[rank + 2 :]
        amounts = tuple(
            v for b, e in zip(reversed(begins), reversed(ends), strict=True) for v in (b, e)
        )
        return self._layer(
            node,
            Op.PAD,
            data,
            pad_amounts=amounts,
            pad_value=float(value) if value is not None else 0.0,
        )


def _module_path(node: Any) -> str:
    """The PyTorch module path in an exported node name (``/enc1/enc1.0/Conv`` -> ``enc1.0``),
    else the node's name (or its output's) with ``/`` as ``.``."""
    parts = [p for p in (node.name or "").split("/") if p]
    if len(parts) >= 2 and parts[-1].split("_")[0] == node.op_type:
        return parts[-2]
    return ".".join(parts) or node.output[0] or node.op_type


def _array(tensor: Any) -> np.ndarray:
    from onnx import numpy_helper

    return np.array(numpy_helper.to_array(tensor))


def _constant(node: Any) -> np.ndarray:
    from onnx import helper, numpy_helper

    for attr in node.attribute:
        if attr.name == "value":
            return np.array(numpy_helper.to_array(attr.t))
        return np.array(helper.get_attribute_value(attr))
    raise ModelError("Constant node without a value", where=node.name)


def _attributes(node: Any) -> dict[str, Any]:
    from onnx import helper

    out = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        out[attr.name] = value.decode() if isinstance(value, bytes) else value
    return out


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _symmetric(pads: Sequence[int], where: str) -> tuple[int, ...]:
    """ONNX pads (begin..., end...) -> PyTorch's per-side padding; asymmetric is an error."""
    n = len(pads) // 2
    begin, end = tuple(int(p) for p in pads[:n]), tuple(int(p) for p in pads[n:])
    if begin != end:
        raise ModelError(
            f"asymmetric padding {list(pads)}",
            where=where,
            hint="use equal padding on both sides (or an explicit Pad)",
        )
    return begin
