"""Recovery of the accuracy the replacements cost: BatchNorm statistics measured on the data,
then distillation from the original model (output logits, softened, and the outputs of the
convolutions both keep) on the user's data.

``DistillTrainer`` is the train loop (train/loop.py: per-epoch seeds, ``last.pth`` every epoch,
resumable, ``best.pth``, train.log) with the teacher's soft targets added to the loss.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from cnnforge.adaptation.width import NEW
from cnnforge.training.loop import Trainer, model_inputs, model_logits, segmentation_loss

TEMPERATURE = 2.0
KD_WEIGHT = 0.5
FEATURE_WEIGHT = 0.1
#: The plateau rule: the rate times PLATEAU_FACTOR once more than PATIENCE epochs bring no
#: gain of PLATEAU_GAIN in validation mIoU, PLATEAU_DROPS times; the plateau after that sets the
#: rate at its floor (0.1 % lower), and PATIENCE epochs more without a gain stop the run.
PATIENCE = 3
PLATEAU_GAIN = 0.002
PLATEAU_FACTOR = 0.3
PLATEAU_DROPS = 3


def measure_batchnorm(
    model: nn.Module, dataset: Dataset, paths: list[str], batches: int = 8, batch_size: int = 32
) -> None:
    """Reset the BatchNorms at ``paths`` and set their statistics to the data's (cumulative
    average over ``batches`` batches; nothing else changes)."""
    norms = [model.get_submodule(p) for p in paths]
    if not norms:
        return
    device = next(model.parameters()).device
    for bn in norms:
        bn.reset_running_stats()
        bn.momentum = None
    model.eval()
    for bn in norms:
        bn.train()
    with torch.no_grad():
        for i, (x, _) in enumerate(DataLoader(dataset, batch_size=batch_size, shuffle=False)):
            if i >= batches:
                break
            model(x.to(device, torch.float32) / 128.0)
    for bn in norms:
        bn.momentum = 0.1
    model.eval()


def wide_output(model: nn.Module) -> nn.Module | None:
    """The last wide quantization-aware module, or None: the device leaves the output shift out
    of a wide output (docs/quantization.md), so in the QAT stage the logits are the float ones
    times 2^-shift; the loss compares them at the float scale the teacher's have, ``gain_of``
    this module (else the student first spends epochs growing its logits back)."""
    from cnnforge.nn import Stage, qat_modules

    wide = [m for _, m in qat_modules(model) if getattr(m, "wide", False)]
    wide = [m for m in wide if m.current_stage is Stage.QAT]
    return wide[-1] if wide else None


def gain_of(module: nn.Module | None) -> float | torch.Tensor:
    """``2^shift`` of ``module`` (1.0 for None), as a tensor on the device where the shift
    stays there: reading it would wait for the GPU at every step."""
    return 1.0 if module is None else 1.0 / module.qat_unit()


def mirrored(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Half the batch (seeded draw) mirrored left-right, images and masks: the teacher labels
    them too, which keeps the student from fitting the few training images."""
    flip = torch.rand(x.shape[0]) < 0.5  # drawn on the CPU, on every device
    if x.device.type == "cuda":  # pinned, the copy does not wait for the GPU
        flip = flip.pin_memory()
    flip = flip.to(x.device, non_blocking=True)
    x = torch.where(flip.view(-1, *[1] * (x.dim() - 1)), x.flip(-1), x)
    mask = torch.where(flip.view(-1, *[1] * (mask.dim() - 1)), mask.flip(-1), mask)
    return x, mask


class PlateauSchedule(torch.optim.lr_scheduler.ReduceLROnPlateau):
    """A constant rate, lowered at each plateau of validation mIoU, ``finished`` at one at the
    lowest rate; saved in every ``last.pth``, so a resumed run continues it."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        lowest = [g["lr"] * PLATEAU_FACTOR**PLATEAU_DROPS * 0.999 for g in optimizer.param_groups]
        super().__init__(
            optimizer, mode="max", factor=PLATEAU_FACTOR, patience=PATIENCE,
            threshold=PLATEAU_GAIN, threshold_mode="abs", min_lr=lowest,
        )  # fmt: skip

    def finished(self) -> bool:
        at_lowest = all(
            g["lr"] <= m for g, m in zip(self.optimizer.param_groups, self.min_lrs, strict=True)
        )
        return at_lowest and self.num_bad_epochs >= self.patience


#: Channels a feature is compared on: an index tensor, or n for channels 0..n-1 in order.
Picked = torch.Tensor | int


def picked(channels: list[int], device: torch.device) -> Picked:
    """``channels`` as ``channels_of`` takes them: n for 0..n-1 in order, else an index tensor
    on ``device``."""
    if channels == list(range(len(channels))):
        return len(channels)
    return torch.tensor(channels, dtype=torch.int64, device=device)


def channels_of(feature: torch.Tensor, channels: Picked) -> torch.Tensor:
    """``feature[:, channels]``; all of them, uncopied, where they are 0..n-1 of n."""
    if isinstance(channels, int):
        if feature.shape[1] == channels:
            return feature
        return feature[:, :channels].contiguous()  # the same values and order as an index copy
    return feature[:, channels]


class DistillTrainer(Trainer):
    """Trainer whose loss is cross-entropy + ``KD_WEIGHT`` x KL(teacher || student) at T=2
    + ``FEATURE_WEIGHT`` x the normalized squared error of intermediate features where they
    line up (``features``: module path -> the teacher channels the student's output keeps)."""

    def __init__(
        self,
        *args,
        teacher: nn.Module,
        features: dict[str, tuple[int, ...]] | None = None,
        plateau: bool = True,
        **kw,
    ) -> None:
        super().__init__(*args, **kw)
        self.teacher = teacher.eval().to(self.device)
        self.features = features or {}
        self._picks: dict[str, tuple[Picked, Picked, int]] | None = None
        self.plateau = plateau
        if plateau:
            self.scheduler = PlateauSchedule(self.optimizer)

    def finished(self) -> bool:
        """Whether the plateau rule has ended the run (else it runs to ``epochs``, the cap)."""
        return self.plateau and self.scheduler.finished()

    def _rebuild_optimizer(self, epoch: int) -> None:
        super()._rebuild_optimizer(epoch)
        if self.plateau:
            self.scheduler = PlateauSchedule(self.optimizer)

    def _validate(self, epoch: int, train_loss: float):
        record = super()._validate(epoch, train_loss)
        if self.plateau:
            self.scheduler.step(record.miou)
        return record

    def _feature_picks(self) -> dict[str, tuple[Picked, Picked, int]]:
        """Per feature path: the teacher's channels, the student's channels they are compared
        with and the student's channel count. Index tensors are made on the device once (a list
        index is copied to the GPU, the host waiting, at every use); a count n where they are
        0..n-1 in order: all of a feature's n channels are then taken as they are, without an
        indexing copy (and its backward) at every step."""
        if self._picks is None:
            picks = {}
            for path, keep in self.features.items():
                ours = [j for j, i in enumerate(keep) if i != NEW]  # widening's new ones: free
                theirs = [keep[j] for j in ours]
                picks[path] = (picked(theirs, self.device), picked(ours, self.device), len(keep))
            self._picks = picks
        return self._picks

    def _feature_hooks(self, taken: dict[tuple[int, str], torch.Tensor]) -> list:
        """Forward hooks that put the feature paths' outputs in ``taken`` (side 0 the teacher,
        1 the student), registered for an epoch rather than a step."""
        hooks = []
        for side, model in enumerate((self.teacher, self.model)):
            for path in self.features:
                hooks.append(
                    model.get_submodule(path).register_forward_hook(
                        lambda _m, _i, out, key=(side, path): taken.__setitem__(key, out)
                    )
                )
        return hooks

    def _feature_loss(
        self, x: torch.Tensor, taken: dict[tuple[int, str], torch.Tensor], head: nn.Module | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Teacher logits (no gradient) and the feature term for the batch ``x``; ``taken``
        filled by ``_feature_hooks``, ``head`` the module whose shift ``gain_of`` undoes."""
        with torch.no_grad():
            soft = self.teacher(model_inputs(x, self.config))
        logits = model_logits(self.model, x, self.config) * gain_of(head)
        term = logits.new_zeros(())
        for path, (theirs, ours, width) in self._feature_picks().items():
            t = channels_of(taken[(0, path)], theirs)
            s = taken[(1, path)]
            if s.shape[1] == width and s.shape[2:] == t.shape[2:]:
                s = channels_of(s, ours)
                term = term + F.mse_loss(s, t) / (t.var() + 1e-6)
        taken.clear()  # the step's features go with the step
        return soft, logits, term / max(len(self.features), 1)

    def _train_epoch(self, epoch: int) -> float:
        torch.manual_seed(self.config.seed + epoch)  # seeds every CUDA generator too
        self.model.train()
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        batches = 0
        train = self.batches("train")
        steps = len(train.sampler)
        head = wide_output(self.model)  # stages change between epochs only
        taken: dict[tuple[int, str], torch.Tensor] = {}
        hooks = self._feature_hooks(taken)
        try:
            for x, mask in train.epoch(epoch):
                x, mask = mirrored(x, mask)
                self.optimizer.zero_grad(set_to_none=True)
                with self.autocast():
                    loss = self._loss(x, mask, taken, head)
                loss.backward()
                self.optimizer.step()
                total += loss.detach()
                batches += 1
                self.batch_done(batches, steps)
        finally:
            for h in hooks:
                h.remove()
        if not self.plateau:
            self.scheduler.step()
        return float(total) / max(batches, 1)

    def _loss(
        self, x: torch.Tensor, mask: torch.Tensor, taken: dict, head: nn.Module | None
    ) -> torch.Tensor:
        """Cross-entropy + the softened teacher's KL term + the feature term of one batch."""
        soft, logits, feature_term = self._feature_loss(x, taken, head)
        soft = soft / TEMPERATURE
        kd = F.kl_div(
            F.log_softmax(logits / TEMPERATURE, dim=1),
            F.log_softmax(soft, dim=1),
            log_target=True,
            reduction="batchmean",
        ) / (x.shape[-1] * x.shape[-2])
        loss = segmentation_loss(logits, mask) + KD_WEIGHT * TEMPERATURE**2 * kd
        return loss + FEATURE_WEIGHT * feature_term
