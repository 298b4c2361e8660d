"""A tiny training or distillation run (QatUNet on 16x16 ``shapes``), float or QAT, on any
device: what tests/training/test_step_syncs.py and tests/gpu/test_cuda.py count waits in."""

from __future__ import annotations

from pathlib import Path

import torch

from cnnforge.adaptation.recover import DistillTrainer
from cnnforge.adaptation.width import NEW
from cnnforge.compute import CPU
from cnnforge.models.qat_unet import QatUNet
from cnnforge.nn import QATPolicy
from cnnforge.training.datasets import ShapesDataset
from cnnforge.training.loop import TrainConfig, Trainer
from cnnforge.training.qat import QatHooks

TINY = dict(channels=(4, 8, 8, 8), batchnorm=True)
BATCHES = 3
EPOCHS = 2  # the second reads its batches from the device cache, as every later one does


def tiny_trainer(out: Path, distill: bool, qat: bool, device: torch.device = CPU) -> Trainer:
    """``EPOCHS`` epochs of ``BATCHES`` batches; distillation from another QatUNet matches two
    feature paths, one with a new channel (``width.NEW``)."""
    torch.manual_seed(0)
    config = TrainConfig(epochs=EPOCHS, batch_size=4, num_classes=5, schedule="none")
    data = (ShapesDataset("train", 4 * BATCHES, 16), ShapesDataset("val", 4, 16))
    hooks = QatHooks(QATPolicy(start_epoch=0) if qat else None)
    if not distill:
        return Trainer(QatUNet(**TINY), *data, config, out, hooks, device=device)
    features = {"enc1": (0, 1, NEW, 3), "dec2": tuple(range(8))}
    return DistillTrainer(
        QatUNet(**TINY), *data, config, out, hooks, teacher=QatUNet(**TINY), features=features,
        plateau=False, device=device,
    )  # fmt: skip
