"""The training loop: float phase then QAT, re-seeded per epoch so a resumed run repeats the
uninterrupted one exactly (CPU, GPU, or DistributedDataParallel under torchrun)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from cnnforge.arithmetic import ACT_SCALE
from cnnforge.compute import CPU, reproducible_math, to_cpu
from cnnforge.durable import replace_bytes, torch_bytes
from cnnforge.errors import InputError
from cnnforge.training import distributed as dist_utils
from cnnforge.training.datasets import VOID, fold, unfold
from cnnforge.training.loaders import Batches
from cnnforge.training.metrics import confusion_counts, segmentation_scores
from cnnforge.training.qat import QatHooks

CHECKPOINT_FORMAT = "cnnforge-train/1"


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a training run (saved in every checkpoint)."""

    epochs: int = 10
    batch_size: int = 32
    lr: float = 3e-3
    optimizer: str = "adam"  # adam | sgd | adamw
    momentum: float = 0.9
    weight_decay: float = 0.0
    schedule: str = "cosine"  # cosine | step | none
    step_size: int = 10
    gamma: float = 0.5
    seed: int = 0
    fold: int = 1  # space-to-depth factor of the input (vendor U-Net: 4)
    num_classes: int = 5
    qat_lr_scale: float = 0.25  # QAT fine-tunes: its fresh optimizer starts at lr x this
    replay_world_size: int = 1  # >1: one process replays a DDP run's batches (tests, checks)
    amp: bool = False  # float epochs under bfloat16 autocast (never QAT epochs)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class EpochRecord:
    epoch: int
    phase: str  # "float" or "qat"
    train_loss: float
    val_loss: float
    pixel_accuracy: float
    miou: float
    lr: float
    seconds: float = 0.0  # the training pass, data loading included (not validation)


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if config.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
        )
    if config.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
    raise InputError(f"unknown optimizer {config.optimizer!r}", hint="adam, adamw or sgd")


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig):
    if config.schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(config.epochs, 1))
    if config.schedule == "step":
        return torch.optim.lr_scheduler.StepLR(optimizer, config.step_size, config.gamma)
    if config.schedule == "none":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    raise InputError(f"unknown schedule {config.schedule!r}", hint="cosine, step or none")


def model_inputs(x: torch.Tensor, config: TrainConfig) -> torch.Tensor:
    """Hardware-range integers -> the float inputs the model trains on (x / 128, folded)."""
    return fold(x.to(torch.float32) / ACT_SCALE, config.fold)


def model_logits(model: nn.Module, x: torch.Tensor, config: TrainConfig) -> torch.Tensor:
    """Per-pixel logits at the mask's resolution (folded outputs are unfolded)."""
    return unfold(model(model_inputs(x, config)), config.fold)


def segmentation_loss(
    logits: torch.Tensor, mask: torch.Tensor, reduction: str = "mean", ordered: bool | None = None
) -> torch.Tensor:
    """Cross-entropy over the non-``VOID`` pixels; ``ordered`` (default on CUDA) sums without
    atomics, so a resumed GPU run repeats an uninterrupted one's losses."""
    if not (logits.device.type == "cuda" if ordered is None else ordered):
        return F.cross_entropy(logits, mask, ignore_index=VOID, reduction=reduction)
    total = F.cross_entropy(logits, mask, ignore_index=VOID, reduction="none").sum()
    if reduction == "sum":
        return total
    return total / (mask != VOID).sum()


def evaluate_segmentation(
    predict: Callable[[torch.Tensor], torch.Tensor],
    batches: Iterable[tuple[torch.Tensor, ...]],
    num_classes: int,
) -> tuple[float, Any]:
    """Run ``predict`` (ints in -> logits out) over ``batches`` of (x, mask); (loss, scores)."""
    cm = None
    # summed and counted where the batches are, the loss in float64 and in order (the numbers
    # of adding float(loss) per batch), read once at the end: a read per batch waits for the GPU
    total_loss: torch.Tensor | float = 0.0
    pixels: torch.Tensor | int = 0
    for x, mask in batches:
        logits = predict(x).to(torch.float64)
        total_loss = total_loss + segmentation_loss(logits, mask, "sum")
        pixels = pixels + (mask != VOID).sum()
        batch_cm = confusion_counts(logits.argmax(dim=1), mask, num_classes)
        cm = batch_cm if cm is None else cm + batch_cm
    scores = segmentation_scores(None if cm is None else cm.cpu().numpy())
    return float(total_loss) / max(int(pixels), 1), scores


#: Every file a training run writes into its ``-o`` directory (its manifest lists them).
OUTPUT_FILES = ("last.pth", "best.pth", "train.log", "last.tmp", "best.tmp", "train.tmp")


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """``path`` replaced whole (``NAME.tmp`` flushed to the disk, then renamed): a kill or a
    power cut leaves the previous checkpoint or this one, never a torn file (docs/faults.md)."""
    replace_bytes(path, torch_bytes(payload), path.with_suffix(".tmp"))


def append_log(path: Path, line: str) -> None:
    """One line appended to ``path`` and flushed to the disk."""
    with open(path, "a") as log:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())


def load_checkpoint(path: Path) -> dict[str, Any]:
    """A training checkpoint, loaded safely; InputError names the file when it is not one."""
    if not Path(path).is_file():
        raise InputError("checkpoint file does not exist", where=str(path))
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt or foreign pickle
        raise InputError(f"cannot load checkpoint: {exc}", where=str(path)) from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise InputError(
            f"not a cnnforge training checkpoint ({CHECKPOINT_FORMAT})", where=str(path)
        )
    return payload


class Trainer:
    """Trains ``model`` on ``train_set`` on ``device``, validating on ``val_set``, writing to
    ``out_dir``; ``workers`` data-loading processes (0: the main process)."""

    def __init__(
        self,
        model: nn.Module,
        train_set: Dataset,
        val_set: Dataset,
        config: TrainConfig,
        out_dir: Path,
        qat: QatHooks | None = None,
        model_spec: dict[str, Any] | None = None,
        on_epoch: Callable[[EpochRecord], None] | None = None,
        *,
        device: torch.device = CPU,
        workers: int = 0,
    ) -> None:
        self.device = device
        self.workers = workers
        self.train_set, self.val_set = train_set, val_set
        self.config = config
        self.out_dir = Path(out_dir)
        self.qat = qat or QatHooks(None)
        self.model_spec = model_spec or {}
        self.on_epoch = on_epoch
        self.on_batch: Callable[[int, int], None] | None = None  # progress inside an epoch
        self.history: list[EpochRecord] = []
        self.best_miou = -math.inf
        self.start_epoch = 0
        self.ctx = replace(dist_utils.context(), device=self.device)
        if self.ctx.world_size > 1:
            model = dist_utils.global_batchnorm(model)
        self.model = model.to(self.device)
        self._net: nn.Module | None = None  # DDP around the model as it trains in this phase
        self._batches: dict[str, Batches] = {}
        self.optimizer = make_optimizer(self.model, config)
        self.scheduler = make_scheduler(self.optimizer, config)

    def resume(self, path: Path) -> None:
        """Continue from a ``last.pth``: weights, QAT state, optimizer, schedule, history."""
        payload = load_checkpoint(path)
        if payload["qat_active"]:
            self.qat.activate(self.model)
            self._net = None
            self._rebuild_optimizer(0)
        self.model.load_state_dict(payload["state_dict"])
        try:
            self.optimizer.load_state_dict(payload["optimizer"])
        except ValueError:  # e.g. QAT state from before folded BatchNorm stopped training
            raise InputError(
                "the optimizer state does not match the model's trainable parameters",
                where=str(path),
                hint="written by an older cnnforge or another model; train again without --resume",
            ) from None
        self.scheduler.load_state_dict(payload["scheduler"])
        self.start_epoch = int(payload["epoch"]) + 1
        self.best_miou = float(payload["best_miou"])
        self.history = [EpochRecord(**r) for r in payload["history"]]
        self._rewrite_log()

    def _payload(self, epoch: int) -> dict[str, Any]:
        """What ``last.pth`` holds, every tensor a CPU copy (it loads on any machine)."""
        return {
            "format": CHECKPOINT_FORMAT,
            "epoch": epoch,
            "state_dict": to_cpu(self.model.state_dict()),
            "optimizer": to_cpu(self.optimizer.state_dict()),
            "scheduler": self.scheduler.state_dict(),
            "qat_active": self.qat.active,
            "best_miou": self.best_miou,
            "history": [asdict(r) for r in self.history],
            "config": json.dumps(asdict(self.config), sort_keys=True),
            "model": json.dumps(self.model_spec, sort_keys=True),
        }

    def fit(self) -> list[EpochRecord]:
        """Run the remaining epochs; returns the full history. Each epoch computes under
        ``reproducible_math`` (TF32 off once QAT is on); the workers stop at the end."""
        try:
            for epoch in range(self.start_epoch, self.config.epochs):
                if self.finished():
                    break
                if self.qat.should_activate(epoch):
                    self.qat.activate(self.model)
                    self._net = None  # the trainable parameters changed: wrap again
                    self._rebuild_optimizer(epoch)
                    self.best_miou = -math.inf  # best.pth: the best *quantization-aware* epoch
                with reproducible_math(self.device, full_precision=self.qat.active):
                    lr = float(self.optimizer.param_groups[0]["lr"])  # the rate it trains at
                    start = time.perf_counter()
                    train_loss = self._train_epoch(epoch)
                    seconds = time.perf_counter() - start
                    record = replace(self._validate(epoch, train_loss), seconds=seconds, lr=lr)
                self.history.append(record)
                self._write(epoch, record)
                if self.on_epoch and self.ctx.is_main:
                    self.on_epoch(record)
        finally:
            for batches in self._batches.values():
                batches.close()
            self._batches = {}
        return self.history

    def finished(self) -> bool:
        """Whether the run ends before ``epochs`` (a subclass's stopping rule; here never)."""
        return False

    def batch_done(self, done: int, total: int) -> None:
        """Tell ``on_batch`` (a progress display; rank 0 only) that ``done`` of ``total``
        batches of this epoch are trained."""
        if self.on_batch is not None and self.ctx.is_main:
            self.on_batch(done, total)

    def batches(self, split: str) -> Batches:
        """The ``train`` (shuffled per epoch) or ``val`` batches, made once per ``fit``."""
        if split not in self._batches:
            train = split == "train"
            self._batches[split] = Batches(
                self.train_set if train else self.val_set,
                self.config.batch_size,
                device=self.device,
                workers=self.workers,
                shuffle=train,
                seed=self.config.seed,
                replay_world=self.config.replay_world_size,
                cache=True,  # every epoch reads the same items: kept on the device once seen
            )
        return self._batches[split]

    def autocast(self) -> contextlib.AbstractContextManager:
        """bfloat16 autocast in float epochs with ``TrainConfig.amp``, else nothing."""
        enabled = self.config.amp and not self.qat.active
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=enabled)

    def _rebuild_optimizer(self, epoch: int) -> None:
        """QAT adds parameters (shifts) and changes the weights' meaning: a fresh optimizer."""
        qat_config = replace(self.config, lr=self.config.lr * self.config.qat_lr_scale)
        self.optimizer = make_optimizer(self.model, qat_config)
        self.scheduler = make_scheduler(self.optimizer, qat_config)
        with warnings.catch_warnings():  # stepping a fresh schedule forward, no optimizer step
            warnings.simplefilter("ignore", UserWarning)
            for _ in range(epoch):
                self.scheduler.step()

    def _train_epoch(self, epoch: int) -> float:
        torch.manual_seed(self.config.seed + epoch)  # seeds every CUDA generator too
        if self._net is None:
            self._net = self.ctx.wrap(self.model)
        net = self._net
        net.train()
        # summed on the device in float64: the same numbers as adding float(loss) per batch,
        # without waiting for each batch to finish
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        batches = 0
        train = self.batches("train")
        steps = len(train.sampler)
        for x, mask in train.epoch(epoch):
            self.optimizer.zero_grad(set_to_none=True)
            with self.autocast():
                loss = segmentation_loss(model_logits(net, x, self.config), mask)
            loss.backward()
            self.optimizer.step()
            total += loss.detach()
            batches += 1
            self.batch_done(batches, steps)
        self.scheduler.step()
        return self.ctx.mean(float(total) / max(batches, 1))

    def _validate(self, epoch: int, train_loss: float) -> EpochRecord:
        self.model.eval()
        with torch.no_grad():
            val_loss, scores = evaluate_segmentation(
                lambda x: model_logits(self.model, x, self.config),
                self.batches("val").epoch(),
                self.config.num_classes,
            )
        return EpochRecord(
            epoch=epoch,
            phase="qat" if self.qat.active else "float",
            train_loss=train_loss,
            val_loss=val_loss,
            pixel_accuracy=scores.pixel_accuracy,
            miou=scores.miou,
            lr=float(self.optimizer.param_groups[0]["lr"]),
        )

    def _write(self, epoch: int, record: EpochRecord) -> None:
        """Rank 0 only: best.pth on a new best mIoU, then last.pth and the log every epoch, so a
        resumed run's files equal an uninterrupted run's."""
        improved = record.miou > self.best_miou
        if improved:
            self.best_miou = record.miou
        if not self.ctx.is_main:
            return
        if epoch == self.start_epoch:  # made once: a run directory that vanishes is an error
            self.out_dir.mkdir(exist_ok=True)
        payload = self._payload(epoch)
        if improved:  # best.pth is for deployment: weights and metadata, no optimizer state
            slim = {k: v for k, v in payload.items() if k not in ("optimizer", "scheduler")}
            save_checkpoint(self.out_dir / "best.pth", slim)
        save_checkpoint(self.out_dir / "last.pth", payload)
        append_log(self.out_dir / "train.log", self._log_line(record))

    def _log_line(self, record: EpochRecord) -> str:
        return json.dumps({"rank": self.ctx.rank, **asdict(record)})

    def _rewrite_log(self) -> None:
        """train.log as the resumed checkpoint's history has it (rank 0 writes it)."""
        if self.ctx.is_main and self.out_dir.is_dir():
            lines = "".join(self._log_line(r) + "\n" for r in self.history)
            log = self.out_dir / "train.log"
            replace_bytes(log, lines.encode("utf-8"), log.with_suffix(".tmp"))
