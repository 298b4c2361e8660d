"""The compile recipe of the HLS target: the shared steps plus the HLS plan, the C++ project, its
C-simulation (``--run``, ``--sanitize``) and report.md."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnnforge.devices import Capabilities
from cnnforge.errors import EmitError
from cnnforge.ir import Network
from cnnforge.owners import scratch_dir
from cnnforge.passes.target_rules import TargetRules
from cnnforge.pipeline.state import CompileState, Steps
from cnnforge.pipeline.steps import (
    step_float,
    step_load,
    step_lower,
    step_quantize,
    step_simulate,
    step_summary,
)
from cnnforge.targets.hls.device import HlsTarget

if TYPE_CHECKING:
    from cnnforge.targets.hls.buffer_plan import HlsPlan

HLS_DIR = "hls"
REPORT = "report.md"
RESOURCES = "resources.json"


def place_hls(network: Network, device: Capabilities) -> HlsPlan:
    """The HLS placement, refusing what the engines lack: ``compile``'s plan step and
    ``check`` (through the target's record) both call it."""
    from cnnforge.targets.hls.buffer_plan import plan_hls

    if not isinstance(device, HlsTarget):
        raise EmitError(f"{device.name} is not an HLS target")
    return plan_hls(network, device)


#: What the checker asks of the HLS target: its placement (its RAM is sized there).
RULES = TargetRules(place=place_hls)


@dataclass(frozen=True)
class HlsState:
    """What the HLS steps keep beside the shared compile state (its ``target_state``)."""

    plan: HlsPlan

    def summary_facts(self) -> dict[str, Any]:
        """The HLS target adds no fact to the summary."""
        return {}


def step_plan_hls(state: CompileState, workdir: Path) -> CompileState:
    """Ping-pong buffers, skip stores (liveness), accumulator widths, resource estimate."""
    del workdir
    return state.with_(target_state=HlsState(place_hls(state.network, state.device)))


def step_emit_hls(state: CompileState, workdir: Path) -> CompileState:
    """The HLS C++ project with its known-answer testbench."""
    from cnnforge.targets.hls.emitter import emit_hls

    out = workdir / HLS_DIR
    out.mkdir()
    emitted = emit_hls(state.network, state.sample, state.answer, out, state.device)
    return state.with_(emitted=emitted).wrote(*(f"{HLS_DIR}/{f}" for f in emitted.files))


def step_csim(state: CompileState, workdir: Path) -> CompileState:
    """With --run: g++ against the ap_types headers, run tb.cpp (builds outside the output)."""
    if not state.options.run:
        return state
    from cnnforge.targets.hls.build import csim

    sanitize = getattr(state.options, "sanitize", False)
    with scratch_dir("hls") as tmp:
        result = csim(workdir / HLS_DIR, state.emitted.top, sanitize=sanitize, build_dir=Path(tmp))
    if not result.passed:
        raise EmitError(
            f"the HLS C-simulation failed: {result.output[:2000]}",
            where=f"{HLS_DIR}/tb.cpp",
            hint="compile without --run and `make run` in hls/ to see the build",
        )
    return state.with_(selftest=result)


def step_report_hls(state: CompileState, workdir: Path) -> CompileState:
    """report.md (resource table, register map, float vs quantized) and resources.json."""
    if not state.options.report:
        return state
    from cnnforge.targets.hls.report import report_markdown, resources

    (workdir / REPORT).write_text(report_markdown(state), "utf-8")
    data = resources(state.target_state.plan)
    (workdir / RESOURCES).write_text(json.dumps(data, indent=1) + "\n", "utf-8")
    return state.wrote(REPORT, RESOURCES)


STEPS: Steps = (
    ("load", step_load),
    ("lower and check", step_lower),
    ("quantize", step_quantize),
    ("plan (HLS buffers)", step_plan_hls),
    ("simulate", step_simulate),
    ("float model", step_float),
    ("HLS C++", step_emit_hls),
    ("C-simulation", step_csim),
    ("report", step_report_hls),
    ("summary", step_summary),
)
