"""Shared test configuration: deterministic hypothesis runs, the shared data (required in CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.register_assert_rewrite("support")  # readable assertion diffs from the shared helpers too

import torch  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from support.paths import AI8X, REQUIRE_VENDOR_DATA_ENV, REQUIRED_DATA  # noqa: E402

# Tiny tensors everywhere: one intra-op thread is much faster than two contending ones
# (and each xdist worker already has its own core).
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def one_thread():
    """Every test single-threaded, even after code under test changed the thread count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


settings.register_profile(
    "cnnforge",
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("random", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("CNNFORGE_HYPOTHESIS_PROFILE", "cnnforge"))


def pytest_configure(config: pytest.Config) -> None:
    """With CNNFORGE_REQUIRE_VENDOR_DATA=1 (CI), absent shared data is an error, not skips."""
    if os.environ.get(REQUIRE_VENDOR_DATA_ENV) != "1":
        return
    missing = [str(p) for p in REQUIRED_DATA if not p.exists()]
    if missing:
        raise pytest.UsageError(f"{REQUIRE_VENDOR_DATA_ENV}=1 but missing: {', '.join(missing)}")


@pytest.fixture
def ai8x_data() -> Path:
    """The vendor reference networks (../shared/data/ai8x); tests skip when it is absent."""
    if not AI8X.is_dir():
        pytest.skip("../shared/data/ai8x is not present")
    return AI8X
