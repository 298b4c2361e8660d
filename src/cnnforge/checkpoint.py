"""cnnforge's own quantized checkpoint (docs/checkpoint-format.md): a ``torch.save`` dict of
strings, ints, dicts and tensors that loads with weights_only=True."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cnnforge.durable import save_torch
from cnnforge.errors import CnnforgeError, InputError
from cnnforge.ir import Network
from cnnforge.outputs import atomic_output_file
from cnnforge.samples import refuse_npy
from cnnforge.version import __version__

#: Network and layer names a checkpoint may carry: they reach file names, YAML, C and plots.
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:+-]{0,127}")

FORMAT = "cnnforge-quantized/1"


def save_quantized(
    network: Network,
    path: Path | str,
    *,
    overwrite: bool = True,
    output_scales: dict[str, int] | None = None,
    network_json: str | None = None,
) -> None:
    """Write quantized ``network`` atomically to ``path``, with calibrated ``output_scales`` and
    ``network_json`` when the caller has it already."""
    if not network.is_quantized:
        missing = [x.name for x in network.layers if x.has_weights and x.quant is None]
        raise InputError(f"layers {missing[:4]} are not quantized", hint="run quantize first")
    layers: dict[str, dict[str, Any]] = {}
    for layer in network.layers:
        if layer.quant is None:
            continue
        entry: dict[str, Any] = {
            "weight": torch.from_numpy(np.ascontiguousarray(layer.quant.weights)),
            "weight_bits": int(layer.quant.weight_bits),
            "output_shift": int(layer.quant.output_shift),
        }
        if layer.quant.bias is not None:
            entry["bias"] = torch.from_numpy(np.ascontiguousarray(layer.quant.bias))
        layers[layer.name] = entry
    doc = {
        "format": FORMAT,
        "generator": f"cnnforge {__version__}",
        "network": network_json if network_json is not None else network.to_json(indent=None),
        "layers": layers,
        "output_scales": {str(k): int(v) for k, v in (output_scales or {}).items()},
    }
    with atomic_output_file(Path(path), overwrite=overwrite) as tmp:
        save_torch(doc, tmp)  # a full disk names the file (durable.py)


def load_quantized(path: Path | str) -> Network:
    """Read a checkpoint written by ``save_quantized`` (weights_only); InputError otherwise."""
    path = Path(path)
    doc = _load(path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError(
            f"not a cnnforge quantized checkpoint (expected format {FORMAT!r})",
            where=str(path),
            hint="write one with `cnnforge quantize`; vendor checkpoints need --ai8x-checkpoint",
        )
    text = doc.get("network")
    if not isinstance(text, str):
        raise InputError("checkpoint has no network description", where=str(path))
    try:
        network = Network.from_json(text)
    except InputError as exc:
        raise InputError(f"network description is broken: {exc.what}", where=str(path)) from None
    except (TypeError, ValueError, KeyError) as exc:
        raise InputError(f"network description is broken: {exc}", where=str(path)) from None
    except RecursionError:
        raise InputError(
            "network description is nested too deeply to be a network",
            where=str(path),
            hint="write the checkpoint with `cnnforge quantize`; do not edit it",
        ) from None
    _check_consistent(network, path)
    _check_layers(network, doc.get("layers"), path)
    return network


def _check_consistent(network: Network, path: Path) -> None:
    """A hand-edited description must still be a runnable quantized hardware network: the IR
    invariants (passes.verify) and what the simulator runs (sim.checks), named per layer."""
    from cnnforge.passes.verify import verify
    from cnnforge.sim.checks import check_network

    for name in (network.name, *(x.name for x in network.layers)):
        if not NAME.fullmatch(name):
            raise InputError(
                f"name {name[:40]!r} in the network description is not a plain name",
                where=str(path),
                hint="names use letters, digits and _ . : + - (at most 128)",
            )
    try:
        if not network.is_hardware or not network.layers:
            raise InputError("the network description is not a quantized hardware network")
        check_network(network, None)  # a checkpoint names no device: the generic checks
        if all(x.out_shape for x in network.layers):  # shapes recorded: they must agree
            verify(network)
    except CnnforgeError as exc:
        where = f"{exc.where}: " if exc.where else ""
        raise InputError(
            f"network description is inconsistent: {where}{exc.what}",
            where=str(path),
            hint="write the checkpoint with `cnnforge quantize`; do not edit it",
        ) from None
    except (ArithmeticError, ValueError, IndexError, TypeError) as exc:
        raise InputError(
            f"network description is inconsistent: {type(exc).__name__}: {exc}",
            where=str(path),
            hint="write the checkpoint with `cnnforge quantize`; do not edit it",
        ) from None


def is_quantized_checkpoint(path: Path | str) -> bool:
    """True when ``path`` is a readable cnnforge quantized checkpoint (False for anything else)."""
    try:
        doc = _load(Path(path))
    except InputError:
        return False
    return isinstance(doc, dict) and doc.get("format") == FORMAT


def _load(path: Path) -> Any:
    if not path.is_file():
        raise InputError("checkpoint file not found", where=str(path))
    refuse_npy(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a broken file fails the load in many ways (OSError, KeyError ...)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(
            f"cannot read checkpoint: {first[:200]}",
            where=str(path),
            hint="cnnforge checkpoints load with weights_only=True; is this the right file?",
        ) from None


def _check_layers(network: Network, layers: Any, path: Path) -> None:
    """The tensors beside the JSON must agree with it (a hand-edited file is refused)."""
    if not isinstance(layers, dict):
        raise InputError("checkpoint has no `layers` table", where=str(path))
    for layer in network.layers:
        if layer.quant is None:
            continue
        entry = layers.get(layer.name)
        if not isinstance(entry, dict) or not _same(entry.get("weight"), layer.quant.weights):
            raise InputError(
                f"layer {layer.name}: weights differ from the network description", where=str(path)
            )
        if entry.get("output_shift") != layer.quant.output_shift or not _same(
            entry.get("bias"), layer.quant.bias
        ):
            raise InputError(
                f"layer {layer.name}: bias or output_shift differ from the network description",
                where=str(path),
            )


def _same(tensor: Any, array: np.ndarray | None) -> bool:
    if array is None or tensor is None:
        return array is None and tensor is None
    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided:
        return False
    try:
        return np.array_equal(tensor.numpy(), array)
    except (RuntimeError, TypeError):  # meta, quantized or other tensors without numpy values
        return False
