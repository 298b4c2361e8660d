"""What ``cnnforge plan`` does, callable from Python: get a quantized network, plan, validate,
write the vendor pair (network.yaml + checkpoint), a sample input and the readable plan.

The output directory appears whole or not at all (cnnforge.outputs.atomic_output_dir).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from cnnforge.errors import EmitError
from cnnforge.ir import Network
from cnnforge.outputs import atomic_output_dir, safe_file_stem
from cnnforge.plan.metrics import PlanMetrics, plan_metrics
from cnnforge.plan.model import Plan
from cnnforge.plan.planner import plan_network
from cnnforge.plan.validate import Issue, raise_on_issues, validate_plan

SAMPLE_SEED = 0


@dataclass(frozen=True)
class PlanResult:
    """A validated plan with its network, figures and how long planning took."""

    network: Network
    plan: Plan
    metrics: PlanMetrics
    wall_s: float
    issues: tuple[Issue, ...] = ()
    files: tuple[str, ...] = field(default=())


def quantized_network(
    model: str,
    input_shape: tuple[int, ...],
    model_args: dict[str, object] | None,
    checkpoint: Path | None,
    device: Any,
    weight_bits: int | str | None = None,
) -> Network:
    """The quantized hardware network to plan: a cnnforge quantized checkpoint as it is, else
    the model (with a float checkpoint, if given) lowered and quantized (``auto``: widths that
    fit kernel memory, passes.weight_bits)."""
    from cnnforge.quant.checkpoint import is_quantized_checkpoint, load_quantized

    if checkpoint is not None and is_quantized_checkpoint(checkpoint):
        return load_quantized(checkpoint)
    from cnnforge.frontend import load_network
    from cnnforge.passes.lower import lower_to_hardware
    from cnnforge.quant.ptq import quantize_network

    network = load_network(model, input_shape, dict(model_args or {}), checkpoint)
    lowered = lower_to_hardware(network, device).network
    bits: Any = weight_bits if weight_bits is not None else 8
    if weight_bits == "auto":
        from cnnforge.passes.weight_bits import choose_weight_bits

        bits = choose_weight_bits(lowered, device).bits
    return quantize_network(lowered, bits, device=device)


def plan_and_validate(network: Network, device: Any, in_place: bool = True) -> PlanResult:
    """Plan ``network``; the plan must pass the validator (else a ``PlanError``: a bug)."""
    start = time.perf_counter()
    out, plan = plan_network(network, device, in_place=in_place)
    wall = time.perf_counter() - start
    raise_on_issues(validate_plan(out, plan, device), "the automatic plan")
    return PlanResult(out, plan, plan_metrics(out, plan, device), wall)


def validate_imported(
    network: Network, plan: Plan, device: Any, allow_overlap: bool, in_place: bool = True
) -> PlanResult:
    """Figures and issues of a given (imported) plan, without re-planning."""
    from cnnforge.plan.metrics import with_cycles

    start = time.perf_counter()
    issues = validate_plan(network, plan, device, allow_overlap, in_place)
    plan = with_cycles(network, plan)
    wall = time.perf_counter() - start
    return PlanResult(network, plan, plan_metrics(network, plan, device), wall, issues)


def write_outputs(
    result: PlanResult, device: Any, out_dir: Path, overwrite: bool = False
) -> PlanResult:
    """network.yaml, the vendor checkpoint, sample input, plan.json/plan.md and pictures."""
    from cnnforge.plan.report import write_report

    net, plan = result.network, result.plan
    dataset = safe_file_stem(net.name.lower())  # names files: never a path (issue 18)
    notes = list(plan.notes)
    with atomic_output_dir(Path(out_dir), overwrite=overwrite) as tmp:
        try:
            _write_vendor_pair(net, plan, tmp, dataset)
        except EmitError as exc:  # the vendor format cannot express it; the plan still stands
            notes.append(f"network.yaml not written: {exc.one_line()}")
        rng = np.random.default_rng(SAMPLE_SEED)
        sample = rng.integers(-128, 128, size=net.input_shape, dtype=np.int64)
        np.save(tmp / f"sample_{dataset}.npy", sample)
        plan = replace(plan, notes=tuple(notes))
        write_report(net, plan, device, result.metrics, tmp, result.wall_s)
        files = tuple(sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file()))
    return PlanResult(net, plan, result.metrics, result.wall_s, result.issues, files)


def _write_vendor_pair(network: Network, plan: Plan, folder: Path, dataset: str) -> None:
    from cnnforge.emit.ai8x_checkpoint import write_checkpoint
    from cnnforge.emit.ai8x_yaml import write_yaml

    if not network.is_quantized:
        raise EmitError("the network is not quantized", hint="quantize it first")
    write_yaml(network, plan, folder / "network.yaml", dataset=dataset)
    write_checkpoint(network, folder / f"{dataset}-q.pth.tar")
