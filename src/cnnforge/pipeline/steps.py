"""The compile steps every target's recipe shares, each ``(CompileState, workdir) -> CompileState``;
stages are imported inside the steps so ``cnnforge --help`` stays light."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cnnforge.arithmetic import ACT_SCALE
from cnnforge.errors import DeviceLimitError, EmitError, InputError
from cnnforge.ir import Network
from cnnforge.pipeline.sources import (
    MODEL,
    default_shape,
    match_sample,
    model_source,
    read_calibration,
    read_sample,
)
from cnnforge.pipeline.state import (
    CHECKPOINT,
    KNOWN_ANSWER,
    QUANTIZED,
    SAMPLE,
    SUMMARY,
    CompileState,
    summary,
)
from cnnforge.samples import FLOAT_RULE, HOST_RULE, InputArray, with_host_input


def step_load(state: CompileState, workdir: Path) -> CompileState:
    """Read the sample and load the model (PyTorch spec or quantized checkpoint); a target that
    reads vendor pairs loads them in its own load step (targets/max7800x/recipe.py)."""
    del workdir
    o = state.options
    source = model_source(
        o.model, o.checkpoint, None, o.ai8x_yaml, o.ai8x_checkpoint,
        hint="give MODEL, or --ai8x-yaml with --ai8x-checkpoint",
    )  # fmt: skip
    if source.kind != MODEL:
        raise InputError(
            f"--device {state.target.name} does not read a vendor pair (--ai8x-yaml)",
            hint="give MODEL with --checkpoint or --ptq",
        )
    if not o.ptq and o.checkpoint is None:
        raise InputError(
            "give --checkpoint (QAT or quantized) or --ptq", hint="--ptq quantizes post-training"
        )
    read = read_sample(o.sample)
    state = sample_note(state, read)
    sample = read.values
    shape = o.input_shape or default_shape(o.model, sample)
    from cnnforge.pipeline.quantized import load_source

    network, quantized = load_source(source, shape, o.model_args, state.device)
    if quantized:  # a saved network's host input step applies to a float sample
        read = with_host_input(read, network.host_input, len(network.input_shape))
        state = _host_input_notes(state, network)
        return state.with_(network=network, sample=match_sample(read.values, network.input_shape))
    sample = match_sample(sample, network.input_shape)
    state = state.with_(source=network, sample=sample, sample_read=read)
    return _read_calibration(state, network.input_shape)


def sample_note(state: CompileState, read: InputArray) -> CompileState:
    """Say on the summary and in the report when the sample was converted from floats."""
    if not read.converted_from_float:
        return state
    note = f"sample {read.describe()}: {FLOAT_RULE}"
    return state.with_(notes=(*state.notes, note))


def _read_calibration(state: CompileState, shape: tuple[int, ...]) -> CompileState:
    """``--calibration`` for --ptq: N samples of the model's input shape."""
    o = state.options
    if o.calibration is not None and not o.ptq:
        raise InputError(
            "--calibration is only used with --ptq", hint="drop it, or quantize with --ptq"
        )
    return state.with_(calibration=read_calibration(o.calibration, shape))


def step_lower(state: CompileState, workdir: Path) -> CompileState:
    """Lower, choose widths, check and place with the target's rules: what ``cnnforge check``
    runs, so check and compile agree."""
    del workdir
    rules = state.target.rules
    if state.source is None:  # already hardware: check only
        from cnnforge.passes.check import check_network

        violations = check_network(state.network, state.device, rules=rules)
        if state.options.ai8x_yaml is None:  # a vendor pair's violations are notes
            _raise_violations(violations)
        notes = tuple(
            f"vendor network: layer {v.layer}: {v.rule}: {v.actual} (limit {v.limit})"
            for v in violations
        )
        return state.with_(violations=violations, notes=(*state.notes, *notes))
    bits = state.options.weight_bits
    bits = state.device.default_weight_bits if bits is None else bits
    from cnnforge.passes.check import check_report
    from cnnforge.pipeline.quantized import weight_widths

    report = check_report(state.source, state.device, weight_widths(bits), rules=rules)
    _raise_violations(report.violations)
    state = _host_input_notes(_normalized_inputs(state, report.network), report.network)
    return state.with_(
        network=report.network,
        rewrites=report.rewrites,
        weight_mode=report.weight_mode,
        weight_bits=dict(report.weight_bits),
        notes=(
            *state.notes,
            *_bits_notes(report.weight_bits, state.device.default_weight_bits),
            *_host_notes(report.network),
        ),
    )


def _normalized_inputs(state: CompileState, network: Network) -> CompileState:
    """The float sample and calibration set through the host's input normalization (when the
    network has one: passes/host_input.py), so the accelerator reads what the model computes."""
    step = network.host_input
    if step is None:
        return state
    ndim = len(network.input_shape)
    changes: dict[str, Any] = {}
    old = state.sample_read
    if old is not None and old.floats is not None:
        read = with_host_input(old, step, ndim)
        changes |= {"sample": match_sample(read.values, network.input_shape), "sample_read": read}
        notes = [n for n in state.notes if not n.startswith(f"sample {old.describe()}: ")]
        note = f"sample {read.describe()}: see the input normalization"
        if read.clamped:
            note += (
                "; the accelerator reads [-1, 127/128] and the inputs leave the range the host "
                "step assumed (docs/check.md, Input normalization on the host)"
            )
        changes["notes"] = (*notes, note)
    if state.calibration is not None:
        changes["calibration"] = with_host_input(state.calibration, step, ndim)
    return state.with_(**changes)


def _host_input_notes(state: CompileState, network: Network) -> CompileState:
    """The summary's line for a host-side input normalization, and what it did to the sample."""
    step = network.host_input
    if step is None:
        return state
    note = (
        f"{step.describe()} (from {step.module_path}; C: cnn_host_input, checked by the "
        f"self-test); input files: {HOST_RULE}"
    )
    return state.with_(notes=(*state.notes, note))


def _host_notes(network: Network) -> tuple[str, ...]:
    """Outputs whose softmax/argmax runs on the host (passes/host_ops.py)."""
    notes = []
    for name, kind in zip(network.outputs, network.host_reduce, strict=False):
        if not kind:
            continue
        note = (
            f"output {name}: {kind.partition(':')[0]} over the channels runs on the host "
            "(C: cnn_host_output, checked by the self-test); the known answer is taken before it"
        )
        if kind == "softmax" and all(n == 1 for n in network.shape_of(name)[1:]):
            note += "; for the vendor tool add --softmax (one softmax over all outputs)"
        notes.append(note)
    return tuple(notes)


def _bits_notes(bits: Mapping[str, int], default: int = 8) -> tuple[str, ...]:
    narrow = {n: b for n, b in bits.items() if b != default}
    return (f"weight bits other than {default}: {narrow}",) if narrow else ()


def _raise_violations(violations: tuple) -> None:
    if violations:
        v = violations[0]
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        raise DeviceLimitError(
            f"{v.rule}: {v.actual} (limit {v.limit}){more}",
            where=v.module_path if v.rule == "placement" else f"layer {v.layer} ({v.module_path})",
            hint=v.hint or "run `cnnforge check` for every violation",
        )


def step_quantize(state: CompileState, workdir: Path) -> CompileState:
    """PTQ of float layers with the chosen widths (QAT layers keep their integers)."""
    del workdir
    network = state.network
    if network is None:
        raise EmitError("nothing to quantize")
    if network.is_quantized:
        return state
    if not state.options.ptq:
        missing = next(x for x in network.layers if x.has_weights and x.quant is None)
        raise InputError(
            "the model has float layers and --ptq was not given",
            where=f"layer {missing.name} ({missing.module_path})",
            hint="pass --ptq, or a QAT / quantized --checkpoint",
        )
    # Calibrated on --calibration, else on the sample: layers whose float outputs would leave
    # the int8 range get a power-of-two activation scale (quant/ptq.py), per network output.
    from cnnforge.pipeline.quantized import calibration_set, quantize_lowered

    values, used = calibration_set(state.calibration, state.sample)
    q = quantize_lowered(
        network, state.device, state.weight_bits or 8, calibration=values, used=used
    )
    return state.with_(
        network=q.network, output_exponents=dict(q.output_exponents), notes=(*state.notes, *q.notes)
    )


def step_simulate(state: CompileState, workdir: Path) -> CompileState:
    """The known answer: the bit-exact simulator on the sample (every layer kept for probes),
    on a CUDA GPU where one is present (the same numbers as on the CPU: sim/exact.py)."""
    import torch

    from cnnforge.checkpoint import save_quantized
    from cnnforge.compute import choose_device
    from cnnforge.sim import simulate

    x = torch.from_numpy(np.asarray(state.sample[None])).to(choose_device(cpu=state.options.cpu))
    result = simulate(state.network, x, device=state.device, all_layers=True)
    answer = {k: _np(v)[0] for k, v in result.outputs.items()}
    layers = {k: _np(v)[0] for k, v in (result.layers or {}).items()}
    np.savez(workdir / KNOWN_ANSWER, **{k: answer[k] for k in sorted(answer)})
    np.save(workdir / SAMPLE, state.sample.astype(np.int64))  # the vendor tool reads int64
    text = state.network.to_json()
    (workdir / QUANTIZED).write_text(text, "utf-8")
    save_quantized(state.network, workdir / CHECKPOINT, network_json=text)
    state = state.with_(answer=answer, layer_outputs=layers)
    return state.wrote(KNOWN_ANSWER, SAMPLE, QUANTIZED, CHECKPOINT)


def _np(value: Any) -> np.ndarray:
    return value.cpu().numpy() if hasattr(value, "numpy") else np.asarray(value)


def step_float(state: CompileState, workdir: Path) -> CompileState:
    """The float model on the same sample (x / 128, or the model input the host normalizes
    to it), for the report's comparison."""
    del workdir
    if state.source is None or not state.options.report:
        return state
    from cnnforge.sim.float_eval import run_float

    x = state.sample[None].astype(np.float32) / ACT_SCALE
    step = state.network.host_input
    if step is not None:  # the model's input that the host normalizes to the sample
        x = step.invert(x, len(state.network.input_shape)).astype(np.float32)
    outputs = run_float(state.source, x, all_layers=True)
    # Fusion may rename layers: pair the model's outputs with the hardware outputs by position;
    # an output whose softmax runs on the host is compared before it (the known answer is).
    pairs = zip(state.network.outputs, state.source.outputs, strict=False)
    host = dict(zip(state.network.outputs, state.network.host_reduce, strict=False))
    before = {hw: state.source.layer(fl).inputs[0] if host.get(hw) else fl for hw, fl in pairs}
    return state.with_(float_outputs={hw: _np(outputs[fl])[0] for hw, fl in before.items()})


def step_summary(state: CompileState, workdir: Path) -> CompileState:
    """summary.json: what was written and the self-test verdict (machine-readable)."""
    (workdir / SUMMARY).write_text(json.dumps(summary(state), indent=1) + "\n", "utf-8")
    return state.wrote(SUMMARY)
