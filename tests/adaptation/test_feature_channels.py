"""Distillation compares features on picked channels without copying them where they are all
of a feature's, in order (a copy and its backward per path per step are launches a small
model's GPU step waits on): the same values and gradients as indexing (hypothesis)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.adaptation.recover import channels_of, picked
from cnnforge.compute import CPU


@st.composite
def features_and_channels(draw) -> tuple[int, list[int]]:
    count = draw(st.integers(1, 8))
    kind = draw(st.sampled_from(["all", "prefix", "any"]))
    if kind == "all":
        return count, list(range(count))
    if kind == "prefix":
        return count, list(range(draw(st.integers(1, count))))
    return count, draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=count))


@settings(max_examples=60, deadline=None)
@given(case=features_and_channels(), seed=st.integers(0, 1 << 16))
def test_picked_channels_are_indexings(case: tuple[int, list[int]], seed: int) -> None:
    count, channels = case
    g = torch.Generator().manual_seed(seed)
    feature = torch.randn(2, count, 3, 5, generator=g)
    target = torch.randn(2, len(channels), 3, 5, generator=g)
    results = []
    for taken in (picked(channels, CPU), torch.tensor(channels)):
        f = feature.clone().requires_grad_()
        kept = channels_of(f, taken)
        loss = torch.nn.functional.mse_loss(kept, target) / (kept.var() + 1e-6)
        loss.backward()
        results.append((kept.detach(), loss.detach(), f.grad))
    for mine, indexed in zip(*results, strict=True):
        assert torch.equal(mine.view(torch.int32), indexed.view(torch.int32))


def test_all_channels_in_order_are_the_feature_itself() -> None:
    feature = torch.randn(2, 4, 3, 3)
    assert picked([0, 1, 2, 3], CPU) == 4 and channels_of(feature, 4) is feature
    assert isinstance(picked([1, 0], CPU), torch.Tensor)
