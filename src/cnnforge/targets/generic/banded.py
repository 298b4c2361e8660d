"""The integer simulation of a tiled plan: fused groups run band by band from line buffers, so the
plan's line-buffer sizes are checked, not assumed (docs/generic-target.md "Tiled")."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from cnnforge.errors import SimulationError
from cnnforge.ir import INPUT, Layer, Op, PoolKind
from cnnforge.sim.ops import geometry
from cnnforge.targets.generic.bands import Bands
from cnnforge.targets.generic.integer import (
    QuantizedGeneric,
    check_accumulator,
    finish,
    pool,
    run_layer,
    weighted,
)
from cnnforge.targets.generic.rows import PAD, TRANSPOSED, UPSAMPLE, RowStage, layer_stages
from cnnforge.targets.generic.steps import Step
from cnnforge.targets.generic.tiling import Group, TiledPlan

Fetch = Callable[[str, int, int], torch.Tensor]  # (tensor name, first row, last row) -> rows


@dataclasses.dataclass
class _LineBuffer:
    """Rows ``first``.. of one blob (N, C, rows, ...), as a band schedule holds them."""

    name: str
    limit: int  # rows planned
    first: int = 0
    rows: torch.Tensor | None = None

    def append(self, y: torch.Tensor, first: int) -> None:
        if self.rows is None or self.rows.shape[2] == 0:
            self.rows, self.first = y, first
        else:
            assert first == self.first + self.rows.shape[2], (self.name, first)
            self.rows = torch.cat([self.rows, y], dim=2)
        if self.rows.shape[2] > self.limit:
            raise SimulationError(
                f"line buffer of {self.rows.shape[2]} rows, {self.limit} planned",
                where=f"blob {self.name}",
            )

    def take(self, lo: int, hi: int) -> torch.Tensor:
        held = 0 if self.rows is None else self.rows.shape[2]
        if lo < self.first or hi >= self.first + held:
            raise SimulationError(
                f"rows {lo}-{hi} read, rows {self.first}-{self.first + held - 1} held",
                where=f"blob {self.name}",
            )
        assert self.rows is not None
        return self.rows[:, :, lo - self.first : hi - self.first + 1]

    def drop_below(self, row: int) -> None:
        if self.rows is not None and row > self.first:
            self.rows = self.rows[:, :, row - self.first :]
            self.first = row


class _Run:
    """One simulation of a tiled plan (scratch, local to ``simulate_tiled``)."""

    def __init__(self, q: QuantizedGeneric, plan: TiledPlan, x: torch.Tensor) -> None:
        self.q = q
        self.layers = {layer.name: layer for layer in q.network.layers}
        self.whole: dict[str, torch.Tensor] = {INPUT: x.to(torch.float64)}
        #: blob (a step's name) -> the quantized layer holding its value (its last member)
        self.names = {INPUT: INPUT}
        for group in plan.groups:
            for step in group.steps:
                self.names[step.name] = self.members(step)[-1].name

    def members(self, step: Step) -> list[Layer]:
        """The quantized layers of ``step`` (a folded BatchNorm is gone)."""
        return [self.layers[m] for m in step.members if m in self.layers]

    def value(self, name: str) -> torch.Tensor:
        """A whole tensor: a blob written whole, or a concatenation/flatten of whole blobs."""
        if name not in self.whole:
            layer = self.layers[name]
            self.whole[name] = run_layer(self.q, layer, [self.value(n) for n in layer.inputs])
        return self.whole[name]

    def group(self, group: Group) -> None:
        if group.bands is None:
            for step in group.steps:
                for layer in self.members(step):
                    xs = [self.value(n) for n in layer.inputs]
                    self.whole[layer.name] = run_layer(self.q, layer, xs)
            return
        _GroupBands(self, group.steps, group.bands).run()


class _GroupBands:
    """One fused group run band by band (module docstring)."""

    def __init__(self, run: _Run, steps: tuple[Step, ...], bands: Bands) -> None:
        self.sim, self.steps, self.bands = run, steps, bands
        self.buffers = {b: _LineBuffer(run.names[b], rows) for b, rows in bands.held.items()}
        self.by_name = {run.names[b]: buffer for b, buffer in self.buffers.items()}
        self.parts: dict[str, list[torch.Tensor]] = {s.name: [] for s in steps}

    def run(self) -> None:
        bands = self.bands
        for i in range(bands.count):
            if bands.start is not None:  # halos recomputed: each band starts afresh
                for buffer in self.buffers.values():
                    buffer.drop_below(_past(buffer))
            for blob in bands.external:
                self._read(blob, *self._rows(blob, i))
            for step in self.steps:
                lo, hi = self._rows(step.name, i)
                if lo <= hi:
                    self._compute(step, lo, hi, int(bands.previous(step.name)[i]) + 1)
            if bands.start is None:  # rows kept: drop those no reader needs any more
                for blob, buffer in self.buffers.items():
                    last = i + 1 == bands.count
                    buffer.drop_below(_past(buffer) if last else int(bands.low[blob][i + 1]))
        for step in self.steps:  # every blob's rows, assembled (whole blobs are written whole)
            self.sim.whole[self.sim.names[step.name]] = torch.cat(self.parts[step.name], dim=2)

    def _rows(self, blob: str, i: int) -> tuple[int, int]:
        """The rows of ``blob`` computed (or read) in band ``i``: the new ones, or from the
        first a reader needs when halos are recomputed."""
        bands = self.bands
        first = bands.previous(blob)[i] + 1 if bands.start is None else bands.start[blob][i]
        return int(first), int(bands.ready[blob][i])

    def _read(self, blob: str, lo: int, hi: int) -> None:
        """Rows of a whole blob into its line buffer (from chip or DDR)."""
        if lo <= hi and blob in self.buffers:
            whole = self.sim.value(self.sim.names.get(blob, blob))
            self.buffers[blob].append(whole[:, :, lo : hi + 1], lo)

    def _compute(self, step: Step, lo: int, hi: int, new: int) -> None:
        """Rows lo..hi of ``step``; rows from ``new`` on are its output's new rows."""
        layers = self.sim.members(step)
        y = layer_rows(self.sim.q, layers[0], lo, hi, self._fetch)
        for layer in layers[1:]:
            y = run_layer(self.sim.q, layer, [y])
        if step.name in self.buffers:
            self.buffers[step.name].append(y, lo)
        if new <= hi:
            self.parts[step.name].append(y[:, :, new - lo :])

    def _fetch(self, name: str, lo: int, hi: int) -> torch.Tensor:
        """Rows of a quantized layer's value, from line buffers only."""
        if name in self.by_name:
            return self.by_name[name].take(lo, hi)
        layer = self.sim.layers.get(name)
        if layer is None or layer.op is not Op.CONCAT:
            raise SimulationError(
                f"rows {lo}-{hi} read outside the group's line buffers", where=f"blob {name}"
            )
        return run_layer(self.sim.q, layer, [self._fetch(n, lo, hi) for n in layer.inputs])


def _past(buffer: _LineBuffer) -> int:
    return buffer.first + (0 if buffer.rows is None else buffer.rows.shape[2])


def simulate_tiled(
    q: QuantizedGeneric, plan: TiledPlan, x: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Integers of every whole blob (by layer name) running ``plan`` on integer input ``x``."""
    run = _Run(q, plan, x)
    for group in plan.tiled:  # once per layer, not per band
        for step in group.steps:
            for layer in run.members(step):
                if layer.has_weights:
                    check_accumulator(q, layer)
    with torch.no_grad():
        for group in plan.groups:
            run.group(group)
        for name in q.network.outputs:  # an output may be a concatenation of blobs
            run.value(name)
    return run.whole


def layer_rows(q: QuantizedGeneric, layer: Layer, lo: int, hi: int, fetch: Fetch) -> torch.Tensor:
    """Output rows ``lo``..``hi`` of ``layer``, reading its inputs' rows through ``fetch``."""
    stages = layer_stages(layer, q.network.shape_of(layer.inputs[0]), layer.out_shape)
    if stages is None:
        raise SimulationError(
            "reads whole blobs: it cannot run on a band", where=f"layer {layer.name}"
        )
    if not stages:  # same rows in and out: element-wise, concatenation, activation
        return run_layer(q, layer, [fetch(n, lo, hi) for n in layer.inputs])
    if len(stages) == 2:  # input pooling, then the convolution
        pooled = _stage_input(
            stages[1], lo, hi, lambda a, b: _pooled(q, layer, stages[0], a, b, fetch)
        )
        return finish(q, layer, _apply(q, layer, stages[1], pooled, lo, hi))
    x = _stage_input(stages[0], lo, hi, lambda a, b: fetch(layer.inputs[0], a, b), layer)
    return finish(q, layer, _apply(q, layer, stages[0], x, lo, hi))


def _pooled(q, layer, stage: RowStage, lo: int, hi: int, fetch: Fetch) -> torch.Tensor:
    x = fetch(layer.inputs[0], int(stage.first(lo)), int(stage.last(hi)))
    assert layer.pool is not None
    return pool(x, layer.pool, ())


def _stage_input(stage: RowStage, lo: int, hi: int, rows, layer: Layer | None = None):
    """The input rows a stage reads for output rows lo..hi, padding rows made explicit."""
    if stage.kind in (UPSAMPLE, TRANSPOSED):
        return rows(int(stage.first(lo)), int(stage.last(hi)))
    want_lo, want_hi = stage.raw_first(lo), stage.raw_last(hi)
    have_lo, have_hi = max(want_lo, 0), min(want_hi, stage.in_rows - 1)
    x = rows(have_lo, have_hi)
    fill = -math.inf if _is_max_pool(layer) else 0.0
    return _pad_rows(x, have_lo - want_lo, want_hi - have_hi, fill)


def _is_max_pool(layer: Layer | None) -> bool:
    return (
        layer is not None
        and layer.op is Op.POOL
        and layer.pool is not None
        and (layer.pool.kind is PoolKind.MAX)
    )


def _pad_rows(x: torch.Tensor, above: int, below: int, fill: float) -> torch.Tensor:
    if above == 0 and below == 0:
        return x
    shape = list(x.shape)
    parts = []
    if above:
        shape[2] = above
        parts.append(torch.full(shape, fill, dtype=x.dtype))
    parts.append(x)
    if below:
        shape[2] = below
        parts.append(torch.full(shape, fill, dtype=x.dtype))
    return torch.cat(parts, dim=2)


def _apply(q, layer: Layer, stage: RowStage, x: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """The layer's main operation on explicit rows: exactly output rows lo..hi."""
    if stage.kind == UPSAMPLE:
        y = x
        for axis, s in enumerate(layer.scale_factor):
            y = y.repeat_interleave(int(s), dim=2 + axis)
        start = int(stage.first(lo)) * stage.factor
        return y[:, :, lo - start : hi - start + 1]
    if stage.kind == TRANSPOSED:
        return _transposed(q, layer, stage, x, lo, hi)
    if stage.kind == PAD:
        amounts = list(layer.pad_amounts)
        at = 2 if x.dim() == 4 else 0  # the rows' (before, after) in F.pad's order
        amounts[at : at + 2] = [0, 0][: max(0, len(amounts) - at)]
        return F.pad(x, amounts)
    if layer.op is Op.POOL:
        assert layer.pool is not None
        return pool(x, layer.pool, (0, *layer.padding[1:]) if layer.padding else ())
    geo = geometry(layer)
    geo = dataclasses.replace(geo, padding=(0, *geo.padding[1:]))
    return weighted(q, layer, x, geo, checked=True)


def _transposed(q, layer: Layer, stage: RowStage, x, lo: int, hi: int) -> torch.Tensor:
    """Output rows of a transposed convolution from input rows first(lo).. (all rows that
    add into lo..hi, zero rows appended where the band ends past the last input row)."""
    first = int(stage.first(lo))
    start = first * stage.stride - stage.pad  # the output row of the computed rows' first
    produced = (x.shape[2] - 1) * stage.stride + stage.span
    short = hi - (start + produced - 1)
    if short > 0:
        x = _pad_rows(x, 0, -(-short // stage.stride), 0.0)
    geo = geometry(layer)
    geo = dataclasses.replace(
        geo, padding=(0, *geo.padding[1:]), output_padding=(0, *geo.output_padding[1:])
    )
    return weighted(q, layer, x, geo, checked=True)[:, :, lo - start : hi - start + 1]
