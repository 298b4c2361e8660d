"""What a target can compute, and the MAX78000 and MAX78002 CNN accelerators, as frozen records.

``Capabilities`` is the target-neutral record the shared stages (frontend, passes, quant, sim,
analysis) read: operations, weight and activation widths, per-op limits (kernel sizes, strides,
channels, pooling, layer count). Each target extends it with its own memories and registers:
``Max7800xDevice`` below (processors, quadrants, kernel, data and bias memories, streaming,
clocks, addresses), ``targets.hls.device.HlsTarget`` for the HLS overlay. Code asks the record
(``device.max_layers``, ``device.supports_op(op)``, ``device.kernel_words(p)``) and never
branches on a device name. Each field cites its section of ../shared/spec/devices.md (§1 is the
side-by-side table, §8 the machine-readable copy). Fields equal on both MAX parts carry their
value as the default; the two instances below give the rest. Where the manual and the vendor
tool disagree the tool's value is used (devices.md §9).
"""

from __future__ import annotations

from dataclasses import dataclass

from cnnforge.errors import InputError
from cnnforge.kinds import (  # no numpy: --help
    BINARY_BITS,
    HARDWARE_ELTWISE,
    HARDWARE_OPS,
    EltwiseOp,
    Op,
)


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What a target computes, target-neutral: ops, widths and per-op limits (devices.md §1).

    The shared stages (frontend, passes, quant, sim, analysis) read only these fields; every
    target's record extends this class with its own memories and registers (``Max7800xDevice``
    below, ``targets.hls.device.HlsTarget``). Defaults are the MAX7800x values; the fields
    without one differ between the parts.
    """

    name: str
    # ---- layers and dims (§1, §8 `layers`, `dims`) --------------------------------------------
    max_layers: int  # hardware layer slots (32 / 128)
    max_row_col: int  # manual value (§1 "Max rows or columns", §9)
    count_bits: int  # row/col counter width: rows + 2*pad <= 2^bits (§1)
    max_channels: int = 1024  # §1 "Max channels in or out per layer" (tool value, §9)
    frame_limit: int = 1 << 21  # H*W*passes < 2^21 (§1 "Frame limit")
    # channels computed side by side: a tensor of C channels takes E = ceil(C / 64) passes (§2)
    pass_channels: int = 64  # channels per pass
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
    # for one pass too where this is False: izer/backend/max7800x.py, docs/check.md)
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


@dataclass(frozen=True, kw_only=True)
class Max7800xDevice(Capabilities):
    """One MAX7800x part: its capabilities plus processors, memories, streaming, clocks and
    memory addresses (devices.md §1-§8). Only MAX7800x code (targets/max7800x/, its firmware,
    the checker's memory rules) reads the fields below ``Capabilities``'."""

    # ---- identity (§1 "Die name / izer device code") ----------------------------------------
    die: str
    # ---- data memory (§1, §2, §8 `data`) -----------------------------------------------------
    instance_bytes: int  # bytes per data-memory instance (32 KiB / 80 KiB)
    data_base_addr: int  # AHB address of data SRAM (§1)
    data_quadrant_stride: int
    data_instance_stride: int
    # ---- kernel (weight) memory (§1 "Weight memory per proc", §3, §8 `kernels`) -------------
    kernel_words_large: int  # 72-bit words of processors 0/16/32/48
    kernel_words_small: int  # 72-bit words of the other processors
    kernel_banks_large: tuple[int, ...]  # physical banks of a large processor (depthwise: one)
    kernel_banks_small: tuple[int, ...]
    kernel_base_addr: int  # §1 "Kernel address"
    kernel_quadrant_stride: int
    kernel_processor_stride: int
    # ---- bias memory (§1, §4, §8 `bias`) ------------------------------------------------------
    bias_entries_per_quadrant: int  # 8-bit entries (512 / 2048)
    bias_base_addr: int
    bias_quadrant_stride: int
    bias_flatten_first: bool  # MAX78000 allocator places flatten layers first (§4)
    # ---- output write pointer (§1 `write_gap`, §7) -------------------------------------------
    write_ptr_inc_bits: int  # out_passes * (write_gap + 1) <= 2^bits
    # ---- streaming (§1 "Streaming specifics", §8 `streaming`) ---------------------------------
    streaming_final_layer_needs_pad: bool
    streaming_passthrough_allowed: bool
    # ---- clocks (§1 "CNN clock", §5, §8 `clock`) ----------------------------------------------
    cnn_clock_mhz: float  # default CNN clock (50 / 200 MHz)
    pipeline: bool  # pipeline on by default
    has_latency_model: bool  # the vendor's cycle model exists only for MAX78000 (§5)
    # calcx4, read-ahead, tcalc: MAX78002 speed-ups (the vendor's SUPPORT_CALCX4, READ_AHEAD)
    speedups: bool = False
    # the data-snooping / conditional-execution registers (the YAML's global `snoop`)
    snoop_registers: int = 0
    # memories making up one data-memory instance (MAX78002: 5 of 16 KiB; read-ahead keeps a
    # layer's input and output in different ones: targets/max7800x/speedups.py)
    data_instance_blocks: int = 1

    # ---- equal on both parts ----------------------------------------------------------------
    processors: int = 64  # §1 "Processors"
    quadrants: int = 4  # §1 "Quadrants x procs per quadrant"
    processors_per_quadrant: int = 16
    processors_per_instance: int = 4  # §1 "Procs sharing one data-memory instance"
    data_instances: int = 16  # §1 "Data-memory instances"
    kernel_word_bits: int = 72  # one 8-bit 3x3 kernel per word (§3)
    kernel_large_processors: tuple[int, ...] = (0, 16, 32, 48)  # §1, §8 `kernels`
    kernel_start_align: int = 4  # a layer's start column is a multiple of 4 (§3 "Placement")
    bias_bits: int = 8  # §4 "Bias is always 8-bit"
    max_streaming_layers: int = 8  # §1 "Max streaming layers"
    fifo_max_hwc_channels: int = 16
    fifo_max_chw_channels: int = 4
    fifo_hwc_mask: int = 0x000F000F000F000F  # §8 `fifo`
    fifo_chw_mask: int = 0x0001000100010001
    streaming_one_by_one_as_3x3: bool = True  # §8 `streaming`
    # The rollover (circular input buffer) formula of a streaming layer: the vendor backend's
    # "new streaming" one (tc REQUIRE_NEW_STREAMING, MAX78002) or the original (plan/streaming.py).
    streaming_new_rollover: bool = False

    # ---- derived numbers ---------------------------------------------------------------------

    @property
    def clock_hz(self) -> float:
        """Default CNN clock in Hz (§5: time = cycles / CNN clock)."""
        return self.cnn_clock_mhz * 1e6

    # ---- questions -----------------------------------------------------------------------------

    def kernel_words(self, processor: int) -> int:
        """72-bit kernel words of one processor (§1 "Weight memory per proc")."""
        self._check_processor(processor)
        if processor in self.kernel_large_processors:
            return self.kernel_words_large
        return self.kernel_words_small

    def kernel_banks(self, processor: int) -> tuple[int, ...]:
        """Physical kernel banks of one processor (§1 "Weight memory physical split")."""
        self._check_processor(processor)
        if processor in self.kernel_large_processors:
            return self.kernel_banks_large
        return self.kernel_banks_small

    def quadrant_of(self, processor: int) -> int:
        """Quadrant of a processor (§6: quadrant = p // 16)."""
        self._check_processor(processor)
        return processor // self.processors_per_quadrant

    def instance_of(self, processor: int) -> int:
        """Data-memory instance of a processor (§6: instance = p // 4)."""
        self._check_processor(processor)
        return processor // self.processors_per_instance

    def write_gap_allowed(self, out_passes: int, write_gap: int) -> bool:
        """out_passes * (write_gap + 1) <= 2^write_ptr_inc_bits (§1 `write_gap`, §7)."""
        return out_passes * (write_gap + 1) <= 1 << self.write_ptr_inc_bits

    def _check_processor(self, processor: int) -> None:
        if not 0 <= processor < self.processors:
            raise InputError(
                f"processor {processor} does not exist on {self.name}",
                hint=f"processors are 0..{self.processors - 1}",
            )


#: The MAX7800x record's name before the split (kept for branches in flight; new code names
#: ``Max7800xDevice`` for MAX7800x code and ``Capabilities`` for the shared stages).
Device = Max7800xDevice


MAX78000 = Max7800xDevice(
    name="MAX78000",
    die="AI85",
    instance_bytes=32768,  # §1 "Data memory per instance": 32 KiB
    data_base_addr=0x50400000,  # §1 "Data SRAM address"
    data_quadrant_stride=0x400000,
    data_instance_stride=0x8000,
    kernel_words_large=768,  # §1 "Weight memory per proc": 768 for every proc
    kernel_words_small=768,
    kernel_banks_large=(768,),  # §1 "Weight memory physical split": 1 x 768
    kernel_banks_small=(768,),
    kernel_base_addr=0x50180000,  # §1 "Kernel address"
    kernel_quadrant_stride=0x400000,
    kernel_processor_stride=0x4000,
    bias_entries_per_quadrant=512,  # §1 "Bias memory per quadrant"
    bias_base_addr=0x50108000,  # §1 "Bias address"
    bias_quadrant_stride=0x400000,
    bias_flatten_first=True,  # §4 "on MAX78000 flatten layers are placed first"
    max_layers=32,  # §1 "Max layers"
    max_row_col=1023,  # §1 "Max rows or columns" (manual)
    count_bits=10,  # §1 "Row/col register width"
    conv1d_dilation_max=1023,  # §1 "Conv dilation"
    conv1d_multipass_pad=True,  # §8 `conv1d.multipass_pad_allowed`
    depthwise=False,  # §1 "Groups": 1 only
    pool_dilation_max=1,  # §1 "Pool dilation"
    passthrough_pool_max_passes=1,  # §1 "Pool-only (passthrough) layer with > 1 pass"
    eltwise_multipass_plain_only=True,  # §1 "Element-wise with multi-pass"
    eltwise_multipass_conv_bias=True,
    write_ptr_inc_bits=4,  # §1 `write_gap`: <= 16
    binary_weights=False,  # §1 "Weight widths"
    streaming_final_layer_needs_pad=True,  # §1 "Streaming specifics"
    streaming_passthrough_allowed=True,
    cnn_clock_mhz=50.0,  # §1 "CNN clock default": PCLK 50 MHz
    pipeline=False,
    has_latency_model=True,  # §1 "Latency estimate in izer": yes
)

MAX78002 = Max7800xDevice(
    name="MAX78002",
    die="AI87",
    instance_bytes=81920,  # §1 "Data memory per instance": 80 KiB
    data_base_addr=0x51800000,
    data_quadrant_stride=0x1000000,
    data_instance_stride=0x20000,
    kernel_words_large=5120,  # §1: 5120 for procs 0,16,32,48
    kernel_words_small=4096,  # §1: 4096 for the others
    kernel_banks_large=(1024, 1024, 1024, 1024, 256, 256, 256, 256),  # §1, §8
    kernel_banks_small=(1024, 1024, 1024, 1024),
    kernel_base_addr=0x51400000,
    kernel_quadrant_stride=0x1000000,
    kernel_processor_stride=0x20000,
    bias_entries_per_quadrant=2048,  # §1: 4 x 512
    bias_base_addr=0x51180000,
    bias_quadrant_stride=0x1000000,
    bias_flatten_first=False,
    max_layers=128,
    max_row_col=2047,
    count_bits=11,
    conv1d_dilation_max=2047,
    conv1d_multipass_pad=False,  # §1 "Conv padding": Conv1d with > 64 in-channels: pad 0
    depthwise=True,
    pool_dilation_max=16,
    passthrough_pool_max_passes=65536,
    eltwise_multipass_plain_only=False,
    eltwise_multipass_conv_bias=False,  # §1: except in-flight eltwise + conv + multipass + bias
    write_ptr_inc_bits=8,  # §1 `write_gap`: <= 256
    binary_weights=True,
    speedups=True,
    snoop_registers=24,
    data_instance_blocks=5,
    streaming_final_layer_needs_pad=False,
    streaming_passthrough_allowed=False,
    streaming_new_rollover=True,
    cnn_clock_mhz=200.0,  # §1 "CNN clock default": PLL 200 MHz, pipeline on
    pipeline=True,
    has_latency_model=False,  # §1 "Latency estimate in izer": none
)

#: Every device cnnforge targets, in a stable order.
DEVICES: tuple[Max7800xDevice, ...] = (MAX78000, MAX78002)

#: What ``--device`` means when not given (the CLI reads it; below the CLI a device is passed).
DEFAULT_DEVICE: str = MAX78000.name
#: The MAX7800x names for help texts: "MAX78000, MAX78002".
DEVICE_NAMES: str = ", ".join(d.name for d in DEVICES)


def as_max7800x(device: Capabilities) -> Max7800xDevice:
    """``device`` as the MAX7800x record MAX7800x-only code needs (InputError for another
    target's record: its planner, memories and writers are the MAX7800x ones)."""
    if isinstance(device, Max7800xDevice):
        return device
    raise InputError(f"{device.name} is not a MAX7800x part", hint=f"choose one of {DEVICE_NAMES}")


def get_device(name: str | Max7800xDevice) -> Max7800xDevice:
    """The MAX7800x device called ``name`` (case-insensitive; a record is returned as is).
    Every target, the FPGA and generic ones included: ``pipeline.targets.resolve_device``."""
    if isinstance(name, Max7800xDevice):
        return name
    for device in DEVICES:
        if str(name).strip().upper() in (device.name, device.die):
            return device
    known = ", ".join(d.name for d in DEVICES)
    raise InputError(f"unknown device {name!r}", hint=f"choose one of {known}")
