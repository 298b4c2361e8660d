"""Reading a vendor network YAML into validated per-layer records: a safe loader that refuses
duplicate keys and keeps line numbers, so errors name file:line (docs/hardware/network-yaml.md)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cnnforge.errors import ConfigError
from cnnforge.ir import BINARY_BITS, Activation, EltwiseOp, Op, PoolKind
from cnnforge.targets.max7800x.ai8x_validate import (
    BoundedSafeLoader,
    check_yaml_types,
    read_input_text,
)

# docs/hardware/network-yaml.md §2: global keys. Known but not supported by cnnforge: the values of
# the dict.
GLOBAL_KEYS = frozenset({"arch", "dataset", "layers", "output_map", "unload", "snoop"})
GLOBAL_UNSUPPORTED = {
    "data_buffer": "rolling data buffers (TCN networks)",
    "bias": "built-in test data (arch: test)",
    "weights": "built-in test data (arch: test)",
}

# docs/hardware/network-yaml.md §3: canonical key -> aliases (only one spelling may be given).
ALIASES = {
    "operation": ("operation", "op", "operator", "convolution"),
    "activate": ("activate", "activation"),
    "conv_groups": ("conv_groups", "groups"),
    "read_gap": ("read_gap", "in_skip"),
    "bias_group": ("bias_group", "bias_quadrant"),
}
# Keys the vendor accepts whose behaviour cnnforge does not model (yet): error, not silence.
LAYER_UNSUPPORTED = {
    "bypass": "kernel bypass",
    "in_crop": "input cropping",
    "in_channel_skip": "input channel skipping",
    "read_gap": "read gaps",
    "simulated_sequence": "partial simulation",
    "snoop_sequence": "data snooping",
    "weight_source": "shared weights",
    "buffer_shift": "data buffers",
    "buffer_insert": "data buffers",
}

OPERATIONS = {
    "conv2d": (Op.CONV2D, None),
    "conv1d": (Op.CONV1D, None),
    "convtranspose2d": (Op.CONVTRANSPOSE2D, None),
    "none": (Op.PASSTHROUGH, None),
    "passthrough": (Op.PASSTHROUGH, None),
    "linear": (Op.LINEAR, None),
    "fc": (Op.LINEAR, None),
    "mlp": (Op.LINEAR, None),
    "add": (Op.PASSTHROUGH, EltwiseOp.ADD),
    "sub": (Op.PASSTHROUGH, EltwiseOp.SUB),
    "or": (Op.PASSTHROUGH, EltwiseOp.OR),
    "bitwiseor": (Op.PASSTHROUGH, EltwiseOp.OR),
    "bitwise_or": (Op.PASSTHROUGH, EltwiseOp.OR),
    "xor": (Op.PASSTHROUGH, EltwiseOp.XOR),
    "bitwisexor": (Op.PASSTHROUGH, EltwiseOp.XOR),
    "bitwise_xor": (Op.PASSTHROUGH, EltwiseOp.XOR),
}
ELTWISE = {"add": EltwiseOp.ADD, "sub": EltwiseOp.SUB, "or": EltwiseOp.OR, "xor": EltwiseOp.XOR}
ACTIVATIONS = {"relu": Activation.RELU, "abs": Activation.ABS, "none": Activation.NONE}
QUANTIZATION = {1: 1, 2: 2, 4: 4, 8: 8, "bin": BINARY_BITS, "binary": BINARY_BITS}
DATA_FORMATS = {"hwc": "HWC", "little": "HWC", "chw": "CHW", "big": "CHW"}
MAX_MASK = (1 << 64) - 1


@dataclass(frozen=True)
class YamlLayer:
    """One YAML layer with aliases resolved and values checked (defaults not yet applied)."""

    index: int  # position in the (sequence-ordered) layer list, as in the vendor's messages
    line: int  # line of the layer's mapping in the file
    name: str | None
    op: Op
    eltwise: EltwiseOp | None
    operands: int  # 1 without an element-wise operation
    pool_kind: PoolKind | None
    pool_size: tuple[int, ...]  # as written: one value (square) or two
    pool_stride: tuple[int, ...]
    pool_dilation: tuple[int, ...]
    pool_first: bool
    activation: Activation
    kernel_size: tuple[int, ...] | None  # None: the operation's default
    pad: int | None
    stride: tuple[int, ...]
    output_pad: int | None
    dilation: int
    groups: int
    quantization: int | None
    output_shift: int | None
    wide: bool
    data_format: str | None
    flatten: bool
    processors: int
    output_processors: int | None
    in_offset: int | None
    out_offset: int | None
    in_sequences: tuple[int | str, ...] | None  # raw references, resolved by targets.max7800x.ai8x
    write_gap: int
    in_channels: int | None
    out_channels: int | None
    in_dim: tuple[int, ...] | None
    bias_group: int | None
    output: bool
    next_sequence: int | str | None = None  # raw; only "the next layer" is supported
    streaming: bool = False  # docs/hardware/network-yaml.md §5 "Streaming"
    calcx4: bool = False  # MAX78002 speed-ups (the results are the same): placement.py
    readahead: bool = False
    tcalc: bool | None = None
    key_lines: tuple[tuple[str, int], ...] = ()

    def line_of(self, key: str) -> int:
        """The line of ``key`` in this layer (the layer's line when the key is absent)."""
        return dict(self.key_lines).get(key, self.line)

    def label(self) -> str:
        return f"layer {self.index}" + (f" ({self.name})" if self.name else "")


@dataclass(frozen=True)
class YamlConfig:
    """The whole file: global keys and the layers in execution order."""

    path: str
    arch: str
    dataset: str
    layers: tuple[YamlLayer, ...]
    output_map: int | None = None
    arch_line: int = 1
    snoop: tuple[int, ...] = ()  # the global `snoop` registers (empty: none)
    snoop_line: int = 0


class _Map(dict):
    """A YAML mapping that remembers its own line and the line of each key."""

    line: int = 0
    key_lines: dict[Any, int]


class _Loader(BoundedSafeLoader):
    """Safe loader: duplicate keys are errors, mappings carry line numbers (bounded nesting)."""


def _construct_map(loader: _Loader, node: yaml.MappingNode) -> Any:
    loader.flatten_mapping(node)
    data = _Map()
    data.line = node.start_mark.line + 1
    data.key_lines = {}
    yield data
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        where = f"{loader.filename}:{key_node.start_mark.line + 1}"
        try:
            hash(key)
        except TypeError:
            raise ConfigError("a mapping key must be a plain value", where=where) from None
        if key in data:
            raise ConfigError(
                f"duplicate key {key!r}", where=where, hint="each key may appear once per mapping"
            )
        data[key] = loader.construct_object(value_node, deep=True)
        data.key_lines[key] = key_node.start_mark.line + 1


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_map)


def load_yaml_text(text: str, filename: str) -> Any:
    """Parse YAML safely; syntax errors and duplicate keys become ``ConfigError`` at file:line."""
    loader = _Loader(text)
    loader.filename = filename
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{filename}:{mark.line + 1}" if mark else filename
        what = " ".join(str(exc.problem or exc.context or "syntax error").split())
        raise ConfigError(f"YAML syntax error: {what}", where=where) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"YAML error: {exc}", where=filename) from None
    finally:
        loader.dispose()


def read_yaml_config(path: Path | str) -> YamlConfig:
    """Read and check a vendor network YAML (docs/hardware/network-yaml.md §1-§3)."""
    path = Path(path)
    doc = load_yaml_text(read_input_text(path), str(path))
    if not isinstance(doc, _Map):
        raise ConfigError("a network YAML must be a mapping of keys", where=f"{path}:1")
    _check_global_keys(doc, str(path))  # an unsupported key is named before its value's type
    check_yaml_types(doc, str(path))  # typed, bounded values from here on
    raw_layers = doc["layers"]
    if not isinstance(raw_layers, list) or not raw_layers:
        line = doc.key_lines["layers"]
        raise ConfigError("`layers` must be a non-empty list", where=f"{path}:{line}")
    ordered = _sequence_order(raw_layers, str(path), doc.key_lines["layers"])
    layers = tuple(_parse_layer(raw, i, str(path)) for i, raw in enumerate(ordered))
    _check_names(layers, str(path))
    output_map = None
    if "output_map" in doc:
        output_map = _mask(doc["output_map"], "output_map", f"{path}:{doc.key_lines['output_map']}")
    return YamlConfig(
        path=str(path),
        arch=_string(doc, "arch", str(path)),
        dataset=_string(doc, "dataset", str(path)),
        layers=layers,
        output_map=output_map,
        arch_line=doc.key_lines["arch"],
        snoop=_snoop(doc["snoop"], f"{path}:{doc.key_lines['snoop']}") if "snoop" in doc else (),
        snoop_line=doc.key_lines.get("snoop", 0),
    )


def _snoop(value: object, where: str) -> tuple[int, ...]:
    """The MAX78002's data-snooping / conditional-execution registers (32 words, the first 24
    exist): the simulated results do not change; the firmware writes them (docs/firmware.md)."""
    if not (isinstance(value, list) and len(value) == 32
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):  # fmt: skip
        raise ConfigError("`snoop` must list 32 integers (the snoop registers)", where=where)
    if any(not 0 <= v < 1 << 32 for v in value):
        raise ConfigError("`snoop` registers are 32-bit unsigned words", where=where)
    return tuple(value)


def _check_global_keys(doc: _Map, path: str) -> None:
    for key in doc:
        where = f"{path}:{doc.key_lines[key]}"
        if key in GLOBAL_UNSUPPORTED:
            raise ConfigError(
                f"global key `{key}` ({GLOBAL_UNSUPPORTED[key]}) is not supported by cnnforge",
                where=where,
            )
        if key not in GLOBAL_KEYS:
            raise ConfigError(
                f"unknown global key {key!r}",
                where=where,
                hint="allowed: " + ", ".join(sorted(GLOBAL_KEYS)),
            )
    missing = [k for k in ("arch", "dataset", "layers") if k not in doc]
    if missing:
        raise ConfigError(
            "missing required key(s): " + ", ".join(f"`{k}`" for k in missing), where=f"{path}:1"
        )


def _string(doc: _Map, key: str, path: str) -> str:
    value = doc[key]
    if not isinstance(value, str | int) or isinstance(value, bool) or str(value) == "":
        raise ConfigError(f"`{key}` must be a name", where=f"{path}:{doc.key_lines[key]}")
    return str(value)


def _sequence_order(raw_layers: list[Any], path: str, line: int) -> list[_Map]:
    """Apply `sequence` keys: explicit positions (gaps compacted), others keep their order."""
    for i, raw in enumerate(raw_layers):
        if not isinstance(raw, _Map):
            raise ConfigError(f"layer {i} must be a mapping of keys", where=f"{path}:{line}")
    if not any("sequence" in raw for raw in raw_layers):
        return list(raw_layers)
    placed: dict[int, _Map] = {}
    for i, raw in enumerate(raw_layers):
        where = f"{path}:{raw.key_lines.get('sequence', raw.line)}"
        seq = raw.get("sequence", i)
        if not _is_int(seq) or seq < 0:
            raise ConfigError(f"layer {i}: `sequence` must be an integer >= 0", where=where)
        if seq in placed:
            raise ConfigError(f"layer {i}: sequence {seq} was already specified", where=where)
        placed[seq] = raw
    return [placed[k] for k in sorted(placed)]


def _check_names(layers: tuple[YamlLayer, ...], path: str) -> None:
    seen: set[str] = set()
    for layer in layers:
        if layer.name is None:
            continue
        where = f"{path}:{layer.line_of('name')}"
        if layer.name.lower() in ("stop", "input"):
            raise ConfigError(f"{layer.label()}: the name {layer.name!r} is reserved", where=where)
        if layer.name in seen:
            raise ConfigError(
                f"{layer.label()}: the name {layer.name!r} is used twice", where=where
            )
        seen.add(layer.name)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _mask(value: Any, key: str, where: str) -> int:
    """A 64-bit processor mask: an integer or a string in which `.` and `_` are ignored."""
    mask = value
    if isinstance(value, str):
        text = value.replace(".", "").replace("_", "").strip().lower()
        try:
            mask = int(text, 0)
        except ValueError:
            mask = None
    if not _is_int(mask) or not 1 <= mask <= MAX_MASK:
        raise ConfigError(
            f"`{key}` {value!r} is not a processor mask",
            where=where,
            hint="a 64-bit mask from 0x1 to 0xffffffffffffffff (bit p = processor p)",
        )
    return mask


def _int(value: Any, key: str, where: str, lo: int | None = None, hi: int | None = None) -> int:
    if not _is_int(value) or (lo is not None and value < lo) or (hi is not None and value > hi):
        rng = f" in [{lo}, {hi}]" if hi is not None else (f" >= {lo}" if lo is not None else "")
        raise ConfigError(f"`{key}` must be an integer{rng}, not {value!r}", where=where)
    return value


def _bool(value: Any, key: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"`{key}` must be true or false, not {value!r}", where=where)
    return value


def _choice(value: Any, key: str, where: str, choices: dict[Any, Any]) -> Any:
    probe = value.lower() if isinstance(value, str) else value
    if isinstance(probe, bool) or probe not in choices:
        allowed = ", ".join(str(c) for c in choices)
        raise ConfigError(
            f"unknown value {value!r} for `{key}`", where=where, hint=f"use {allowed}"
        )
    return choices[probe]


def _ints(value: Any, key: str, where: str, lo: int, hi: int) -> tuple[int, ...]:
    """An int or a list of one or two ints, each in [lo, hi]."""
    items = value if isinstance(value, list) else [value]
    if not 1 <= len(items) <= 2:
        raise ConfigError(f"`{key}` must be an integer or a list of two", where=where)
    return tuple(_int(v, key, where, lo, hi) for v in items)


def _kernel(value: Any, key: str, where: str) -> tuple[int, ...]:
    """`3x3`, `1x1` or an integer (conv1d length; a square 2-D kernel)."""
    if _is_int(value):
        return (_int(value, "kernel_size", where, 1, 9),)
    if isinstance(value, str):
        parts = value.lower().split("x")
        if all(p.strip().isdigit() for p in parts) and len(parts) in (1, 2):
            return tuple(int(p) for p in parts)
    raise ConfigError(f"unsupported value {value!r} for `kernel_size`", where=where)


def _sequences(value: Any, key: str, where: str) -> tuple[int | str, ...]:
    items = value if isinstance(value, list) else [value]
    if not items or len(items) > 16:
        raise ConfigError("`in_sequences` must name 1 to 16 layers", where=where)
    for item in items:
        if not (_is_int(item) or isinstance(item, str)):
            raise ConfigError(f"`in_sequences` entry {item!r} is not a layer", where=where)
    return tuple(items)


def _name(value: Any, key: str, where: str) -> str:
    return str(value)


def _reference(value: Any, key: str, where: str) -> int | str:
    if not (_is_int(value) or isinstance(value, str)):
        raise ConfigError(f"`{key}` {value!r} is not a layer number or name", where=where)
    return value


def _canonical(raw: _Map, index: int, path: str) -> dict[str, tuple[Any, int]]:
    """Resolve aliases; reject unknown, unsupported and duplicated keys. Values keep their line."""
    out: dict[str, tuple[Any, int]] = {}
    for key, value in raw.items():
        where = f"{path}:{raw.key_lines[key]}"
        if key not in LAYER_KEYS:
            raise ConfigError(
                f"layer {index}: unknown key {key!r}",
                where=where,
                hint="see docs/hardware/network-yaml.md §3 for the keys of a layer",
            )
        canon = next((c for c, names in ALIASES.items() if key in names), key)
        if canon in out:
            raise ConfigError(f"layer {index}: `{key}` given twice (aliases)", where=where)
        if canon in LAYER_UNSUPPORTED:
            raise ConfigError(
                f"layer {index}: `{key}` ({LAYER_UNSUPPORTED[canon]}) is not supported by cnnforge",
                where=where,
            )
        out[canon] = (value, raw.key_lines[key])
    return out


def _value(
    keys: dict[str, tuple[Any, int]], path: str, key: str, parse: Any, default: Any = None, *args
) -> Any:
    """``parse(value, key, "file:line", *args)`` of ``key``, or ``default`` when it is absent."""
    if key not in keys:
        return default
    value, line = keys[key]
    return parse(value, key, f"{path}:{line}", *args)


def _operation(
    keys: dict[str, tuple[Any, int]], index: int, path: str
) -> tuple[Op, EltwiseOp | None]:
    """`operation` and `eltwise`: the main operation and the element-wise one, if any."""
    op, eltwise = _value(keys, path, "operation", _choice, (Op.CONV2D, None), OPERATIONS)
    if "eltwise" in keys:
        if eltwise is not None:
            raise ConfigError(
                f"layer {index}: `eltwise` with an element-wise operation",
                where=f"{path}:{keys['eltwise'][1]}",
            )
        eltwise = _value(keys, path, "eltwise", _choice, None, ELTWISE)
    if "operands" in keys and eltwise is None:
        line = keys["operands"][1]
        raise ConfigError(
            f"layer {index}: `operands` without an element-wise operation", where=f"{path}:{line}"
        )
    return op, eltwise


#: YamlLayer field <- key, parser, default, the parser's bounds or choices; in the order checked.
_FIELDS = (
    ("pool_stride", "pool_stride", _ints, (), 1, 16),
    ("pool_dilation", "pool_dilation", _ints, (), 1, 16),
    ("pool_first", "pool_first", _bool, True),
    ("activation", "activate", _choice, Activation.NONE, ACTIVATIONS),
    ("kernel_size", "kernel_size", _kernel, None),
    ("pad", "pad", _int, None, 0, 3),
    ("stride", "stride", _ints, (), 1, 16),
    ("output_pad", "output_pad", _int, None, 0, 2),
    ("dilation", "dilation", _int, 1, 1, 2047),
    ("groups", "conv_groups", _int, 1, 1, 1024),
    ("quantization", "quantization", _choice, None, QUANTIZATION),
    ("output_shift", "output_shift", _int, None, -32, 32),
    ("wide", "output_width", _choice, False, {8: False, 32: True}),
    ("data_format", "data_format", _choice, None, DATA_FORMATS),
    ("flatten", "flatten", _bool, False),
    ("processors", "processors", _mask, None),
    ("output_processors", "output_processors", _mask, None),
    ("in_offset", "in_offset", _int, None, 0),
    ("out_offset", "out_offset", _int, None, 0),
    ("in_sequences", "in_sequences", _sequences, None),
    ("write_gap", "write_gap", _int, 0, 0, 15),
    ("in_channels", "in_channels", _int, None, 1, 2048),
    ("out_channels", "out_channels", _int, None, 1, 2048),
    ("in_dim", "in_dim", _ints, None, 1, 2048),
    ("bias_group", "bias_group", _int, None, 0, 3),
    ("output", "output", _bool, False),
    ("next_sequence", "next_sequence", _reference, None),
    ("streaming", "streaming", _bool, False),
    ("calcx4", "calcx4", _bool, False),
    ("readahead", "readahead", _bool, False),
    ("tcalc", "tcalc", _bool, None),
)
#: docs/hardware/network-yaml.md §3: every key a layer may hold (aliases included).
LAYER_KEYS = frozenset(
    {key for _, key, *_ in _FIELDS} | {a for names in ALIASES.values() for a in names}
    | {"eltwise", "operands", "max_pool", "avg_pool", "name", "sequence"} | set(LAYER_UNSUPPORTED)
)  # fmt: skip


def _parse_layer(raw: _Map, index: int, path: str) -> YamlLayer:
    """Check one layer's keys and values (docs/hardware/network-yaml.md §3)."""
    keys = _canonical(raw, index, path)
    get = functools.partial(_value, keys, path)
    if "processors" not in keys:
        raise ConfigError(f"layer {index}: `processors` is missing", where=f"{path}:{raw.line}")
    op, eltwise = _operation(keys, index, path)
    pool_kind, pool_size = _pool(keys, index, path)
    name = get("name", _name)
    operands = get("operands", _int, 2, 2, 16) if eltwise else 1
    fields = {field: get(key, *parse) for field, key, *parse in _FIELDS}
    return YamlLayer(
        index=index,
        line=raw.line,
        name=name,
        op=op,
        eltwise=eltwise,
        operands=operands,
        pool_kind=pool_kind,
        pool_size=pool_size,
        key_lines=tuple((k, line) for k, (_, line) in keys.items()),
        **fields,
    )


def _pool(keys: dict[str, tuple[Any, int]], index: int, path: str) -> tuple[Any, tuple]:
    if "max_pool" in keys and "avg_pool" in keys:
        line = keys["avg_pool"][1]
        raise ConfigError(f"layer {index}: both `max_pool` and `avg_pool`", where=f"{path}:{line}")
    for key, kind in (("max_pool", PoolKind.MAX), ("avg_pool", PoolKind.AVG)):
        if key in keys:
            value, line = keys[key]
            return kind, _ints(value, key, f"{path}:{line}", 1, 16)
    return None, ()
