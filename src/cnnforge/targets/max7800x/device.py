"""The MAX78000 and MAX78002 as frozen records: ``Capabilities`` plus their own memories, each field
citing docs/hardware/devices.md (the vendor tool's value where it and the manual disagree, §9)."""

from __future__ import annotations

from dataclasses import dataclass

from cnnforge.devices import Capabilities
from cnnforge.errors import InputError


@dataclass(frozen=True, kw_only=True)
class Max7800xDevice(Capabilities):
    """One MAX7800x part: its capabilities plus processors, memories, streaming, clocks and
    addresses (docs/hardware/devices.md §1-§8), read only by this package."""

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
    # layer's input and output in different ones: speedups.py)
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
    Every target, the FPGA and generic ones included: ``api.targets.get_target``."""
    if isinstance(name, Max7800xDevice):
        return name
    for device in DEVICES:
        if str(name).strip().upper() in (device.name, device.die):
            return device
    known = ", ".join(d.name for d in DEVICES)
    raise InputError(f"unknown device {name!r}", hint=f"choose one of {known}")
