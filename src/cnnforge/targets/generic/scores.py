"""Quantized accuracy on the generic target: float and bit-exact integer segmentation scored on the
same images, as ``cnnforge evaluate`` reports it for the MAX7800x."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from cnnforge.arithmetic import ACT_SCALE
from cnnforge.ir import Network
from cnnforge.targets.generic.integer import (
    IntegerSemantics,
    quantize_generic,
    run_float_outputs,
    simulate_generic,
)
from cnnforge.targets.generic.target import GenericTarget
from cnnforge.training.datasets import VOID
from cnnforge.training.metrics import SegmentationScores, confusion_matrix, segmentation_scores


@dataclass(frozen=True)
class GenericEvaluation:
    """Scores of ``float`` and ``integer`` (the target's simulation) and their agreement."""

    scores: dict[str, SegmentationScores]
    pixels: int
    pixels_agreeing: int  # pixels whose arg-max class is the same in float and integers
    images: int
    semantics: IntegerSemantics


def evaluate_generic(
    network: Network,
    target: GenericTarget,
    dataset: Dataset,
    calibration: np.ndarray,
    num_classes: int,
    *,
    batch_size: int = 32,
) -> GenericEvaluation:
    """Quantize ``network`` on ``calibration``, then score float and integer segmentation on
    ``dataset`` (images read as ``x / 128``, docs/hardware/arithmetic.md R6.1)."""
    q = quantize_generic(network, target, calibration)
    out = q.network.outputs[0]
    cms: dict[str, np.ndarray] = {}
    pixels = agreeing = images = 0
    with torch.no_grad():
        for x, mask in DataLoader(dataset, batch_size=batch_size, shuffle=False):
            xf = x.to(torch.float64) / ACT_SCALE
            preds = {
                "float": run_float_outputs(q.network, xf.numpy())[out].argmax(dim=1),
                # Integers are the float value times a positive power of two: same arg-max.
                "integer": simulate_generic(q, q.to_int(xf.numpy()))[out].argmax(dim=1),
            }
            pixels += preds["float"].numel()
            agreeing += int((preds["float"] == preds["integer"]).sum())
            images += x.shape[0]
            for mode, pred in preds.items():
                cm = confusion_matrix(pred, mask, num_classes, VOID)
                cms[mode] = cms[mode] + cm if mode in cms else cm
    scores = {mode: segmentation_scores(cm) for mode, cm in cms.items()}
    return GenericEvaluation(scores, pixels, agreeing, images, q.semantics)
