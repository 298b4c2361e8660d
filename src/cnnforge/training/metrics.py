"""Classification and segmentation metrics from a confusion matrix; void (255) ignored, and
classes absent from prediction and truth left out of the means (NaN)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from cnnforge.compute import check_on_device
from cnnforge.training.datasets import VOID


def confusion_matrix(
    pred: torch.Tensor, target: torch.Tensor, num_classes: int, ignore_index: int = VOID
) -> np.ndarray:
    """``cm[t, p]`` = pixels (or samples) of true class t predicted as p (``confusion_counts``,
    read back)."""
    counts = confusion_counts(pred, target, num_classes, ignore_index)
    return counts.cpu().numpy().astype(np.int64)


def confusion_counts(
    pred: torch.Tensor, target: torch.Tensor, num_classes: int, ignore_index: int = VOID
) -> torch.Tensor:
    """``confusion_matrix`` as an int64 tensor where ``pred`` is, never read back: ignored
    pixels go to a bin in front, left out, rather than being selected away (a selection waits
    for the GPU to learn its size); counted by ``bincount`` on the CPU and by ``sorted_counts``
    on a GPU (CUDA's bincount reads its largest value back and adds with atomics)."""
    pred = pred.reshape(-1).to(torch.int64)
    target = target.reshape(-1).to(torch.int64)
    idx = target * num_classes + pred.clamp(0, num_classes - 1) + 1
    idx = torch.where(target != ignore_index, idx, 0)
    bins = num_classes * num_classes + 1
    if idx.device.type == "cpu":
        counts = torch.bincount(idx.to(torch.int32), minlength=bins)
    else:
        counts = sorted_counts(idx, bins)
    return counts[1:].reshape(num_classes, num_classes)


def sorted_counts(values: torch.Tensor, bins: int) -> torch.Tensor:
    """How many of the integers ``values``, all in [0, ``bins``), equal each of 0 .. ``bins`` - 1,
    from their sorted order: where each value starts (searchsorted), differences; exact, in a
    fixed order, without a read back (a value out of range fails ``check_on_device``)."""
    ordered = values.reshape(-1).sort().values
    edges = torch.arange(bins + 1, device=values.device, dtype=values.dtype)
    starts = torch.searchsorted(ordered, edges)
    inside = (starts[0] == 0) & (starts[-1] == ordered.numel())
    check_on_device(inside, f"a confusion-matrix index outside [0, {bins})")
    return starts[1:] - starts[:-1]


@dataclass(frozen=True)
class SegmentationScores:
    """Pixel accuracy, per-class IoU and Dice, and their means over the defined classes."""

    pixel_accuracy: float
    iou: tuple[float, ...]
    dice: tuple[float, ...]
    miou: float
    mean_dice: float


def segmentation_scores(cm: np.ndarray) -> SegmentationScores:
    """Scores from a confusion matrix (rows = truth, columns = prediction)."""
    cm = cm.astype(np.float64)
    tp = np.diag(cm)
    fp = cm.sum(axis=0) - tp
    fn = cm.sum(axis=1) - tp
    total = cm.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        iou = np.where(tp + fp + fn > 0, tp / (tp + fp + fn), np.nan)
        dice = np.where(tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan)
    return SegmentationScores(
        pixel_accuracy=float(tp.sum() / total) if total else float("nan"),
        iou=tuple(float(v) for v in iou),
        dice=tuple(float(v) for v in dice),
        miou=float(np.nanmean(iou)) if np.isfinite(iou).any() else float("nan"),
        mean_dice=float(np.nanmean(dice)) if np.isfinite(dice).any() else float("nan"),
    )


def topk_accuracy(logits: torch.Tensor, target: torch.Tensor, ks: tuple[int, ...] = (1, 5)):
    """Fraction of samples whose true class is among the k highest logits, for each k."""
    out = {}
    for k in ks:
        k_eff = min(k, logits.shape[1])
        top = logits.topk(k_eff, dim=1).indices
        out[k] = float((top == target.unsqueeze(1)).any(dim=1).double().mean())
    return out
