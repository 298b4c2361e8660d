"""Metrics computed by hand on small examples."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.training.metrics import (
    confusion_matrix,
    segmentation_scores,
    sorted_counts,
    topk_accuracy,
)


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


@settings(max_examples=60, deadline=None)
@given(
    classes=st.integers(1, 6),
    pixels=st.lists(st.tuples(st.integers(-1, 7), st.integers(-1, 7)), max_size=40),
    void=st.sampled_from([255, -1]),
)
def test_confusion_counts_every_kept_pixel_once(classes, pixels, void) -> None:
    """Ignored pixels counted apart (no selection) leave the same matrix as selecting the kept
    ones: each kept (truth, clamped prediction) pair counted once."""
    pixels = [(p, t if 0 <= t < classes else void) for p, t in pixels]
    pred = torch.tensor([p for p, _ in pixels], dtype=torch.int64)
    target = torch.tensor([t for _, t in pixels], dtype=torch.int64)
    expected = np.zeros((classes, classes), dtype=np.int64)
    for p, t in pixels:
        if t != void:
            expected[t, min(max(p, 0), classes - 1)] += 1
    assert np.array_equal(confusion_matrix(pred, target, classes, void), expected)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.integers(0, 30), max_size=200), extra=st.integers(0, 5))
def test_sorted_counts_are_bincounts(values: list[int], extra: int) -> None:
    """A GPU's counts (from the sorted values) are the CPU's bincount, bin for bin."""
    bins = max(values, default=0) + 1 + extra
    tensor = torch.tensor(values, dtype=torch.int64)
    expected = torch.bincount(tensor, minlength=bins)
    assert torch.equal(sorted_counts(tensor, bins), expected)


def test_sorted_counts_refuse_an_index_out_of_range() -> None:
    with pytest.raises(RuntimeError, match="outside"):
        sorted_counts(torch.tensor([0, 3]), 3)
