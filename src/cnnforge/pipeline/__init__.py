"""The shared steps every target's recipe uses (load, check, quantize, simulate, summary), and the
``Target`` record a target plugs in with; stage packages never import this one."""

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
