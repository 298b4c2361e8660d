"""The one intermediate representation: an immutable ``Network`` of ``Layer`` records, model-level
(one per PyTorch op) or hardware (docs/hardware/network-yaml.md §1)."""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from cnnforge.errors import InputError

# The kinds live in the leaf module kinds.py (shared with arithmetic.py); re-exported here.
from cnnforge.kinds import (  # noqa: F401
    BINARY_BITS,
    HARDWARE_ACTIVATIONS,
    HARDWARE_ELTWISE,
    HARDWARE_OPS,
    WEIGHT_OPS,
    Activation,
    EltwiseOp,
    Op,
    PoolKind,
)

#: The name by which layers refer to the network input.
INPUT = "input"

JSON_SCHEMA = "cnnforge-network/1"


@dataclass(frozen=True)
class Pooling:
    """Input pooling of a layer: no padding, partial edge windows dropped
    (docs/hardware/arithmetic.md §3)."""

    kind: PoolKind
    size: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...] = ()

    def dilation_or_ones(self) -> tuple[int, ...]:
        return self.dilation or (1,) * len(self.size)

    def output_dims(self, dims: tuple[int, ...]) -> tuple[int, ...]:
        """Pooled spatial size (docs/hardware/arithmetic.md R3.2, R3.3)."""
        out = []
        for n, k, t, d in zip(dims, self.size, self.stride, self.dilation_or_ones(), strict=True):
            out.append(math.ceil(n / t) if k == 1 else (n - d * (k - 1) - 1) // t + 1)
        return tuple(out)


@dataclass(frozen=True, eq=False)
class BatchNormParams:
    """Statistics and (optional) affine parameters of a model-level BatchNorm layer."""

    running_mean: np.ndarray
    running_var: np.ndarray
    eps: float = 1e-5
    weight: np.ndarray | None = None  # gamma; None when affine=False
    bias: np.ndarray | None = None  # beta; None when affine=False


def fold_bn_arrays(
    weight: np.ndarray,
    bias: np.ndarray | None,
    bn: BatchNormParams,
    *,
    out_axis: int = 0,
    groups: int = 1,
    divisor: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Folded (weight, bias) for ``bn(w * x + b) / divisor`` in float64; ``out_axis`` is 1 for
    ConvTranspose2d ``(in, out/g, ...)``, with ``groups`` groups."""
    mean = np.asarray(bn.running_mean, dtype=np.float64)
    var = np.asarray(bn.running_var, dtype=np.float64)
    gamma = np.ones_like(mean) if bn.weight is None else np.asarray(bn.weight, np.float64)
    beta = np.zeros_like(mean) if bn.bias is None else np.asarray(bn.bias, np.float64)
    scale = gamma / np.sqrt(var + float(bn.eps)) / divisor
    w = np.asarray(weight, dtype=np.float64)
    b = np.zeros_like(mean) if bias is None else np.asarray(bias, dtype=np.float64)
    if out_axis == 0:
        w_folded = w * scale.reshape((-1,) + (1,) * (w.ndim - 1))
    else:
        grouped = w.reshape((groups, w.shape[0] // groups, *w.shape[1:]))
        shape = (groups, 1, w.shape[1]) + (1,) * (w.ndim - 2)
        w_folded = (grouped * scale.reshape(shape)).reshape(w.shape)
    b_folded = (b - mean) * scale + beta / divisor
    dtype = np.asarray(weight).dtype
    return w_folded.astype(dtype), b_folded.astype(dtype)


@dataclass(frozen=True, eq=False)
class Quantized:
    """Integer parameters of a quantized weight layer (docs/hardware/arithmetic.md §1-2): weights in
    PyTorch layout, bias added as ``bias << 7`` (R1.5), YAML ``output_shift`` (R2.1)."""

    weight_bits: int
    weights: np.ndarray
    bias: np.ndarray | None
    output_shift: int = 0

    @property
    def total_shift(self) -> int:
        return self.output_shift + 8 - abs(self.weight_bits)


@dataclass(frozen=True, eq=False)
class Layer:
    """One layer: model level, or hardware ``pool -> eltwise/concat -> op -> activation -> output``
    (8-bit clamped or 32-bit wide)."""

    name: str
    op: Op
    inputs: tuple[str, ...] = (INPUT,)
    out_shape: tuple[int, ...] = ()  # without batch: (C, H, W), (C, L) or (C,)
    module_path: str = ""  # PyTorch module path (or YAML file:line) for messages
    # Main operation geometry (PyTorch conventions: padding per side).
    in_channels: int = 0
    out_channels: int = 0
    kernel_size: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    dilation: tuple[int, ...] = ()
    output_padding: tuple[int, ...] = ()
    groups: int = 1
    # Fused stages.
    pool: Pooling | None = None
    eltwise: EltwiseOp | None = None
    # Element-wise over the channel groups of its one input (the vendor's `operands` without
    # `in_sequences`, docs/ai8x-format.md): that input's channels split into this many equal
    # consecutive groups, each an operand; 0: one operand per input.
    split_operands: int = 0
    pool_first: bool = True
    flatten: bool = False
    activation: Activation = Activation.NONE
    activation_params: tuple[float, ...] = ()  # e.g. hardtanh (min, max), leakyrelu (slope,)
    wide: bool = False  # 32-bit output (docs/hardware/arithmetic.md R2.4)
    # Float parameters in PyTorch layout.
    weight: np.ndarray | None = field(default=None, repr=False)
    bias: np.ndarray | None = field(default=None, repr=False)
    batchnorm: BatchNormParams | None = field(default=None, repr=False)
    scale_factor: tuple[int, ...] = ()  # UPSAMPLE only
    upsample_mode: str = ""  # UPSAMPLE only: "nearest", "bilinear", ...
    pad_amounts: tuple[int, ...] = ()  # PAD only: (left, right, top, bottom) as F.pad takes them
    pad_value: float = 0.0  # PAD only
    axis: int = 0  # SOFTMAX only: the channel axis without batch (0) unless the model says so
    reduce_kind: str = ""  # SOFTMAX only: "softmax", "log_softmax" or "argmax"
    opaque_kind: str = ""  # OPAQUE only: the PyTorch/ATen op it stands for, e.g. "aten.hardswish"
    # Integer parameters once quantized.
    quant: Quantized | None = field(default=None, repr=False)

    @property
    def is_hardware(self) -> bool:
        """True when this is a layer the accelerator can execute as one hardware layer."""
        return self.op in HARDWARE_OPS

    @property
    def has_weights(self) -> bool:
        return self.op in WEIGHT_OPS

    @property
    def operand_count(self) -> int:
        """Operands of the element-wise op (its input's channel groups, else one per input); 1
        without one."""
        if self.eltwise is None:
            return 1
        return self.split_operands or len(self.inputs)

    @property
    def is_concat(self) -> bool:
        """Several inputs without an element-wise op: channel concatenation in argument order."""
        return self.eltwise is None and len(self.inputs) > 1

    def label(self) -> str:
        """Short op name for tables: ``conv2d``, ``maxpool``, ``relu``, ``add`` ..."""
        if self.op is Op.POOL and self.pool is not None:
            return f"{self.pool.kind.value}pool"
        if self.op is Op.ACTIVATION:
            return self.activation.value
        if self.op is Op.ELTWISE and self.eltwise is not None:
            return self.eltwise.value
        if self.op is Op.SOFTMAX and self.reduce_kind:
            return self.reduce_kind
        if self.op is Op.OPAQUE and self.opaque_kind:
            return self.opaque_kind
        if self.op is Op.BATCHNORM and self.batchnorm is not None and self.batchnorm.eps == 0:
            return "scale"  # constant arithmetic captured as an affine map (frontend/affine.py)
        return self.op.value


@dataclass(frozen=True)
class HostInput:
    """An input normalization done on the host (passes/host_input.py): the accelerator reads
    ``(x * scale[c] + offset[c]) / 2^exponent``; ``module_path`` names the user's layer."""

    scale: tuple[float, ...]
    offset: tuple[float, ...]
    module_path: str = ""
    exponent: int = 0

    def apply(self, x: np.ndarray, ndim: int) -> np.ndarray:
        """The step on ``x`` whose last ``ndim`` axes are one sample (C, ...), in float64."""
        a, b = self.columns(ndim)
        return np.asarray(x, np.float64) * a + b

    def invert(self, y: np.ndarray, ndim: int) -> np.ndarray:
        """The model input that the step maps to ``y`` (float64; every scale is nonzero)."""
        a, b = self.columns(ndim)
        return (np.asarray(y, np.float64) - b) / a

    def columns(self, ndim: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Scale and offset with the ``2^-exponent`` (exact: a power of two), float64, shaped
        to broadcast over a sample of rank ``ndim``; what the host and the C compute with."""
        shape = (-1,) + (1,) * (ndim - 1)
        unit = 2.0**-self.exponent
        a = np.asarray(self.scale, np.float64).reshape(shape) * unit
        return a, np.asarray(self.offset, np.float64).reshape(shape) * unit

    def mean_std(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """The model's normalization written as ``(x - mean) / std`` (without the exponent)."""
        std = tuple(1.0 / a for a in self.scale)
        mean = tuple(-b / a for a, b in zip(self.scale, self.offset, strict=True))
        return mean, std

    def describe(self) -> str:
        """``input normalization (x - mean)/std on the host: mean=[...], std=[...]``."""
        mean, std = self.mean_std()
        text = (
            f"input normalization (x - mean)/std on the host: mean={_numbers(mean)}, "
            f"std={_numbers(std)}"
        )
        if self.exponent:
            e = self.exponent
            text += f", then / 2^{e} into the int8 input range (the first layer's weights x 2^{e})"
        return text


def _numbers(values: tuple[float, ...]) -> str:
    """One number when all are equal, else the list; 6 significant digits."""
    if len(set(values)) == 1:
        return f"{values[0]:.6g}"
    return "[" + ", ".join(f"{v:.6g}" for v in values) + "]"


@dataclass(frozen=True, eq=False)
class Network:
    """An ordered list of layers (a topological order) with the input shape and output names."""

    name: str
    input_shape: tuple[int, ...]  # without batch: (C, H, W) or (C, L)
    layers: tuple[Layer, ...]
    outputs: tuple[str, ...] = ()  # default: the last layer
    avg_pool_rounding: bool = False  # global flag (docs/hardware/arithmetic.md R3.6)
    #: Per output (same order), what the host computes after the accelerator: "" (nothing),
    #: or a SOFTMAX ``reduce_kind`` over the channels ("softmax", "log_softmax", "argmax",
    #: "argmax:keepdim"); see passes/host_ops.py. Known answers are taken before it.
    host_reduce: tuple[str, ...] = ()
    #: ``(module path, numel)`` of each parameter of the captured module that forward() does
    #: not use (encoder stages beyond the depth used): reported by analyze, never lowered.
    unused_params: tuple[tuple[str, int], ...] = ()
    #: An input normalization the host applies before the accelerator reads the input (None:
    #: the input is read as given); see passes/host_input.py. Float evaluation applies it.
    host_input: HostInput | None = None

    def __post_init__(self) -> None:
        if not self.outputs and self.layers:
            object.__setattr__(self, "outputs", (self.layers[-1].name,))

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def layer(self, name: str) -> Layer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    def index(self, name: str) -> int:
        for i, layer in enumerate(self.layers):
            if layer.name == name:
                return i
        raise KeyError(name)

    def shape_of(self, name: str) -> tuple[int, ...]:
        """Output shape of a layer, or the input shape for ``INPUT``."""
        return self.input_shape if name == INPUT else self.layer(name).out_shape

    def input_shapes(self, layer: Layer) -> tuple[tuple[int, ...], ...]:
        return tuple(self.shape_of(n) for n in layer.inputs)

    def consumers(self, name: str) -> tuple[Layer, ...]:
        return tuple(layer for layer in self.layers if name in layer.inputs)

    def with_layers(self, layers: Iterable[Layer], **changes: Any) -> Network:
        """A copy with a new layer list (and optionally other fields changed)."""
        return dataclasses.replace(self, layers=tuple(layers), **changes)

    @property
    def is_hardware(self) -> bool:
        return all(layer.is_hardware for layer in self.layers)

    @property
    def is_quantized(self) -> bool:
        return all(layer.quant is not None for layer in self.layers if layer.has_weights)

    def to_json(self, indent: int | None = 1) -> str:
        """Lossless JSON (schema ``cnnforge-network/1``)."""
        doc = {"schema": JSON_SCHEMA, **_encode(self)}
        return json.dumps(doc, indent=indent, sort_keys=False)

    @classmethod
    def from_json(cls, text: str) -> Network:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON: {exc.msg}", where=f"line {exc.lineno}") from None
        except RecursionError:  # json recurses per level: 100,000 brackets end here
            raise InputError(
                f"the JSON is nested {_depth(text)} levels deep, too deep to be a network "
                "(a network's JSON nests a few levels)"
            ) from None
        if not isinstance(doc, dict) or doc.get("schema") != JSON_SCHEMA:
            raise InputError(f"not a cnnforge network (expected schema {JSON_SCHEMA!r})")
        doc.pop("schema")
        return _decode(Network, doc)


def _depth(text: str) -> int:
    """The deepest nesting of brackets in JSON ``text``, strings skipped (for the message)."""
    depth = deepest = 0
    for token in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[{]|[\]}]', text):
        mark = token.group()
        if mark in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif mark in "]}":
            depth -= 1
    return deepest

_CLASSES = {
    c.__name__: c for c in (Network, Layer, Pooling, BatchNormParams, Quantized, HostInput)
}
_ENUMS = {c.__name__: c for c in (Op, Activation, PoolKind, EltwiseOp)}


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return {
            "__array__": data.dtype.str,
            "shape": list(data.shape),
            "data": base64.b64encode(data.tobytes()).decode("ascii"),
        }
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


#: Bounds of decoded numbers: far beyond any real network, small enough for int64 arithmetic.
_MAX_JSON_INT = 2**40
_MAX_JSON_TEXT = 4096


def _decode(cls: type, doc: Any, where: str = "network") -> Any:
    """``cls`` from its JSON dict; every field is type-checked (InputError naming the field)."""
    if not isinstance(doc, dict):
        raise InputError(f"{where} must be an object, not {type(doc).__name__}")
    kwargs = {}
    hints = {f.name: f.type for f in dataclasses.fields(cls)}
    for name, raw in doc.items():
        if name not in hints:
            raise InputError(f"unknown field {str(name)[:40]!r} in {cls.__name__}", where=where)
        kwargs[name] = _decode_value(str(hints[name]), raw, f"{where}.{name}")
    try:
        return cls(**kwargs)
    except TypeError:  # a required field is missing
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in kwargs]
        raise InputError(f"{cls.__name__} lacks {missing}", where=where) from None


def _decode_value(hint: str, raw: Any, where: str = "network") -> Any:
    base = hint.split("|")[0].strip()
    if raw is None:
        if hint.endswith("| None"):
            return None
        raise InputError(f"null where {base} is needed", where=where)
    if base == "np.ndarray":
        return _decode_array(raw, where)
    if base.startswith("tuple["):
        if not isinstance(raw, list):
            raise InputError(f"expected a list, found {type(raw).__name__}", where=where)
        inner = base[len("tuple[") : -1].split(",")[0].strip()
        return tuple(_decode_value(inner, v, f"{where}[{i}]") for i, v in enumerate(raw))
    if base in _CLASSES:
        return _decode(_CLASSES[base], raw, where)
    if base in _ENUMS:
        values = {e.value for e in _ENUMS[base]}
        if not isinstance(raw, str) or raw not in values:
            raise InputError(f"{str(raw)[:40]!r} is not a {base}", where=where)
        return _ENUMS[base](raw)
    return _decode_scalar(base, raw, where)


def _decode_scalar(base: str, raw: Any, where: str) -> Any:
    ok = {
        "int": isinstance(raw, int) and not isinstance(raw, bool) and abs(raw) < _MAX_JSON_INT,
        "float": isinstance(raw, int | float)
        and not isinstance(raw, bool)
        and math.isfinite(raw)
        and abs(raw) < _MAX_JSON_INT,
        "bool": isinstance(raw, bool),
        "str": isinstance(raw, str) and len(raw) <= _MAX_JSON_TEXT,
    }.get(base, True)
    if not ok:
        found = f"{type(raw).__name__} {str(raw)[:40]}"
        raise InputError(f"expected {base}, found {found}", where=where)
    return raw


def _decode_array(raw: Any, where: str) -> np.ndarray:
    """A base64 array of a real numeric dtype whose byte count matches its shape; finite."""
    try:
        dtype = np.dtype(raw["__array__"])
        shape = [int(n) for n in raw["shape"]]
        buf = base64.b64decode(raw["data"], validate=True)
        if dtype.kind not in "biuf" or any(n < 0 for n in shape) or len(shape) > 8:
            raise ValueError(f"dtype {dtype} shape {shape}")
        if len(buf) != math.prod(shape) * dtype.itemsize:
            raise ValueError(f"{len(buf)} bytes for shape {shape} of {dtype}")
        array = np.frombuffer(buf, dtype=dtype).reshape(shape).copy()
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"not a stored array ({str(exc)[:80]})", where=where) from None
    if dtype.kind == "f" and not np.isfinite(array).all():
        raise InputError("array holds NaN or infinite values", where=where)
    return array
