"""Metrics computed by hand on small examples."""

import math

import numpy as np
import torch

from cnnforge.train.metrics import confusion_matrix, segmentation_scores, topk_accuracy


def test_segmentation_scores_by_hand():
    target = torch.tensor([[0, 0, 1, 1], [2, 2, 255, 255]])
    pred = torch.tensor([[0, 1, 1, 1], [2, 0, 2, 0]])
    cm = confusion_matrix(pred, target, 3)
    assert cm.tolist() == [[1, 1, 0], [0, 2, 0], [1, 0, 1]]
    s = segmentation_scores(cm)
    assert s.pixel_accuracy == 4 / 6
    assert np.allclose(s.iou, [1 / 3, 2 / 3, 1 / 2])
    assert np.allclose(s.dice, [2 / 4, 4 / 5, 2 / 3])
    assert math.isclose(s.miou, (1 / 3 + 2 / 3 + 1 / 2) / 3)


def test_absent_class_is_left_out_of_the_mean():
    cm = confusion_matrix(torch.tensor([0, 0]), torch.tensor([0, 0]), 3)
    s = segmentation_scores(cm)
    assert s.iou[0] == 1.0 and math.isnan(s.iou[1]) and s.miou == 1.0


def test_topk():
    logits = torch.tensor([[0.1, 0.9, 0.0], [0.8, 0.1, 0.15], [0.2, 0.3, 0.5]])
    acc = topk_accuracy(logits, torch.tensor([1, 2, 0]), ks=(1, 2))
    assert acc[1] == 1 / 3 and acc[2] == 2 / 3
