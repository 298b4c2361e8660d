"""Shared test configuration: deterministic hypothesis runs, paths to the shared vendor data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

# Tiny tensors everywhere: one intra-op thread is much faster than two contending ones
# (and each xdist worker already has its own core).
torch.set_num_threads(1)

settings.register_profile(
    "cnnforge",
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("random", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("CNNFORGE_HYPOTHESIS_PROFILE", "cnnforge"))

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
AI8X = SHARED / "data" / "ai8x"


@pytest.fixture
def ai8x_data() -> Path:
    """The vendor reference networks (../shared/data/ai8x); tests skip when it is absent."""
    if not AI8X.is_dir():
        pytest.skip("../shared/data/ai8x is not present")
    return AI8X
