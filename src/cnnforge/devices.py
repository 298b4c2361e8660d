"""What a target can compute, as the frozen, target-neutral ``Capabilities`` record the shared
stages read (docs/hardware/devices.md); targets extend it in their own packages."""

from __future__ import annotations

from dataclasses import dataclass

from cnnforge.kinds import (  # no numpy: --help
    BINARY_BITS,
    HARDWARE_ELTWISE,
    HARDWARE_OPS,
    EltwiseOp,
    Op,
)

#: Channels computed side by side in one pass (§2), the default of ``pass_channels``.
PASS_CHANNELS = 64


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What a target computes, target-neutral: ops, widths and per-op limits
    (docs/hardware/devices.md §1); targets extend it, defaults are the MAX7800x values."""

    name: str
    # ---- layers and dims (§1, §8 `layers`, `dims`) --------------------------------------------
    max_layers: int  # hardware layer slots (32 / 128)
    max_row_col: int  # manual value (§1 "Max rows or columns", §9)
    count_bits: int  # row/col counter width: rows + 2*pad <= 2^bits (§1)
    max_channels: int = 1024  # §1 "Max channels in or out per layer" (tool value, §9)
    frame_limit: int = 1 << 21  # H*W*passes < 2^21 (§1 "Frame limit")
    # channels computed side by side: a tensor of C channels takes E = ceil(C / 64) passes (§2)
    pass_channels: int = PASS_CHANNELS  # channels per pass
    pass_align: int = 4  # T rounded up to a multiple of 4 when C > 64 (§2)
    # ---- operations (§1) -------------------------------------------------------------------------
    ops: frozenset[Op] = HARDWARE_OPS  # the hardware layer operations
    eltwise_ops: frozenset[EltwiseOp] = HARDWARE_ELTWISE  # §1 "Element-wise ops / operands"
    # ---- widths (§1 "Weight widths", arithmetic R1.2) ----------------------------------------
    weight_bits: tuple[int, ...] = (8, 4, 2, 1)  # §1 "Weight widths" (binary: binary_weights)
    binary_weights: bool  # binary -1/+1 weights (MAX78002)
    default_weight_bits: int = 8  # the width compile uses unless --weight-bits is given
    activation_bits: int = 8  # activations: 8-bit, value v / 128 (arithmetic R1.1)
    shift_range: tuple[int, int] = (-15, 15)  # total output shift (§1 "Output shift")
    # ---- per-op limits (§1, §8) -------------------------------------------------------------
    conv2d_kernels: tuple[tuple[int, int], ...] = ((1, 1), (3, 3))  # §1 "Conv2d kernel"
    conv1d_kernel_range: tuple[int, int] = (1, 9)  # §1 "Conv1d kernel length"
    conv_pads: tuple[int, ...] = (0, 1, 2)  # §1 "Conv padding"; pad < kernel size
    conv2d_dilation_max: int = 1  # tool value; the manual's 16 is rejected by izer (§9)
    conv1d_dilation_max: int  # §1 "Conv dilation" (1023 / 2047)
    conv1d_multipass_pad: bool  # False: padded Conv1d with > 64 in-channels rejected (§1)
    depthwise: bool  # groups = in = out allowed (§1 "Groups", §8 `groups`)
    convtranspose2d_kernel: tuple[int, int] = (3, 3)  # §1 "ConvTranspose2d"
    convtranspose2d_stride: int = 2
    convtranspose2d_output_padding: int = 1
    convtranspose2d_pads: tuple[int, ...] = (0, 1, 2)  # hardware pad k-1-p; PyTorch p alike
    pool_size_range: tuple[int, int] = (1, 16)  # §1 "Pool kernel", per dim
    pool_stride_range: tuple[int, int] = (1, 16)  # §1 "Pool stride"
    pool_dilation_max: int  # §1 "Pool dilation" (1 / 16; max pooling only)
    passthrough_pool_max_passes: int  # pool-only layer passes unless pooled to 1x1 (§1)
    eltwise_operands_range: tuple[int, int] = (2, 16)
    pool_after_eltwise_operands: int = 2  # `pool_first: false` operand limit (§1)
    eltwise_multipass_plain_only: bool  # > 1 pass needs an eltwise-only layer (MAX78000, §1)
    # in-flight eltwise + conv + bias allowed (§1 says with multipass; the vendor tool refuses it
    # for one pass too where this is False: docs/check.md)
    eltwise_multipass_conv_bias: bool
    flatten_max_chw: int = 16384  # §1 "Flatten"
    flatten_max_hw: int = 256
    linear_max_in: int = 1024  # §1 "Linear layer"
    linear_max_out: int = 1024

    # ---- questions -----------------------------------------------------------------------------

    def supports_op(self, op: Op | str) -> bool:
        """True for the hardware layer operations of the target (``ops``)."""
        try:
            return Op(op) in self.ops
        except ValueError:
            return False

    def supports_eltwise(self, op: EltwiseOp | str) -> bool:
        """True for add/sub/or/xor (§1 "Element-wise ops / operands")."""
        try:
            return EltwiseOp(op) in self.eltwise_ops
        except ValueError:
            return False

    def supports_groups(self, groups: int, in_channels: int, out_channels: int) -> bool:
        """Groups 1, or depthwise (groups = in = out) where the device has it (§1 "Groups")."""
        if groups == 1:
            return True
        return self.depthwise and groups == in_channels == out_channels

    def weight_bits_allowed(self, bits: int) -> bool:
        """True if the device stores ``bits``-bit weights; ``BINARY_BITS`` for -1/+1 (R1.2)."""
        if bits == BINARY_BITS:
            return self.binary_weights
        return bits in self.weight_bits

    @property
    def allowed_weight_bits(self) -> tuple[int, ...]:
        """All weight width codes of the device, widest first, binary (-1) last."""
        return self.weight_bits + ((BINARY_BITS,) if self.binary_weights else ())

    def shift_allowed(self, total_shift: int) -> bool:
        """Total output shift (with the implicit 8 - |bits|) in range (§1 "Output shift")."""
        lo, hi = self.shift_range
        return lo <= total_shift <= hi

    def passes(self, channels: int) -> int:
        """Multi-pass count E = ceil(C / 64) (§2); cnnforge.geometry asks here."""
        return max(1, -(-channels // self.pass_channels))

    def processors_per_pass(self, channels: int) -> int:
        """T = ceil(C / E), rounded up to a multiple of 4 when C > 64 (§2)."""
        n = self.passes(channels)
        per = -(-channels // n)
        return min(self.pass_channels, per + (-per) % self.pass_align) if n > 1 else per
