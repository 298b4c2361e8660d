"""The training loss a GPU computes (``ordered``: per-pixel terms summed by an ordinary
reduction, not torch's atomics) is the CPU's cross-entropy, void pixels ignored (hypothesis;
the GPU runs it in tests/gpu/test_cuda.py)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.training.datasets import VOID
from cnnforge.training.loop import segmentation_loss


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 1 << 16),
    classes=st.integers(2, 6),
    void=st.floats(0.0, 1.0),
    reduction=st.sampled_from(["mean", "sum"]),
)
def test_the_ordered_loss_is_cross_entropy(seed: int, classes: int, void: float, reduction: str):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(3, classes, 5, 7, generator=g) * 4).requires_grad_()
    mask = torch.randint(0, classes, (3, 5, 7), generator=g)
    mask[torch.rand(3, 5, 7, generator=g) < void] = VOID
    expected = F.cross_entropy(logits, mask, ignore_index=VOID, reduction=reduction)
    ordered = segmentation_loss(logits, mask, reduction=reduction, ordered=True)
    cpu = segmentation_loss(logits, mask, reduction=reduction)
    assert torch.allclose(cpu, expected, rtol=0, atol=0, equal_nan=True)  # the CPU's: torch's
    if math.isnan(float(expected.detach())):  # every pixel void: torch's mean is 0/0 too
        assert math.isnan(float(ordered.detach()))
        return
    assert torch.allclose(ordered, expected, rtol=1e-5, atol=1e-6)
    (mine,) = torch.autograd.grad(ordered, logits)
    (theirs,) = torch.autograd.grad(expected, logits)
    assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-7)
