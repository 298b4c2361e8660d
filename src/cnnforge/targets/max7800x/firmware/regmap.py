"""The CNN accelerator's register and memory map per device (docs/firmware.md), absolute addresses;
quadrant ``q`` repeats its block at ``q * quadrant_stride``."""

from __future__ import annotations

from dataclasses import dataclass

from cnnforge.targets.max7800x.device import MAX78000, MAX78002

APB_BASE = 0x5000_0000
# Layer registers (index into the per-layer register file) and what they hold.
LAYER_REGISTERS = (
    "next",  # MAX78002 only: next layer / stop
    "rows",  # row count (+ padding), MAX78002: pooling difference and pad enable
    "cols",  # column count, likewise
    "oned",  # time-slot count, 1x1 / 1D mode, element-wise operation
    "pool_rows",  # pooling rows - 1 (times dilation)
    "pool_cols",
    "stride",  # stride - 1 (pool stride when pooling), MAX78002: multi-pass stride
    "wptr_base",  # SRAM write pointer: instance and word offset of the output
    "wptr_toffs",  # write pointer time-slot offset (1x1 convolutions, pooling-only layers)
    "wptr_moffs",  # write pointer mask offset
    "wptr_choffs",  # write pointer multi-pass channel offset
    "rptr_base",  # SRAM read pointer: word offset of the input
    "lctl",  # layer control: ReLU, pooling, CHW input, master/slave quadrants, 32-bit output
    "lctl2",  # layer control 2: output processors x weight bits, passes, write-pointer skip
    "mcnt",  # MAX78000: kernel memory start << 16 | end (in 8-bit kernel bytes x 8)
    "mcnt1",  # MAX78002: kernel memory end
    "mcnt2",  # MAX78002: kernel memory start
    "ochan",  # MAX78002: output channel count - 1
    "tptr",  # TRAM pointer max
    "ena",  # mask enables << 16 | processor enables (this quadrant's 16 processors)
    "post",  # post-processing: bias enable and offset, output shift, weight-size shift, flags
    "stream_start",  # streaming: words that must arrive before the layer starts
    "stream_delta",  # streaming: the read pointer's steps, per column and per row
    "rollover",  # streaming: the circular input buffer's length in words (FMAX)
)
# MAX78002: these follow one another per layer (4 bytes apart), not per register.
STREAM_REGISTERS = ("stream_start", "stream_delta", "rollover")

# Bit fields of the layer registers that sit at the same place on both devices: name ->
# (register, lowest bit, width). registers.py writes them with ``put``, decode.py reads them with
# ``get`` (docs/firmware.md: the layer-register table, read both ways). Fields whose place depends
# on the device are the RegisterMap's ``*_offs`` below.
FIELDS: dict[str, tuple[str, int, int]] = {
    "in_expand": ("lctl2", 0, 4),  # passes - 1 (flatten: low 4 bits of passes x pixels - 1)
    "wptr_skip": ("lctl2", 4, 8),  # write-pointer skip, up to xpch_max_offs
    "chw": ("lctl", 6, 1),
    "pooling": ("lctl", 7, 1),
    "max_pool": ("lctl", 8, 1),
    "relu": ("lctl", 9, 1),
    "master_slave": ("lctl", 11, 1),
    "sources": ("lctl", 12, 4),  # other quadrants that compute, and the bias quadrant
    "wide": ("lctl", 16, 1),  # 32-bit output
    "timeslots": ("oned", 0, 4),
    "kernel_sad": ("oned", 4, 4),  # first kernel within a column
    "one_by_one": ("oned", 8, 1),
    "conv1d_kernel": ("oned", 8, 4),
    "conv1d": ("oned", 12, 1),
    "eltwise_ena": ("oned", 13, 1),  # element-wise operation over the operands
    "eltwise_fn": ("oned", 14, 2),  # 0 sub, 1 add, 2 or, 3 xor (eltwise.py)
    "eltwise_pool_first": ("oned", 16, 1),  # pool each operand, then combine
    "eltwise_conv": ("oned", 17, 1),  # a convolution follows the element-wise operation
    "eltwise_operands": ("oned", 18, 4),  # operands - 1
    "bias_offset": ("post", 0, 11),
    "bias_enable": ("post", 12, 1),
    "shift": ("post", 13, 5),  # bit 4 set: a right shift of the low 4 bits
    "flatten_high": ("post", 18, 4),  # passes x pixels - 1, >> 4
    "weight_size": ("post", 22, 2),  # 1-bit: 1, 2-bit: 2, 4-bit: 3, 8-bit: 0
    "passthrough": ("post", 24, 2),  # 3: pooling-only layer, 1: element-wise only
    "abs": ("post", 26, 1),
    "flatten": ("post", 27, 1),
    "transposed": ("post", 28, 1),
    "timeslot_enable": ("post", 24, 1),  # depthwise (with bit 30)
    "calcx4": ("post", 29, 1),  # MAX78002: four output channels at once (firmware/speedups.py)
    "depthwise": ("post", 30, 1),
    "tcalc": ("post", 31, 1),  # MAX78002: the pass counter in steps of 4
    "read_ahead": ("lctl", 17, 1),  # MAX78002: read the next input ahead
    "read_ahead_passes": ("lctl", 26, 4),  # with read-ahead: passes - 1 (tcalc: / 4)
    "broadcast": ("lctl", 29, 1),  # depthwise: output processors = input processors
    "tram_max": ("tptr", 0, 16),  # TRAM words the layer uses - 1 (+ the streaming layers' before)
    "tram_start": ("tptr", 16, 16),  # streaming: TRAM words of the streaming layers before it
    # Streaming (widths: the MAX78002's; the MAX78000 holds 14, 12 and 17 bits).
    "stream_start": ("stream_start", 0, 15),  # input words before the layer may start
    "stream_invol": ("stream_delta", 0, 4),  # streaming: input passes of the layers before it
    "stream_delta1": ("stream_delta", 4, 5),  # words the read pointer advances per column step
    "stream_delta2": ("stream_delta", 16, 14),  # words it advances at the end of a row
    "rollover": ("rollover", 0, 18),  # circular buffer length in words (a multiple of passes)
    # Quadrant control (RegisterMap.ctl(q, 0)): cnn_init's stop and cnn_start's go.
    "ctl_enable": ("ctl", 0, 1),  # run (the master quadrant: go)
    "ctl_clocks": ("ctl", 3, 1),
    "ctl_chw_stream": ("ctl", 6, 1),  # MAX78002: CHW input into a streaming first layer
    "ctl_master": ("ctl", 9, 2),  # the master quadrant's number (the others follow it)
    "ctl_ext_sync": ("ctl", 11, 1),  # wait for the master quadrant
    "ctl_streaming": ("ctl", 14, 1),  # some layer streams
    "ctl_fifo": ("ctl", 15, 1),  # the input arrives through the FIFOs
    "ctl_fifo_streaming": ("ctl", 19, 1),  # FIFO input feeds a streaming first layer
    "ctl_mexpress": ("ctl", 20, 1),  # the express kernel loader
    "ctl_binary": ("ctl", 30, 1),  # MAX78002: some layer has binary (-1/+1) weights
    # The FIFO control register (FIFO_CTL, APB_BASE + 0): the vendor's --fifo.
    "fifo_ready_sel": ("fifo_ctl", 0, 2),  # wait states (the vendor's --ready-sel-fifo, 0)
    "fifo_setting_a": ("fifo_ctl", 2, 2),  # the vendor writes 2 (not documented further)
    "fifo_setting_b": ("fifo_ctl", 7, 2),  # the vendor writes 2 (not documented further)
    "fifo_cpl": ("fifo_ctl", 11, 1),  # MAX78000: required (the vendor's REQUIRE_FIFO_CPL)
    "fifo_enable": ("fifo_ctl", 12, 4),  # bit k: FIFO k feeds processor 16 k onward
}

# The FIFOs' registers (the vendor's C_FIFO_BASE = 0): control, status (bit k: FIFO k full),
# and one data register per FIFO.
FIFO_CTL = APB_BASE
FIFO_STAT = APB_BASE + 4
FIFO_DATA = APB_BASE + 8  # + 4 k for FIFO k
# Quadrant control register number of the input frame size (words the FIFOs deliver).
CTL_IFRM = {MAX78000.name: 612, MAX78002.name: 0x42018}


def put(name: str, value: int) -> int:
    """``value`` placed in field ``name`` of its register."""
    return value << FIELDS[name][1]


def get(word: int, name: str) -> int:
    """Field ``name`` of a register's ``word``."""
    _, lo, width = FIELDS[name]
    return word >> lo & ((1 << width) - 1)


@dataclass(frozen=True)
class RegisterMap:
    """Where a device keeps its CNN registers and memories."""

    device: str
    quadrant_stride: int  # C_GROUP_OFFS
    ctl_base: int  # C_CNN_BASE: quadrant control registers (CTL, SRAM, LCNT, SRAM test)
    layer_base: int  # first layer register (C_CNN_BASE + C_CNN * 4)
    layer_index: dict[str, int]  # register -> index
    layer_stride: int  # bytes between layers of one register (MAX78000) or of one layer (002)
    register_stride: int  # bytes between registers of one layer
    bias_base: int  # C_BRAM_BASE: one 32-bit word per 8-bit bias entry
    kernel_base: int  # C_MRAM_BASE
    kernel_processor_stride: int  # MASK_OFFS * 16 bytes per processor
    sram_base: int  # C_SRAM_BASE
    instance_stride: int  # INSTANCE_SIZE * 16 bytes per data-memory instance
    instance_words: int  # INSTANCE_SIZE: 32-bit words per instance
    write_ptr_shift: int  # WRITE_PTR_SHIFT: instance number in the write pointer
    kernel_columns_small: int  # MASK_WIDTH_SMALL: 72-bit columns per processor
    kernel_columns_large: int  # MASK_WIDTH_LARGE: processors 0/16/32/48 (MAX78002)
    kernel_mem_offs: int  # MASK_OFFS: columns between processors in the address space
    bias_entries: int  # BIAS_SIZE per quadrant
    max_layers: int
    # Field positions that differ between the devices.
    pad_cnt_offs: int
    pad_ena_offs: int | None
    cnt_diff_offs: int | None
    cnt_inc_offs: int | None
    mp_stride_offs: int | None
    xpch_max_offs: int
    rprime_max_offs: int | None
    cprime_max_offs: int | None
    require_reg_clear: bool  # MAX78002: cnn_init clears the registers and waits for it
    supports_pipeline: bool  # MAX78002: CTL bit 5 disables the pipeline
    flatten_bias_first: bool  # MAX78000 places flatten layers' bias first
    stream_bias_ok: bool
    require_fifo_cpl: bool = False  # MAX78000: FIFO control bit 11 (REQUIRE_FIFO_CPL)
    stream_layer_stride: int = 0  # MAX78002: the streaming registers' own layer stride
    new_streaming: bool = False  # MAX78002: the stream registers' other formulas (stream.py)
    mlator_reg: int = 1024  # REG_MLAT: the quadrant control register the mlator is read at
    # MAX78002: a depthwise layer's kernels stay in one memory instance (REQUIRE_WEIGHT_MASK) of
    # kernel_bank_large columns below kernel_columns_small, kernel_bank_small above
    # MAX78002: average pooling right after an element-wise layer needs a reset layer before it
    # (REQUIRE_PASSTHROUGH_AVGPOOL_AFTER_ELTWISE; firmware/eltwise.py)
    avgpool_reset_after_eltwise: bool = False
    weight_mask_banks: bool = False
    kernel_bank_large: int = 0
    kernel_bank_small: int = 256

    def ctl(self, quadrant: int, reg: int) -> int:
        """Address of quadrant control register ``reg`` (0 CTL, 1 SRAM, 2 LCNT, 3 SRAM test)."""
        return APB_BASE + quadrant * self.quadrant_stride + self.ctl_base + 4 * reg

    def layer(self, quadrant: int, layer: int, name: str) -> int:
        """Address of layer register ``name`` of hardware layer ``layer``."""
        index = self.layer_index[name]
        stride = self.layer_stride
        if name in STREAM_REGISTERS and self.stream_layer_stride:
            stride = self.stream_layer_stride
        return (
            APB_BASE
            + quadrant * self.quadrant_stride
            + self.layer_base
            + index * self.register_stride
            + layer * stride
        )

    def bias(self, quadrant: int, entry: int = 0) -> int:
        return APB_BASE + quadrant * self.quadrant_stride + self.bias_base + 4 * entry

    def kernel(self, processor: int, column: int) -> int:
        """Address of 72-bit kernel column ``column`` of ``processor`` (16 bytes per column)."""
        q, p = divmod(processor, 16)
        return (
            APB_BASE
            + q * self.quadrant_stride
            + self.kernel_base
            + p * self.kernel_processor_stride
            + 16 * column
        )

    def sram(self, processor: int, byte_offset: int) -> int:
        """Address of ``byte_offset`` in the data-memory instance of ``processor``."""
        q, p = divmod(processor, 16)
        return (
            APB_BASE
            + q * self.quadrant_stride
            + self.sram_base
            + (p // 4) * self.instance_stride
            + byte_offset
        )

    def kernel_columns(self, processor: int) -> int:
        return self.kernel_columns_large if processor % 16 == 0 else self.kernel_columns_small


_AI85_INDEX = dict(
    rows=0, cols=1, oned=2, pool_rows=3, pool_cols=4, stride=5, wptr_base=6, wptr_toffs=7,
    wptr_moffs=8, wptr_choffs=9, rptr_base=10, lctl=11, mcnt=12, tptr=13, ena=14, post=15,
    stream_start=16, stream_delta=17, rollover=18, lctl2=20,
)  # fmt: skip
_AI87_INDEX = dict(
    next=0, rows=1, cols=2, oned=3, pool_rows=4, pool_cols=5, stride=6, wptr_base=7,
    wptr_toffs=8, wptr_moffs=9, wptr_choffs=10, rptr_base=11, lctl=12, lctl2=13, mcnt1=14,
    mcnt2=15, ochan=16, tptr=17, ena=18, post=19,
    stream_start=0x2000, stream_delta=0x2008, rollover=0x2010,
)  # fmt: skip

MAPS = {
    MAX78000.name: RegisterMap(
        MAX78000.name,
        0x40_0000,
        0x10_0000,
        0x10_0010,
        _AI85_INDEX,
        4,
        4 * 32,
        0x10_8000,
        0x18_0000,
        0x400 * 16,
        0x40_0000,
        0x800 * 16,
        0x800,
        13,
        0x300,
        0x300,
        0x400,
        0x200,
        32,
        16,
        None,
        None,
        None,
        None,
        8,
        None,
        None,
        False,
        False,
        True,
        False,
        require_fifo_cpl=True,
    ),
    MAX78002.name: RegisterMap(
        MAX78002.name,
        0x100_0000,
        0x100_0000,
        0x110_0000,
        _AI87_INDEX,
        0x100,
        4,
        0x118_0000,
        0x140_0000,
        0x2000 * 16,
        0x180_0000,
        0x2000 * 16,
        0x2000,
        15,
        0x1000,
        0x1400,
        0x2000,
        0x800,
        128,
        13,
        15,
        16,
        4,
        4,
        12,
        22,
        18,
        True,
        True,
        False,
        True,
        stream_layer_stride=4,
        new_streaming=True,
        mlator_reg=0x44000,
        avgpool_reset_after_eltwise=True,
        weight_mask_banks=True,
        kernel_bank_large=1024,
        kernel_bank_small=256,
    ),
}
