"""One function per command, for models that live in memory: what the CLI does, returned.

Each takes what the CLI takes — an ``nn.Module`` object, an ``nn.Module`` class, or the same
references (``file.py:Name``, ``pkg.mod:Name``, ``model.onnx``, a shipped name) — and returns a
result (api/results.py). Nothing prints and nothing exits: bad input raises the project's
exception family (``cnnforge.errors``) with the one-line message the CLI would print.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnnforge.api.results import (
    Analysis,
    Budget,
    CheckResult,
    Compiled,
    Evaluated,
    History,
    Planned,
    Quantized,
)
from cnnforge.api.running import array_of, run_network
from cnnforge.errors import InputError
from cnnforge.owners import scratch_dir
from cnnforge.targets.max7800x.device import DEFAULT_DEVICE

if TYPE_CHECKING:
    import torch

    from cnnforge.devices import Capabilities
    from cnnforge.frontend.loading import ModelSpec
    from cnnforge.ir import Network
    from cnnforge.pipeline.targets import Target
    from cnnforge.targets.max7800x.firmware.options import FirmwareOptions
    from cnnforge.training.loop import EpochRecord


def analyze(
    model: ModelSpec | None,
    input_shape: Sequence[int] | None = None,
    *,
    count: str = "true",
    weight_bits: int = 8,
    model_args: Mapping[str, Any] | None = None,
    checkpoint: str | Path | None = None,
    ai8x_yaml: str | Path | None = None,
    ai8x_checkpoint: str | Path | None = None,
) -> Analysis:
    """Per-layer parameters, MACs, receptive field and memory (``cnnforge analyze``).

    >>> import torch.nn as nn, cnnforge
    >>> a = cnnforge.analyze(nn.Conv2d(3, 8, 3, padding=1), (3, 16, 16))
    >>> a.totals.params
    224
    """
    from cnnforge.analysis import analyze_network

    network = _network(
        model, input_shape, model_args, checkpoint, (ai8x_yaml, ai8x_checkpoint), None
    )
    layout = _device(DEFAULT_DEVICE, "analyze")  # the int8 data-memory layout of the bytes
    return Analysis(analyze_network(network, layout, count=count, weight_bits=weight_bits))


def check(
    model: ModelSpec | None,
    device: str | Capabilities = DEFAULT_DEVICE,
    input_shape: Sequence[int] | None = None,
    *,
    weight_bits: int | str | None = None,
    model_args: Mapping[str, Any] | None = None,
    checkpoint: str | Path | None = None,
    ai8x_yaml: str | Path | None = None,
    ai8x_checkpoint: str | Path | None = None,
) -> CheckResult:
    """Will it run on ``device``? The exact rewrites, widths and every violation at once
    (``cnnforge check``); ``weight_bits`` is 8, 4, 2, 1, ``"auto"`` or None (the layers' own).

    >>> r = cnnforge.check(model, "MAX78000", (3, 32, 32))
    >>> r.fits, [v.rule for v in r.violations]
    """
    from cnnforge.api.targets import check_for

    target = _target(device, "check")
    vendor = (ai8x_yaml, ai8x_checkpoint)
    network = _network(model, input_shape, model_args, checkpoint, vendor, target)
    return CheckResult(check_for(network, target, weight_bits))


def quantize(
    model: ModelSpec,
    input_shape: Sequence[int] | None = None,
    *,
    device: str | Capabilities = DEFAULT_DEVICE,
    checkpoint: str | Path | None = None,
    weight_bits: int | Mapping[str, int] = 8,
    clip: str = "max",
    calibration: Any = None,
    model_args: Mapping[str, Any] | None = None,
    output: str | Path | None = None,
    overwrite: bool = False,
) -> Quantized:
    """Post-training quantization (QAT modules keep their integers), as ``cnnforge quantize``;
    with ``output``, also saved as cnnforge's quantized checkpoint.

    >>> q = cnnforge.quantize(model, (3, 32, 32), calibration=images)  # N,C,H,W floats
    >>> y = q.simulate(images[0])
    """
    from cnnforge.pipeline.quantized import quantized_from_source
    from cnnforge.pipeline.sources import model_source, read_calibration
    target = _target(device, "quantize")
    dev = target.device
    path = _path(output)
    if path is not None and path.exists() and not overwrite:  # refused before any work
        raise InputError(f"{path} already exists", hint="pass --overwrite or choose another -o")
    shape = _shape(model, input_shape)
    if shape is None and calibration is not None:
        raise InputError("--calibration needs --input-shape", hint="e.g. -i 3,64,64")
    ckpt = _path(checkpoint)
    q = quantized_from_source(
        model_source(model, ckpt),  # type: ignore[arg-type]  # a model object is a spec too
        shape,
        dict(model_args or {}),
        dev,
        weight_bits,
        rules=target.rules,
        clip=clip,
        calibration=read_calibration(array_of(calibration), shape) if shape else None,
    )
    if path is not None:
        from cnnforge.checkpoint import save_quantized
        from cnnforge.outputs import atomic_output_file

        with atomic_output_file(path, overwrite=True) as tmp:
            save_quantized(q.network, tmp, output_scales=q.output_exponents)
    return Quantized(q.network, dev, dict(q.output_exponents), path)


def plan(
    model: ModelSpec | None,
    device: str | Capabilities = DEFAULT_DEVICE,
    input_shape: Sequence[int] | None = None,
    *,
    checkpoint: str | Path | None = None,
    weight_bits: int | str | None = None,
    model_args: Mapping[str, Any] | None = None,
    sample: Any = None,
    calibration: Any = None,
    in_place: bool = True,
    ai8x_yaml: str | Path | None = None,
    ai8x_checkpoint: str | Path | None = None,
    allow_overlap: bool = False,
    validate_only: bool = False,
    output_dir: str | Path | None = None,
    overwrite: bool = False,
) -> Planned:
    """Processors, data-memory offsets, kernel map (``cnnforge plan``) of a model or a vendor
    pair (re-planned, or with ``validate_only`` its own plan only validated); returns it as
    ``Planned`` (``.network``, ``.plan``, ``.metrics``, ``.issues``); with ``output_dir``
    (and not ``validate_only``) also writes the vendor YAML + checkpoint, plan.json and the
    memory maps there."""
    from cnnforge.pipeline.sources import shipped_shape
    from cnnforge.pipeline.state import PlanRequest

    target = _target(device, "plan")
    dev = target.device
    if target.plans != "place" or target.planner is None or target.write is None:
        raise InputError(f"device {dev.name} has no plan", hint="compile it with cnnforge.compile")
    shape = shipped_shape(model) if input_shape is None else tuple(int(n) for n in input_shape)
    request = PlanRequest(
        model=model,  # type: ignore[arg-type]  # the planner takes a model object as a spec too
        input_shape=shape,
        model_args=dict(model_args or {}),
        checkpoint=_path(checkpoint),
        weight_bits=weight_bits,
        sample=array_of(sample),
        calibration=array_of(calibration),
        ai8x_yaml=_path(ai8x_yaml),
        ai8x_checkpoint=_path(ai8x_checkpoint),
        allow_overlap=allow_overlap,
        validate_only=validate_only,
        in_place=in_place,
    )
    result = target.planner(request, dev)
    if output_dir is not None and not validate_only:
        result = target.write(result, dev, Path(output_dir), overwrite)
    return Planned(result)


def compile(  # the command's name: cnnforge.compile(...) in a script
    model: ModelSpec | None = None,
    *,
    device: str | Capabilities = DEFAULT_DEVICE,
    input_shape: Sequence[int] | None = None,
    ptq: bool = False,
    checkpoint: str | Path | None = None,
    sample: Any = None,
    calibration: Any = None,
    output_dir: str | Path | None = None,
    overwrite: bool = False,
    run: bool = False,
    weight_bits: int | str | Mapping[str, int] | None = None,
    model_args: Mapping[str, Any] | None = None,
    ai8x_yaml: str | Path | None = None,
    ai8x_checkpoint: str | Path | None = None,
    report: bool = True,
    in_place: bool = True,
    firmware: bool | None = None,
    firmware_options: FirmwareOptions | None = None,
    fifo: bool = False,
    probe: bool = False,
    sanitize: bool = False,
    max_verify: int | None = None,
    progress: bool = False,
    on_step: Callable[[str, int, int], None] | None = None,
    cpu: bool = False,
) -> Compiled:
    """Everything ``cnnforge compile`` does: vendor files, portable C with a known-answer
    self-test (``run=True`` builds and runs it), report.html, and for MAX78000/MAX78002 the MSDK
    firmware (``firmware``: None writes it where the writer covers the network, True or fails,
    False not; ``firmware_options``: the vendor's code-generation options). ``sample`` (C,H,W
    int8 values or floats in model units) is what the known answer is computed on. Without
    ``output_dir`` the files go to a new temporary directory (``Compiled.output_dir``), kept for
    inspection.
    ``on_step(name, index, total)`` is called before each step (the CLI's progress line).
    The known answer is simulated on a CUDA GPU where one is present (``cpu``: on the CPU).

    >>> c = cnnforge.compile(model, input_shape=(3, 32, 32), ptq=True, sample=x)
    >>> (c.simulate(x) == cnnforge.simulate(c.output_dir / "network.pth", x)).all()
    True
    """
    from cnnforge.api.targets import get_target
    from cnnforge.pipeline import CompileOptions, run_recipe

    target = get_target(device)  # resolved once: the recipe refuses a target without one
    options = CompileOptions(
        output=Path(output_dir or "out"),  # None: a new temporary folder's, below
        model=model,  # type: ignore[arg-type]  # the steps take a model object as a spec too
        device=target.name, checkpoint=_path(checkpoint), ptq=ptq, sample=array_of(sample),
        calibration=array_of(calibration), input_shape=_ints(input_shape),
        model_args=dict(model_args or {}), weight_bits=weight_bits, ai8x_yaml=_path(ai8x_yaml),
        ai8x_checkpoint=_path(ai8x_checkpoint), overwrite=overwrite, run=run, report=report,
        in_place=in_place, firmware=firmware, fifo=fifo, firmware_options=firmware_options,
        probe=probe, sanitize=sanitize, max_verify=max_verify, cpu=cpu,
    )  # fmt: skip
    with contextlib.ExitStack() as stack:
        if output_dir is None:  # kept for inspection when it succeeds
            scratch = stack.enter_context(scratch_dir("compile", keep=True))
            options = replace(options, output=scratch / "out")
        show = on_step or stack.enter_context(_progress(progress, "compile"))
        return Compiled(run_recipe(target, options, show), options.output)


def simulate(
    network: Network | Compiled | Quantized | str | Path,
    x: Any,
    *,
    device: str | Capabilities = DEFAULT_DEVICE,
    all_layers: bool = False,
    cpu: bool = False,
) -> Any:
    """Bit-exact integer simulation (``cnnforge simulate``) of a quantized network — a
    ``Network``, a compile/quantize result, or a cnnforge quantized checkpoint path — on ``x``
    (C,H,W or N,C,H,W; int8 values or floats in model units, numpy or torch). Returns the output
    (int64, batch axis as given); a dict by layer name for several outputs or ``all_layers``.
    Runs on a CUDA GPU where one is present, else or with ``cpu`` on the CPU (same numbers)."""
    net = _quantized(network)
    return run_network(net, x, _device(device, "simulate"), all_layers, cpu)


def budget(
    model: ModelSpec,
    device: str = "generic",
    input_shape: Sequence[int] | None = None,
    *,
    model_args: Mapping[str, Any] | None = None,
    checkpoint: str | Path | None = None,
    points: int = 24,
) -> Budget:
    """The generic on-chip-budget plan (``cnnforge budget``): schedule, allocation, DDR spill.

    >>> b = cnnforge.budget(model, "generic:onchip=64KiB", (3, 32, 32))
    >>> b.to_dict()["totals"]
    """
    from cnnforge.targets.generic.run import plan_budget

    args = (_ints(input_shape), dict(model_args or {}), _path(checkpoint), points)
    _target, network, planned = plan_budget(model, device, *args)  # type: ignore[arg-type]
    return Budget(planned, network)


def evaluate(
    model: ModelSpec,
    checkpoint: str | Path | None = None,
    *,
    dataset: str = "shapes",
    data: str | Path | None = None,
    split: str = "val",
    size: int = 32,
    fold: int = 1,
    val_length: int = 256,
    batch_size: int = 64,
    seed: int = 0,
    model_args: Mapping[str, Any] | None = None,
    cpu: bool = False,
    gpus: str | Sequence[int] | None = None,
    workers: int | None = None,
    on_start: Callable[[torch.device], None] | None = None,
    length: int | None = None,
) -> Evaluated:
    """Float, QAT-eval and bit-exact scores on the same images (``cnnforge evaluate``); a
    float-only model gets its float row and ``absent`` says why the others are missing.

    Runs on a CUDA GPU when one is present (``gpus``: which one), else or with ``cpu`` on the
    CPU (docs/training.md); ``workers`` data-loading processes (None: from the core count);
    ``on_start(device)`` once the model and data are checked, before the first batch."""
    from cnnforge.compute import check_workers, choose_device, default_workers
    from cnnforge.frontend.loading import load_model
    from cnnforge.training.datasets import make_dataset
    from cnnforge.training.evaluate import evaluate_three_ways
    from cnnforge.training.run import model_classes

    device = choose_device(cpu=cpu, gpus=gpus)
    net = load_model(model, model_args, _path(checkpoint))
    classes = model_classes(net, size, fold)
    count = val_length if length is None else length  # length: val_length's old name
    ds = make_dataset(
        dataset, split, data=_path(data), size=size, num_classes=classes, length=count, seed=seed
    )
    if on_start is not None:
        on_start(device)
    return Evaluated(evaluate_three_ways(
        net, ds, classes, fold_factor=fold, batch_size=batch_size, device=device,
        workers=default_workers(device) if workers is None else check_workers(workers),
    ))  # fmt: skip


def train(
    model: ModelSpec,
    output_dir: str | Path,
    *,
    dataset: str = "shapes",
    data: str | Path | None = None,
    size: int = 32,
    epochs: int = 10,
    batch_size: int = 16,
    lr: float = 1e-2,
    optimizer: str = "adam",
    schedule: str = "cosine",
    weight_decay: float = 0.0,
    seed: int = 0,
    fold: int = 1,
    qat: bool = True,
    qat_policy: str | Path | None = None,
    train_length: int = 1024,
    val_length: int = 256,
    resume: bool = False,
    overwrite: bool = False,
    model_args: Mapping[str, Any] | None = None,
    on_epoch: Callable[[EpochRecord], None] | None = None,
    cpu: bool = False,
    gpus: str | Sequence[int] | None = None,
    workers: int | None = None,
    amp: bool = False,
    on_start: Callable[[torch.device], None] | None = None,
    on_batch: Callable[[int, int], None] | None = None,
) -> History:
    """Float training then QAT (``cnnforge train``) of a copy of ``model``; the checkpoints
    (last.pth, best.pth) go to ``output_dir`` (the rules of every writer: a new folder or one
    cnnforge wrote, ``overwrite`` to start again, ``resume`` to continue); returns one record
    per epoch; ``on_batch(done, total)`` after each batch (a progress display). Under
    ``torchrun`` every rank calls it (docs/training.md).

    Trains on a CUDA GPU when one is present (``gpus``: which; under torchrun one per rank),
    else or with ``cpu`` on the CPU; ``workers`` data-loading processes (None: from the core
    count); ``amp``: the float epochs under bfloat16 autocast (never QAT);
    ``on_start(device)`` once everything given is checked, before the first epoch."""
    from cnnforge.compute import choose_device
    from cnnforge.training.distributed import local_rank
    from cnnforge.training.loop import TrainConfig
    from cnnforge.training.run import train_model

    device = choose_device(cpu=cpu, gpus=gpus, local_rank=local_rank())
    config = TrainConfig(
        epochs=epochs, batch_size=batch_size, lr=lr, optimizer=optimizer, schedule=schedule,
        weight_decay=weight_decay, seed=seed, fold=fold, amp=amp,
    )  # fmt: skip
    return History(train_model(
        model,  # type: ignore[arg-type]  # load_model takes a model object as a spec too
        dict(model_args or {}),
        dataset=dataset,
        data=_path(data),
        size=size,
        config=config,
        out_dir=Path(output_dir),
        policy_path=_path(qat_policy),
        qat=qat,
        lengths=(train_length, val_length),
        resume=resume,
        overwrite=overwrite,
        on_epoch=on_epoch,
        device=device,
        workers=workers,
        on_start=on_start,
        on_batch=on_batch,
    ))


# ---- helpers -------------------------------------------------------------------------------


def _path(path: str | Path | None) -> Path | None:
    return None if path is None else Path(path)


def _ints(shape: Sequence[int] | None) -> tuple[int, ...] | None:
    return None if shape is None else tuple(int(n) for n in shape)


def _device(device: str | Capabilities, command: str) -> Capabilities:
    return _target(device, command).device


def _target(device: str | Capabilities, command: str) -> Target:
    """The resolved record of ``device`` (the one resolution: api.targets), one with hardware
    layers (``command`` names what refuses a budget target)."""
    from cnnforge.api.targets import device_for, get_target

    target = get_target(device)
    device_for(target, command)
    return target


def _shape(model: Any, input_shape: Sequence[int] | None) -> tuple[int, ...] | None:
    """The given shape, else a shipped model's own (ONNX files carry theirs: None)."""
    from cnnforge.pipeline.sources import shipped_shape

    if input_shape is not None:
        return tuple(int(n) for n in input_shape)
    if (shipped := shipped_shape(model)) is not None:
        return shipped
    if isinstance(model, str) and model.lower().endswith(".onnx"):
        return None
    raise InputError("no input_shape given", hint="e.g. input_shape=(3, 64, 64)")


def _network(
    model: Any,
    input_shape: Sequence[int] | None,
    model_args: Mapping[str, Any] | None,
    checkpoint: str | Path | None,
    vendor: tuple[str | Path | None, str | Path | None],
    target: Target | None,
) -> Network:
    """The model-level float Network of any model reference (checked against eager; a model
    wider than ``target``'s device allows is refused before it is traced; None: analysis, no
    device), or a vendor pair's network (read by the target, by default the default one's)."""
    from cnnforge.frontend import load_network
    from cnnforge.pipeline.sources import load_limits, network_for_cli

    if vendor != (None, None) or model is None:
        shape = _ints(input_shape)
        reader = target or _target(DEFAULT_DEVICE, "analyze")
        network = network_for_cli(model, shape, vendor[0], vendor[1], reader)
        if network is not None:
            return network
    ckpt = _path(checkpoint)
    shape = _shape(model, input_shape)
    device = None if target is None else target.device
    return load_network(model, shape, dict(model_args or {}), ckpt, **load_limits(device))


def _quantized(network: Any) -> Network:
    """A quantized Network from a result, a Network or a cnnforge quantized checkpoint path."""
    from cnnforge.ir import Network

    if isinstance(network, Compiled | Quantized):
        return network.network
    if isinstance(network, Network):
        if not network.is_quantized:
            raise InputError(
                f"network {network.name} is not quantized",
                hint="quantize it first: cnnforge.quantize(model, ...)",
            )
        return network
    if isinstance(network, str | Path):
        from cnnforge.checkpoint import load_quantized

        return load_quantized(Path(network))
    raise InputError(
        f"cannot simulate a {type(network).__name__}",
        hint="give a compile/quantize result, a quantized Network or a network.pth path",
    )


@contextlib.contextmanager
def _progress(show: bool, title: str) -> Iterator[Callable[[str, int, int], None] | None]:
    """A transient progress bar (terminal or notebook) when asked, else nothing at all."""
    if not show:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task(title, total=None)

        def on_step(name: str, index: int, total: int) -> None:
            bar.update(task, description=f"[{index + 1}/{total}] {name}", total=total,
                       completed=index)  # fmt: skip

        yield on_step
