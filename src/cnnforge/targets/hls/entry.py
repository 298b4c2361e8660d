"""The HLS FPGA overlay as an entry of the table of targets (api/targets.py)."""

from __future__ import annotations

from cnnforge import arithmetic
from cnnforge.pipeline.state import SUMMARY
from cnnforge.pipeline.targets import Target
from cnnforge.targets.hls import recipe
from cnnforge.targets.hls.device import HLS

TARGET = Target(
    "HLS",
    "FPGA overlay from HLS C++ (docs/hls-target.md)",
    arithmetic,  # A8 activations, W1-8 weights (docs/hls-target.md §2)
    device=HLS,
    rules=recipe.RULES,
    compile_steps=recipe.STEPS,
    report=(recipe.REPORT, recipe.RESOURCES, SUMMARY),
)
