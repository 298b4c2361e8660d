"""The width search's checks in forked processes (docs/adapt.md, "Fit"): the same answers as one
at a time, in order, a failed child's item computed in the parent, no child left behind, no
output from the children; and the search's result the same for any number of workers."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.adaptation.forked import forked_map, usable_workers

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux only")


def _square(x: int) -> list[int]:
    return [x, x * x]


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(-50, 50), max_size=7), st.integers(1, 4))
def test_forked_map_equals_map(items: list[int], workers: int) -> None:
    assert forked_map(_square, items, workers) == [_square(x) for x in items]


def test_stop_returns_the_answers_up_to_the_first_accepted(tmp_path: Path) -> None:
    """The children after the accepted answer are killed and reaped: none is left running or a
    zombie."""

    def slow_after_two(x: int) -> int:
        (tmp_path / f"{x}.pid").write_text(str(os.getpid()))
        if x > 2:
            signal.pause()  # killed by the parent, never answers
        return x

    before = _children()
    assert forked_map(slow_after_two, [0, 1, 2, 3, 4], 5, stop=lambda a: a == 2) == [0, 1, 2]
    pids = [int(p.read_text()) for p in tmp_path.glob("*.pid")]  # those killed late wrote one
    assert len(pids) >= 3 and os.getpid() not in pids
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert _children() == before


def _children() -> set[int]:
    """This process's children, zombies included (/proc/PID/stat: the parent is field 4)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            found.add(int(stat.parent.name))
    return found


def test_a_failed_child_is_computed_in_the_parent() -> None:
    parent = os.getpid()

    def dies_in_a_child(x: int) -> int:
        if x == 1 and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return x + 10

    assert forked_map(dies_in_a_child, [0, 1, 2], 3) == [10, 11, 12]


def test_an_error_raises_as_it_would_without_children() -> None:
    def fails_on_one(x: int) -> int:
        if x == 1:
            raise ValueError(f"item {x} is bad")
        return x

    with pytest.raises(ValueError, match="item 1 is bad"):
        forked_map(fails_on_one, [0, 1, 2], 3)


def test_children_write_no_output(capfd: pytest.CaptureFixture[str]) -> None:
    def chatty(x: int) -> int:
        print(f"child says {x}")
        print(f"child warns {x}", file=sys.stderr)
        return x

    assert forked_map(chatty, [0, 1], 2) == [0, 1]
    out, err = capfd.readouterr()
    assert "child" not in out + err


def test_usable_workers_follow_the_cpu_affinity() -> None:
    code = "from cnnforge.adaptation.forked import usable_workers; print(usable_workers())"
    one = sorted(os.sched_getaffinity(0))[:1]
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        preexec_fn=lambda: os.sched_setaffinity(0, one),
    )  # fmt: skip
    assert run.stdout.strip() == "1"
    assert 1 <= usable_workers() <= 8


def _state(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    return sorted(model.state_dict().items())


@pytest.mark.parametrize(
    ("depth", "channels", "device"),
    [(3, 8, "MAX78000"), (3, 48, "MAX78000"), (3, 192, "MAX78000"), (3, 48, "MAX78002"),
     (14, 80, "MAX78000")],  # fits at the first, the second, the 11th try
)  # fmt: skip
def test_the_search_is_the_same_for_any_number_of_workers(
    depth: int, channels: int, device: str
) -> None:
    """Tries, width, cap, kept channels, the student's weights and torch's generator after the
    search (widened tries draw from it; a wave builds tries past the winner) as one at a time."""
    import cnnforge.adaptation.fit as fit
    from cnnforge.api.targets import get_target

    target, shape = get_target(device), (3, 8, 8)
    layers = [nn.Conv2d(3, channels, 3, padding=1), nn.ReLU()]
    for _ in range(depth - 2):
        layers += [nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Conv2d(channels, 5, 1)).eval()
    results = []
    for workers in (1, 2, 5):
        checked = fit.Checked()
        adapted, _ = fit.preflight(copy.deepcopy(model), shape, target, checked)
        torch.manual_seed(3)
        student, w, cap, tries, kept = fit.choose_width(
            adapted, shape, target, "auto", checked, workers=workers
        )
        results.append((_state(student), w, cap, tries, kept, torch.rand(4)))
    first = results[0]
    assert len(first[3]) == {3: 1 + (channels > 8 and device == "MAX78000"), 14: 11}[depth]
    for other in results[1:]:
        assert other[1:5] == first[1:5]
        assert [k for k, _ in other[0]] == [k for k, _ in first[0]]
        assert all(torch.equal(a, b) for (_, a), (_, b) in zip(other[0], first[0], strict=True))
        assert torch.equal(other[5], first[5])
