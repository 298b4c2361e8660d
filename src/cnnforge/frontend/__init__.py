"""Frontends: from a user's model (PyTorch module or vendor YAML + checkpoint) to a ``Network``.

``load_network`` is the one call the pipeline needs for PyTorch models: load (and build) the
model named by a spec, load its checkpoint, trace it into a model-level float ``Network``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cnnforge.ir import Network


def load_network(
    spec: str,
    input_shape: Sequence[int],
    model_args: Mapping[str, Any] | None = None,
    checkpoint: Path | None = None,
) -> Network:
    """Load the model named by ``spec`` (file.py:Name, pkg.mod:Name or short name) and trace it."""
    from cnnforge.frontend.numerics import check_model_values
    from cnnforge.frontend.torch_fx import load_model, trace

    module = load_model(spec, model_args or {}, checkpoint)
    check_model_values(module)  # NaN weights, negative BN variance: named here (issue 18)
    return trace(module, input_shape, name=spec.rpartition(":")[2] or spec)


__all__ = ["load_network"]
