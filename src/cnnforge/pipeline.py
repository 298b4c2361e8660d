"""The compile pipeline: a model (or vendor pair) to a directory of deployable, verified outputs.

``compile_model(options)`` runs ``STEPS`` in order, each a plain function
``(CompileState, workdir) -> CompileState``:

    load -> lower and check -> quantize -> plan -> simulate the sample (the known answer)
    -> vendor YAML + checkpoint -> portable C -> report -> [build and run the C self-test]

Everything is written into a temporary directory that becomes ``options.output`` only when every
step succeeded (outputs.atomic_output_dir): a failed compile leaves nothing behind and an existing
directory is replaced only with ``overwrite``. The output is a pure function of the inputs.
Upstream stages are imported where they are used; a missing one fails loudly (EmitError).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cnnforge.errors import CnnforgeError, DeviceLimitError, EmitError, InputError
from cnnforge.ir import Network
from cnnforge.outputs import atomic_output_dir, check_target, safe_file_stem
from cnnforge.plan.model import Plan
from cnnforge.samples import FLOAT_RULE, InputArray, load_input_array

C_DIR = "c"
AI8X_DIR = "ai8x"
REPORT = "report.html"
SUMMARY = "summary.json"
KNOWN_ANSWER = "sample_output.npz"
SAMPLE = "sample_input.npy"
QUANTIZED = "network.json"
CHECKPOINT = "network.pth"  # cnnforge quantized checkpoint (cnnforge simulate --network)


@dataclass(frozen=True)
class CompileOptions:
    """What ``cnnforge compile`` was asked to do (see the CLI's help for each option)."""

    output: Path
    model: str | None = None
    device: str = "MAX78000"
    checkpoint: Path | None = None
    ptq: bool = False
    sample: Path | np.ndarray | None = None
    calibration: Path | np.ndarray | None = None  # --ptq activation scales (default: the sample)
    input_shape: tuple[int, ...] | None = None
    model_args: Mapping[str, Any] = field(default_factory=dict)
    weight_bits: int | str | Mapping[str, int] | None = None  # None: the device's default
    ai8x_yaml: Path | None = None
    ai8x_checkpoint: Path | None = None
    overwrite: bool = False
    run: bool = False
    probe: bool = False
    sanitize: bool = False  # --run under AddressSanitizer + UBSan
    max_verify: int | None = None
    report: bool = True
    in_place: bool = True  # layers may overwrite their dying input (vendor: --overlap-data)


@dataclass(frozen=True)
class CompileState:
    """Everything the steps have produced so far (immutable: each step returns a new one)."""

    options: CompileOptions
    device: Any = None
    source: Network | None = None  # model-level float network (None for quantized inputs)
    imported: Any = None  # frontend.ai8x.Ai8xModel for a vendor pair
    rewrites: tuple = ()
    violations: tuple = ()
    weight_mode: str = ""
    weight_bits: dict[str, int] = field(default_factory=dict)
    network: Network | None = None  # quantized hardware network
    plan: Plan | None = None
    plan_issues: tuple = ()
    sample: np.ndarray | None = None  # int64, C,H,W (or C,L)
    calibration: InputArray | None = None  # --calibration, N,C,H,W int64
    answer: dict[str, np.ndarray] = field(default_factory=dict)
    output_exponents: dict[str, int] = field(default_factory=dict)  # calibrated PTQ scales
    layer_outputs: dict[str, np.ndarray] = field(default_factory=dict)
    float_outputs: dict[str, np.ndarray] = field(default_factory=dict)
    emitted: Any = None  # emit.c.EmittedC
    files: tuple[str, ...] = ()
    selftest: Any = None  # emit.c.build.RunResult
    notes: tuple[str, ...] = ()

    def with_(self, **changes: Any) -> CompileState:
        """A copy with some fields replaced."""
        return dataclasses.replace(self, **changes)

    def wrote(self, *names: str) -> CompileState:
        """A copy that also lists ``names`` (paths relative to the output) as written."""
        return self.with_(files=tuple(sorted({*self.files, *names})))


Step = Callable[[CompileState, Path], CompileState]


def _stage(module: str, attr: str) -> Any:
    """An upstream function, or EmitError naming the missing stage (never a silent fake)."""
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise EmitError(
            f"pipeline stage {module}.{attr} is not available ({exc})",
            hint="this cnnforge build is incomplete",
        ) from None


# ---- steps ---------------------------------------------------------------------------------


def step_load(state: CompileState, workdir: Path) -> CompileState:
    """Read the sample and load the model (PyTorch spec, quantized checkpoint or vendor pair)."""
    del workdir
    o = state.options
    device = _stage("cnnforge.devices", "get_device")(o.device)
    state = state.with_(device=device)
    if o.ai8x_yaml is not None or o.ai8x_checkpoint is not None:
        return _load_ai8x(state)
    if o.model is None:
        raise InputError("no model given", hint="give MODEL, or --ai8x-yaml with --ai8x-checkpoint")
    if not o.ptq and o.checkpoint is None:
        raise InputError(
            "give --checkpoint (QAT or quantized) or --ptq", hint="--ptq quantizes post-training"
        )
    read = read_sample(o.sample)
    state = _sample_note(state, read)
    sample = read.values
    shape = o.input_shape or _default_shape(o.model, sample)
    if _is_quantized_checkpoint(o.checkpoint):
        network = _stage("cnnforge.quant.checkpoint", "load_quantized")(o.checkpoint)
        return state.with_(network=network, sample=match_sample(sample, network.input_shape))
    load_network = _stage("cnnforge.frontend", "load_network")
    source = load_network(o.model, shape, dict(o.model_args), o.checkpoint)
    state = state.with_(source=source, sample=match_sample(sample, source.input_shape))
    return _read_calibration(state, source.input_shape)


def _sample_note(state: CompileState, read: InputArray) -> CompileState:
    """Say on the summary and in the report when the sample was converted from floats."""
    if not read.converted_from_float:
        return state
    note = f"sample {read.describe()}: {FLOAT_RULE}"
    return state.with_(notes=(*state.notes, note))


def _read_calibration(state: CompileState, shape: tuple[int, ...]) -> CompileState:
    """``--calibration`` for --ptq: N samples of the model's input shape."""
    o = state.options
    if o.calibration is None:
        return state
    if not o.ptq:
        raise InputError(
            "--calibration is only used with --ptq", hint="drop it, or quantize with --ptq"
        )
    read = load_input_array(o.calibration, "--calibration")
    values = read.values if read.values.ndim == len(shape) + 1 else read.values[None]
    if tuple(values.shape[1:]) != tuple(shape):
        raise InputError(
            f"--calibration shape {tuple(read.values.shape)} does not match the model input "
            f"{tuple(shape)}",
            where=read.source,
            hint=f"give N,{','.join(map(str, shape))} samples",
        )
    return state.with_(calibration=dataclasses.replace(read, values=values))


def _load_ai8x(state: CompileState) -> CompileState:
    o = state.options
    if o.model is not None:
        raise InputError(f"give MODEL ({o.model}) or --ai8x-yaml, not both")
    if o.ai8x_yaml is None or o.ai8x_checkpoint is None:
        raise InputError("--ai8x-yaml and --ai8x-checkpoint must be given together")
    read_ai8x = _stage("cnnforge.frontend.ai8x", "read_ai8x")
    if o.calibration is not None:
        raise InputError(
            "--calibration is for --ptq of a float model; a vendor pair is already quantized",
            hint="drop --calibration",
        )
    read = read_sample(o.sample) if o.sample is not None else None
    given = read.values if read is not None else None
    if read is not None:
        state = _sample_note(state, read)
    shape = o.input_shape
    if shape is None and given is not None:  # the sample decides the input size
        shape = tuple(given.shape[1:] if given.ndim == 4 else given.shape)
    model = read_ai8x(
        o.ai8x_yaml, o.ai8x_checkpoint, shape, device=state.device.name, overlap_data=True
    )
    if given is None:
        given = read_sample(
            _stage("cnnforge.frontend.ai8x", "sample_path")(o.ai8x_yaml, model.dataset)
        ).values
    sample = match_sample(given, model.network.input_shape)
    return state.with_(imported=model, network=model.network, plan=model.plan, sample=sample)


def step_lower(state: CompileState, workdir: Path) -> CompileState:
    """Fold, fuse and legalize, choose weight widths, check every device limit."""
    del workdir
    if state.source is None:  # already hardware: check only
        check = _stage("cnnforge.passes.check", "check_network")
        violations = check(state.network, state.device)
        if state.imported is None:
            _raise_violations(violations)
        notes = tuple(
            f"vendor network: layer {v.layer}: {v.rule}: {v.actual} (limit {v.limit})"
            for v in violations
        )
        return state.with_(violations=violations, notes=(*state.notes, *notes))
    bits = state.options.weight_bits
    bits = state.device.default_weight_bits if bits is None else bits
    report = _stage("cnnforge.passes.check", "check_report")(
        state.source, state.device, _bits_option(bits)
    )
    _raise_violations(report.violations)
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


def _bits_option(value: int | str | Mapping[str, int]) -> int | str | dict[str, int]:
    if isinstance(value, str) and value != "auto":
        try:
            return int(value)
        except ValueError:
            raise InputError(f"--weight-bits {value!r}", hint="use 8, 4, 2, 1 or auto") from None
    return dict(value) if isinstance(value, Mapping) else value


def _bits_notes(bits: Mapping[str, int], default: int = 8) -> tuple[str, ...]:
    narrow = {n: b for n, b in bits.items() if b != default}
    return (f"weight bits other than {default}: {narrow}",) if narrow else ()


def _raise_violations(violations: tuple) -> None:
    if violations:
        v = violations[0]
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        raise DeviceLimitError(
            f"{v.rule}: {v.actual} (limit {v.limit}){more}",
            where=f"layer {v.layer} ({v.module_path})",
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
    quantize = _stage("cnnforge.quant.ptq", "quantize_with_scales")
    if state.calibration is not None:
        calibration = state.calibration.values
        used = f"--calibration {state.calibration.describe()}"
    else:
        calibration = None if state.sample is None else state.sample[None]
        used = "the sample alone (1 sample; pass --calibration N.npy for a representative set)"
    q, exps = quantize(
        network, state.weight_bits or 8, device=state.device, calibration=calibration
    )
    notes = [f"PTQ activation scales calibrated on {used}"]
    notes += [f"output {n} is calibrated: value x 2^{e}" for n, e in sorted(exps.items()) if e]
    return state.with_(network=q, output_exponents=dict(exps), notes=(*state.notes, *notes))


def step_plan(state: CompileState, workdir: Path) -> CompileState:
    """Place the network (processors, memories, kernels); validate the plan independently."""
    del workdir
    validate = _stage("cnnforge.plan.validate", "validate_plan")
    if state.plan is None:
        plan_network = _stage("cnnforge.plan.planner", "plan_network")
        network, plan = plan_network(state.network, state.device, in_place=state.options.in_place)
        _stage("cnnforge.plan.validate", "raise_on_issues")(validate(network, plan, state.device))
        flags = tuple(n for n in plan.notes if "the vendor tool needs" in n)  # --fifo, ...
        return state.with_(network=network, plan=plan, notes=(*state.notes, *flags))
    issues = validate(state.network, state.plan, state.device, allow_overlap=True)
    notes = tuple(f"imported plan: {x.one_line()}" for x in issues)
    return state.with_(plan_issues=issues, notes=(*state.notes, *notes))


def step_simulate(state: CompileState, workdir: Path) -> CompileState:
    """The known answer: the bit-exact simulator on the sample (every layer kept for probes)."""
    simulate = _stage("cnnforge.sim", "simulate")
    result = simulate(state.network, state.sample[None], all_layers=True)
    answer = {k: _np(v)[0] for k, v in result.outputs.items()}
    layers = {k: _np(v)[0] for k, v in (result.layers or {}).items()}
    np.savez(workdir / KNOWN_ANSWER, **{k: answer[k] for k in sorted(answer)})
    np.save(workdir / SAMPLE, state.sample.astype(np.int8))
    text = state.network.to_json()
    (workdir / QUANTIZED).write_text(text, "utf-8")
    save = _stage("cnnforge.quant.checkpoint", "save_quantized")
    save(state.network, workdir / CHECKPOINT, network_json=text)
    state = state.with_(answer=answer, layer_outputs=layers)
    return state.wrote(KNOWN_ANSWER, SAMPLE, QUANTIZED, CHECKPOINT)


def _np(value: Any) -> np.ndarray:
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def step_float(state: CompileState, workdir: Path) -> CompileState:
    """The float model on the same sample (x / 128), for the report's comparison."""
    del workdir
    if state.source is None or not state.options.report:
        return state
    run_float = _stage("cnnforge.sim.float_eval", "run_float")
    x = state.sample[None].astype(np.float32) / 128.0
    outputs = run_float(state.source, x, all_layers=True)
    # Fusion may rename layers: pair the model's outputs with the hardware outputs by position;
    # an output whose softmax runs on the host is compared before it (the known answer is).
    pairs = zip(state.network.outputs, state.source.outputs, strict=False)
    host = dict(zip(state.network.outputs, state.network.host_reduce, strict=False))
    before = {
        hw: state.source.layer(fl).inputs[0] if host.get(hw) else fl for hw, fl in pairs
    }
    return state.with_(float_outputs={hw: _np(outputs[fl])[0] for hw, fl in before.items()})


def step_vendor(state: CompileState, workdir: Path) -> CompileState:
    """The vendor's YAML and quantized checkpoint (for ai8x-synthesis)."""
    write_yaml = _stage("cnnforge.emit.ai8x_yaml", "write_yaml")
    write_ckpt = _stage("cnnforge.emit.ai8x_checkpoint", "write_checkpoint")
    arch = _arch(state)
    (workdir / AI8X_DIR).mkdir()
    yaml_name, ckpt_name = f"{AI8X_DIR}/{arch}.yaml", f"{AI8X_DIR}/{arch}-q.pth.tar"
    dataset = state.imported.dataset if state.imported is not None else None
    write_yaml(state.network, state.plan, workdir / yaml_name, arch=arch, dataset=dataset)
    modules = dict(state.imported.modules) if state.imported is not None else None
    write_ckpt(state.network, workdir / ckpt_name, arch=arch, modules=modules)
    return state.wrote(yaml_name, ckpt_name)


def _arch(state: CompileState) -> str:
    name = state.imported.arch if state.imported is not None else state.network.name
    return safe_file_stem(name)


def step_emit_c(state: CompileState, workdir: Path) -> CompileState:
    """Portable C with the known-answer self-test."""
    from cnnforge.emit.c import emit_c

    c_dir = workdir / C_DIR
    c_dir.mkdir()
    emitted = emit_c(
        state.network,
        state.sample,
        state.answer,
        c_dir,
        max_verify=state.options.max_verify,
        output_exponents=state.output_exponents,
    )
    return state.with_(emitted=emitted).wrote(*(f"{C_DIR}/{f}" for f in emitted.files))


def step_run(state: CompileState, workdir: Path) -> CompileState:
    """With --run: build with the host cc and run the self-test (builds outside the output)."""
    if not (state.options.run or state.options.probe):
        return state
    from cnnforge.emit.c.build import build_and_run
    from cnnforge.emit.c.probe import run_probe

    with tempfile.TemporaryDirectory(prefix="cnnforge-build-") as tmp:
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
    from cnnforge.emit.report import write_report

    write_report(state, workdir / REPORT)
    return state.wrote(REPORT)


def step_summary(state: CompileState, workdir: Path) -> CompileState:
    """summary.json: what was written and the self-test verdict (machine-readable)."""
    (workdir / SUMMARY).write_text(json.dumps(summary(state), indent=1) + "\n", "utf-8")
    return state.wrote(SUMMARY)


#: The compile recipe, in order.
STEPS: tuple[tuple[str, Step], ...] = (
    ("load", step_load),
    ("lower and check", step_lower),
    ("quantize", step_quantize),
    ("plan", step_plan),
    ("simulate", step_simulate),
    ("float model", step_float),
    ("vendor files", step_vendor),
    ("C code", step_emit_c),
    ("build and run", step_run),
    ("report", step_report),
    ("summary", step_summary),
)


def compile_model(
    options: CompileOptions, on_step: Callable[[str, int, int], None] | None = None
) -> CompileState:
    """Run ``STEPS``; the output directory appears only if all succeed. ``on_step(name, i, n)``
    is called before each step (progress display)."""
    state = CompileState(options=options)
    check_target(options.output, directory=True, overwrite=options.overwrite)  # before the work
    steps = steps_for(_stage("cnnforge.devices", "get_device")(options.device))
    with (
        _one_torch_thread(),
        atomic_output_dir(Path(options.output), overwrite=options.overwrite) as workdir,
    ):
        for i, (name, step) in enumerate(steps):
            if on_step is not None:
                on_step(name, i, len(steps))
            state = step(state, workdir)
    return state


def steps_for(device: Any) -> tuple[tuple[str, Step], ...]:
    """The compile recipe of a target: ``STEPS`` for the MAX parts, else the one its
    ``emitter`` field names (an HLS target: ``cnnforge.emit.hls.steps.STEPS``)."""
    emitter = getattr(device, "emitter", None)
    return STEPS if emitter is None else _stage(f"cnnforge.emit.{emitter}.steps", "STEPS")


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread while compiling: one sample's layers are too small to share out, and
    OpenMP workers spinning between layers cost ~30x the work itself on a busy machine (a
    float32 sum below 2^24 is exact in any order, so the known answer does not change)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def summary(state: CompileState) -> dict[str, Any]:
    """The facts the CLI prints and summary.json records."""
    e = state.emitted
    run = state.selftest
    return {
        "network": state.network.name if state.network else None,
        "device": state.device.name if state.device else None,
        "layers": len(state.network.layers) if state.network else 0,
        "macs": e.macs if e else None,
        "c_arena_bytes": e.arena_bytes if e else None,
        "outputs": e.output_size if e else None,
        "verified_outputs": e.verify_count if e else None,
        "checksum": f"{e.checksum:08x}" if e else None,
        "selftest": None if run is None else {"passed": run.passed, "output": run.output},
        "notes": list(state.notes),
        "files": [f for f in state.files if f != SUMMARY],
    }


# ---- samples -------------------------------------------------------------------------------


def read_sample(sample: Path | np.ndarray | None, option: str = "--sample") -> InputArray:
    """The sample as int64 values in [-128, 127] (an .npy path or an array; floats x 128)."""
    if sample is None:
        raise InputError(
            "no sample given", hint="pass --sample x.npy (int8 values or floats, C,H,W)"
        )
    return load_input_array(sample, option)


def match_sample(sample: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The sample without batch axis; InputError naming both shapes if it does not fit."""
    shape = tuple(shape)
    if sample.shape == shape:
        return sample
    if sample.shape == (1, *shape):
        return sample[0]
    raise InputError(
        f"sample shape {tuple(sample.shape)} does not match the model input {shape}",
        hint=f"give an array of shape {shape} or {(1, *shape)}",
    )


def _default_shape(model: str, sample: np.ndarray) -> tuple[int, ...]:
    """Without --input-shape: a registered model's own shape, else the sample's (batch dropped)."""
    try:
        from cnnforge.models import default_input_shape

        return tuple(default_input_shape(model))
    except (ImportError, CnnforgeError, KeyError):
        pass
    shape = tuple(int(n) for n in sample.shape)
    return shape[1:] if len(shape) == 4 else shape


def _is_quantized_checkpoint(path: Path | None) -> bool:
    if path is None:
        return False
    check = _stage("cnnforge.quant.checkpoint", "is_quantized_checkpoint")
    return bool(check(path))
