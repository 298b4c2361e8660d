"""Frontends: from a user's model (PyTorch module, ONNX file) to a float ``Network`` that computes
what the model computes; ``load_network`` is the one call the pipeline needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnnforge.errors import CnnforgeError, InputError
from cnnforge.ir import Network

if TYPE_CHECKING:
    from cnnforge.frontend.loading import ModelSpec

UNTRAINED_SEED = 0  # torch.manual_seed for models built without a checkpoint


def is_untrained(spec: ModelSpec, checkpoint: Path | None) -> bool:
    """Whether ``spec`` is built with untrained weights: a reference or class (not a model
    object, which has its own weights, nor an ONNX file, which carries them) and no checkpoint."""
    from cnnforge.frontend.onnx import is_onnx_spec

    if checkpoint is not None or not isinstance(spec, str | type):
        return False
    return not (isinstance(spec, str) and is_onnx_spec(spec))


def untrained_note(spec: ModelSpec, checkpoint: Path | None, what: str = "the results") -> None:
    """Warn (``errors.Note``: the CLI prints it after the command succeeds) that a model
    without --checkpoint runs on untrained weights, so ``what`` are not a trained model's."""
    import warnings

    from cnnforge.errors import Note

    if not is_untrained(spec, checkpoint):
        return
    name = spec if isinstance(spec, str) else spec.__name__
    warnings.warn(
        f"{name} has no --checkpoint: untrained weights (torch.manual_seed({UNTRAINED_SEED}), "
        f"the same in every command), so {what} are not a trained model's",
        Note,
        stacklevel=2,
    )


def load_network(
    spec: ModelSpec,
    input_shape: Sequence[int] | None,
    model_args: Mapping[str, Any] | None = None,
    checkpoint: Path | None = None,
    *,
    max_channels: int | None = None,
    max_rows: int | None = None,
    device: str = "the device",
) -> Network:
    """Load ``spec`` (file.py:Name, pkg.mod:Name, short name, module, ``.onnx``) as a verified
    ``Network``, seeded with ``UNTRAINED_SEED``; refused early when over memory or device limits."""
    from cnnforge.frontend.onnx import is_onnx_spec

    if isinstance(spec, str) and is_onnx_spec(spec):
        return _load_onnx_spec(spec, input_shape, model_args, checkpoint)
    import torch

    from cnnforge.frontend.capture import capture
    from cnnforge.frontend.footprint import (
        check_attribute_access,
        check_channels,
        check_footprint,
        meta_model,
        model_code_error,
    )
    from cnnforge.frontend.loading import load_model, model_name
    from cnnforge.frontend.numerics import check_model_values

    def budget(factory: Any, where: str) -> None:
        meta = meta_model(factory, model_args or {})
        check_footprint(meta, input_shape, where)
        if meta is not None and max_channels is not None:
            check_channels(meta, max_channels, device)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(UNTRAINED_SEED)
        module = load_model(spec, model_args or {}, checkpoint, before_build=budget)
    if input_shape is not None and max_rows is not None:  # after the memory estimate, not traced
        _check_rows(tuple(int(n) for n in input_shape), max_rows, device)
    where = spec if isinstance(spec, str) else model_name(spec)
    if not isinstance(spec, str | type) and max_channels is not None:  # an object: built already
        check_channels(module, max_channels, device)
    check_attribute_access(module, where)
    try:
        check_model_values(module)  # NaN weights, negative BN variance: named here (issue 18)
        return capture(module, input_shape, name=model_name(spec), handed_over=True)
    except (CnnforgeError, MemoryError):
        raise
    except Exception as exc:  # raised in the user's own code (an attribute, a hook): theirs
        raise model_code_error(exc) from None


def _load_onnx_spec(
    spec: str, input_shape: Sequence[int] | None, model_args: Any, checkpoint: Path | None
) -> Network:
    """An ONNX file: the same model-level Network (frontend/onnx.py), which carries its weights."""
    from cnnforge.frontend.onnx import load_onnx

    if model_args or checkpoint is not None:
        raise InputError(
            "--model-arg and --checkpoint do not apply to an ONNX file",
            hint="the .onnx file carries its weights: drop --model-arg and --checkpoint",
        )
    return load_onnx(spec, input_shape)


def _check_rows(shape: tuple[int, ...], max_rows: int, device: str) -> None:
    """An input taller or wider than the device's row/column counter is refused at once."""
    big = max(shape[1:], default=0)
    if big > max_rows:
        raise InputError(
            f"input {'x'.join(map(str, shape))}: {big} rows or columns; {device} reads at most "
            f"{max_rows} per layer",
            hint="give a smaller --input-shape (or fold the input into channels: --fold)",
        )


__all__ = ["UNTRAINED_SEED", "is_untrained", "load_network", "untrained_note"]
