"""Accelerator state ({address: word}) back to hardware layers: registers.py / kernels.py / bias.py
read the other way (docs/firmware.md's table); bad values are DecodeErrors naming the register."""

from __future__ import annotations

from dataclasses import dataclass, field

from cnnforge.arithmetic import implicit_shift
from cnnforge.targets.max7800x.firmware.bias import stream_skip
from cnnforge.targets.max7800x.firmware.decode_depthwise import DepthwiseReadError, channel_bias
from cnnforge.targets.max7800x.firmware.eltwise import ELTWISE_FN
from cnnforge.targets.max7800x.firmware.regmap import FIFO_CTL, MAPS, RegisterMap, get

WEIGHT_BITS = {0: 8, 1: 1, 2: 2, 3: 4}  # the weight_size field (regmap.FIELDS)


class DecodeError(ValueError):
    """A register value the hardware cannot hold, or two that contradict each other."""


@dataclass
class DecodedLayer:
    """One hardware layer as its registers say it."""

    index: int
    op: str  # conv2d / conv1d / convtranspose2d / passthrough
    in_map: int
    out_base: int  # first output processor's instance (a multiple of 4)
    out_span: int  # output processors from out_base (the highest one's distance + 1)
    in_offset: int
    out_offset: int
    in_dims: tuple[int, int]
    padding: tuple[int, int]
    kernel: tuple[int, int]  # (0, 0): a 2D kernel whose size the MAX78000 registers do not hold
    pool: tuple[int, int]
    pool_dilation: tuple[int, int]
    pool_stride: tuple[int, int]
    pool_avg: bool
    stride: tuple[int, int]
    relu: bool
    abs: bool
    wide: bool
    chw: bool
    weight_bits: int
    output_shift: int
    in_expand: int  # flatten: the low 4 bits of (passes x pooled pixels - 1), + 1
    out_expand: int
    write_gap: int
    flatten: bool
    flatten_prod: int  # passes x pooled pixels - 1 when flatten needs the long TRAM (>= 16)
    kernel_start: int  # first kernel column
    kernel_field: int  # mcnt start field (start column x 9 / kernel size x 8)
    kernel_end: int  # mcnt end field (kernel count - 1) x bits + start x 8
    tptr: int
    timeslots: int
    bias_quadrant: int | None
    bias_offset: int
    bias: list[int] = field(default_factory=list)  # signed, from the first entry the layer reads
    kernels: dict[int, bytes] = field(default_factory=dict)  # processor -> the layer's columns
    streaming: bool = False  # its rollover (FIFO input) or, after the first, stream start/deltas
    fifo: bool = False  # the first layer: its input arrives through the FIFOs (FIFO/CTL control)
    operands: int = 1  # element-wise: the operands it combines (interleaved at its read pointer)
    eltwise: str = ""  # add / sub / or / xor ("" without an element-wise operation)
    pool_first: bool = True  # element-wise with pooling: pool each operand, then combine
    # per quadrant the layer reads: (quadrant, first output processor of its write pointer)
    out_bases: tuple[tuple[int, int], ...] = ()
    depthwise: bool = False  # one kernel per channel (groups = channels)
    broadcast: bool = False  # depthwise: writes where it reads
    # depthwise: per quadrant the first bias entry of its slice (registers: entry / 4 when
    # broadcasting); its bias, per channel (decode_depthwise.py)
    slices: tuple[tuple[int, int], ...] = ()
    channel_bias: list[int] | None = None
    binary: bool = False  # 1-bit weights that mean -1 (bit set) / +1 (MAX78002, quadrant control)
    # MAX78002 speed-ups (speedups.py): calcx4 (its kernel columns in quarters of the memory:
    # ``physical`` holds its processors' columns as loaded, recover.py orders them), read-ahead
    calcx4: bool = False
    read_ahead: bool = False
    tcalc: bool = False
    physical: dict[int, dict[int, bytes]] = field(default_factory=dict)

    @property
    def processors(self) -> int:
        return self.in_map.bit_count()


def _bits(value: int, lo: int, width: int) -> int:
    return value >> lo & ((1 << width) - 1)


def layer_count(state: dict[int, int], rmap: RegisterMap) -> tuple[int, list[int]]:
    """(layers, quadrants in use) from the quadrants' LCNT registers."""
    groups = [q for q in range(4) if state.get(rmap.ctl(q, 0), 0) & 1 << 3]
    if not groups:
        raise DecodeError(f"register 0x{rmap.ctl(0, 0):08x}: no quadrant's clocks are on")
    counts = {state.get(rmap.ctl(q, 2), 0) for q in groups}
    if len(counts) > 1:
        raise DecodeError(
            f"register 0x{rmap.ctl(groups[1], 2):08x}: the quadrants' layer counts differ "
            f"({sorted(counts)})"
        )
    last = counts.pop()
    if last >= rmap.max_layers:
        raise DecodeError(
            f"register 0x{rmap.ctl(groups[0], 2):08x}: last layer {last} past the device's "
            f"{rmap.max_layers}"
        )
    return last + 1, groups


def decode_state(
    state: dict[int, int],
    device: str,
    records: list[tuple[int, list[int]]] | None = None,
    start: dict[int, int] | None = None,
) -> list[DecodedLayer]:
    """Every hardware layer of a state; ``records`` (the kernel loader's) make kernels exact where
    the host state overlaps them; ``start``: cnn_start's quadrant-control stores."""
    rmap = MAPS[device]
    layers, groups = layer_count(state, rmap)
    out = [_layer(state, rmap, i, groups) for i in range(layers)]
    for i in range(layers):
        _check_in_order(_Registers(state, rmap, i, groups), layers)
    ctl = rmap.ctl(groups[0], 0)
    if get(state.get(ctl, 0) | (start or {}).get(ctl, 0), "ctl_binary"):  # 1-bit: binary
        for ly in out:  # (the vendor tool refuses 1-bit and binary layers in one network)
            ly.binary = ly.op != "passthrough" and ly.weight_bits == 1
    _streaming(state, rmap, out, groups)
    if rmap.cnt_diff_offs is not None:
        _refine_rows(out)
    _kernels(state, rmap, out, records)
    _bias(state, rmap, out)
    return out


def _streaming(
    state: dict[int, int], rmap: RegisterMap, layers: list[DecodedLayer], groups: list[int]
) -> None:
    """Streaming layers (a rollover, or after the first a stream start / deltas; they come first,
    in a row) and FIFO input (FIFO control or the quadrant's FIFO bit): stream.py read back."""
    idx = rmap.layer_index
    # MAX78002: the streaming registers follow one another per layer, so only the first layers
    # (8: the distance to the next register) have their own; the later ones alias theirs.
    most = len(layers)
    if rmap.stream_layer_stride:
        gap = (idx["stream_delta"] - idx["stream_start"]) * rmap.register_stride
        most = gap // rmap.stream_layer_stride
    for ly in layers[:most]:
        reg = _Registers(state, rmap, ly.index, groups)
        moves = ly.index > 0 and any(reg(n) for n in ("stream_start", "stream_delta"))
        ly.streaming = bool(reg("rollover")) or moves
    last = max((ly.index for ly in layers if ly.streaming), default=-1)
    for ly in layers[: max(last, 0)]:
        if not ly.streaming:
            raise DecodeError(
                f"register 0x{rmap.layer(groups[0], ly.index, 'stream_start'):08x}: layer "
                f"{ly.index} does not stream, layer {last} after it does"
            )
    ctl = state.get(rmap.ctl(groups[0], 0), 0)
    fifos = get(state.get(FIFO_CTL, 0), "fifo_enable")
    if layers:
        layers[0].fifo = bool(fifos or get(ctl, "ctl_fifo"))


@dataclass(frozen=True)
class _Registers:
    """Layer ``i``'s registers in ``state`` (read in its first quadrant unless one is named)."""

    state: dict[int, int]
    rmap: RegisterMap
    i: int
    groups: list[int]

    def __call__(self, name: str, q: int | None = None) -> int:
        if name not in self.rmap.layer_index:
            return 0
        return self.state.get(self.rmap.layer(self.groups[0] if q is None else q, self.i, name), 0)

    def error(self, name: str, what: str) -> DecodeError:
        """A DecodeError naming the register ``name`` of this layer."""
        return DecodeError(
            f"register 0x{self.rmap.layer(self.groups[0], self.i, name):08x}: {what}"
        )

    @property
    def ai87(self) -> bool:
        return self.rmap.cnt_diff_offs is not None


def _check_in_order(reg: _Registers, layers: int) -> None:
    """Refuse a MAX78002 next-layer link (bit 7) past the next layer or a stop (bit 8) before the
    last (the vendor's conditional execution): cnnforge decodes layers that run in order only."""
    nxt = reg("next")
    target = nxt & 0x7F
    if nxt >> 7 & 1 and target != reg.i + 1:
        raise reg.error("next", f"layer {reg.i} links to layer {target} (layer links and "
                        "conditional execution are not decoded: layers run in order only)")
    if nxt >> 8 & 1 and reg.i != layers - 1:
        raise reg.error("next", f"layer {reg.i} stops the network before its last layer "
                        f"{layers - 1} (not decoded: layers run in order only)")


def _operation(reg: _Registers, in_map: int, masks: int) -> str:
    """conv2d / conv1d / convtranspose2d / passthrough (a computing layer enables masks)."""
    post, oned = reg("post"), reg("oned")
    # a depthwise convolution's time-slot bit sits where a passthrough's bits do
    conv = get(post, "passthrough") == 0 or bool(get(post, "depthwise"))
    if conv and not masks and in_map:
        raise reg.error("ena", f"layer {reg.i} computes but enables no kernel masks")
    if get(post, "transposed"):
        return "convtranspose2d"
    if get(oned, "conv1d"):
        return "conv1d"
    return "conv2d" if conv else "passthrough"


def depthwise_fields(reg: _Registers, in_map: int) -> tuple[bool, bool, tuple]:
    """(depthwise, broadcast, bias slices: per quadrant whose post register enables its bias,
    (quadrant, first entry)) of a layer (depthwise.py read back)."""
    if not get(reg("post"), "depthwise"):
        return False, False, ()
    broadcast = bool(get(reg("lctl"), "broadcast"))
    slices = []
    for q in reg.groups:
        post = reg("post", q)
        if in_map >> 16 * q & 0xFFFF and get(post, "bias_enable"):
            slices.append((q, get(post, "bias_offset") * (4 if broadcast else 1)))
    return True, broadcast, tuple(slices)


def packed_outputs(ly: DecodedLayer) -> int:
    """The processors a packing layer writes (a passthrough; a depthwise layer that does not
    broadcast): per quadrant its channels in a row from its write pointer's lane."""
    bases = dict(ly.out_bases)
    first = (ly.in_map & -ly.in_map).bit_length() - 1 if ly.in_map else 0
    out = 0
    for q in range(4):
        mine = ly.in_map >> 16 * q & 0xFFFF
        if mine:
            base = bases.get(q, ly.out_base + 16 * (q - first // 16))
            lane = 0 if ly.depthwise else ((mine & -mine).bit_length() - 1) % 4
            out |= ((1 << mine.bit_count()) - 1) << (base + lane)
    return out


def _eltwise(reg: _Registers, conv: bool) -> tuple[int, str, bool]:
    """(operands, operation, pool first) of the 1D register's element-wise bits (eltwise.py):
    (1, "", True) without an element-wise operation."""
    oned = reg("oned")
    if not get(oned, "eltwise_ena"):
        return 1, "", True
    operands = get(oned, "eltwise_operands") + 1
    if operands < 2:
        raise reg.error("oned", f"layer {reg.i} combines {operands} operand element-wise")
    if bool(get(oned, "eltwise_conv")) != conv:
        what = f"layer {reg.i}: the element-wise 'convolution follows' bit contradicts the op"
        raise reg.error("oned", what)
    fn = {v: k for k, v in ELTWISE_FN.items()}[get(oned, "eltwise_fn")]
    return operands, fn, bool(get(oned, "eltwise_pool_first"))


def _kernel_shape(reg: _Registers, op: str) -> tuple[int, int]:
    """The kernel size; (0, 0) for a passthrough."""
    lctl, oned, rmap = reg("lctl"), reg("oned"), reg.rmap
    if op == "passthrough":
        return (0, 0)
    if op == "conv1d":
        return (get(oned, "conv1d_kernel"), 1)
    if get(oned, "one_by_one"):
        return (1, 1)
    if rmap.cprime_max_offs is not None:
        return (_bits(lctl, rmap.rprime_max_offs, 4) + 1, _bits(lctl, rmap.cprime_max_offs, 4) + 1)
    return (3, 3)  # the MAX78000's only 2D kernel besides 1x1


def _pooling(reg: _Registers) -> tuple[list[int], list[int]]:
    """(pool size, pool dilation) per axis; the pooling flag must agree with the size."""
    rmap = reg.rmap
    pool, dil = [], []
    for name in ("pool_rows", "pool_cols"):
        val = reg(name)
        d = _bits(val, rmap.cnt_inc_offs, 4) + 1 if rmap.cnt_inc_offs is not None else 1
        low = val & ((1 << (rmap.cnt_inc_offs or 16)) - 1)
        if low % d:
            raise reg.error(name, f"pooling {low} is not a multiple of the dilation {d}")
        pool.append(low // d + 1)
        dil.append(d)
    pooling = bool(get(reg("lctl"), "pooling"))
    if pooling != (pool != [1, 1]):
        what = f"layer {reg.i} pooling flag {int(pooling)} contradicts pooling {pool[0]}x{pool[1]}"
        raise reg.error("lctl", what)
    return pool, dil


def _strides(reg: _Registers, op: str, pooling: bool) -> tuple[tuple[int, int], tuple[int, int]]:
    """(pool stride, convolution stride) from the one register, the pooling's: a layer that does
    not pool steps as a 1x1 pooling of that stride would."""
    del pooling
    offs = reg.rmap.mp_stride_offs
    s = reg("stride") & ((1 << offs) - 1 if offs is not None else 0xFFFF)
    pool_stride, stride = (1, 1), (1, 1)
    if op == "convtranspose2d":
        stride = (2, 2)  # the hardware's only transposed stride
    elif s > 0:
        pool_stride = (s + 1, s + 1)
    if op == "conv1d":  # one dimension: the columns' counts are 1
        pool_stride, stride = (pool_stride[0], 1), (stride[0], 1)
    return pool_stride, stride


def _dims_and_pads(
    reg: _Registers, pool: list[int], dil: list[int]
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Input rows/columns and padding from the row and column count registers."""
    rmap = reg.rmap
    dims, pads = [], []
    for axis, name in ((0, "rows"), (1, "cols")):
        val = reg(name)
        if reg.ai87:  # count - difference | difference (rows: a multi-pass stride, not theirs)
            pad = _bits(val, rmap.pad_cnt_offs, 2) + 1 if val >> rmap.pad_ena_offs & 1 else 0
            low = val & ((1 << rmap.pad_cnt_offs) - 1)
            diff = val >> rmap.cnt_diff_offs if axis == 1 else 0
            # rows: the smallest count the pooling window fits (refined from the writer of the
            # layer's input in decode_state)
            size = low + diff if axis == 1 else low + pool[axis] + dil[axis] - 1
        else:
            pad = _bits(val, rmap.pad_cnt_offs, 2)
            size = (val & 0xFFFF) - 2 * pad + 1
        if size < 1:
            raise reg.error(name, f"layer {reg.i} {name} {size}")
        dims.append(size)
        pads.append(pad)
    return (dims[0], dims[1]), (pads[0], pads[1])


def _output_place(reg: _Registers, in_map: int) -> tuple[int, int]:
    """(first output instance, output offset in bytes) from the write pointer of a quadrant
    the layer reads."""
    first_q = (in_map & -in_map).bit_length() - 1
    wptr = reg("wptr_base", reg.groups[0] if first_q < 0 else first_q // 16)
    out_offset = (wptr & ((1 << reg.rmap.write_ptr_shift) - 1)) * 4
    out_base = (wptr >> reg.rmap.write_ptr_shift) * 4
    if out_base >= 64:
        raise reg.error("wptr_base", f"layer {reg.i} writes past the data memory")
    return out_base, out_offset


def _expansion(reg: _Registers, conv: bool, wide: bool) -> tuple[int, int]:
    """(output passes, write gap): the write pointer's skip and channel offset registers, or
    a passthrough's mask count."""
    lctl2 = reg("lctl2")
    skip = get(lctl2, "wptr_skip") & ((1 << reg.rmap.xpch_max_offs - 4) - 1)
    choffs = reg("wptr_choffs")
    write_gap = choffs // (4 if wide else 1) - 1 if choffs else (skip if not conv else 0)
    if conv:
        if not choffs:
            return 1, skip
        return (skip + 1) // (write_gap + 1), write_gap
    return reg("mcnt2" if reg.ai87 else "mcnt") // 8 + 1, write_gap


def _unquartered(index: int, rmap: RegisterMap) -> int:
    """The column whose place in the calcx4 quartered memory is ``index``
    (speedups.quarter_index read back)."""
    small, large = rmap.kernel_columns_small, rmap.kernel_columns_large
    if index < small:
        quarter, rest = divmod(index, small // 4)
        return rest * 4 + quarter
    quarter, rest = divmod(index - small, (large - small) // 4)
    return small + rest * 4 + quarter


def _kernel_fields(reg: _Registers, conv: bool) -> tuple[int, int]:
    """The mask count's (start, end) fields; zero for a passthrough."""
    if not conv:
        return 0, 0
    if reg.ai87:
        return reg("mcnt2"), reg("mcnt1")
    mcnt = reg("mcnt")
    return mcnt >> 16, mcnt & 0xFFFF


def _bias_place(reg: _Registers) -> tuple[int | None, int]:
    """(quadrant, offset) of the layer's bias: the quadrant whose post register enables it
    (a depthwise layer's slices: decode_depthwise.py)."""
    bias_q, bias_offset = None, 0
    if get(reg("post"), "depthwise"):
        return bias_q, bias_offset
    for q in reg.groups:
        p = reg("post", q)
        if get(p, "bias_enable"):
            bias_q, bias_offset = q, get(p, "bias_offset")
    if get(reg("post"), "bias_enable") and bias_q is None:
        bias_q = reg.groups[0]
    return bias_q, bias_offset


def _output_shift(post: int, conv: bool, quant: int) -> int:
    """The checkpoint's output shift: the register adds narrow weights' own, 8 - bits."""
    shift = get(post, "shift")
    shift = -(shift & 15) if shift & 16 else shift
    return shift - implicit_shift(quant) if conv else shift


def _kernel_place(
    reg: _Registers, conv: bool, calcx4: bool, kernel: tuple[int, int]
) -> tuple[int, int, int]:
    """(start field, end field, first kernel) of a layer's kernel columns."""
    kstart, kend = _kernel_fields(reg, conv)
    if calcx4:  # the start field names the first column in the quartered memory
        length = kend - kstart
        kstart = _unquartered(kstart // 8, reg.rmap) * 8
        kend = kstart + length
    ksize = kernel[0] * kernel[1]
    oned = reg("oned")
    kernel_start = (kstart // 8 * ksize + get(oned, "kernel_sad")) // 9 if conv and ksize else 0
    return kstart, kend, kernel_start


def _layer(state: dict[int, int], rmap: RegisterMap, i: int, groups: list[int]) -> DecodedLayer:
    """Layer ``i`` as the registers of its quadrants ``groups`` say it."""
    reg = _Registers(state, rmap, i, groups)
    in_map = masks = 0
    for q in groups:
        ena = reg("ena", q)
        in_map |= (ena & 0xFFFF) << 16 * q
        masks |= ena >> 16
    post, lctl, lctl2, oned = reg("post"), reg("lctl"), reg("lctl2"), reg("oned")
    op = _operation(reg, in_map, masks)
    conv = op != "passthrough"
    flatten_prod = get(post, "flatten_high") << 4 if get(post, "flatten") else 0
    flatten = bool(flatten_prod)
    kernel = _kernel_shape(reg, op)
    pool, dil = _pooling(reg)
    pooling = pool != [1, 1]
    pool_stride, stride = _strides(reg, op, pooling)
    dims, pads = _dims_and_pads(reg, pool, dil)
    quant = WEIGHT_BITS[get(post, "weight_size")] if conv else 8
    shift = _output_shift(post, conv, quant)
    out_base, out_offset = _output_place(reg, in_map)
    span = _bits(lctl2, rmap.xpch_max_offs, 9) // quant + 1 if conv else 0
    wide = bool(get(lctl, "wide"))
    out_expand, write_gap = _expansion(reg, conv, wide)
    calcx4 = conv and bool(get(post, "calcx4"))
    kstart, kend, kernel_start = _kernel_place(reg, conv, calcx4, kernel)
    bias_q, bias_offset = _bias_place(reg)
    if calcx4 and bias_q is not None and not get(post, "depthwise"):
        bias_offset *= 4  # the entry / 4: a calcx4 layer's bias starts at a multiple of 4
    operands, eltwise, pool_first = _eltwise(reg, conv)
    out_bases = tuple((q, (reg("wptr_base", q) >> rmap.write_ptr_shift) * 4) for q in groups
                      if in_map >> 16 * q & 0xFFFF)  # fmt: skip
    depthwise, broadcast, slices = depthwise_fields(reg, in_map)
    return DecodedLayer(
        index=i, op=op, in_map=in_map, out_base=out_base, out_span=span,
        in_offset=reg("rptr_base") * 4, out_offset=out_offset,
        in_dims=dims, padding=pads, kernel=kernel,
        pool=(pool[0], pool[1]), pool_dilation=(dil[0], dil[1]), pool_stride=pool_stride,
        pool_avg=pooling and not get(lctl, "max_pool"), stride=stride, relu=bool(get(lctl, "relu")),
        abs=bool(get(post, "abs")), wide=wide, chw=bool(get(lctl, "chw")), weight_bits=quant,
        output_shift=shift, in_expand=get(lctl2, "in_expand") + 1, out_expand=out_expand,
        write_gap=write_gap, flatten=flatten,
        flatten_prod=flatten_prod | (get(lctl2, "in_expand") if flatten else 0),
        kernel_start=kernel_start, kernel_field=kstart, kernel_end=kend, tptr=reg("tptr"),
        timeslots=get(oned, "timeslots"), bias_quadrant=bias_q, bias_offset=bias_offset,
        operands=operands, eltwise=eltwise, pool_first=pool_first or not pooling,
        out_bases=out_bases, depthwise=depthwise, broadcast=broadcast, slices=slices,
        calcx4=calcx4, read_ahead=bool(get(lctl, "read_ahead")), tcalc=bool(get(post, "tcalc")),
    )  # fmt: skip


def out_rows(layer: DecodedLayer) -> int:
    """Rows a layer writes (stride 1 or a transposed stride 2)."""
    pooled = (layer.in_dims[0] - layer.pool[0] - layer.pool_dilation[0] + 1) // layer.pool_stride[
        0
    ] + 1
    if layer.op == "passthrough":
        return pooled
    if layer.op == "convtranspose2d":
        return 2 * pooled
    return pooled + 2 * layer.padding[0] - layer.kernel[0] + 1


def _refine_rows(layers: list[DecodedLayer]) -> None:
    """MAX78002: a pooling stride leaves a layer's rows known up to the stride; the layer that
    wrote its input (the last one before it writing at its read offset) knows them."""
    for ly in layers:
        if ly.pool_stride[0] <= 1:
            continue
        for src in reversed(layers[: ly.index]):
            if src.out_offset == ly.in_offset:
                rows = out_rows(src)
                if ly.in_dims[0] <= rows < ly.in_dims[0] + ly.pool_stride[0]:
                    ly.in_dims = (rows, ly.in_dims[1])
                break


def kernel_columns(layer: DecodedLayer) -> int:
    """Columns per processor of a weight layer (kernels.py ``_counts``, read back)."""
    if layer.op == "passthrough":
        return 0
    q = layer.weight_bits
    kc = (layer.kernel_end - layer.kernel_field) // q + 1
    ksize = 1 if layer.flatten else layer.kernel[0] * layer.kernel[1]
    qfactor = 8 // q
    res = (kc % qfactor) * ksize * (qfactor - 1)
    return (kc * ksize * q + res + 71) // 72


def _kernel_error(rmap: RegisterMap, ly: DecodedLayer, p: int, n: int) -> DecodeError:
    name = "mcnt2" if "mcnt2" in rmap.layer_index else "mcnt"
    return DecodeError(
        f"register 0x{rmap.layer(0, ly.index, name):08x}: layer {ly.index} kernel columns "
        f"{ly.kernel_start}..{ly.kernel_start + n - 1} past processor {p}'s "
        f"{rmap.kernel_columns(p)}"
    )


def _kernels(
    state: dict[int, int],
    rmap: RegisterMap,
    layers: list[DecodedLayer],
    records: list[tuple[int, list[int]]] | None,
) -> None:
    """Each weight layer's kernel columns per input processor: exact from the loader's records
    (weights.h), else each run's words up to the next run's address (the host keeps the last)."""
    cols = _recorded_columns(rmap, records or [])
    for p in range(64):
        for ly in layers:  # calcx4: the processor's columns as loaded (recover.py orders them)
            if ly.calcx4 and ly.in_map >> p & 1:
                ly.physical[p] = {c: b for (q, c), b in cols.items() if q == p}
        mine = sorted(
            (ly for ly in layers if ly.in_map >> p & 1 and ly.op != "passthrough"
             and not ly.calcx4),
            key=lambda ly: ly.kernel_start,
        )  # fmt: skip
        runs = _runs(rmap, p, mine)
        if records is None:
            for k, (first, end) in enumerate(runs):
                limit = runs[k + 1][0] if k + 1 < len(runs) else first + 3 * (end - first)
                words = min(limit - first, (9 * (end - first) + 3) // 4)
                raw = _stream(state, rmap.kernel(p, 0) | first * 4, 4 * words)
                for c in range(len(raw) // 9):
                    cols[p, first + c] = raw[9 * c : 9 * c + 9]
        for ly in mine:
            out = b""
            for c in range(ly.kernel_start, ly.kernel_start + kernel_columns(ly)):
                if (p, c) not in cols and records is None:
                    break  # overwritten on the host by the next run's words
                # a column no record loads holds no kernel the layer uses (the slot of an
                # output processor it skips): zeros
                out += cols.get((p, c), bytes(9))
            ly.kernels[p] = out


def _recorded_columns(
    rmap: RegisterMap, records: list[tuple[int, list[int]]]
) -> dict[tuple[int, int], bytes]:
    """(processor, column) -> 9 bytes: a record's big-end words from its first column on."""
    cols: dict[tuple[int, int], bytes] = {}
    for addr, words in records:
        p, col = _kernel_address(rmap, addr)
        raw = b"".join(int(w).to_bytes(4, "big") for w in words)
        for k in range(len(raw) // 9):
            cols[p, col + k] = raw[9 * k : 9 * k + 9]
    return cols


def _runs(rmap: RegisterMap, p: int, mine: list[DecodedLayer]) -> list[list[int]]:
    """Processor ``p``'s runs of kernel columns [first, end) (layers by first column); a layer
    past the processor's kernel memory is a DecodeError."""
    runs: list[list[int]] = []
    for ly in mine:
        n = kernel_columns(ly)
        if ly.kernel_start + n > rmap.kernel_columns(p):
            raise _kernel_error(rmap, ly, p, n)
        if runs and ly.kernel_start <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], ly.kernel_start + n)
        else:
            runs.append([ly.kernel_start, ly.kernel_start + n])
    return runs


def _kernel_address(rmap: RegisterMap, addr: int) -> tuple[int, int]:
    """(processor, first column) of a loader record's address."""
    for p in range(64):
        base = rmap.kernel(p, 0)
        if base <= addr < base + rmap.kernel_processor_stride:
            return p, (addr - base) // 4
    raise DecodeError(f"kernel record address 0x{addr:08x} is outside the kernel memory")


def _stream(state: dict[int, int], addr: int, nbytes: int) -> bytes:
    words = (nbytes + 3) // 4
    raw = b"".join(state.get(addr + 4 * i, 0).to_bytes(4, "big") for i in range(words))
    return raw[:nbytes]


def _bias(state: dict[int, int], rmap: RegisterMap, layers: list[DecodedLayer]) -> None:
    for ly in layers:
        if ly.slices:
            out_map = ly.in_map if ly.broadcast else packed_outputs(ly)
            channels = ly.in_map.bit_count() * ly.in_expand
            try:
                ly.channel_bias = channel_bias(state, rmap, ly.in_map, out_map, channels, ly.slices)
            except DepthwiseReadError as exc:
                q = ly.slices[0][0]
                raise DecodeError(
                    f"register 0x{rmap.layer(q, ly.index, 'post'):08x}: layer {ly.index} "
                    f"depthwise bias: {exc}"
                ) from None
        if ly.bias_quadrant is None:
            continue
        # a streaming first layer's bias starts one entry late on the MAX78000 (bias.py)
        skip = stream_skip(ly.index, ly.streaming, rmap)
        n = ly.out_span * ly.out_expand
        if ly.bias_offset + skip + n > rmap.bias_entries:
            raise DecodeError(
                f"register 0x{rmap.layer(ly.bias_quadrant, ly.index, 'post'):08x}: layer "
                f"{ly.index} bias entries {ly.bias_offset + skip}.."
                f"{ly.bias_offset + skip + n - 1} past {rmap.bias_entries}"
            )
        vals = [
            state.get(rmap.bias(ly.bias_quadrant, ly.bias_offset + skip + k), 0) & 0xFF
            for k in range(n)
        ]
        ly.bias = [v - 256 if v > 127 else v for v in vals]
