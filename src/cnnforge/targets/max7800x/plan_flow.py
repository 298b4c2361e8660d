"""The ``cnnforge plan`` sequence of the MAX7800x: quantize, plan (or re-plan / validate a vendor
pair), validate and write the pair, a sample and the readable plan, atomically."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from cnnforge.devices import Capabilities
from cnnforge.errors import EmitError, InputError
from cnnforge.ir import Network
from cnnforge.outputs import atomic_output_dir, safe_file_stem
from cnnforge.pipeline.quantized import host_inputs, quantized_from_source
from cnnforge.pipeline.sources import (
    VENDOR,
    match_sample,
    model_source,
    read_calibration,
    read_sample,
)
from cnnforge.pipeline.state import PlanRequest
from cnnforge.targets.max7800x.device import Max7800xDevice, as_max7800x
from cnnforge.targets.max7800x.metrics import PlanMetrics, plan_metrics
from cnnforge.targets.max7800x.placement import Plan
from cnnforge.targets.max7800x.planner import plan_network
from cnnforge.targets.max7800x.rules import RULES
from cnnforge.targets.max7800x.validate import Issue, raise_on_issues, validate_plan

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
    sample: np.ndarray | None = None  # the --sample, written instead of a seeded random one


def plan_request(request: PlanRequest, device: Capabilities) -> PlanResult:
    """Plan a model (quantized the one way) or a vendor pair (re-planned, or only validated)."""
    device = as_max7800x(device)  # the MAX7800x planner (the Target record names it)
    source = model_source(
        request.model, request.checkpoint, None, request.ai8x_yaml, request.ai8x_checkpoint,
        hint="give MODEL, or --ai8x-yaml with --ai8x-checkpoint",
    )  # fmt: skip
    if source.kind == VENDOR:
        return _vendor(request, device)
    own_shape = str(request.model).lower().endswith(".onnx")  # an ONNX file has its own shape
    inputs = request.sample is not None or request.calibration is not None
    if request.input_shape is None and (inputs or not own_shape):
        raise InputError("MODEL and --input-shape are needed", hint="e.g. unet-large -i 48,88,88")
    read = None
    if request.sample is not None:
        read = read_sample(request.sample)
        match_sample(read.values, request.input_shape)  # InputError unless it fits
    calibration = read_calibration(request.calibration, request.input_shape)
    quantized = quantized_from_source(
        source, request.input_shape, request.model_args, device, request.weight_bits,
        rules=RULES, calibration=calibration, sample=read,
    )  # fmt: skip
    result = plan_and_validate(quantized.network, device, request.in_place)
    if read is None:
        return result
    _, sample = host_inputs(quantized.network, None, read)
    return replace(result, sample=match_sample(sample, request.input_shape))


def _vendor(request: PlanRequest, device: Max7800xDevice) -> PlanResult:
    from cnnforge.targets.max7800x.ai8x import load_ai8x

    pair, overlap = (request.ai8x_yaml, request.ai8x_checkpoint), request.allow_overlap
    network, vendor_plan = load_ai8x(*pair, request.input_shape, device=device.name,
                                     overlap_data=overlap)  # fmt: skip
    if request.validate_only:
        return validate_imported(
            network, vendor_plan, device, request.allow_overlap, request.in_place
        )
    return plan_and_validate(network, device, request.in_place)


def plan_and_validate(
    network: Network, device: Max7800xDevice, in_place: bool = True
) -> PlanResult:
    """Plan ``network``; the plan must pass the validator (else a ``PlanError``: a bug)."""
    start = time.perf_counter()
    out, plan = plan_network(network, device, in_place=in_place)
    wall = time.perf_counter() - start
    raise_on_issues(validate_plan(out, plan, device), "the automatic plan")
    return PlanResult(out, plan, plan_metrics(out, plan, device), wall)


def validate_imported(
    network: Network, plan: Plan, device: Max7800xDevice, allow_overlap: bool, in_place: bool = True
) -> PlanResult:
    """Figures and issues of a given (imported) plan, without re-planning."""
    from cnnforge.targets.max7800x.metrics import with_cycles

    start = time.perf_counter()
    issues = validate_plan(network, plan, device, allow_overlap, in_place)
    plan = with_cycles(network, plan)
    wall = time.perf_counter() - start
    return PlanResult(network, plan, plan_metrics(network, plan, device), wall, issues)


def write_outputs(
    result: PlanResult, device: Capabilities, out_dir: Path, overwrite: bool = False
) -> PlanResult:
    """network.yaml, the vendor checkpoint, sample input, plan.json/plan.md and pictures."""
    from cnnforge.targets.max7800x.plan_report import write_report

    device = as_max7800x(device)
    net, plan = result.network, result.plan
    dataset = safe_file_stem(net.name.lower())  # names files: never a path (issue 18)
    notes = list(plan.notes)
    with atomic_output_dir(Path(out_dir), overwrite=overwrite) as tmp:
        try:
            _write_vendor_pair(net, plan, tmp, dataset)
        except EmitError as exc:  # the vendor format cannot express it; the plan still stands
            notes.append(f"network.yaml not written: {exc.one_line()}")
        sample = result.sample
        if sample is None:
            rng = np.random.default_rng(SAMPLE_SEED)
            sample = rng.integers(-128, 128, size=net.input_shape, dtype=np.int64)
        np.save(tmp / f"sample_{dataset}.npy", sample)
        plan = replace(plan, notes=tuple(notes))
        write_report(net, plan, device, result.metrics, tmp, result.wall_s)
        files = tuple(sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file()))
    return replace(result, plan=plan, files=files)


def _write_vendor_pair(network: Network, plan: Plan, folder: Path, dataset: str) -> None:
    from cnnforge.targets.max7800x.ai8x_checkpoint_writer import write_checkpoint
    from cnnforge.targets.max7800x.ai8x_yaml_writer import write_yaml

    if not network.is_quantized:
        raise EmitError("the network is not quantized", hint="quantize it first")
    write_yaml(network, plan, folder / "network.yaml", dataset=dataset)
    write_checkpoint(network, folder / f"{dataset}-q.pth.tar")
