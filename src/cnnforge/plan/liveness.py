"""When each tensor of a network is live, and its geometry on the accelerator.

The formulas live in cnnforge.geometry (one per hardware fact); this module keeps the names the
planner, the validator and the C emitter have always imported from plan/liveness.py.
"""

from __future__ import annotations

from cnnforge.geometry import (
    BEFORE_FIRST,
    TensorGeometry,
    layer_in_channels,
    layer_in_geometry,
    live_intervals,
    main_input_shape,
    tensor_geometry,
)

__all__ = [
    "BEFORE_FIRST",
    "TensorGeometry",
    "layer_in_channels",
    "layer_in_geometry",
    "live_intervals",
    "main_input_shape",
    "tensor_geometry",
]
