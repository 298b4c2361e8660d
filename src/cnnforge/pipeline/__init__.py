"""The shared steps every target's recipe uses, and the record a target plugs in with.

- ``targets.Target``: what ``--device NAME`` means and what each command runs for it (each
  target package builds its own; api/targets.py is the table of them);
- ``compile``: ``run_recipe(target, CompileOptions)`` runs the target's recipe (its
  ``compile_steps``) into an output directory, atomically;
- ``steps``: the steps every recipe shares (load, lower and check, quantize, simulate, float
  model, summary); ``state``: what they pass along;
- ``quantized``: the one way to a quantized network (compile, plan, simulate, quantize);
- ``sources``: the one "exactly one model source" check and the sample readers.

The stage packages below (frontend, passes, quant, sim, analysis) never import this one; the
targets, the API and the CLI above it do.
"""

from __future__ import annotations

from cnnforge.pipeline.compile import run_recipe
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
    PlanRequest,
    Step,
    summary,
)
from cnnforge.pipeline.targets import Target

__all__ = [
    "AI8X_DIR",
    "CHECKPOINT",
    "C_DIR",
    "KNOWN_ANSWER",
    "QUANTIZED",
    "REPORT",
    "SAMPLE",
    "SUMMARY",
    "CompileOptions",
    "CompileState",
    "PlanRequest",
    "Step",
    "Target",
    "match_sample",
    "read_sample",
    "run_recipe",
    "summary",
]
