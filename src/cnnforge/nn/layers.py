"""QAT weight layers (Conv1d/2d, ConvTranspose2d, Linear), each one hardware layer with stages
FLOAT, QAT and QUANTIZED; quantized, ``module(x / 128) * 128 == sim(layer, x)`` exactly (wide
outputs: ``sim(layer, x) * 2^(1 - bits)``, as float64)."""

from __future__ import annotations

import dataclasses
from enum import IntEnum

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cnnforge.arithmetic import (
    ACT_SCALE,
    add_bias,
    dequantize_params,
    finish_output,
    implicit_shift,
    output_unit,
)
from cnnforge.ir import (
    INPUT,
    Activation,
    BatchNormParams,
    Layer,
    Op,
    Pooling,
    Quantized,
    fold_bn_arrays,
)
from cnnforge.nn.functional import (
    IntParams,
    clamp_activation,
    device_unit,
    int_params,
    make_pooling,
    pool_float,
    pool_int,
    qat_weights,
    quantize_output_ste,
    to_int,
    unit_stays_on_device,
)

BN_DIVISOR = 4.0  # the vendor's bn(y)/4 (docs/hardware/arithmetic.md R6.5)


class Stage(IntEnum):
    """Training stage of a QAT module, kept in the buffer ``stage`` so checkpoints resume in it."""

    FLOAT = 0
    QAT = 1
    QUANTIZED = 2


class QATModule(nn.Module):
    """What every cnnforge.nn module shares: the stage, weight bits, shift quantile, pool mode."""

    def __init__(self, weight_bits: int | None = None) -> None:
        super().__init__()
        self.avg_pool_rounding = False  # must match Network.avg_pool_rounding (R3.6)
        # Buffers, so that a resumed checkpoint continues in the same stage and widths.
        self.register_buffer("stage", torch.tensor(int(Stage.FLOAT)))
        self.register_buffer("qat_weight_bits", torch.tensor(weight_bits or 0))  # 0: unset
        self.register_buffer("qat_shift_quantile", torch.tensor(1.0, dtype=torch.float64))

    def _scalar(self, name: str) -> int | float | bool:
        """The one-element buffer ``name``'s value, re-read from the device only when the buffer
        changes (a GPU read waits for queued work)."""
        buffer = self._buffers[name]
        assert buffer is not None
        try:
            version = buffer._version
        except RuntimeError:  # an inference-mode tensor keeps no version: read it
            return buffer.item()
        seen = self.__dict__.setdefault("_scalars", {})
        cached = seen.get(name)
        if cached is not None and cached[0] is buffer and cached[1] == version:
            return cached[2]
        value = buffer.item()
        seen[name] = (buffer, version, value)
        return value

    def __getstate__(self) -> dict:
        """What a copy or a pickle takes: all but the values read (``_scalar``), which belong
        to this module's buffers."""
        state = super().__getstate__()
        return {k: v for k, v in state.items() if k != "_scalars"}

    @property
    def weight_bits(self) -> int | None:
        """Weight width (None: not chosen yet, the policy's default applies)."""
        return int(self._scalar("qat_weight_bits")) or None

    @weight_bits.setter
    def weight_bits(self, bits: int | None) -> None:
        self.qat_weight_bits.fill_(bits or 0)

    @property
    def shift_quantile(self) -> float:
        """Quantile of |params| that sets the output shift (R6.3 step 2)."""
        return float(self._scalar("qat_shift_quantile"))

    @shift_quantile.setter
    def shift_quantile(self, value: float) -> None:
        self.qat_shift_quantile.fill_(value)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        """Checkpoints written before the width buffers existed still load (defaults kept)."""
        for name in ("qat_weight_bits", "qat_shift_quantile"):
            state_dict.setdefault(prefix + name, getattr(self, name).clone())
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def current_stage(self) -> Stage:
        """The training stage (FLOAT, QAT or QUANTIZED)."""
        return Stage(int(self._scalar("stage")))

    def set_stage(self, stage: Stage) -> None:
        """Switch stage (``enable_qat`` / ``set_quantized_eval`` call this)."""
        self.stage.fill_(int(stage))


class _WeightLayer(QATModule):
    """Shared forward/export of the weight layers; subclasses set ``op`` and ``_apply_op``."""

    op: Op
    ndim: int

    def _init_stages(
        self, out_channels: int, pool: Pooling | None, activation: str, wide: bool, batchnorm: bool
    ) -> None:
        self.pool = pool
        self.activation = Activation(activation)
        if self.activation not in (Activation.NONE, Activation.RELU, Activation.ABS):
            raise ValueError(f"activation {activation!r}: the hardware has none, relu, abs")
        if wide and self.activation is not Activation.NONE:
            raise ValueError("a wide (32-bit) output cannot have an activation (R2.4)")
        self.wide = wide
        bn_cls = nn.BatchNorm1d if self.ndim != 2 else nn.BatchNorm2d
        self.bn = bn_cls(out_channels) if batchnorm else None
        self.register_buffer("bn_folded", torch.tensor(False))

    def _bn_active(self) -> bool:
        return self.bn is not None and not bool(self._scalar("bn_folded"))

    def fold_bn(self) -> None:
        """Fold the float-phase BatchNorm (``bn(y)/4``) into weight and bias, idempotent; its
        parameters stop training (``requires_grad=False``)."""
        if self._bn_active():
            w, b = self._folded_numpy()
            with torch.no_grad():
                self.weight.copy_(torch.from_numpy(w))
                self.bias.copy_(torch.from_numpy(b))  # batchnorm=True implies a bias (R6.5)
                self.bn_folded.fill_(True)
        if self.bn is not None:
            self.bn.requires_grad_(False)

    def _folded_numpy(self) -> tuple[np.ndarray, np.ndarray | None]:
        w = self.weight.detach().cpu().numpy()
        b = None if self.bias is None else self.bias.detach().cpu().numpy()
        if not self._bn_active():
            return w, b
        bn = self.bn
        params = BatchNormParams(
            running_mean=bn.running_mean.cpu().numpy(),
            running_var=bn.running_var.cpu().numpy(),
            eps=bn.eps,
            weight=None if bn.weight is None else bn.weight.detach().cpu().numpy(),
            bias=None if bn.bias is None else bn.bias.detach().cpu().numpy(),
        )
        out_axis = 1 if self.op is Op.CONVTRANSPOSE2D else 0
        groups = getattr(self, "groups", 1) if out_axis == 1 else 1
        return fold_bn_arrays(w, b, params, out_axis=out_axis, groups=groups, divisor=BN_DIVISOR)

    def bits(self) -> int:
        """Weight width in use: the chosen one, else 8."""
        return 8 if self.weight_bits is None else self.weight_bits

    def quantized_params(self) -> IntParams:
        """Integer weights, bias and output shift as the hardware gets them (R6.3, R6.6)."""
        return int_params(self.weight, self.bias, self.bits(), self.shift_quantile)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Float, QAT or exact quantized evaluation, by stage."""
        stage = self.current_stage
        if stage is Stage.QUANTIZED:
            return self._forward_int(x)
        if self.pool is not None:
            x = pool_float(x, self.pool, stage is Stage.QAT, self.avg_pool_rounding)
        x = self._prepare(x)
        if stage is Stage.FLOAT:
            y = self._apply_op(x, self.weight, self.bias)
            if self._bn_active():
                y = self.bn(y) / BN_DIVISOR
            return self._activate(y) if self.wide else clamp_activation(self._activate(y))
        return self._forward_qat(x)

    def qat_unit(self) -> float | torch.Tensor:
        """2^-output_shift of ``quantized_params``, a tensor on the device where the quantile
        allows (``functional.device_unit``), with no integer weights made."""
        if unit_stays_on_device(self.weight, self.bias, self.shift_quantile):
            return device_unit(self.weight, self.bias, self.bits())
        return 2.0 ** -self.quantized_params().output_shift

    def _forward_qat(self, x: torch.Tensor) -> torch.Tensor:
        w, b, unit = qat_weights(self.weight, self.bias, self.bits(), self.shift_quantile)
        y = self._apply_op(x, w, b)
        if not self.wide:  # wide outputs skip the output scale (R6.3 step 6, R2.4)
            y = y / unit  # times 2^shift, exactly
        return quantize_output_ste(self._activate(y), self.wide)

    def _activate(self, y: torch.Tensor) -> torch.Tensor:
        if self.activation is Activation.RELU:
            return F.relu(y)
        if self.activation is Activation.ABS:
            return y.abs()
        return y

    def _prepare(self, x: torch.Tensor) -> torch.Tensor:
        return x

    @torch.no_grad()
    def _forward_int(self, x: torch.Tensor) -> torch.Tensor:
        """Hardware arithmetic on x_int = 128 x (R2.3/R2.4, pooling R3)."""
        xi = to_int(x)
        if self.pool is not None:
            xi = pool_int(xi, self.pool, self.avg_pool_rounding)
        xi = self._prepare(xi)
        q = self.quantized_params()
        acc = self._apply_op(xi.double(), q.weight.double(), None).round().to(torch.int64)
        acc = add_bias(acc, q.bias)
        total = q.output_shift + implicit_shift(q.weight_bits)
        y = finish_output(acc, total, self.activation, self.wide)
        if self.wide:
            return y.double() * output_unit(q.weight_bits, q.output_shift, wide=True)
        return y.to(x.dtype) / ACT_SCALE

    def cnnforge_layer(
        self,
        name: str,
        inputs: tuple[str, ...] = (INPUT,),
        in_shapes: tuple[tuple[int, ...], ...] = (),
        out_shape: tuple[int, ...] = (),
    ) -> Layer:
        """This module as one hardware Layer; ``quant`` filled from the QAT stage on, float weights
        dequantized (``arithmetic.dequantize_params``) once quantized."""
        layer = Layer(
            name=name,
            op=self.op,
            inputs=tuple(inputs),
            out_shape=tuple(out_shape),
            pool=self.pool,
            activation=self.activation,
            wide=self.wide,
            **self._geometry(),
        )
        if self.current_stage is Stage.FLOAT:
            w, b = self._folded_numpy()
            return dataclasses.replace(layer, weight=w, bias=b)
        q = self.quantized_params()
        bias = None if q.bias is None else q.bias.numpy()
        weight, float_bias = dequantize_params(
            q.weight.numpy(), bias, q.weight_bits, q.output_shift, self.wide
        )
        return dataclasses.replace(
            layer,
            weight=weight,
            bias=float_bias,
            quant=Quantized(q.weight_bits, q.weight.numpy(), bias, q.output_shift),
        )


class _Conv(_WeightLayer):
    """Shared constructor of the convolutions."""

    def _setup(
        self, conv: nn.Module, pool: Pooling | None, activation: str, wide: bool, batchnorm: bool
    ) -> None:
        self.weight = conv.weight
        self.bias = conv.bias
        self.stride, self.padding, self.dilation = conv.stride, conv.padding, conv.dilation
        self.groups = conv.groups
        self.in_channels, self.out_channels = conv.in_channels, conv.out_channels
        self.kernel_size = conv.kernel_size
        self._init_stages(conv.out_channels, pool, activation, wide, batchnorm)

    def _geometry(self) -> dict:
        return dict(
            in_channels=self.in_channels,
            out_channels=self.out_channels,
            kernel_size=tuple(self.kernel_size),
            stride=tuple(self.stride),
            padding=tuple(self.padding),
            dilation=tuple(self.dilation),
            groups=self.groups,
        )


class Conv2d(_Conv):
    """QAT Conv2d with optional input pooling (``pool``: None, "max", "avg"), BatchNorm (float
    phase), relu/abs and wide output."""

    op = Op.CONV2D
    ndim = 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int] = 3,
        stride: int = 1,
        padding: int = 1,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
        *,
        pool: str | None = None,
        pool_size: int | tuple[int, int] = 2,
        pool_stride: int | tuple[int, int] | None = None,
        pool_dilation: int = 1,
        activation: str = "none",
        wide: bool = False,
        batchnorm: bool = False,
        weight_bits: int | None = None,
    ) -> None:
        super().__init__(weight_bits)
        conv = nn.Conv2d(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias or batchnorm,
        )
        self._setup(
            conv,
            make_pooling(pool, pool_size, pool_stride, pool_dilation, 2),
            activation,
            wide,
            batchnorm,
        )

    def _apply_op(self, x, w, b):
        return F.conv2d(x, w, b, self.stride, self.padding, self.dilation, self.groups)


class Conv1d(_Conv):
    """QAT Conv1d (same options as Conv2d, pooling 1-D without dilation, R3.7)."""

    op = Op.CONV1D
    ndim = 1

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        stride: int = 1,
        padding: int = 1,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
        *,
        pool: str | None = None,
        pool_size: int = 2,
        pool_stride: int | None = None,
        activation: str = "none",
        wide: bool = False,
        batchnorm: bool = False,
        weight_bits: int | None = None,
    ) -> None:
        super().__init__(weight_bits)
        conv = nn.Conv1d(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias or batchnorm,
        )
        self._setup(
            conv, make_pooling(pool, pool_size, pool_stride, 1, 1), activation, wide, batchnorm
        )

    def _apply_op(self, x, w, b):
        return F.conv1d(x, w, b, self.stride, self.padding, self.dilation, self.groups)


class ConvTranspose2d(_Conv):
    """QAT ConvTranspose2d (hardware: 3x3, stride 2, output_padding 1; R2.7)."""

    op = Op.CONVTRANSPOSE2D
    ndim = 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        stride: int = 2,
        padding: int = 1,
        output_padding: int = 1,
        groups: int = 1,
        bias: bool = True,
        *,
        pool: str | None = None,
        pool_size: int | tuple[int, int] = 2,
        pool_stride: int | tuple[int, int] | None = None,
        activation: str = "none",
        wide: bool = False,
        batchnorm: bool = False,
        weight_bits: int | None = None,
    ) -> None:
        super().__init__(weight_bits)
        conv = nn.ConvTranspose2d(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            output_padding,
            groups,
            bias or batchnorm,
        )
        self.output_padding = conv.output_padding
        self._setup(
            conv, make_pooling(pool, pool_size, pool_stride, 1, 2), activation, wide, batchnorm
        )

    def _apply_op(self, x, w, b):
        return F.conv_transpose2d(
            x, w, b, self.stride, self.padding, self.output_padding, self.groups, self.dilation
        )

    def _geometry(self) -> dict:
        return dict(super()._geometry(), output_padding=tuple(self.output_padding))


class Linear(_WeightLayer):
    """QAT Linear; ``flatten=True`` flattens C x H x W input channel-major first (R5.1)."""

    op = Op.LINEAR
    ndim = 1

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        flatten: bool = False,
        activation: str = "none",
        wide: bool = False,
        batchnorm: bool = False,
        weight_bits: int | None = None,
    ) -> None:
        super().__init__(weight_bits)
        linear = nn.Linear(in_features, out_features, bias or batchnorm)
        self.weight, self.bias = linear.weight, linear.bias
        self.in_features, self.out_features = in_features, out_features
        self.flatten = flatten
        self._init_stages(out_features, None, activation, wide, batchnorm)

    def _prepare(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1) if self.flatten else x

    def _apply_op(self, x, w, b):
        return F.linear(x, w, b)

    def _geometry(self) -> dict:
        return dict(
            in_channels=self.in_features,
            out_channels=self.out_features,
            kernel_size=(1, 1),
            stride=(1, 1),
            padding=(0, 0),
            dilation=(1, 1),
            flatten=self.flatten,
        )
