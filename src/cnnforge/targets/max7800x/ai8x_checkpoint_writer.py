"""Write a quantized hardware ``Network``'s weights as a vendor (ai8x) ``-q`` checkpoint, loadable
with ``weights_only=True`` (layout: docs/hardware/checkpoint-format.md §7)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cnnforge.arithmetic import bias_to_checkpoint
from cnnforge.durable import save_torch
from cnnforge.errors import EmitError
from cnnforge.ir import BINARY_BITS, Layer, Network
from cnnforge.outputs import atomic_output_file
from cnnforge.ranges import verify_quantized

DEFAULT_EPOCH = 1000  # >= every QAT start epoch, so ai8x-training loads it as fused (§7)


def _scalar(value: float) -> torch.Tensor:
    return torch.tensor([float(value)], dtype=torch.float32)


def stored_weight_bits(layer: Layer) -> int:
    """The checkpoint's `weight_bits` (binary layers store 1, the YAML says `binary`)."""
    assert layer.quant is not None
    return 1 if layer.quant.weight_bits == BINARY_BITS else layer.quant.weight_bits


def layer_state(layer: Layer, module: str) -> OrderedDict[str, torch.Tensor]:
    """The state_dict entries of one quantized weight layer under module path ``module``."""
    q = layer.quant
    if q is None:
        raise EmitError("the layer is not quantized", where=f"layer {layer.name}")
    bits = stored_weight_bits(layer)
    state: OrderedDict[str, torch.Tensor] = OrderedDict()
    state[f"{module}.op.weight"] = torch.from_numpy(np.asarray(q.weights, dtype=np.float32))
    if q.bias is not None:
        if any(p.field == "bias" for p in verify_quantized(q, layer.wide)):
            raise EmitError("bias outside the 8-bit bias memory", where=f"layer {layer.name}")
        state[f"{module}.op.bias"] = torch.from_numpy(bias_to_checkpoint(q.bias, bits))
    state[f"{module}.output_shift"] = _scalar(q.output_shift)
    state[f"{module}.weight_bits"] = _scalar(bits)
    state[f"{module}.bias_bits"] = _scalar(bits)
    state[f"{module}.quantize_activation"] = _scalar(1)
    state[f"{module}.adjust_output_shift"] = _scalar(0)
    state[f"{module}.shift_quantile"] = _scalar(1)
    return state


def checkpoint_dict(
    network: Network,
    *,
    arch: str | None = None,
    epoch: int | None = None,
    modules: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The checkpoint as a plain dict (``modules``: layer name -> module path, default the name)."""
    modules = dict(modules or {})
    state: OrderedDict[str, torch.Tensor] = OrderedDict()
    seen: set[str] = set()
    for layer in network.layers:
        if not layer.has_weights:
            continue
        module = modules.get(layer.name, layer.name)
        if not module or module in seen or module.endswith(".op") or " " in module:
            raise EmitError(f"module path {module!r} is empty, repeated or invalid",
                            where=f"layer {layer.name}")  # fmt: skip
        seen.add(module)
        state.update(layer_state(layer, module))
    return {
        "arch": arch or network.name,
        "epoch": DEFAULT_EPOCH if epoch is None else int(epoch),
        "state_dict": state,
        "extras": {"clipping_method": "MAX_BIT_SHIFT", "generator": "cnnforge"},
    }


def write_checkpoint(
    network: Network,
    path: Path | str,
    *,
    arch: str | None = None,
    epoch: int | None = None,
    modules: Mapping[str, str] | None = None,
) -> Path:
    """Write the vendor-layout checkpoint for ``network`` to ``path`` atomically."""
    doc = checkpoint_dict(network, arch=arch, epoch=epoch, modules=modules)
    with atomic_output_file(Path(path)) as tmp:
        save_torch(doc, tmp)  # a full disk names the file (durable.py)
    return Path(path)
