"""The bias slices of depthwise convolutions (targets/max7800x/depthwise_bias.py): every channel's
bias once, in the quadrant of the processor that computes it; the vendor's broadcast order and
its empty entries (the firmware's bytes are checked against the vendor's in test_firmware_cases:
depthwise-*)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.geometry import processors_per_pass
from cnnforge.targets.max7800x.depthwise_bias import broadcast_order, depthwise_bias
from cnnforge.targets.max7800x.device import MAX78002


def _mask(first: int, count: int) -> int:
    return ((1 << count) - 1) << first


@st.composite
def depthwise_layers(draw: st.DrawFn) -> tuple[int, int, int]:
    """(in mask, out mask, channels) the vendor tool accepts: processors contiguous, starting
    at a multiple of 4 when they span quadrants; output processors at a multiple of 4."""
    channels = draw(st.integers(1, 256))
    width = processors_per_pass(channels, MAX78002)
    first = draw(st.integers(0, 64 - width))
    if first // 16 != (first + width - 1) // 16:
        first &= ~3
    in_mask = _mask(first, width)
    if draw(st.booleans()):
        return in_mask, in_mask, channels
    out_first = draw(st.integers(0, (64 - width) // 4)) * 4
    return in_mask, _mask(out_first, width), channels


@settings(max_examples=300, deadline=None)
@given(st.lists(depthwise_layers(), min_size=1, max_size=4))
def test_every_channel_once_in_its_own_quadrant(layers: list[tuple[int, int, int]]) -> None:
    fill = [0] * 4
    for in_mask, out_mask, channels in layers:
        before = list(fill)
        slices = depthwise_bias(in_mask, out_mask, channels, fill, MAX78002)
        procs = [p for p in range(64) if in_mask >> p & 1]
        width = processors_per_pass(channels, MAX78002)
        seen: dict[int, int] = {}
        for q, (start, held) in slices.entries.items():
            assert start >= before[q] and start + len(held) <= fill[q] <= 2048
            for channel in held:
                if channel is not None:
                    assert channel not in seen
                    seen[channel] = q
        assert sorted(seen) == list(range(channels))
        for channel, q in seen.items():
            assert procs[channel % width] // 16 == q
        assert set(slices.offsets) == {p // 16 for p in procs}
        if in_mask == out_mask:
            assert all(offset % 4 == 0 for offset in slices.offsets.values())


def test_broadcast_reads_the_four_processors_of_an_instance_at_once() -> None:
    """64 channels on all processors: quadrant 0's entries hold processors 0, 4, 8, 12, 1, 5, ...
    (the vendor tool's firmware for its own depthwise test has the same bytes)."""
    fill = [0] * 4
    slices = depthwise_bias((1 << 64) - 1, (1 << 64) - 1, 64, fill, MAX78002)
    assert slices.offsets == {0: 0, 1: 0, 2: 0, 3: 0}
    assert slices.entries[0][1] == [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]
    assert slices.entries[3][1][:4] == [48, 52, 56, 60]
    assert [broadcast_order(p, 16) for p in (1, 4, 17)] == [4, 1, 20]
    assert fill == [16] * 4


def test_a_layer_spanning_quadrants_leaves_empty_entries_in_the_quadrants_before() -> None:
    """Processors 32-63 (quadrants 2 and 3), not broadcast: quadrants 0 and 1 get 16 empty
    entries each, and the next broadcast layer's slices start after them, at a multiple of 4."""
    fill = [0] * 4
    first = depthwise_bias(0xFFFFFFFF << 32, 0xFFFFFFFF, 32, fill, MAX78002)
    assert first.offsets == {2: 0, 3: 0}
    assert first.entries[0] == (0, [None] * 16)
    assert first.entries[2][1] == list(range(16))
    assert fill == [16, 16, 16, 16]
    fill[0] = 13
    second = depthwise_bias(0xFFFF, 0xFFFF, 16, fill, MAX78002)
    assert second.offsets == {0: 16}
