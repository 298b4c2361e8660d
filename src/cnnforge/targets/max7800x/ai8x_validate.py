"""The read boundary of the vendor pair: bounded files and YAML, value types and names checked
before the importer sees them, each error one ``ConfigError`` naming file and key or line."""

from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import torch
import yaml

from cnnforge.errors import ConfigError

MAX_YAML_BYTES = 1 << 20  # vendor network files are a few kB
MAX_DEPTH = 16  # a network YAML nests 4 deep (document, layers, layer, list)
MAX_ALIASES = 64
MAX_TEXT = 64  # the longest text value: a layer name or a dotted mask
MAX_LIST = 16  # in_sequences takes up to 16 layers; other lists hold 2
#: arch, dataset and layer names: what the vendor's files use, nothing that needs escaping.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
#: What YAML does not allow in a stream (yaml.reader.Reader.NON_PRINTABLE): control characters.
_CONTROL = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

# docs/hardware/network-yaml.md §2-§3: the value types of each key ("list": of scalars, at most
# MAX_LIST).
_INT, _STR, _BOOL, _NULL, _LIST, _MAP = "integer", "text", "true/false", "null", "list", "map"
GLOBAL_TYPES: dict[str, tuple[str, ...]] = {
    "arch": (_STR, _INT),
    "dataset": (_STR, _INT),
    "layers": (_LIST,),
    "output_map": (_INT, _STR),
    "unload": (_LIST,),
}
_LAYER_GROUPS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("processors", "output_processors"), (_INT, _STR)),
    (("operation", "op", "operator", "convolution", "eltwise", "data_format"), (_STR,)),
    (("activate", "activation"), (_STR, _NULL)),
    (
        (
            "operands", "pad", "output_pad", "output_shift", "in_offset", "out_offset",
            "write_gap", "read_gap", "in_skip", "in_channels", "out_channels", "sequence",
            "in_channel_skip", "buffer_shift", "buffer_insert", "conv_groups", "groups",
        ),
        (_INT,),
    ),
    (
        (
            "kernel_size", "quantization", "output_width", "name", "next_sequence",
            "simulated_sequence", "snoop_sequence", "weight_source",
        ),
        (_INT, _STR),
    ),
    (
        (
            "stride", "pool_stride", "pool_dilation", "max_pool", "avg_pool", "in_dim",
            "dilation", "bias_group", "bias_quadrant", "in_crop",
        ),
        (_INT, _LIST),
    ),
    (("in_sequences",), (_INT, _STR, _LIST)),
    (
        ("pool_first", "flatten", "output", "calcx4", "readahead", "tcalc", "bypass", "streaming"),
        (_BOOL,),
    ),
)  # fmt: skip
LAYER_TYPES = {key: kinds for keys, kinds in _LAYER_GROUPS for key in keys}
_SCALARS = (_INT, _STR, _BOOL, _NULL)
_NAMED = frozenset({"arch", "dataset", "name"})


def check_regular_file(path: Path, what: str) -> None:
    """``path`` is an existing regular file (a FIFO or device would hang or never end)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ConfigError(f"{what} not found", where=str(path), hint="check the path") from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read {what}: {exc.strerror}", where=str(path), hint="check the path"
        ) from None
    if not stat.S_ISREG(mode):
        raise ConfigError(
            f"{what} is not a regular file", where=str(path), hint="give the path of a file"
        )


def read_input_text(path: Path, what: str = "the YAML file", limit: int = MAX_YAML_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes without control characters."""
    check_regular_file(path, what)
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror}", where=str(path)) from None
    if len(data) > limit:
        raise ConfigError(
            f"{what} is larger than {limit} bytes",
            where=str(path),
            hint="a network YAML is a few kB; is this the right file?",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} is not UTF-8 text (byte {exc.start})", where=str(path), hint="save it as UTF-8"
        ) from None
    bad = _CONTROL.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        raise ConfigError(
            f"control character {bad.group()!r} in {what}",
            where=f"{path}:{line}",
            hint="remove it; a network YAML is plain text",
        )
    return text


class BoundedSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with bounded nesting and aliases (no "billion laughs")."""

    filename = "<yaml>"

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        where = f"{self.filename}:{self.peek_event().start_mark.line + 1}"
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise ConfigError(
                    f"more than {MAX_ALIASES} YAML aliases (*name)",
                    where=where,
                    hint="write the values out; a network YAML needs no aliases",
                )
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ConfigError(
                f"YAML nested more than {MAX_DEPTH} levels deep",
                where=where,
                hint="a network YAML is a mapping with a list of layer mappings",
            )
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _kind(value: Any) -> str:
    if value is None:
        return _NULL
    if isinstance(value, bool):
        return _BOOL
    if isinstance(value, int):
        return _INT
    if isinstance(value, str):
        return _STR
    if isinstance(value, list):
        return _LIST
    if isinstance(value, dict):
        return _MAP
    return type(value).__name__  # float, date, bytes, set ...


def _found(value: Any) -> str:
    kind = _kind(value)
    if kind in (_LIST, _MAP):
        return f"a {kind} of {len(value)}"
    text = repr(value)
    return f"{kind} {text[:40]}{'...' if len(text) > 40 else ''}"


def _line(doc: Any, key: Any, default: int = 1) -> int:
    lines = getattr(doc, "key_lines", None) or {}
    return lines.get(key, getattr(doc, "line", default))


def check_yaml_types(doc: Any, path: str) -> None:
    """Every known key of the document and of each layer holds a value of its documented type."""
    if not isinstance(doc, dict):
        return  # the importer names this
    for key, value in doc.items():
        _check_value(key, value, GLOBAL_TYPES.get(key), f"{path}:{_line(doc, key)}")
    for item in doc.get("layers") or []:
        if not isinstance(item, dict):
            continue  # the importer names this
        for key, value in item.items():
            _check_value(key, value, LAYER_TYPES.get(key), f"{path}:{_line(item, key)}")
    for item in doc.get("unload") or []:
        if not isinstance(item, dict):
            raise ConfigError("an `unload` entry must be a mapping", where=f"{path}:1")


def _check_value(key: Any, value: Any, kinds: tuple[str, ...] | None, where: str) -> None:
    kinds = kinds or (*_SCALARS, _LIST)  # a key this table does not know: no nesting
    if _kind(value) not in kinds:
        raise ConfigError(
            f"`{key}` holds {_found(value)}",
            where=where,
            hint="allowed: " + " or ".join(k if k != _LIST else "a list" for k in kinds),
        )
    if isinstance(value, str):
        _check_text(key, value, where)
    if isinstance(value, list) and key not in ("layers", "unload"):
        if len(value) > (32 if key == "snoop" else MAX_LIST):  # snoop: its 32 registers
            raise ConfigError(
                f"`{key}` lists {len(value)} values", where=where, hint=f"at most {MAX_LIST}"
            )
        for item in value:
            if _kind(item) not in (_INT, _STR):
                raise ConfigError(
                    f"`{key}` lists {_found(item)}", where=where, hint="allowed: integers or text"
                )
            if isinstance(item, str):
                _check_text(key, item, where)


def _check_text(key: Any, value: str, where: str) -> None:
    if len(value) > MAX_TEXT:
        raise ConfigError(
            f"`{key}` is {len(value)} characters long", where=where, hint=f"at most {MAX_TEXT}"
        )
    if key in _NAMED and not NAME_PATTERN.fullmatch(value):
        raise ConfigError(
            f"`{key}` {value!r} is not a plain name",
            where=where,
            hint="use letters, digits, '_', '-' and '.', starting with a letter, digit or '_'",
        )


#: dtypes of stored values: real numbers, dense, on the CPU (docs/hardware/checkpoint-format.md §3).
CHECKPOINT_DTYPES = frozenset(
    {torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8}
    | {torch.int16, torch.int32, torch.int64}
)
#: Stored integers (weights, bias, shifts) are far below this in magnitude.
MAX_MAGNITUDE = 2**31
MAX_KEY = 256


def check_checkpoint_doc(doc: dict[str, Any], path: str) -> None:
    """The fields cnnforge reads from a vendor checkpoint hold values of the documented types."""
    for key, kinds in (("arch", (str,)), ("epoch", (int, float)), ("extras", (dict,))):
        value = doc.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            raise ConfigError(
                f"`{key}` holds a {type(value).__name__}",
                where=path,
                hint="allowed: " + " or ".join(k.__name__ for k in kinds),
            )
    epoch = doc.get("epoch")
    if isinstance(epoch, int | float) and not (math.isfinite(epoch) and abs(epoch) < MAX_MAGNITUDE):
        raise ConfigError(
            f"`epoch` is {epoch!r}, not a finite epoch number",
            where=path,
            hint="an epoch is a whole number of training epochs",
        )
    arch = doc.get("arch")
    if isinstance(arch, str) and len(arch) > MAX_TEXT:
        raise ConfigError(f"`arch` is {len(arch)} characters long", where=path)
    state = doc.get("state_dict")
    if not isinstance(state, dict):
        return  # the importer names this
    for key, value in state.items():
        if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY:
            raise ConfigError(
                f"state_dict key {str(key)[:40]!r} is not a name",
                where=path,
                hint=f"keys are module paths of 1 to {MAX_KEY} characters",
            )
        check_checkpoint_value(value, f"state_dict[{key!r}]", path)


def check_checkpoint_value(value: Any, what: str, path: str) -> None:
    """A real-valued, finite, dense CPU tensor (or a plain number) of moderate magnitude."""
    allowed = "a dense CPU tensor of " + ", ".join(
        sorted(str(d).replace("torch.", "") for d in CHECKPOINT_DTYPES)
    )
    if isinstance(value, bool) or not isinstance(value, int | float | torch.Tensor):
        raise ConfigError(
            f"`{what}` holds a {type(value).__name__}", where=path, hint=f"allowed: {allowed}"
        )
    if isinstance(value, int | float):
        if not math.isfinite(value) or abs(value) >= MAX_MAGNITUDE:
            raise ConfigError(
                f"`{what}` is {value!r}", where=path, hint=f"allowed: |value| < {MAX_MAGNITUDE}"
            )
        return
    tensor = value
    if tensor.layout != torch.strided or tensor.is_quantized or tensor.device.type != "cpu":
        found = f"{tensor.layout} {tensor.device.type} tensor".replace("torch.", "")
        raise ConfigError(f"`{what}` is a {found}", where=path, hint=f"allowed: {allowed}")
    if tensor.dtype not in CHECKPOINT_DTYPES:
        dtype = str(tensor.dtype).replace("torch.", "")
        raise ConfigError(f"`{what}` has dtype {dtype}", where=path, hint=f"allowed: {allowed}")
    if tensor.numel() == 0:
        return
    data = tensor.detach().to(torch.float64)
    if not bool(torch.isfinite(data).all()):
        raise ConfigError(
            f"`{what}` holds NaN or infinite values", where=path, hint="allowed: finite numbers"
        )
    biggest = float(data.abs().max())
    if biggest >= MAX_MAGNITUDE:
        raise ConfigError(
            f"`{what}` holds {biggest:g}", where=path, hint=f"allowed: |value| < {MAX_MAGNITUDE}"
        )


class _InertOptimizer:
    """Stands in for a ``torch.optim`` class named in a vendor checkpoint: nothing of it runs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs

    def __setstate__(self, state: Any) -> None:
        del state


def inert_optimizer_globals(names: list[str], path: str) -> list[tuple[type, str]]:
    """Stand-ins for the ``torch.optim`` classes a checkpoint names, so no crafted pickle runs a
    real constructor (docs/hardware/checkpoint-format.md §1); any other global refused."""
    out = []
    for name in names:
        module, _, attr = name.rpartition(".")
        if not (module == "torch.optim" or module.startswith("torch.optim.")) or not (
            attr.isidentifier()
        ):
            raise ConfigError(
                f"the checkpoint needs the global {name[:80]!r}, which is not allowed",
                where=path,
                hint="only torch.optim classes are accepted besides tensors and containers",
            )
        stand_in = type(attr, (_InertOptimizer,), {"__module__": __name__, "stored_as": name})
        out.append((stand_in, name))
    return out
