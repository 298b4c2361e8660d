"""Argument parsing helpers and consoles shared by the command modules."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import typer
from rich.console import Console

from cnnforge.errors import InputError
from cnnforge.resources import check_input_shape

if TYPE_CHECKING:  # numpy and torch load when a command needs them (cnnforge --help stays fast)
    import numpy as np

# Piped output (files, `less`, CI logs) gets no width limit: rich would otherwise wrap tables at
# 80 columns into one word per line. Emoji codes stay text (``file.yaml:100:`` is a location).
PIPE_WIDTH = 100_000


class UnwrappedConsole(Console):
    """A console for pipes and files: no width limit, and nothing wrapped or cropped — a table's
    title longer than the table stays one line (rich would fold it to the table's width)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        kwargs.setdefault("no_wrap", True)
        kwargs.setdefault("overflow", "ignore")
        super().print(*objects, **kwargs)


def make_console(*, stderr: bool = False, file: IO[str] | None = None) -> Console:
    """A console that wraps at the terminal's width, and not at all when output is not a tty
    (``file``: a text file, always unwrapped and without colour)."""
    if file is not None:
        return UnwrappedConsole(file=file, width=PIPE_WIDTH, color_system=None, emoji=False)
    if Console(stderr=stderr).is_terminal:
        return Console(stderr=stderr, emoji=False, highlight=not stderr)
    return UnwrappedConsole(stderr=stderr, width=PIPE_WIDTH, emoji=False, highlight=not stderr)


console = make_console()
err_console = make_console(stderr=True)


@contextlib.contextmanager
def batch_progress(progress: Any = None) -> Iterator[Callable[[int, int], None] | None]:
    """On a terminal, the batches of the running epoch as a transient bar (in ``progress``
    when given, else a bar of its own); piped or logged output gets none (None)."""
    if not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    own = progress is None
    bar = progress or Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        console=console, transient=True,
    )  # fmt: skip
    task = bar.add_task("batches", total=None)

    def on_batch(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    if own:
        with bar:
            yield on_batch
    else:
        yield on_batch


def parse_shape(text: str, option: str = "--input-shape") -> tuple[int, ...]:
    """``"3,64,64"`` -> ``(3, 64, 64)``; accepts ``x`` as separator too."""
    parts = [p for p in text.replace("x", ",").replace(" ", "").split(",") if p]
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise InputError(
            f"{option} {text!r} is not a list of integers", hint="write C,H,W (or C,L for 1-D)"
        ) from None
    if len(shape) not in (2, 3) or any(n <= 0 for n in shape):
        raise InputError(
            f"{option} {text!r} must be C,H,W or C,L with positive sizes",
            hint="for example --input-shape 3,64,64",
        )
    check_input_shape(shape, option)  # absurd sizes and inputs beyond memory, before any work
    return shape


def model_input_shape(model: str | None, text: str | None) -> tuple[int, ...] | None:
    """``--input-shape``, else a shipped model's own shape, else None (the caller decides)."""
    from cnnforge.pipeline.sources import shipped_shape

    return parse_shape(text) if text else shipped_shape(model)


def parse_weight_bits(
    text: str, *, binary: bool = False, widths: tuple[int, ...] = (8, 4, 2, 1)
) -> int | str:
    """``--weight-bits``: one of ``widths`` (8, 4, 2, 1) or ``auto``; with ``binary``, also
    ``-1``/``binary``. Case and surrounding blanks are ignored.
    """
    low = text.strip().lower()
    if low == "auto":
        return "auto"
    if binary and low in ("binary", "bin", "-1"):
        return -1
    if low in {str(w) for w in widths if w > 0}:
        return int(low)
    named = ", ".join(str(w) for w in widths if w > 0)
    allowed = f"{named}, binary or auto" if binary else f"{named} or auto"
    raise InputError(f"--weight-bits {text!r} is not {allowed}", hint=f"use {allowed}")


def parse_bits_option(values: list[str] | None) -> int | dict[str, int]:
    """``["8"]`` -> 8; ``["4", "head=8"]`` -> ``{"*": 4, "head": 8}`` ("*": the default)."""
    default, per_layer = 8, {}
    for text in values or []:
        name, sep, raw = text.rpartition("=")
        try:
            bits = int(raw)
        except ValueError:
            raise InputError(f"--weight-bits {text!r} is not BITS or LAYER=BITS") from None
        if sep:
            per_layer[name] = bits
        else:
            default = bits
    if not per_layer:
        return default
    return {"*": default, **per_layer}


def parse_model_args(items: list[str] | None) -> dict[str, object]:
    """``["channels=(8,16,32)", "name=unet", "wide=True"]`` -> keyword arguments.

    Values are Python literals (``ast.literal_eval``: numbers, strings, tuples, lists, dicts,
    None, booleans; ``true``/``false``/``none`` in any case too), else the plain string.
    """
    out: dict[str, object] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.isidentifier():
            raise InputError(
                f"--model-arg {item!r} is not key=value", hint="e.g. --model-arg classes=21"
            )
        out[key] = _literal(raw)
    return out


def read_input_array(path: Path, option: str = "--input") -> np.ndarray:
    """An .npy of C,H,W / N,C,H,W (or C,L / N,C,L) int8 values or model-unit floats, as int64."""
    from cnnforge.samples import load_input_array

    return load_input_array(path, option).values


def old_name(option: str) -> Any:
    """A hidden option under an option's old name (``--length`` for ``--val-length``): still
    accepted, not listed in --help; ``renamed`` merges it into the new one."""
    import typer

    return typer.Option(None, option, hidden=True, help=f"The old name of {option}.")


def renamed(ctx: Any, name: str, old: str) -> Any:
    """The value of parameter ``name``, or of ``old`` (its hidden old name, ``old_name``) when
    that was given instead; both on the command line: InputError."""
    value, old_value = ctx.params[name], ctx.params[old]
    if old_value is None:
        return value
    source = ctx.get_parameter_source(name)  # typer's own click: compare by name
    if source is not None and source.name == "COMMANDLINE":
        flags = {p.name: p.opts[0] for p in ctx.command.params}
        raise InputError(
            f"{flags[old]} and {flags[name]} are one option ({flags[old]} is its old name)",
            hint=f"give {flags[name]} once",
        )
    return old_value


def _literal(raw: str) -> object:
    low = raw.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:  # literals only: ast.literal_eval never calls or looks up anything
        return ast.literal_eval(raw.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return raw


# ---- where a command computes (cnnforge.compute): the options train, adapt and evaluate share


def cpu_option() -> Any:
    return typer.Option(
        False, "--cpu", help="Compute on the CPU even where a CUDA GPU is present."
    )


def gpus_option() -> Any:
    return typer.Option(
        None,
        "--gpus",
        help="GPU index to compute on (default 0 where CUDA is present; under torchrun one per "
        "process: 0,1). --device stays the target chip.",
    )


def workers_option() -> Any:
    return typer.Option(
        None,
        "--workers",
        help="Data-loading processes (default: from the CPU cores; 0: the main process loads).",
    )


def amp_option() -> Any:
    return typer.Option(
        False, "--amp", help="Float epochs under bfloat16 autocast (never the QAT epochs)."
    )


def say_where(verb: str, world_size: int = 1) -> Any:
    """``on_start`` of train, adapt and evaluate: the first line says where the work runs
    (``training on cuda:0, NVIDIA H200`` / ``training on the CPU, 2 threads``)."""

    def show(device: Any) -> None:
        from cnnforge.compute import describe

        ranks = f" (rank 0 of {world_size}; each rank on its own device)" if world_size > 1 else ""
        console.print(f"{verb} on {describe(device)}{ranks}", highlight=False, markup=False)

    return show


# ---- the options several commands declare alike


def model_argument() -> Any:
    return typer.Argument(
        None, help="path/to/file.py:Name, package.module:Name, or a short name (unet-voc)."
    )


def model_arg_option() -> Any:
    return typer.Option(None, "--model-arg", help="Constructor argument key=value (repeatable).")


def ai8x_checkpoint_option() -> Any:
    return typer.Option(
        None, "--ai8x-checkpoint", help="The vendor quantized checkpoint of --ai8x-yaml."
    )
