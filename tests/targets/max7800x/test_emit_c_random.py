"""The generated C equals the simulator bit for bit on >= 100 random small networks.

Random networks (support/emit_c.random_network) cover every operation the simulator runs;
they are batched into one executable per build flavour to keep the test fast: each project gets
its own API prefix and the driver runs every known-answer test (full output compared).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cnnforge.sim import simulate
from cnnforge.targets.max7800x.c import emit_c
from support.emit_c import build_batch, random_input, random_network


def test_random_networks_are_consistent() -> None:
    """Every generated layer's shape matches its inputs (a sanity check of the generator)."""
    for seed in range(50):
        net = random_network(seed)
        assert net.layers
        for layer in net.layers:
            for name in layer.inputs:
                net.shape_of(name)


N_RANDOM = 120  # acceptance: >= 100 random small networks
N_SANITIZE = 30


def _emit(root: Path, seeds: range, *, force_acc64: bool = False) -> list[tuple[str, Path]]:
    projects = []
    for seed in seeds:
        net = random_network(seed)
        x = random_input(net, seed)
        answer = {k: v.numpy()[0] for k, v in simulate(net, x[None], device=None).outputs.items()}
        api = f"{'w' if force_acc64 else 'n'}{seed}"
        out = root / api
        out.mkdir()
        emit_c(net, x, answer, out, api=api, force_acc64=force_acc64)
        projects.append((api, out))
    return projects


def _failures(results: dict[str, str]) -> list[str]:
    return [line for line in results.values() if not line.startswith("PASS")]


def test_random_networks_strict_o2(tmp_path: Path) -> None:
    """120 networks, cc -std=c99 -Wall -Wextra -Werror -pedantic -O2, every output compared."""
    projects = _emit(tmp_path, range(N_RANDOM))
    results = build_batch(tmp_path, projects)
    assert len(results) == N_RANDOM
    assert _failures(results) == []


def test_random_networks_sanitized_and_int64_path(tmp_path: Path) -> None:
    """AddressSanitizer + UBSan run clean, for the int32 plane kernels and the int64 path."""
    projects = _emit(tmp_path, range(N_RANDOM, N_RANDOM + N_SANITIZE))
    projects += _emit(tmp_path, range(N_SANITIZE), force_acc64=True)
    results = build_batch(tmp_path, projects, sanitize=True)
    assert _failures(results) == []


@pytest.mark.parametrize("seed", [3, 17])
def test_generator_is_deterministic(seed: int) -> None:
    a, b = random_network(seed), random_network(seed)
    assert a.to_json() == b.to_json()
    assert np.array_equal(random_input(a, seed), random_input(b, seed))
