"""``cnnforge adapt`` as a Python call: refuse what has no replacement, replace, fit, recover,
write adapted.py / adapted.pth / adapt.json, and score the four rows on the same images."""

from __future__ import annotations

import copy
import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from cnnforge.adaptation.fit import Checked, choose_width, preflight
from cnnforge.adaptation.recover import DistillTrainer, measure_batchnorm
from cnnforge.adaptation.surgery import Replacement
from cnnforge.compute import CPU, reproducible_math, to_cpu
from cnnforge.durable import replace_bytes, torch_bytes
from cnnforge.errors import InputError
from cnnforge.outputs import RunDirectory, run_directory
from cnnforge.training.loop import OUTPUT_FILES, TrainConfig, evaluate_segmentation
from cnnforge.training.run import (
    DataSpec,
    _in_channels,
    appear_with_first_checkpoint,
    model_classes,
)

if TYPE_CHECKING:
    from cnnforge.frontend.loading import ModelSpec

ROWS = ("original float", "adapted float", "QAT-eval", "bit-exact")
#: What the results are, written as they are done, and what a killed run may have left.
RESULTS = ("adapted.py", "sample.npy", "adapted.pth", "adapt.json")
#: Every file adapt writes in its OUT (its manifest lists them): the results, the two training
#: runs' checkpoints and logs, and the temporary names a kill may leave (removed on --resume).
ADAPT_FILES = (
    *RESULTS,
    *(f"{name}.tmp" for name in RESULTS),
    *(f"{run}/{name}" for run in ("run", "run_qat") for name in OUTPUT_FILES),
)
SCORE_BATCH = 64  # images per batch when scoring the rows


@dataclass
class AdaptResult:
    """What adapt did and what it cost: replacements, width tries, scores per row."""

    replacements: list[Replacement]
    width: float
    cap: int | None
    width_tries: list[dict[str, Any]]
    scores: dict[str, dict[str, float] | None] = field(default_factory=dict)
    minutes: float = 0.0
    epochs: dict[str, int] = field(default_factory=dict)  # run before the plateau or the cap
    size: dict[str, Any] = field(default_factory=dict)  # params, weight memory, latency
    plateau: bool = True  # each phase ended by the plateau rule (else exactly its epochs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "replacements": [r.to_dict() for r in self.replacements],
            "width": self.width,
            "cap": self.cap,
            "width_tries": self.width_tries,
            "epochs": self.epochs,
            "plateau": self.plateau,
            "scores": self.scores,
            "size": self.size,
            "minutes": self.minutes,
        }


def _has(model: nn.Module, path: str) -> bool:
    """Whether ``model`` still has a module at ``path`` (a depth cut removes blocks)."""
    try:
        model.get_submodule(path)
    except AttributeError:
        return False
    return True


def adapt_model(
    spec: ModelSpec,
    model_args: dict[str, Any],
    checkpoint: Path | None,
    *,
    target: Any,
    data: DataSpec,
    out: Path,
    config: TrainConfig,
    width: str = "auto",
    resume: bool = False,
    on_epoch: Callable | None = None,
    on_step: Callable[[str], None] | None = None,
    qat_epochs: int = 20,
    overwrite: bool = False,
    compute: torch.device = CPU,
    workers: int = 0,
    on_start: Callable[[torch.device], None] | None = None,
    plateau: bool = True,
    on_try: Callable[[dict[str, Any]], None] | None = None,
    allow_untrained: bool = False,
    measure: Callable[[Path, tuple[int, ...]], dict[str, Any]] | None = None,
    on_batch: Callable[[int, int], None] | None = None,
) -> AdaptResult:
    """The whole command (module docstring), training on ``compute``; ``out`` as train's
    (outputs.RunDirectory), adapt.json written last; ``measure``: the result's size, latency."""
    _check_teacher(spec, checkpoint, allow_untrained)
    step = on_step or (lambda _: None)
    start = time.monotonic()
    with run_directory(out, ADAPT_FILES, overwrite=overwrite, resume=resume) as run:
        torch.manual_seed(config.seed)
        s = _fit(spec, model_args, checkpoint, target, data, config, width, step)
        if on_start is not None:
            on_start(compute)
        for t in s.tries if on_try is not None else ():  # after the search: a refusal stays 1 line
            on_try(t)
        resumed = _started(run.path)
        _measure_norms(s.student.to(compute), s.splits[0], s.reps, widened=s.width > 1,
                       resume=resumed)  # fmt: skip
        step("distilling")
        place = {"device": compute, "workers": workers}
        spec_json = {"model": _name(spec), "model_args": model_args, "width": s.width, "cap": s.cap}
        loop = {"resume": resume, "on_epoch": on_epoch, "plateau": plateau, "on_batch": on_batch}
        distilled = _distill(run, s.student, s.teacher, s.kept, s.splits, s.config, place,
                             spec_json, loop)  # fmt: skip
        s.student.eval()
        run.commit()  # no float epochs: the directory appears before adapted.py names its path
        qat = _quantization_aware(s.student, s.teacher, s.shape, target, s.splits, s.config,
                                  out, _name(spec), qat_epochs, place, loop, step)  # fmt: skip
        step("scoring")
        result = AdaptResult(
            s.reps, s.width, s.cap, s.tries, epochs={"distill": distilled,
            "qat": _epochs_run(out / "run_qat")}, plateau=plateau,
            scores=_scores(s.teacher, s.student, qat, s.splits[1], s.config.num_classes, place),
            size=_size(s.teacher, measure, out, s.shape), minutes=(time.monotonic() - start) / 60,
        )  # fmt: skip
        text = json.dumps(result.to_dict(), indent=1) + "\n"
        replace_bytes(out / "adapt.json", text.encode("utf-8"))  # last: the run is complete
        return result


@dataclass
class _Fitted:
    """The teacher, its data and the student that fits, before any training."""

    teacher: nn.Module
    shape: tuple[int, ...]
    config: TrainConfig
    splits: tuple[Any, Any]
    reps: list[Replacement]
    student: nn.Module
    width: float
    cap: int | None
    tries: list[dict[str, Any]]
    kept: dict[str, tuple[int, ...]]


def _fit(spec, model_args, checkpoint, target, data: DataSpec, config, width, step) -> _Fitted:
    """The teacher loaded, its classes and data, the replacements and the width that fits."""
    from cnnforge.frontend.torch_fx import load_model

    teacher = load_model(spec, model_args, checkpoint).eval()
    shape = (_in_channels(teacher), data.size, data.size)
    classes = model_classes(teacher, data.size)
    config = replace(config, num_classes=classes)
    splits = tuple(data.splits(classes))
    step("replacing ops")
    checked = Checked()
    adapted, reps = preflight(teacher, shape, target, checked)
    step("choosing the width")
    student, w, cap, tries, kept = choose_width(adapted, shape, target, width, checked)
    return _Fitted(teacher, shape, config, splits, reps, student, w, cap, tries, kept)


def _quantization_aware(
    student, teacher, shape, target, splits, config, out, origin, epochs, place, loop, step
) -> nn.Module:
    """The distilled student lowered for ``target`` (adapted.py, compile's sample.npy), trained
    quantization-aware from the teacher; its weights written as adapted.pth."""
    step("building the QAT network")
    qat = _qat_network(copy.deepcopy(student).cpu(), shape, target, splits[0], out, origin)
    sample = splits[1][0][0].numpy().astype(np.int64)  # compile's --sample (the vendor's type)
    replace_bytes(out / "sample.npy", _npy_bytes(sample))
    step("quantization-aware training")
    _qat(qat, teacher, splits, config, out, epochs, place, loop)
    replace_bytes(out / "adapted.pth", torch_bytes(to_cpu(qat.state_dict())))
    return qat


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _check_teacher(spec: ModelSpec, checkpoint: Path | None, allow_untrained: bool) -> None:
    """An untrained teacher is refused (distilling from it teaches nothing), or with
    ``allow_untrained`` noted (errors.Note)."""
    from cnnforge.frontend import is_untrained, untrained_note

    if is_untrained(spec, checkpoint) and not allow_untrained:
        raise InputError(
            f"{_name(spec)} has no --checkpoint: adapt would distill from an untrained teacher",
            hint="give --checkpoint float.pth (its trained state_dict), or --allow-untrained",
        )
    untrained_note(spec, checkpoint, "the teacher's and the student's scores")


def _name(spec: ModelSpec) -> str:
    """How a model is named in adapt.json and adapted.py: the reference, else its class."""
    if isinstance(spec, str):
        return spec
    return spec.__name__ if isinstance(spec, type) else type(spec).__name__


def _started(out: Path) -> bool:
    return (out / "run" / "last.pth").is_file()


def _measure_norms(student, train_set, reps, *, widened: bool, resume: bool) -> None:
    """The replaced norms' statistics measured on training images (and every BatchNorm of a
    widened student, whose new channels have none); a resumed run loads them instead."""
    if resume:
        return
    norms = [r.path for r in reps if r.row == "norm" and _has(student, r.path)]
    if widened:
        norms += [p for p, m in student.named_modules() if isinstance(m, nn.BatchNorm2d)]
    measure_batchnorm(student, train_set, sorted(set(norms)))


def _qat_network(student, shape, target, train_set, out: Path, origin: str) -> nn.Module:
    """The student lowered for ``target``'s device as cnnforge.nn modules, written as
    adapted.py."""
    from cnnforge.adaptation.hardware import build

    calib = torch.stack([train_set[i][0] for i in range(min(64, len(train_set)))])
    return build(hardware_network(student, shape, target, calib), out / "adapted.py", origin)


def _epochs_run(run: Path) -> int:
    """Epochs a run folder's train.log records (a resumed run: all of them)."""
    log = run / "train.log"
    return len(log.read_text().splitlines()) if log.is_file() else 0


def _size(teacher: nn.Module, measure, out: Path, shape: tuple[int, ...]) -> dict[str, Any]:
    """The original's parameters and, from ``measure``, the result's size and latency."""
    size: dict[str, Any] = {"original_params": sum(p.numel() for p in teacher.parameters())}
    if measure is not None:
        size.update(measure(out, shape))
    return size


def _features(student: nn.Module, teacher: nn.Module, kept: dict[str, tuple[int, ...]]) -> dict:
    """The conv outputs to match (kept channels; at full width all) of the convs the teacher
    has at the same path (a stacked 3x3 that replaced a 7x7 has no counterpart)."""
    convs = {p for p, m in teacher.named_modules() if isinstance(m, _CONVS)}
    if kept:
        return {p: k for p, k in kept.items() if p in convs}
    return {
        p: tuple(range(m.out_channels))
        for p, m in student.named_modules()
        if isinstance(m, _CONVS) and p in convs
    }


_CONVS = (nn.Conv2d, nn.ConvTranspose2d)


def hardware_network(student: nn.Module, shape, target, calibration: torch.Tensor):
    """The adapted module lowered for ``target``'s device, its output layer wide, scales
    divided out."""
    import dataclasses

    from cnnforge.adaptation.hardware import rescaled
    from cnnforge.frontend.capture import capture
    from cnnforge.passes.lower import lower_to_hardware

    lowered = lower_to_hardware(capture(student, shape, name="Adapted"), target.device).network
    layers = [
        dataclasses.replace(x, wide=True)
        if x.name in lowered.outputs and x.has_weights and x.activation.value == "none"
        else x
        for x in lowered.layers
    ]
    return rescaled(lowered.with_layers(layers), calibration)


def _distill(run: RunDirectory, student, teacher, kept, splits, config, place, spec, loop) -> int:
    """Float distillation from the original in OUT/run (resumable, to its plateau; OUT appears
    with the first checkpoint); the epochs the run has had."""
    trainer = DistillTrainer(
        student, *splits, config, run.path / "run", None, model_spec=spec,
        on_epoch=loop["on_epoch"], teacher=teacher, features=_features(student, teacher, kept),
        plateau=loop["plateau"], **place,
    )  # fmt: skip
    trainer.on_epoch = appear_with_first_checkpoint(run, trainer, loop["on_epoch"])
    trainer.on_batch = loop["on_batch"]
    if loop["resume"] and (run.path / "run" / "last.pth").is_file():
        trainer.resume(run.path / "run" / "last.pth")
    if config.epochs:
        trainer.fit()
    return len(trainer.history)


def _qat(qat, teacher, splits, config, out, epochs, place, loop) -> None:
    """Quantization-aware distillation of the cnnforge.nn network (train's loop, QAT from 0,
    to its plateau)."""
    from cnnforge.nn import QATPolicy
    from cnnforge.training.qat import QatHooks

    trainer = DistillTrainer(
        qat, *splits, replace(config, epochs=epochs, qat_lr_scale=1.0, lr=config.lr / 4),
        out / "run_qat", QatHooks(QATPolicy(start_epoch=0)),
        model_spec={"model": str(out / "adapted.py") + ":Adapted"},
        on_epoch=loop["on_epoch"], teacher=teacher, plateau=loop["plateau"], **place,
    )  # fmt: skip
    trainer.on_batch = loop["on_batch"]
    last = out / "run_qat" / "last.pth"
    if loop["resume"] and last.is_file():
        trainer.resume(last)
    trainer.fit()
    if trainer.qat.active is False:  # zero QAT epochs: the quantized stage still needs QAT on
        trainer.qat.activate(qat)


def _scores(teacher, student, qat, val_set, classes, place) -> dict[str, dict[str, float] | None]:
    """The four rows on the same validation images (the last two by evaluate's code)."""
    from cnnforge.training.evaluate import evaluate_three_ways
    from cnnforge.training.loaders import Batches

    def as_float(model):
        return lambda x: model(x.to(torch.float32) / 128.0)

    scores: dict[str, dict[str, float] | None] = {}
    batches = Batches(val_set, SCORE_BATCH, **place)
    try:
        with torch.no_grad(), reproducible_math(place["device"]):
            for row, model in (("original float", teacher), ("adapted float", student)):
                _, s = evaluate_segmentation(as_float(model), batches.epoch(), classes)
                scores[row] = _row(s)
    finally:
        batches.close()
    three = evaluate_three_ways(qat, val_set, classes, batch_size=SCORE_BATCH, **place)
    scores["QAT-eval"] = _row(three.scores["qat-eval"])
    scores["bit-exact"] = _row(three.scores["bit-exact"])
    return scores


def _row(s) -> dict[str, float]:
    return {"miou": s.miou, "pixel_accuracy": s.pixel_accuracy, "dice": s.mean_dice}
