"""Training and evaluation as Python calls: what the train, evaluate and demo commands run."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from cnnforge.errors import InputError
from cnnforge.training.datasets import make_dataset
from cnnforge.training.loop import EpochRecord, TrainConfig, Trainer
from cnnforge.training.qat import QatHooks

if TYPE_CHECKING:
    from cnnforge.outputs import RunDirectory


def folded_input_shape(model: nn.Module, size: int, fold: int = 1) -> tuple[int, int, int]:
    """The (C, H, W) the model sees for ``size`` x ``size`` images folded space-to-depth by
    ``fold``: the one place train, evaluate and the class probe derive it."""
    channels = _in_channels(model)
    if fold < 1 or size % fold or channels % (fold * fold):
        raise InputError(
            f"--fold {fold} does not divide the input: {channels} channels at {size}x{size}",
            hint="the first layer's in_channels must be (image channels) x fold^2 and --size "
            "a multiple of --fold",
        )
    return channels, size // fold, size // fold


def model_classes(model: nn.Module, size: int, fold: int = 1) -> int:
    """Number of classes a segmentation model predicts (its output channels / fold^2), probed
    on one zero image of ``size`` x ``size`` folded by ``fold``."""
    shape = folded_input_shape(model, size, fold)
    with torch.no_grad():
        was_training = model.training
        model.eval()
        out = model(torch.zeros(1, *shape))
        model.train(was_training)
    return int(out.shape[1]) // (fold * fold)


def default_policy(epochs: int):
    """QAT for the last third of the epochs at 8-bit weights (the vendor's usual schedule)."""
    from cnnforge.nn import QATPolicy

    return QATPolicy(start_epoch=max(1, (2 * epochs) // 3))


@dataclass(frozen=True)
class DataSpec:
    """Which dataset, where, at which size; enough to rebuild the same splits anywhere."""

    name: str = "shapes"
    data: Path | None = None
    size: int = 32
    train_length: int = 1024
    val_length: int = 256
    seed: int = 0

    def splits(self, num_classes: int):
        common = dict(data=self.data, size=self.size, num_classes=num_classes, seed=self.seed)
        train = make_dataset(self.name, "train", length=self.train_length, **common)
        val = make_dataset(self.name, "val", length=self.val_length, **common)
        return train, val


def train_model(
    spec: str,
    model_args: dict[str, Any],
    *,
    dataset: str,
    data: Path | None,
    size: int,
    config: TrainConfig,
    out_dir: Path,
    policy_path: Path | None = None,
    qat: bool = True,
    lengths: tuple[int, int] = (1024, 256),
    resume: bool = False,
    on_epoch: Callable[[EpochRecord], None] | None = None,
    overwrite: bool = False,
    device: torch.device = torch.device("cpu"),
    workers: int | None = None,
    on_start: Callable[[torch.device], None] | None = None,
    on_batch: Callable[[int, int], None] | None = None,
) -> list[EpochRecord]:
    """Build the model, data and trainer; train (or resume) into ``out_dir`` (an
    outputs.RunDirectory) and return the history; ``on_start(device)`` runs before epoch one."""
    from cnnforge.compute import check_workers, default_workers
    from cnnforge.training.distributed import local_processes

    if workers is None:
        workers = default_workers(device, local_processes())
    check_workers(workers)

    last = Path(out_dir) / "last.pth"
    if resume and not last.is_file():
        raise InputError(
            "nothing to resume: no last.pth", where=str(out_dir), hint="run without --resume"
        )
    with _run_directory(out_dir, overwrite, resume) as run:
        data_spec = DataSpec(dataset, data, size, lengths[0], lengths[1], config.seed)
        model, num_classes, (train_set, val_set) = _model_and_data(
            spec, model_args, data_spec, config
        )
        trainer = Trainer(
            model,
            train_set,
            val_set,
            replace(config, num_classes=num_classes),
            out_dir if run is None else run.path,
            QatHooks(_policy(qat, policy_path, config.epochs)),
            model_spec={"model": spec, "model_args": model_args, "data": _data_json(data_spec)},
            on_epoch=on_epoch,
            device=device,
            workers=workers,
        )
        trainer.on_batch = on_batch
        if run is not None:
            trainer.on_epoch = appear_with_first_checkpoint(run, trainer, on_epoch)
        if resume:
            trainer.resume(last)
        if on_start is not None:
            on_start(device)
        return trainer.fit()


def _model_and_data(
    spec: str, model_args: dict[str, Any], data_spec: DataSpec, config: TrainConfig
) -> tuple[torch.nn.Module, int, tuple[Any, Any]]:
    """The model built under ``config.seed`` (its initial weights are part of a deterministic
    run), its class count and the data splits for it."""
    from cnnforge.frontend.torch_fx import load_model

    torch.manual_seed(config.seed)
    model = load_model(spec, model_args, None)
    num_classes = model_classes(model, data_spec.size, config.fold)
    return model, num_classes, data_spec.splits(num_classes)


def _run_directory(
    out_dir: Path, overwrite: bool, resume: bool
) -> contextlib.AbstractContextManager[RunDirectory | None]:
    """Rank 0 writes ``out_dir`` (outputs.run_directory); under torchrun the others only train."""
    from cnnforge.outputs import run_directory
    from cnnforge.training.distributed import context
    from cnnforge.training.loop import OUTPUT_FILES

    if not context().is_main:
        return contextlib.nullcontext()
    return run_directory(out_dir, OUTPUT_FILES, overwrite=overwrite, resume=resume)


def _policy(qat: bool, path: Path | None, epochs: int):
    """The QAT policy: the file's, else the default for ``epochs``; None without QAT."""
    from cnnforge.nn import load_policy

    if not qat:
        return None
    return load_policy(path) if path else default_policy(epochs)


def appear_with_first_checkpoint(
    run: RunDirectory, trainer: Trainer, on_epoch: Callable[[EpochRecord], None] | None
) -> Callable[[EpochRecord], None]:
    """``trainer``'s epoch callback: after the first epoch's checkpoint is written (in the
    stage), the run directory is put in place and the trainer writes there from then on."""

    def after_epoch(record: EpochRecord) -> None:
        if not run.committed:
            inside = trainer.out_dir.relative_to(run.path)
            run.commit()
            trainer.out_dir = run.path / inside
        if on_epoch is not None:
            on_epoch(record)

    return after_epoch


def _in_channels(model: nn.Module) -> int:
    for module in model.modules():
        if hasattr(module, "in_channels"):
            return int(module.in_channels)
    raise InputError(f"cannot tell the input channels of {type(model).__name__}")


def _data_json(spec: DataSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "data": None if spec.data is None else str(spec.data),
        "size": spec.size,
        "train_length": spec.train_length,
        "val_length": spec.val_length,
        "seed": spec.seed,
    }
