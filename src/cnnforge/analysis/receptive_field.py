"""Receptive fields in the MatConvNet convention (size, stride, offset per axis), exact in
fractions; a global operation makes a field the whole input."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction

from cnnforge.ir import Layer, Op, Pooling


@dataclass(frozen=True)
class ReceptiveField:
    """Field of a tensor w.r.t. the network input; ``grid`` = the spatial size it describes."""

    size: tuple[Fraction, ...]
    stride: tuple[Fraction, ...]
    offset: tuple[Fraction, ...]
    grid: tuple[int, ...]
    bound: tuple[int, ...] = ()  # the network input's spatial size (a global op's field)
    global_: bool = False  # computed through a global op: the whole input, whatever follows

    @classmethod
    def identity(cls, grid: tuple[int, ...]) -> ReceptiveField:
        """The network input: every pixel sees itself."""
        one = (Fraction(1),) * len(grid)
        return cls(one, one, one, grid, grid)

    def then(self, own: tuple[tuple[Fraction, Fraction, Fraction], ...], grid: tuple[int, ...]):
        """Compose with an operator whose own field per axis is (f, t, c); a field that is the
        whole input already stays the whole input (no window of a later op adds to it)."""
        size, stride, offset = [], [], []
        for (f, t, c), r, j, o in zip(own, self.size, self.stride, self.offset, strict=True):
            size.append(r + (f - 1) * j)
            stride.append(j * t)
            offset.append(o + (c - 1) * j)
        composed = ReceptiveField(tuple(size), tuple(stride), tuple(offset), grid, self.bound)
        return composed.whole(grid) if self.global_ else composed

    def whole(self, grid: tuple[int, ...]) -> ReceptiveField:
        """After a global operation: the whole input along every axis (size = input, centred;
        the stride stays that of the tensor it was computed from)."""
        if not self.bound or len(self.bound) != len(self.size):
            return dataclasses.replace(self, grid=grid)
        size = tuple(Fraction(b) for b in self.bound)
        offset = tuple(Fraction(b + 1, 2) for b in self.bound)
        return ReceptiveField(size, self.stride, offset, grid, self.bound, global_=True)


def _conv_own(k: int, s: int, p: int, d: int) -> tuple[Fraction, Fraction, Fraction]:
    keff = d * (k - 1) + 1
    return Fraction(keff), Fraction(s), 1 + Fraction(keff - 1, 2) - p


def _transposed_own(k: int, s: int, p: int, d: int) -> tuple[Fraction, Fraction, Fraction]:
    keff = d * (k - 1) + 1
    return Fraction(keff - 1, s) + 1, Fraction(1, s), Fraction(2 * p - keff + 1, 2 * s) + 1


def _pool_own(pool: Pooling, padding: tuple[int, ...]) -> tuple:
    pads = padding or (0,) * len(pool.size)
    return tuple(
        _conv_own(k, s, p, d)
        for k, s, p, d in zip(pool.size, pool.stride, pads, pool.dilation_or_ones(), strict=True)
    )


def _geometry(layer: Layer, n: int) -> tuple[tuple[int, ...], ...]:
    """kernel, stride, padding, dilation of the main op, defaulted to ones/zeros."""
    ones = (1,) * n
    return (
        layer.kernel_size or ones,
        layer.stride or ones,
        layer.padding or (0,) * n,
        layer.dilation or ones,
    )


def merge(fields: list[ReceptiveField]) -> ReceptiveField:
    """The largest field per axis among tensors that meet (ties: the first)."""
    if len(fields) == 1:
        return fields[0]
    axes = []
    for axis in range(len(fields[0].size)):
        widest = max(len(rf.grid) > axis and rf.grid[axis] for rf in fields)
        on_grid = [rf for rf in fields if len(rf.grid) > axis and rf.grid[axis] == widest]
        best = max(on_grid or fields, key=lambda rf: rf.size[axis])
        size = max(rf.size[axis] for rf in fields)
        axes.append((size, best.stride[axis], best.offset[axis]))
    size, stride, offset = zip(*axes, strict=True)
    grid = max(fields, key=lambda rf: rf.grid).grid
    bound = fields[0].bound
    whole = any(rf.global_ for rf in fields) and tuple(size) == tuple(map(Fraction, bound))
    return ReceptiveField(tuple(size), tuple(stride), tuple(offset), grid, bound, whole)


def layer_field(layer: Layer, inputs: list[ReceptiveField]) -> ReceptiveField:
    """The receptive field of ``layer``'s output, from those of its inputs."""
    rf = merge(inputs)
    n = len(rf.size)
    grid = tuple(layer.out_shape[1:])
    if len(grid) != n:  # flat output: keep the grid a later Linear will see whole
        grid = (1,) * n if layer.op is Op.LINEAR else rf.grid
    if layer.pool is not None and layer.op is not Op.POOL:  # hardware layer: input pooling first
        pooled = layer.pool.output_dims(rf.grid) if len(rf.grid) == n else rf.grid
        rf = _pooled(rf, layer.pool, (), pooled)
    op = layer.op
    if op is Op.POOL and layer.pool is not None:
        return _pooled(rf, layer.pool, layer.padding, grid)
    if op in (Op.CONV1D, Op.CONV2D) and len(layer.kernel_size) == n:
        return rf.then(tuple(_conv_own(*g) for g in zip(*_geometry(layer, n), strict=True)), grid)
    if op is Op.CONVTRANSPOSE2D and len(layer.kernel_size) == n:
        geometry = zip(*_geometry(layer, n), strict=True)
        return rf.then(tuple(_transposed_own(*g) for g in geometry), grid)
    if op is Op.UPSAMPLE and len(layer.scale_factor) == n:
        f = Fraction(1) if layer.upsample_mode == "nearest" else Fraction(2)
        own = tuple((f, Fraction(1, s), Fraction(s + 1, 2 * s)) for s in layer.scale_factor)
        return rf.then(own, grid)
    if op is Op.PAD and len(layer.pad_amounts) == 2 * n:
        befores = layer.pad_amounts[::2][::-1]  # F.pad order is last axis first
        return rf.then(tuple((Fraction(1), Fraction(1), Fraction(1 - p)) for p in befores), grid)
    if op is Op.LINEAR or layer.flatten:
        return _whole(rf, grid)
    if len(grid) == n and grid != rf.grid and all(grid) and len(rf.grid) == n:
        t = tuple(Fraction(i, o) for i, o in zip(rf.grid, grid, strict=True))
        return rf.then(tuple((max(Fraction(1), s), s, (1 + s) / 2) for s in t), grid)
    return dataclasses.replace(rf, grid=grid)


def _whole(rf: ReceptiveField, grid: tuple[int, ...]) -> ReceptiveField:
    """A layer that sees its whole (spatial) input (Linear, flatten): the whole input."""
    return rf.whole(grid)


def _pooled(
    rf: ReceptiveField, pool: Pooling, padding: tuple[int, ...], grid: tuple[int, ...]
) -> ReceptiveField:
    """A pooling's field; global pooling (one output pixel whose window covers the whole
    input grid, padding aside) sees the whole input."""
    pooled = rf.then(_pool_own(pool, padding), grid)
    covers = len(rf.grid) == len(pool.size) and all(
        k >= g for k, g in zip(pool.size, rf.grid, strict=True)
    )
    return pooled.whole(grid) if covers and all(g == 1 for g in grid) else pooled
