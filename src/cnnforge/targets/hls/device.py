"""FPGA targets from HLS C++ (docs/hls-target.md): ``Capabilities`` whose limits make the shared
lowering produce what the engines implement, plus accumulator, parallelism, clock and registers."""

from __future__ import annotations

from dataclasses import dataclass

from cnnforge.devices import Capabilities
from cnnforge.ir import Op

#: Operations the HLS engines implement (docs/hls-target.md §3).
HLS_OPS = frozenset({Op.CONV2D, Op.CONVTRANSPOSE2D, Op.PASSTHROUGH})


@dataclass(frozen=True, kw_only=True)
class HlsTarget(Capabilities):
    """One HLS C++ overlay: engines, widths, parallelism and register map (hls-target.md)."""

    accumulator_bits_max: int = 32  # widest accumulator an engine may have (§2 H4)
    macs_per_cycle: int = 9  # multipliers per MAC engine: one 3x3 window per cycle (§4)
    initiation_interval: int = 1  # II of every pipelined loop (§4)
    clock_mhz: float = 100.0  # fabric clock for the cycle estimate (§4)
    # AXI-Lite register offsets (§5; the reference design's: 0x000 control, 0x010/0x020/0x030
    # geometry)
    reg_control: int = 0x000
    reg_height_width: int = 0x010
    reg_kernel_padding: int = 0x020
    reg_channels: int = 0x030
    reg_layer_select: int = 0x040
    reg_layer_count: int = 0x050
    reg_status: int = 0x060


HLS = HlsTarget(
    name="HLS",
    ops=HLS_OPS,
    max_layers=1024,
    max_row_col=4095,
    count_bits=12,  # the 16-bit height/width register fields hold up to 4095 (§5)
    conv1d_dilation_max=1,
    conv1d_multipass_pad=True,
    depthwise=False,
    pool_dilation_max=1,
    passthrough_pool_max_passes=1 << 16,
    eltwise_multipass_plain_only=False,
    eltwise_multipass_conv_bias=True,
    binary_weights=False,
    weight_bits=(8, 7, 6, 5, 4, 3, 2, 1),  # any width up to 8 (§2 H2)
    default_weight_bits=5,  # W5 unless --weight-bits says otherwise (§2 H2)
    activation_bits=8,  # A8: ap_int<8> activations, value v / 128 (§2 H1)
)
