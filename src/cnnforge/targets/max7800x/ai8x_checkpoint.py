"""Reading a vendor quantized checkpoint (``*-q.pth.tar``) safely (``weights_only``, inert optimizer
stand-ins) into per-layer records in stored order (docs/hardware/checkpoint-format.md §1, §5)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cnnforge.errors import ConfigError
from cnnforge.samples import refuse_npy
from cnnforge.targets.max7800x.ai8x_validate import (
    check_checkpoint_doc,
    check_regular_file,
    inert_optimizer_globals,
)


@dataclass(frozen=True, eq=False)
class CheckpointLayer:
    """The keys of one weight-owning module ``module`` (docs/hardware/checkpoint-format.md §3)."""

    module: str  # key prefix P of P.op.weight (or P.weight)
    weight_key: str
    weight: np.ndarray = field(repr=False)  # int64, torch layout
    bias: np.ndarray | None = field(repr=False)  # raw stored values (float64), or None
    output_shift: int  # 0 when absent
    weight_bits: int  # as stored; 0 when absent


@dataclass(frozen=True)
class CheckpointData:
    """What cnnforge keeps of a vendor checkpoint."""

    path: str
    arch: str | None
    epoch: int | None
    layers: tuple[CheckpointLayer, ...]
    extras: dict[str, Any] = field(default_factory=dict)


def _optim_globals(path: Path) -> list[Any]:
    """Inert stand-ins for the pickled globals beyond torch's safe set (``torch.optim`` only)."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
    except Exception as exc:  # torch reports a broken file in many ways (OSError, KeyError ...)
        raise ConfigError(
            f"not a PyTorch checkpoint: {type(exc).__name__}: {str(exc)[:200]}", where=str(path)
        ) from None
    return inert_optimizer_globals(names, str(path))


def load_checkpoint_dict(path: Path | str) -> dict[str, Any]:
    """``torch.load(..., weights_only=True)`` of a vendor checkpoint, as a dict."""
    path = Path(path)
    check_regular_file(path, "checkpoint file")
    refuse_npy(path)
    extra = _optim_globals(path)
    try:
        with torch.serialization.safe_globals(extra):
            doc = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # a broken or crafted file: any failure of the load is its fault
        what = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ConfigError(f"cannot load the checkpoint: {what}", where=str(path)) from None
    if not isinstance(doc, dict):
        raise ConfigError("the checkpoint is not a dict", where=str(path))
    return doc


def read_checkpoint(path: Path | str) -> CheckpointData:
    """Load a quantized vendor checkpoint and list its weight layers in stored order (§5)."""
    doc = load_checkpoint_dict(path)
    where = str(path)
    check_checkpoint_doc(doc, where)  # issue 18: typed values from here on
    state = doc.get("state_dict")
    if not isinstance(state, dict):
        raise ConfigError("no `state_dict` in the checkpoint", where=where)
    layers = []
    for key, value in state.items():
        _refuse_batchnorm(key, value, where)
        if key.count(".") and key.endswith(".weight"):
            layers.append(_layer(state, key, where))
    arch = doc.get("arch")
    epoch = doc.get("epoch")
    extras = doc.get("extras")
    return CheckpointData(
        path=where,
        arch=str(arch) if arch is not None else None,
        epoch=int(epoch) if isinstance(epoch, int | float) else None,
        layers=tuple(layers),
        extras=dict(extras) if isinstance(extras, dict) else {},
    )


def _refuse_batchnorm(key: str, value: Any, where: str) -> None:
    """Unfolded batch norm (any `bn.` key, or a 1-D weight) is refused, never ignored (§3)."""
    one_d_weight = key.endswith(".weight") and isinstance(value, torch.Tensor) and value.dim() < 2
    if ".bn." in f".{key}" or one_d_weight:
        raise ConfigError(
            f"`{key}` is a batch-norm entry: the checkpoint is not folded",
            where=where,
            hint="fold batch norm into the convolutions and quantize before importing",
        )


def _scalar(state: dict[str, Any], key: str, where: str) -> float | None:
    value = state.get(key)
    if value is None:
        return None
    tensor = torch.as_tensor(value)
    if tensor.numel() != 1:
        raise ConfigError(f"`{key}` must have exactly one element", where=where)
    return float(tensor.reshape(()).item())


def _integers(tensor: Any, key: str, where: str) -> np.ndarray:
    """Integer values of a stored tensor (any dtype); fractional values mean not quantized."""
    if not isinstance(tensor, torch.Tensor):
        raise ConfigError(f"`{key}` is not a tensor", where=where)
    data = tensor.detach().to(torch.float64).numpy()
    if not np.all(np.isfinite(data)) or np.any(data != np.floor(data)):
        raise ConfigError(
            f"`{key}` holds non-integer values: not a quantized (-q) checkpoint",
            where=where,
            hint="quantize it first (cnnforge quantize, or the vendor's quantize.py)",
        )
    return data


def _layer(state: dict[str, Any], key: str, where: str) -> CheckpointLayer:
    operation = key[: -len(".weight")]
    # The vendor's rule (its checkpoint loader): P.X.weight keeps its shift and bits at P.*
    module = key.rsplit(".", 2)[0] if key.count(".") >= 2 else operation
    weight = _integers(state[key], key, where).astype(np.int64)
    bias = state.get(operation + ".bias")
    adjust = _scalar(state, module + ".adjust_output_shift", where)
    if adjust is not None and adjust != 0:
        raise ConfigError(
            f"`{module}` has adjust_output_shift = 1: a QAT checkpoint, not a quantized one",
            where=where,
            hint="run the quantizer on it first",
        )
    shift = _scalar(state, module + ".output_shift", where)
    bits = _scalar(state, module + ".weight_bits", where)
    for name, value in (("output_shift", shift), ("weight_bits", bits)):
        if value is not None and (not math.isfinite(value) or value != int(value)):
            raise ConfigError(f"`{module}.{name}` is not an integer ({value})", where=where)
    return CheckpointLayer(
        module=module,
        weight_key=key,
        weight=weight,
        bias=None if bias is None else _integers(bias, operation + ".bias", where),
        output_shift=int(shift or 0),
        weight_bits=int(bits or 0),
    )
