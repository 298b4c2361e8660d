"""The MAX78000/MAX78002 compile recipe: its own steps (plan, vendor pair, C, firmware, run, report)
between the shared ones; stages are imported inside the steps (``--help`` stays light)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cnnforge.devices import Capabilities
from cnnforge.errors import EmitError, InputError
from cnnforge.ir import Network
from cnnforge.outputs import safe_file_stem
from cnnforge.owners import scratch_dir
from cnnforge.pipeline.sources import VENDOR, match_sample, model_source, read_sample
from cnnforge.pipeline.state import AI8X_DIR, C_DIR, REPORT, CompileState, Steps, summary
from cnnforge.pipeline.steps import (
    sample_note,
    step_float,
    step_load,
    step_lower,
    step_quantize,
    step_simulate,
    step_summary,
)
from cnnforge.targets.max7800x.device import Max7800xDevice, as_max7800x
from cnnforge.targets.max7800x.firmware.options import FirmwareOptions
from cnnforge.targets.max7800x.firmware_step import step_firmware
from cnnforge.targets.max7800x.placement import Plan
from cnnforge.targets.max7800x.state import keep, own


def step_load_pair(state: CompileState, workdir: Path) -> CompileState:
    """The shared load, or a vendor pair (--ai8x-yaml with --ai8x-checkpoint) with its plan."""
    o = state.options
    source = model_source(
        o.model, o.checkpoint, None, o.ai8x_yaml, o.ai8x_checkpoint,
        hint="give MODEL, or --ai8x-yaml with --ai8x-checkpoint",
    )  # fmt: skip
    return _load_ai8x(state) if source.kind == VENDOR else step_load(state, workdir)


def _load_ai8x(state: CompileState) -> CompileState:
    """A vendor pair: its network and its plan, as the vendor tool would place it."""
    from cnnforge.targets.max7800x.ai8x import read_ai8x, sample_path

    o = state.options
    if o.calibration is not None:
        raise InputError(
            "--calibration is for --ptq of a float model; a vendor pair is already quantized",
            hint="drop --calibration",
        )
    read = read_sample(o.sample) if o.sample is not None else None
    given = read.values if read is not None else None
    if read is not None:
        state = sample_note(state, read)
    shape = o.input_shape
    if shape is None and given is not None:  # the sample decides the input size
        shape = tuple(given.shape[1:] if given.ndim == 4 else given.shape)
    options = o.firmware_options or FirmwareOptions()
    model = read_ai8x(
        o.ai8x_yaml, o.ai8x_checkpoint, shape, device=state.device.name, overlap_data=True,
        fifo=True if o.fifo else None, calcx4=options.calcx4, read_ahead=options.read_ahead,
    )  # fmt: skip
    if given is None:
        given = read_sample(sample_path(o.ai8x_yaml, model.dataset)).values
    sample = match_sample(given, model.network.input_shape)
    state = state.with_(network=model.network, sample=sample)
    return keep(state, imported=model, plan=model.plan)


def step_plan(state: CompileState, workdir: Path) -> CompileState:
    """Place the network (processors, memories, kernels); validate the plan independently."""
    del workdir
    from cnnforge.targets.max7800x.metrics import latency
    from cnnforge.targets.max7800x.planner import plan_network
    from cnnforge.targets.max7800x.validate import raise_on_issues, validate_plan

    device = as_max7800x(state.device)  # this recipe's record (the MAX7800x Target's)
    imported = own(state).plan
    if imported is None:
        network, plan = plan_network(
            state.network, device, in_place=state.options.in_place, fifo=state.options.fifo
        )
        plan = _speedups(network, plan, device, state.options.firmware_options)
        raise_on_issues(validate_plan(network, plan, device))
        flags = tuple(  # --fifo, ...; where --calcx4 / --read-ahead took
            n for n in plan.notes if "the vendor tool needs" in n or n.startswith("--")
        )
        state = state.with_(network=network, notes=(*state.notes, *flags))
        return keep(state, plan=plan, latency=latency(network, plan))
    issues = validate_plan(state.network, imported, device, allow_overlap=True)
    notes = tuple(f"imported plan: {x.one_line()}" for x in issues)
    state = state.with_(notes=(*state.notes, *notes))
    return keep(state, latency=latency(state.network, imported))


def _speedups(
    network: Network, plan: Plan, device: Max7800xDevice, o: FirmwareOptions | None
) -> Plan:
    """The plan with --calcx4 / --read-ahead on every layer that can take them (MAX78002)."""
    if o is None or not (o.calcx4 or o.read_ahead):
        return plan
    from cnnforge.targets.max7800x.speedups import with_speedups

    if not device.speedups:
        flag = "--calcx4" if o.calcx4 else "--read-ahead"
        raise InputError(f"{flag} is a MAX78002 option", where=flag, hint=f"drop {flag}")
    return with_speedups(network, plan, device, o.calcx4, o.read_ahead)


def step_vendor(state: CompileState, workdir: Path) -> CompileState:
    """The vendor's YAML and quantized checkpoint (for ai8x-synthesis)."""
    from cnnforge.targets.max7800x.ai8x_checkpoint_writer import write_checkpoint as write_ckpt
    from cnnforge.targets.max7800x.ai8x_yaml_writer import write_yaml

    arch = _arch(state)
    (workdir / AI8X_DIR).mkdir()
    yaml_name, ckpt_name = f"{AI8X_DIR}/{arch}.yaml", f"{AI8X_DIR}/{arch}-q.pth.tar"
    imported = own(state).imported
    dataset = imported.dataset if imported is not None else None
    write_yaml(state.network, own(state).plan, workdir / yaml_name, arch=arch, dataset=dataset)
    modules = dict(imported.modules) if imported is not None else None
    write_ckpt(state.network, workdir / ckpt_name, arch=arch, modules=modules)
    return state.wrote(yaml_name, ckpt_name)


def _arch(state: CompileState) -> str:
    imported = own(state).imported
    name = imported.arch if imported is not None else state.network.name
    return safe_file_stem(name)


def step_emit_c(state: CompileState, workdir: Path) -> CompileState:
    """Portable C with the known-answer self-test."""
    from cnnforge.targets.max7800x.c import emit_c

    c_dir = workdir / C_DIR
    c_dir.mkdir()
    exponents, max_verify = state.output_exponents, state.options.max_verify
    emitted = emit_c(state.network, state.sample, state.answer, c_dir, max_verify=max_verify,
                     output_exponents=exponents)  # fmt: skip
    notes = (*state.notes, *_macs_note(state.source, state.network, emitted.macs, state.device))
    return state.with_(emitted=emitted, notes=notes).wrote(*(f"{C_DIR}/{f}" for f in emitted.files))


def _macs_note(
    source: Network | None, network: Network, macs: int, device: Capabilities
) -> tuple[str, ...]:
    """Why the C's MAC count differs from ``cnnforge analyze``'s count of the model, layer by
    layer: what the exact rewrites added or changed (an upsample that became a convolution)."""
    if source is None:
        return ()
    from cnnforge.analysis import analyze_network

    model = {row.name: row for row in analyze_network(source, device).layers}
    total = sum(row.macs for row in model.values())
    if total == macs:
        return ()
    changes = []  # (layer, MACs it adds, what the rewrite made of it)
    for row in analyze_network(network, device).layers:
        before = model.get(row.name)
        delta = row.macs - (before.macs if before else 0)
        if delta:
            what = f"{before.op} as {row.op}" if before else f"{row.op} added by a rewrite"
            changes.append((row.name, delta, what))
    rest = macs - total - sum(delta for _, delta, _ in changes)
    shown = "; ".join(f"{name} {delta:+,} ({what})" for name, delta, what in changes[:4])
    shown += "; ..." if len(changes) > 4 else ""
    tail = f"; {rest:+,} counted differently by the C" if rest else ""
    return (f"MACs: the C runs {macs:,}, `cnnforge analyze` counts {total:,} on the model, "
            f"because of the exact rewrites: {shown}{tail}",)  # fmt: skip


def step_run(state: CompileState, workdir: Path) -> CompileState:
    """With --run: build with the host cc and run the self-test (builds outside the output)."""
    if not (state.options.run or state.options.probe):
        return state
    from cnnforge.targets.max7800x.c.build import build_and_run
    from cnnforge.targets.max7800x.c.probe import run_probe

    with scratch_dir("build") as tmp:
        result = build_and_run(
            workdir / C_DIR, build_dir=Path(tmp), sanitize=state.options.sanitize
        )
        if state.options.probe:
            run_probe(workdir / C_DIR, Path(tmp), workdir / "probe")
    if not result.passed:
        raise EmitError(
            f"the C self-test failed: {result.output}",
            where=f"{C_DIR}/main.c",
            hint="compile without --run; then `make probe` in c/, `cnnforge simulate --network "
            "network.pth --input sample_input.npy --output o.npy --layers L` and "
            "`cnnforge diff c/probe L` name the first diverging layer",
        )
    state = state.with_(selftest=result)
    if state.options.probe:
        layers = {x.name: state.layer_outputs[x.name] for x in state.network.layers}
        np.savez(workdir / "sim_layers.npz", **layers)  # in layer order, as diff reads it
        state = state.wrote("probe/manifest.txt", "sim_layers.npz")
    return state


def step_report(state: CompileState, workdir: Path) -> CompileState:
    """The self-contained HTML report."""
    if not state.options.report:
        return state
    from cnnforge.targets.max7800x.compile_report import write_report

    write_report(state, workdir / REPORT, summary(state))
    return state.wrote(REPORT)


#: The compile recipe, in order.
STEPS: Steps = (
    ("load", step_load_pair),
    ("lower and check", step_lower),
    ("quantize", step_quantize),
    ("plan", step_plan),
    ("simulate", step_simulate),
    ("float model", step_float),
    ("vendor files", step_vendor),
    ("C code", step_emit_c),
    ("firmware", step_firmware),
    ("build and run", step_run),
    ("report", step_report),
    ("summary", step_summary),
)
