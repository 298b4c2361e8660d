"""Where a command's network comes from (exactly one of MODEL, ``--network``, the vendor pair),
checked in one place by ``model_source``, and the sample it runs on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cnnforge.devices import Capabilities
from cnnforge.errors import InputError
from cnnforge.ir import Network
from cnnforge.samples import InputArray, load_input_array

if TYPE_CHECKING:
    from cnnforge.pipeline.targets import Target

MODEL, NETWORK, VENDOR = "model", "network", "vendor"


@dataclass(frozen=True)
class ModelSource:
    """The one source a command was given (``kind``: model, network or vendor)."""

    kind: str
    model: str | None = None
    checkpoint: Path | None = None
    network: Path | None = None
    ai8x_yaml: Path | None = None
    ai8x_checkpoint: Path | None = None


def model_source(
    model: str | None,
    checkpoint: Path | None = None,
    network: Path | None = None,
    ai8x_yaml: Path | None = None,
    ai8x_checkpoint: Path | None = None,
    *,
    hint: str = "give MODEL, or --ai8x-yaml with --ai8x-checkpoint",
) -> ModelSource:
    """Exactly one of MODEL [--checkpoint], --network, or the vendor pair; else InputError."""
    if ai8x_yaml is not None or ai8x_checkpoint is not None:
        if ai8x_yaml is None or ai8x_checkpoint is None:
            raise InputError("--ai8x-yaml and --ai8x-checkpoint must be given together")
        if model is not None:
            raise InputError(f"give MODEL ({model}) or --ai8x-yaml, not both")
        if network is not None or checkpoint is not None:
            raise InputError(
                "give the vendor pair or --network/--checkpoint, not both",
                hint="--ai8x-yaml with --ai8x-checkpoint describe the whole network",
            )
        return ModelSource(VENDOR, ai8x_yaml=Path(ai8x_yaml), ai8x_checkpoint=Path(ai8x_checkpoint))
    if network is not None:
        if model is not None or checkpoint is not None:
            raise InputError("give --network alone, or MODEL with --checkpoint, not both")
        return ModelSource(NETWORK, network=Path(network))
    if model is None:
        raise InputError("no network given", hint=hint)
    return ModelSource(MODEL, model=model, checkpoint=checkpoint)


def load_limits(device: Capabilities | None) -> dict[str, Any]:
    """The keyword limits ``frontend.load_network`` checks a model against before tracing (its
    channel counts and rows/columns on ``device``); none without a device (analysis)."""
    if device is None:
        return {}
    return {
        "max_channels": device.max_channels,
        "max_rows": device.max_row_col,
        "device": device.name,
    }


def read_sample(sample: Path | np.ndarray | None, option: str = "--sample") -> InputArray:
    """The sample as int64 values in [-128, 127] (an .npy path or an array; floats x 128)."""
    if sample is None:
        raise InputError(
            "no sample given", hint="pass --sample x.npy (int8 values or floats, C,H,W)"
        )
    return load_input_array(sample, option)


def match_sample(sample: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The sample without batch axis; InputError naming both shapes if it does not fit."""
    shape = tuple(shape)
    if sample.shape == shape:
        return sample
    if sample.shape == (1, *shape):
        return sample[0]
    raise InputError(
        f"sample shape {tuple(sample.shape)} does not match the model input {shape}",
        hint=f"give an array of shape {shape} or {(1, *shape)}",
    )


def read_calibration(
    calibration: Path | np.ndarray | None, shape: tuple[int, ...]
) -> InputArray | None:
    """``--calibration``: N samples of the model's input ``shape`` (one sample gets N=1)."""
    import dataclasses

    if calibration is None:
        return None
    read = load_input_array(calibration, "--calibration")
    values = read.values if read.values.ndim == len(shape) + 1 else read.values[None]
    if tuple(values.shape[1:]) != tuple(shape):
        raise InputError(
            f"--calibration shape {tuple(read.values.shape)} does not match the model input "
            f"{tuple(shape)}",
            where=read.source,
            hint=f"give N,{','.join(map(str, shape))} samples",
        )
    return dataclasses.replace(read, values=values)


def shipped_shape(model: object) -> tuple[int, ...] | None:
    """A shipped model's own input shape (``qat-unet``: 3,32,32), else None (any other model)."""
    from cnnforge.models import default_input_shape, model_names

    if isinstance(model, str) and model in model_names():
        return tuple(default_input_shape(model))
    return None


def default_shape(model: object, sample: np.ndarray) -> tuple[int, ...]:
    """Without --input-shape: a shipped model's own shape, else the sample's (batch dropped)."""
    shipped = shipped_shape(model)
    if shipped is not None:
        return shipped
    shape = tuple(int(n) for n in sample.shape)
    return shape[1:] if len(shape) == 4 else shape


def network_for_cli(
    model: str | None,
    input_shape: tuple[int, ...] | None,
    ai8x_yaml: Path | str | None,
    ai8x_checkpoint: Path | str | None,
    target: Target,
) -> Network | None:
    """The network of the vendor pair (read by ``target``'s reader), or None when MODEL is to be
    loaded; exactly one source."""
    source = model_source(
        model,
        ai8x_yaml=None if ai8x_yaml is None else Path(ai8x_yaml),
        ai8x_checkpoint=None if ai8x_checkpoint is None else Path(ai8x_checkpoint),
    )
    if source.kind == VENDOR:
        return pair_network(source, input_shape, target)
    if input_shape is None and not str(model).lower().endswith(".onnx"):  # ONNX: its own
        raise InputError("MODEL needs --input-shape", hint="e.g. --input-shape 3,64,64")
    return None


def pair_network(
    source: ModelSource, input_shape: tuple[int, ...] | None, target: Target
) -> Network:
    """The network of a vendor-pair source, read by ``target``'s reader (its plan is not needed
    here); InputError for a target that reads no vendor pair."""
    if target.read_pair is None:
        raise InputError(
            f"--device {target.name} does not read a vendor pair (--ai8x-yaml)",
            hint="give MODEL instead",
        )
    return target.read_pair(source, input_shape, target.device)
