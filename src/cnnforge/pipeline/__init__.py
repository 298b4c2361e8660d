"""The orchestrator: every command's sequence as named steps, with ordinary imports.

- ``compile``: ``compile_model(CompileOptions)`` runs the target's recipe (``steps.STEPS`` for
  the MAX7800x, ``hls.STEPS`` for the HLS target), chosen from ``targets.TARGETS``;
- ``plan``: ``plan.plan_request`` then ``plan.write_outputs`` (MAX7800x), ``generic`` for the
  generic budget target;
- ``quantized``: the one way to a quantized network (compile, plan, simulate, quantize);
- ``sources``: the one "exactly one model source" check and the sample readers.

The stage packages (frontend, passes, quant, plan, sim, emit, targets) never import this one.
"""

from __future__ import annotations

from cnnforge.pipeline.compile import compile_model
from cnnforge.pipeline.sources import match_sample, read_sample
from cnnforge.pipeline.state import (
    AI8X_DIR,
    C_DIR,
    CHECKPOINT,
    KNOWN_ANSWER,
    QUANTIZED,
    REPORT,
    SAMPLE,
    SUMMARY,
    CompileOptions,
    CompileState,
    Step,
    summary,
)
from cnnforge.pipeline.steps import STEPS
from cnnforge.pipeline.targets import TARGETS, Target, get_target, resolve_device, steps_for

__all__ = [
    "AI8X_DIR",
    "CHECKPOINT",
    "C_DIR",
    "KNOWN_ANSWER",
    "QUANTIZED",
    "REPORT",
    "SAMPLE",
    "STEPS",
    "SUMMARY",
    "TARGETS",
    "CompileOptions",
    "CompileState",
    "Step",
    "Target",
    "compile_model",
    "get_target",
    "match_sample",
    "read_sample",
    "resolve_device",
    "steps_for",
    "summary",
]
