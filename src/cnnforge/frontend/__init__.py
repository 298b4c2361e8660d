"""Frontends: from a user's model (PyTorch module or vendor YAML + checkpoint) to a ``Network``.

``load_network`` is the one call the pipeline needs for PyTorch models: load (and build) the
model named by a spec, load its checkpoint, capture it into a model-level float ``Network``
that computes what the model computes (frontend/capture.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cnnforge.errors import CnnforgeError, InputError
from cnnforge.ir import Network

UNTRAINED_SEED = 0  # torch.manual_seed for models built without a checkpoint


def load_network(
    spec: str,
    input_shape: Sequence[int] | None,
    model_args: Mapping[str, Any] | None = None,
    checkpoint: Path | None = None,
    *,
    max_channels: int | None = None,
    device: str = "the device",
) -> Network:
    """Load the model named by ``spec`` (file.py:Name, pkg.mod:Name or short name) and capture
    it (torch.fx, else torch.export), checked against the eager model (frontend/capture.py);
    or import ``spec`` when it is an ``.onnx`` file (``input_shape`` may then be None).

    The model is built with torch's generator seeded with ``UNTRAINED_SEED`` (and restored
    after), so a model without a checkpoint has the same weights in every command and run.
    Before that it is built on the meta device and its memory estimated from the shapes
    (frontend/footprint.py): above the limit (``--max-memory``), or with more channels than
    ``max_channels`` (``device``'s limit), it is refused before any real work.
    """
    from cnnforge.frontend.onnx import is_onnx_spec

    if is_onnx_spec(spec):  # an ONNX file: the same model-level Network (frontend/onnx.py)
        from cnnforge.frontend.onnx import load_onnx

        if model_args or checkpoint is not None:
            raise InputError(
                "--model-arg and --checkpoint do not apply to an ONNX file",
                hint="the .onnx file carries its weights: drop --model-arg and --checkpoint",
            )
        return load_onnx(spec, input_shape)
    import torch

    from cnnforge.frontend.capture import capture
    from cnnforge.frontend.footprint import (
        check_attribute_access,
        check_channels,
        check_footprint,
        meta_model,
        model_code_error,
    )
    from cnnforge.frontend.loading import load_model
    from cnnforge.frontend.numerics import check_model_values

    def budget(factory: Any, where: str) -> None:
        meta = meta_model(factory, model_args or {})
        check_footprint(meta, input_shape, where)
        if meta is not None and max_channels is not None:
            check_channels(meta, max_channels, device)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(UNTRAINED_SEED)
        module = load_model(spec, model_args or {}, checkpoint, before_build=budget)
    check_attribute_access(module, spec)
    try:
        check_model_values(module)  # NaN weights, negative BN variance: named here (issue 18)
        return capture(module, input_shape, name=spec.rpartition(":")[2] or spec, handed_over=True)
    except (CnnforgeError, MemoryError):
        raise
    except Exception as exc:  # raised in the user's own code (an attribute, a hook): theirs
        raise model_code_error(exc) from None


__all__ = ["UNTRAINED_SEED", "load_network"]
