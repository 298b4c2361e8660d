"""Where the tests find the repository and the shared data next to it (../shared)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
AI8X = SHARED / "data" / "ai8x"

# CI sets this: then absent shared data fails the run instead of skipping the tests that need it.
REQUIRE_VENDOR_DATA_ENV = "CNNFORGE_REQUIRE_VENDOR_DATA"
REQUIRED_DATA = (AI8X, AI8X / "golden")

TESTS = REPO / "tests"
SRC = REPO / "src"
GOLDEN = TESTS / "golden"  # vendor-format goldens (tests/golden/README.md)
GOLDEN_C = TESTS / "golden_c"  # emitted C projects
GOLDEN_HLS = TESTS / "golden_hls"  # emitted HLS projects
