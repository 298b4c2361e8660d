"""A fused group of steps run band by band, and the line buffers (or recomputed halos) this takes
(docs/generic-target.md "Tiled, fused schedules")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from cnnforge.targets.generic.rows import chain_first, chain_ready
from cnnforge.targets.generic.steps import Step

_DONE = np.iinfo(np.int64).max  # "no row needed any more"


@dataclass(frozen=True, eq=False)
class Bands:
    """The band schedule of one group (module docstring); arrays have one entry per band."""

    count: int
    ready: Mapping[str, np.ndarray]  # blob -> last row written (or read, if whole) by band i
    low: Mapping[str, np.ndarray]  # blob -> lowest row held in band i (_DONE: none)
    held: Mapping[str, int]  # blob -> rows of its line buffer
    external: tuple[str, ...]  # whole blobs the group reads band by band
    line_buffer_bytes: int
    #: halo=recompute: blob -> first row computed (or read) in band i; None: rows are kept
    start: Mapping[str, np.ndarray] | None = None
    extra_rows: Mapping[str, int] = field(default_factory=dict)  # step -> rows computed again
    read_rows: Mapping[str, int] = field(default_factory=dict)  # whole input -> rows read

    def previous(self, blob: str) -> np.ndarray:
        """Last row of ``blob`` available before band i (-1 before the first)."""
        return np.concatenate(([-1], self.ready[blob][:-1]))

    def band_rows(self, blob: str) -> int:
        """The most new rows of ``blob`` in one band (the band height, in its rows)."""
        return int(np.max(self.ready[blob] - self.previous(blob)))


class BandWalk:
    """Bands of a growing group: ``add`` a step, read ``line_buffer_bytes``, ``freeze``."""

    def __init__(self, count: int, rows: Mapping[str, int], row_bytes: Mapping[str, int]) -> None:
        self.count, self.rows, self.row_bytes = count, rows, row_bytes
        self.ready: dict[str, np.ndarray] = {}
        self.low: dict[str, np.ndarray] = {}
        self.held: dict[str, int] = {}
        self.external: list[str] = []
        self.line_buffer_bytes = 0

    def add(self, step: Step) -> None:
        """Run ``step`` in the group's bands after the steps added before it."""
        assert step.stages is not None, f"{step.name} reads whole blobs"
        parts = tuple(dict.fromkeys(step.inputs))
        for blob in parts:
            if blob not in self.ready:  # a whole blob written before the group
                self.external.append(blob)
                self.ready[blob] = self._read_rows(self.rows[blob])
        out_rows = self.rows[step.name]
        ready = np.min([chain_ready(step.stages, self.ready[b]) for b in parts], axis=0)
        before = np.concatenate(([-1], ready[:-1]))
        needs = np.where(before >= out_rows - 1, _DONE, chain_first(step.stages, before + 1))
        for blob in parts:
            low = np.minimum(self.low.get(blob, np.full(self.count, _DONE)), needs)
            self.low[blob] = low
            self._hold(blob)
        self.ready[step.name] = ready

    def _read_rows(self, rows: int) -> np.ndarray:
        """Last row of a whole input read by the end of each band (even progress)."""
        bands = np.arange(1, self.count + 1, dtype=np.int64)
        return -(-rows * bands // self.count) - 1

    def _hold(self, blob: str) -> None:
        """Rows held in band i: from the lowest row a reader still needs, or the first row
        written in the band if lower (a row no reader needs is still written), to the last."""
        ready = self.ready[blob]
        first = np.minimum(self.low[blob], np.concatenate(([-1], ready[:-1])) + 1)
        held = int(np.max(np.maximum(0, ready - first + 1)))
        self.line_buffer_bytes += (held - self.held.get(blob, 0)) * self.row_bytes[blob]
        self.held[blob] = held

    def freeze(self) -> Bands:
        return Bands(
            self.count,
            dict(self.ready),
            dict(self.low),
            dict(self.held),
            tuple(self.external),
            self.line_buffer_bytes,
        )


def recompute(
    bands: Bands, steps: tuple[Step, ...], rows: Mapping[str, int], row_bytes: Mapping[str, int]
) -> Bands:
    """``bands`` (same progress) with halos recomputed in every band, not kept."""
    ready = bands.ready
    start = {s.name: np.concatenate(([-1], ready[s.name][:-1])) + 1 for s in steps}
    start |= {blob: ready[blob] + 1 for blob in bands.external}  # nothing read yet
    for step in reversed(steps):  # a reader's lowest row, back through the group
        assert step.stages is not None
        active = start[step.name] <= ready[step.name]
        needs = np.where(active, chain_first(step.stages, start[step.name]), _DONE)
        for blob in dict.fromkeys(step.inputs):
            start[blob] = np.minimum(start[blob], needs)
    held = {blob: int(np.max(np.maximum(0, ready[blob] - start[blob] + 1))) for blob in bands.held}
    computed = {b: int(np.sum(np.maximum(0, ready[b] - start[b] + 1))) for b in start}
    return Bands(
        bands.count,
        ready,
        bands.low,
        held,
        bands.external,
        sum(held[b] * row_bytes[b] for b in held),
        start,
        {s.name: computed[s.name] - rows[s.name] for s in steps},
        {blob: computed[blob] for blob in bands.external},
    )


def blob_rows(shapes: Mapping[str, tuple[int, ...]], act_bytes: int) -> tuple[dict, dict]:
    """``(rows, bytes per row)`` of every blob with rows (C, H, W or C, L)."""
    rows, row_bytes = {}, {}
    for blob, shape in shapes.items():
        if len(shape) >= 2:
            rows[blob] = shape[1]
            row_bytes[blob] = act_bytes * int(np.prod(shape)) // shape[1]
    return rows, row_bytes


def walk(
    steps: tuple[Step, ...], count: int, shapes: Mapping[str, tuple[int, ...]], act_bytes: int
) -> Bands:
    """The ``Bands`` of ``steps`` fused into ``count`` bands."""
    rows, row_bytes = blob_rows(shapes, act_bytes)
    walker = BandWalk(count, rows, row_bytes)
    for step in steps:
        walker.add(step)
    return walker.freeze()
