"""Typer's coercion of the plain option values (str, int, Path, list[str]) without pydantic.

typer >= 0.29 coerces every parameter's value, the defaults too, through a pydantic
``TypeAdapter`` built on first use: importing pydantic and building the adapters costs a
command ~0.12 s, 5% of a vendor-pair ``compile`` (benchmarks/vs_vendor.py). For the values a
command line gives -- a string, a decimal integer within the option's range, a non-empty path,
a list of strings -- the result is known without pydantic (the same value, ``int(text)``,
typer's own path checks on ``Path(text)``, a list); every other value (a bad integer, a float,
a prompt's bytes, ...) goes to typer's own coercion, so results and error messages are typer's
(tests/cli/test_cli_coercion.py compares the two).

This reaches into typer's runtime-parameter hook (``_runtime_param``, built lazily by
``get_runtime_param``); where a typer release lacks it, nothing is installed and typer coerces
as usual.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:  # typer's internals as of 0.29; without them, typer's own coercion runs
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
    from typer._param_types import coerce_cli_path
except ImportError:  # pragma: no cover - another typer release
    RuntimeParam = None  # type: ignore[assignment,misc]

#: A decimal integer as ``int()`` and pydantic both read it (no sign on zero, no leading zeros).
_DECIMAL = re.compile(r"-?[1-9][0-9]{0,17}|0")
#: A decimal fraction both read alike (no exponent, no inf/nan, no underscores).
_FLOAT = re.compile(r"-?[0-9]{1,15}(\.[0-9]{1,15})?")


def install(param: Any) -> bool:
    """Give ``param`` (a typer option or argument) the plain coercion; True when installed.

    Any annotation: a value typer's coercion would not pass through unchanged (the absent
    ``None`` is answered before coercion) goes to typer's own, built when first needed."""
    descriptor = getattr(param, "type_descriptor", None)
    if (
        RuntimeParam is None
        or descriptor is None
        or getattr(param, "_runtime_param", 0) is not None
    ):
        return False
    param._runtime_param = _Plain(descriptor.parameter_info, descriptor.annotation, descriptor)
    return True


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class _Plain(RuntimeParam):
        """The known results for plain values; anything else to typer's own coercion."""

        descriptor: TypeDescriptor

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            known = _known(self.descriptor, value, param, ctx)
            if known is not None:
                return known
            typer_own = build_runtime_param(self.descriptor)
            return typer_own._coerce_value(value, param=param, ctx=ctx)


def _known(descriptor: TypeDescriptor, value: Any, param: Any, ctx: Any) -> Any:
    """What typer's coercion returns for ``value``, or None where only typer knows."""
    annotation, info = descriptor.annotation, descriptor.parameter_info
    if info.parser is not None or descriptor.is_file:
        return None
    if annotation is str and isinstance(value, str):
        return value
    if annotation == list[str] and isinstance(value, list | tuple):
        return list(value) if all(isinstance(v, str) for v in value) else None
    if annotation is Path and isinstance(value, str | Path) and str(value) and not info.path_type:
        return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
    if annotation in (int, float) and not info.clamp:
        number = _number(annotation, value)
        low, high = info.min, info.max
        if (
            number is not None
            and (low is None or number >= low)
            and (high is None or number <= high)
        ):
            return number
    return None


def _number(kind: type, value: Any) -> int | float | None:
    """``value`` as an int (float), where it is one or is the plain decimal text of one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, kind) or (kind is float and isinstance(value, int)):
        return kind(value)
    pattern = _DECIMAL if kind is int else _FLOAT
    if isinstance(value, str) and pattern.fullmatch(value):
        return kind(value)
    return None
