"""Recovery of the accuracy the replacements cost: BatchNorm statistics measured on the data,
then distillation from the original model (output logits, softened) on the user's data.

``DistillTrainer`` is the train loop (train/loop.py: per-epoch seeds, ``last.pth`` every epoch,
resumable, ``best.pth``, train.log) with the teacher's soft targets added to the loss.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from cnnforge.train.datasets import VOID
from cnnforge.train.loop import Trainer, _loader, model_inputs, model_logits

TEMPERATURE = 2.0
KD_WEIGHT = 0.5


def measure_batchnorm(
    model: nn.Module, dataset: Dataset, paths: list[str], batches: int = 8, batch_size: int = 32
) -> None:
    """Reset the BatchNorms at ``paths`` and set their statistics to the data's (cumulative
    average over ``batches`` batches; nothing else changes)."""
    norms = [model.get_submodule(p) for p in paths]
    if not norms:
        return
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
            model(x.to(torch.float32) / 128.0)
    for bn in norms:
        bn.momentum = 0.1
    model.eval()


class DistillTrainer(Trainer):
    """Trainer whose loss is cross-entropy + ``KD_WEIGHT`` x KL(teacher || student) at T=2."""

    def __init__(self, *args, teacher: nn.Module, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.teacher = teacher.eval()
        self.progress = kwargs.get("on_epoch")

    def _train_epoch(self, epoch: int) -> float:
        torch.manual_seed(self.config.seed + epoch)
        self.model.train()
        ce = nn.CrossEntropyLoss(ignore_index=VOID)
        total, batches = 0.0, 0
        for x, mask in _loader(self.train_set, self.config, epoch, shuffle=True):
            self.optimizer.zero_grad(set_to_none=True)
            logits = model_logits(self.model, x, self.config)
            with torch.no_grad():
                soft = self.teacher(model_inputs(x, self.config)) / TEMPERATURE
            kd = F.kl_div(
                F.log_softmax(logits / TEMPERATURE, dim=1),
                F.log_softmax(soft, dim=1),
                log_target=True,
                reduction="batchmean",
            ) / (x.shape[-1] * x.shape[-2])
            loss = ce(logits, mask) + KD_WEIGHT * TEMPERATURE**2 * kd
            loss.backward()
            self.optimizer.step()
            total += float(loss.detach())
            batches += 1
        self.scheduler.step()
        return total / max(batches, 1)
