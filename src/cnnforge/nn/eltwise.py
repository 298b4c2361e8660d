"""QAT element-wise layers (Add, Sub, Or, Xor over N operands) and the pooling-only layer, both
hardware PASSTHROUGH layers; quantized they match the simulator exactly (R4.2)."""

from __future__ import annotations

import torch

from cnnforge.arithmetic import ACT_SCALE, eltwise_fold
from cnnforge.ir import INPUT, EltwiseOp, Layer, Op, Pooling
from cnnforge.nn.functional import clamp_activation, make_pooling, pool_float, pool_int, to_int
from cnnforge.nn.layers import QATModule, Stage


def _passthrough(
    name: str, inputs: tuple[str, ...], out_shape: tuple[int, ...], pool: Pooling | None, **kw
) -> Layer:
    ndim = max(len(out_shape) - 1, 1)
    channels = out_shape[0] if out_shape else 0
    return Layer(
        name=name,
        op=Op.PASSTHROUGH,
        inputs=tuple(inputs),
        out_shape=tuple(out_shape),
        in_channels=channels,
        out_channels=channels,
        kernel_size=(1,) * ndim,
        stride=(1,) * ndim,
        padding=(0,) * ndim,
        dilation=(1,) * ndim,
        pool=pool,
        **kw,
    )


class _Eltwise(QATModule):
    """N-operand element-wise layer with optional pooling (``pool``: None, "max" or "avg")."""

    eltwise: EltwiseOp

    def __init__(
        self,
        *,
        pool: str | None = None,
        pool_size: int | tuple[int, ...] = 2,
        pool_stride: int | tuple[int, ...] | None = None,
        pool_first: bool = True,
        ndim: int = 2,
    ) -> None:
        super().__init__()
        self.pool = make_pooling(pool, pool_size, pool_stride, 1, ndim)
        self.pool_first = pool_first

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        """Combine 2..16 operands of one shape (float/QAT or exact integers, by stage)."""
        if not 2 <= len(xs) <= 16 or any(x.shape != xs[0].shape for x in xs):
            shapes = [tuple(x.shape) for x in xs]
            raise ValueError(f"{type(self).__name__} needs 2..16 operands of one shape: {shapes}")
        stage = self.current_stage
        if stage is Stage.QUANTIZED:
            return self._forward_int(xs)
        qat = stage is Stage.QAT
        if self.pool is not None and self.pool_first:
            xs = tuple(pool_float(x, self.pool, qat, self.avg_pool_rounding) for x in xs)
        y = self._combine(xs)
        if self.pool is not None and not self.pool_first:
            y = pool_float(y, self.pool, qat, self.avg_pool_rounding)
        return y

    def _combine(self, xs: tuple[torch.Tensor, ...]) -> torch.Tensor:
        if self.eltwise in (EltwiseOp.OR, EltwiseOp.XOR):
            ints = [to_int(x) for x in xs]
            return eltwise_fold(self.eltwise, ints).to(xs[0].dtype) / ACT_SCALE
        y = xs[0]
        for x in xs[1:]:
            y = y + x if self.eltwise is EltwiseOp.ADD else y - x
        return clamp_activation(y)

    @torch.no_grad()
    def _forward_int(self, xs: tuple[torch.Tensor, ...]) -> torch.Tensor:
        ints = [to_int(x) for x in xs]
        rounding = self.avg_pool_rounding
        if self.pool is not None and self.pool_first:
            ints = [pool_int(x, self.pool, rounding) for x in ints]
        y = eltwise_fold(self.eltwise, ints)
        if self.pool is not None and not self.pool_first:
            y = pool_int(y, self.pool, rounding)
        return y.to(xs[0].dtype) / ACT_SCALE

    def cnnforge_layer(
        self,
        name: str,
        inputs: tuple[str, ...] = (INPUT,),
        in_shapes: tuple[tuple[int, ...], ...] = (),
        out_shape: tuple[int, ...] = (),
    ) -> Layer:
        """A PASSTHROUGH layer with ``eltwise`` over ``inputs`` in order."""
        return _passthrough(
            name, inputs, out_shape, self.pool, eltwise=self.eltwise, pool_first=self.pool_first
        )


class Add(_Eltwise):
    """``x0 + x1 + ...`` saturated once (R4.2)."""

    eltwise = EltwiseOp.ADD


class Sub(_Eltwise):
    """``x0 - x1 - ...`` saturated once (R4.2)."""

    eltwise = EltwiseOp.SUB


class Or(_Eltwise):
    """Bitwise or of the int8 patterns (R4.2)."""

    eltwise = EltwiseOp.OR


class Xor(_Eltwise):
    """Bitwise xor of the int8 patterns (R4.2)."""

    eltwise = EltwiseOp.XOR


class Pool(QATModule):
    """A pooling-only hardware layer (PASSTHROUGH with input pooling; ``ndim`` 1 or 2)."""

    def __init__(
        self,
        kind: str = "max",
        size: int | tuple[int, ...] = 2,
        stride: int | tuple[int, ...] | None = None,
        dilation: int = 1,
        ndim: int = 2,
    ) -> None:
        super().__init__()
        pool = make_pooling(kind, size, stride, dilation, ndim)
        assert pool is not None
        self.pool = pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Pool (float/QAT, or exact integers in the quantized stage)."""
        stage = self.current_stage
        if stage is Stage.QUANTIZED:
            y = pool_int(to_int(x), self.pool, self.avg_pool_rounding)
            return y.to(x.dtype) / ACT_SCALE
        return pool_float(x, self.pool, stage is Stage.QAT, self.avg_pool_rounding)

    def cnnforge_layer(
        self,
        name: str,
        inputs: tuple[str, ...] = (INPUT,),
        in_shapes: tuple[tuple[int, ...], ...] = (),
        out_shape: tuple[int, ...] = (),
    ) -> Layer:
        """A PASSTHROUGH layer that only pools."""
        return _passthrough(name, inputs, out_shape, self.pool)
