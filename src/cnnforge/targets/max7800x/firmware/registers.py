"""The register values of a planned network (cnn_init's and cnn_configure's), each with its meaning;
cases the writer does not cover raise NotImplementedError naming the feature (docs/firmware.md)."""

from __future__ import annotations

from dataclasses import dataclass

from cnnforge.arithmetic import implicit_shift
from cnnforge.ir import BINARY_BITS, Op
from cnnforge.targets.max7800x.device import get_device
from cnnforge.targets.max7800x.firmware.bias import BiasLayout
from cnnforge.targets.max7800x.firmware.depthwise import depthwise_refusal, depthwise_values
from cnnforge.targets.max7800x.firmware.eltwise import (
    avgpool_reset,
    eltwise_meaning,
    eltwise_oned,
    eltwise_refusal,
    multipass_values,
    reset_values,
)
from cnnforge.targets.max7800x.firmware.facts import LayerFacts
from cnnforge.targets.max7800x.firmware.kernels import KernelLayout
from cnnforge.targets.max7800x.firmware.regmap import CTL_IFRM, FIFO_CTL, RegisterMap, put
from cnnforge.targets.max7800x.firmware.speedups import speedup_values
from cnnforge.targets.max7800x.firmware.stream import (
    after_streams,
    fifo_control,
    frame_words,
    stream_values,
    tram_words,
)


@dataclass(frozen=True)
class Write:
    """One register write: address, value, and what it means."""

    addr: int
    value: int
    comment: str
    wait: bool = False  # instead: wait until the bits of ``value`` read back set
    check: bool = False  # instead: cnn_init fails when any bit of ``value`` reads back set


def _ffs(x: int) -> int:
    return (x & -x).bit_length() - 1


def _fls(x: int) -> int:
    return x.bit_length() - 1


def groups_used(facts: list[LayerFacts]) -> list[int]:
    """Quadrants that take part: any layer's input processors or the last layer's output."""
    used = facts[-1].out_map
    for f in facts:
        used |= f.in_map
    return [q for q in range(4) if used >> (16 * q) & 0xFFFF]


def unsupported(f: LayerFacts, device: str = "") -> str:
    """Why the writer cannot write this layer (on ``device``) yet ('' when it can)."""
    if eltwise_refusal(f, device):
        return eltwise_refusal(f, device)
    if depthwise_refusal(f):
        return depthwise_refusal(f)
    if f.calcx4 and f.has_weights and (f.groups > 1 or f.out_channels % 4):
        return "calcx4 in a depthwise convolution or one of output channels not in fours"
    if f.weight_bits == BINARY_BITS and device and not get_device(device).binary_weights:
        return f"binary (-1/+1) weights on the {device}"
    if f.weight_bits not in (8, 4, 2, 1, BINARY_BITS):
        return f"{f.weight_bits}-bit weights"
    return ""


def init_writes(
    facts: list[LayerFacts],
    rmap: RegisterMap,
    has_bias: bool,
    fifo: bool = False,
    zero_sram: bool = False,
) -> list[Write]:
    """cnn_init: stop, memory control, layer count (MAX78002: clear first); ``fifo``: FIFO input bit
    on; ``zero_sram`` (the vendor's --zero-sram): zero every quadrant's memories by BIST."""
    out = []
    groups = groups_used(facts)
    if rmap.require_reg_clear:  # clocks on (the pipeline stays on), then clear and wait
        out += [Write(rmap.ctl(q, 0), 1 << 3, f"quadrant {q}: enable clocks") for q in groups]
    out.append(Write(0x5000_1000, 0, "always-on control"))
    sram = [Write(rmap.ctl(q, 1), 0x40E, f"quadrant {q}: SRAM control") for q in groups]
    if rmap.require_reg_clear:
        out += sram
        # BIST zero: registers (12, 11, 7) and, when a layer has a bias, bias memory (10).
        clear = 1 << 12 | 1 << 11 | 1 << 7 | (1 << 10 if has_bias else 0)
        out += [Write(rmap.ctl(q, 3), clear, f"quadrant {q}: clear registers") for q in groups]
        out += [
            Write(rmap.ctl(q, 3), 1 << 25, f"quadrant {q}: wait for clear", True) for q in groups
        ]
        out += [Write(rmap.ctl(q, 3), 0, f"quadrant {q}: reset BIST") for q in groups]
    last = hardware_layers(facts, rmap)[-1]
    for q in groups:
        # Clocks on, express kernel loader, FIFOs on; the state machine stays stopped.
        stop = put("ctl_clocks", 1) | put("ctl_mexpress", 1) | put("ctl_fifo", fifo)
        what = "stop state machine" + (", FIFO input" if fifo else "")
        out.append(Write(rmap.ctl(q, 0), stop, f"quadrant {q}: {what}"))
        if not rmap.require_reg_clear:
            out.append(sram[groups.index(q)])
        out.append(Write(rmap.ctl(q, 2), last, f"quadrant {q}: last layer {last}"))
    return out + (_zero_sram(rmap) if zero_sram else [])


# The memory self-test (BIST) that zeroes a memory: (what, request, done bits, error bit), learned
# from the vendor tool's device description (BIST_*) and backend (--zero-sram).
_BIST = {
    False: (
        ("data memory", 1 << 0, 1 << 27 | 1 << 18, 1 << 14),
        ("mask (kernel) memory", 1 << 2, 1 << 27 | 1 << 19, 1 << 15),
        ("TRAM", 1 << 4, 1 << 27 | 1 << 20, 1 << 16),
        ("bias memory", 1 << 6, 1 << 27 | 1 << 21, 1 << 17),
    ),
    True: (  # MAX78002 (the part that clears its registers first)
        ("data memory", 1 << 12 | 1 << 0, 1 << 18, 1 << 14),
        ("mask (kernel) memory", 1 << 13 | 1 << 2, 1 << 19, 1 << 15),
        ("TRAM", 1 << 13 | 1 << 12 | 1 << 4, 1 << 20, 1 << 16),
        ("bias memory", 1 << 12 | 1 << 11 | 1 << 10 | 1 << 6, 1 << 21, 1 << 17),
    ),
}


def _zero_sram(rmap: RegisterMap) -> list[Write]:
    """Per memory: request the BIST in all four quadrants, wait for each, fail on an error bit,
    reset the test register."""
    out = []
    quadrants = range(4)
    for what, request, done, error in _BIST[rmap.require_reg_clear]:
        out += [Write(rmap.ctl(q, 3), request, f"quadrant {q}: zero {what}") for q in quadrants]
        out += [Write(rmap.ctl(q, 3), done, f"quadrant {q}: BIST done", True) for q in quadrants]
        out += [
            Write(rmap.ctl(q, 3), error, f"quadrant {q}: fail on BIST error", check=True)
            for q in quadrants
        ]
        out += [Write(rmap.ctl(q, 3), 0, f"quadrant {q}: reset BIST") for q in quadrants]
    return out


def layer_writes(
    facts: list[LayerFacts],
    rmap: RegisterMap,
    kl: KernelLayout,
    bl: BiasLayout,
    fifo: bool = False,
    in_channels: int = 0,
) -> list[Write]:
    """cnn_configure: every non-zero layer register of every used quadrant; with ``fifo`` the
    input frame size and, last, the FIFO control (``in_channels``: the network's input)."""
    out: list[Write] = []
    groups = groups_used(facts)
    hw = hardware_layers(facts, rmap)
    if hw[-1] >= rmap.max_layers:
        raise NotImplementedError(
            f"{hw[-1] + 1} hardware layers with the average-pool reset layers after element-wise "
            f"layers; the {rmap.device} runs {rmap.max_layers}"
        )
    for f in facts:
        why = unsupported(f, rmap.device)
        if why:
            raise NotImplementedError(f"layer {f.name}: {why}")
        for q in groups:
            values = _quadrant_values(facts, f, q, groups, rmap, kl, bl, fifo)
            if q == groups[0] and avgpool_reset(facts, f, rmap):  # its own layer before it
                out += _writes(rmap, q, hw[f.index] - 1, reset_values(values))
            out += _writes(rmap, q, hw[f.index], values)
            if fifo and f.index == 0:
                frame = frame_words(f)
                addr = rmap.ctl(q, CTL_IFRM[rmap.device])
                out.append(Write(addr, frame, f"layer 0 quadrant {q}: input frame: {frame} words"))
    if fifo:
        ctl = fifo_control(facts[0], in_channels, rmap)
        out.append(Write(FIFO_CTL, ctl, "FIFOs: control: enable the FIFOs that carry input"))
    return out


# The MAX78002's data-snooping / conditional-execution registers: the YAML's `snoop` word i
# goes to control register SNOOP_FIRST + i of every used quadrant (the first 24 exist; zero
# words are left as the register clear left them); docs/firmware.md "Quadrant control registers".
SNOOP_FIRST = 0x42020
_SNOOP_UNIT = (
    "address 1", "address 2", "data 1", "data 2", "count 1", "count 2", "control 1",
    "control 2", "data accumulator", "match hit accumulator", "match max accumulator",
    "match address",
)  # fmt: skip
SNOOP_NAMES = tuple(f"snoop {unit} {what}" for unit in (1, 2) for what in _SNOOP_UNIT)


def snoop_writes(
    snoop: tuple[int, ...], facts: list[LayerFacts], rmap: RegisterMap
) -> list[Write]:
    """The `snoop` registers' non-zero words, in every used quadrant."""
    return [
        Write(rmap.ctl(q, SNOOP_FIRST + i), value, f"quadrant {q}: {name}")
        for q in (groups_used(facts) if snoop else ())
        for i, (name, value) in enumerate(zip(SNOOP_NAMES, snoop, strict=False))
        if value
    ]


def hardware_layers(facts: list[LayerFacts], rmap: RegisterMap) -> list[int]:
    """Each layer's hardware layer number: its index plus the average-pool reset layers
    (eltwise.py) before it and its own."""
    out, added = [], 0
    for f in facts:
        added += avgpool_reset(facts, f, rmap)
        out.append(f.index + added)
    return out


def _writes(rmap: RegisterMap, q: int, layer: int, values: Values) -> list[Write]:
    """The non-zero ``values`` as writes to hardware layer ``layer`` of quadrant ``q``."""
    return [
        Write(rmap.layer(q, layer, name), value, f"layer {layer} quadrant {q}: {meaning}")
        for name, value, meaning in values
        if value
    ]


def _quadrant_values(
    facts: list[LayerFacts],
    f: LayerFacts,
    q: int,
    groups: list[int],
    rmap: RegisterMap,
    kl: KernelLayout,
    bl: BiasLayout,
    fifo: bool,
) -> Values:
    """Layer ``f``'s registers in quadrant ``q``: the plain ones, then what element-wise,
    depthwise and streaming layers change."""
    values = _layer_values(f, q, groups, rmap, kl, bl, len(facts))
    values = multipass_values(f, values, rmap.instance_words, rmap.device)
    values = depthwise_values(f, q, groups, values, rmap, bl.slices.get(f.index))
    values = speedup_values(f, values, f.quant, rmap)
    values += stream_values(facts, f, fifo, rmap)
    if f.streaming and f.index > 0:  # TRAM after the earlier streaming layers'
        values = [after_streams(facts, f) if v[0] == "tptr" else v for v in values]
    return values


def _timeslots(f: LayerFacts, q: int) -> int:
    procs = (f.in_map >> (16 * q) & 0xFFFF).bit_count()
    width = 32 if f.wide else 8
    if f.op is Op.PASSTHROUGH and procs:
        return (procs * width // 8 - 1) // 4
    return 0


Values = list[tuple[str, int, str]]  # (register name, value, what it means), in write order


def _layer_values(
    f: LayerFacts,
    q: int,
    groups: list[int],
    rmap: RegisterMap,
    kl: KernelLayout,
    bl: BiasLayout,
    layers: int,
) -> Values:
    """Layer ``f``'s registers in quadrant ``q``, in the vendor's order (zeros included: the
    caller writes the non-zero ones)."""
    vals: Values = []
    conv = f.op is not Op.PASSTHROUGH
    quant = f.quant if conv else 0  # a layer without weights has no weight width here
    flatten_prod = f.in_expand * f.pooled[0] * f.pooled[1] - 1 if f.flatten else 0
    if rmap.cnt_diff_offs is not None:
        vals.append(("next", 1 << 8 if f.index == layers - 1 and False else 0, "next layer"))
    vals += _window_counts(f, rmap)
    vals += _pooling_stride(f, rmap)
    vals += _pointers(f, q, rmap)
    vals += _layer_controls(f, q, groups, rmap, bl, quant, flatten_prod)
    vals += _kernel_memory(f, groups, rmap, kl, quant)
    vals += _tram_post(f, q, bl, quant, flatten_prod)
    return vals


def _window_counts(f: LayerFacts, rmap: RegisterMap) -> Values:
    """Rows and columns: the counts the convolution window walks (with padding)."""
    vals: Values = []
    ai87 = rmap.cnt_diff_offs is not None
    if f.flatten:
        in_row, in_col = f.pool
    elif f.op is Op.CONVTRANSPOSE2D:
        in_row, in_col = f.stride[0] * f.in_dims[0], f.stride[1] * f.in_dims[1]
    else:
        in_row, in_col = f.in_dims
    for axis, name, size in ((0, "rows", in_row), (1, "cols", in_col)):
        pad = f.padding[axis]
        if ai87:
            diff = (
                size
                - ((size - f.pool[axis] - f.pool_dilation[axis] + 1) // f.pool_stride[axis])
                * f.pool_stride[axis]
            )
            val = size - diff
            if axis == 0:
                col_diff = (
                    1
                    if f.op is Op.CONV1D
                    else (
                        in_col
                        - ((in_col - f.pool[1] - f.pool_dilation[1] + 1) // f.pool_stride[1])
                        * f.pool_stride[1]
                    )
                )
                diff = (col_diff + (f.pool_stride[0] - 1) * in_col) * f.operands * f.in_expand
            val |= diff << rmap.cnt_diff_offs
            if pad > 0:
                val |= 1 << rmap.pad_ena_offs | (pad - 1) << rmap.pad_cnt_offs
        else:
            val = (size - 1 | pad << rmap.pad_cnt_offs) + 2 * pad
        vals.append((name, val, f"{name}: {size} (pad {pad})"))
    return vals


def _pooling_stride(f: LayerFacts, rmap: RegisterMap) -> Values:
    """The pooling window (rows, columns) and the stride register."""
    vals: Values = []
    for axis, name in ((0, "pool_rows"), (1, "pool_cols")):
        val = (f.pool[axis] - 1) * f.pool_dilation[axis]
        if rmap.cnt_inc_offs is not None:
            val |= f.pool_dilation[axis] - 1 << rmap.cnt_inc_offs
        vals.append((name, val, f"pooling {name[5:]}: {f.pool[axis]}"))
    if f.op is Op.CONVTRANSPOSE2D:
        stride = 0
    elif f.pool_stride[0] > 1:
        stride = f.pool_stride[0] - 1
    else:
        stride = f.stride[0] - 1
    if rmap.mp_stride_offs is not None:
        stride |= f.pool_stride[0] * f.operands * f.in_expand << rmap.mp_stride_offs
    vals.append(("stride", stride, "stride"))
    return vals


def _pointers(f: LayerFacts, q: int, rmap: RegisterMap) -> Values:
    """Write pointer (the output's instance and word offset, its offsets) and read pointer."""
    vals: Values = []
    conv = f.op is not Op.PASSTHROUGH
    wptr = f.out_offset // 4
    instance = _ffs(f.out_map) & ~3 if conv else _passthrough_instance(f, q)
    wptr |= (instance % 4) * rmap.instance_words | (instance // 4) << rmap.write_ptr_shift
    vals.append(
        ("wptr_base", wptr, f"write pointer: offset 0x{f.out_offset:04x}, instance {instance // 4}")
    )
    toffs = 0
    if f.op in (Op.CONV2D, Op.LINEAR) and f.kernel == (1, 1):
        toffs = 1
    elif not conv:
        toffs = rmap.instance_words * 4 if f.in_map.bit_count() > 4 else rmap.instance_words
    vals.append(("wptr_toffs", toffs, "write pointer time-slot offset"))
    if conv:
        vals.append(("wptr_moffs", 1 << rmap.write_ptr_shift, "write pointer mask offset"))
    choffs = (32 if f.wide else 8) // 8 * (f.write_gap + 1) if f.out_expand > 1 else 0
    vals.append(("wptr_choffs", choffs, "write pointer multi-pass channel offset"))
    vals.append(("rptr_base", f.in_offset // 4, f"read pointer: offset 0x{f.in_offset:04x}"))
    return vals


def _layer_controls(
    f: LayerFacts,
    q: int,
    groups: list[int],
    rmap: RegisterMap,
    bl: BiasLayout,
    quant: int,
    flatten_prod: int,
) -> Values:
    """Layer control (ReLU, pooling, the quadrants that feed the first, kernel size) and layer
    control 2 (output processors x bits, input passes, write-pointer skip)."""
    conv = f.op is not Op.PASSTHROUGH
    pooling = f.pool[0] > 1 or f.pool[1] > 1
    lctl = put("relu", f.relu) | put("max_pool", not f.pool_avg) | put("pooling", pooling)
    lctl |= put("chw", f.chw) | 0x20 | put("master_slave", 1)
    if f.wide:
        lctl |= put("wide", 1)
    if conv and q == groups[0] and f.groups == 1:
        sources = 0
        for t in range(groups[0] + 1, 4):
            if f.in_map >> (16 * t) & 0xFFFF:
                sources |= 1 << t
        bq = bl.place.get(f.index, (None, 0))[0]
        if bq is not None and bq != q:
            sources |= 1 << bq
        lctl |= put("sources", sources)
    if rmap.cprime_max_offs is not None and conv:
        lctl |= f.kernel[0] - 1 << rmap.rprime_max_offs | f.kernel[1] - 1 << rmap.cprime_max_offs
    in_exp = flatten_prod & 0xF if f.flatten else f.in_expand - 1
    lctl2 = (_fls(f.out_map) - (_ffs(f.out_map) & ~3)) * quant << rmap.xpch_max_offs | put(
        "in_expand", in_exp
    )
    skip = f.out_expand * (f.write_gap + 1) - 1 if conv else f.write_gap
    lctl2 |= put("wptr_skip", skip)
    return [("lctl", lctl, "layer control"), ("lctl2", lctl2, "layer control 2")]


def _kernel_memory(
    f: LayerFacts, groups: list[int], rmap: RegisterMap, kl: KernelLayout, quant: int
) -> Values:
    """The kernel memory range (and, MAX78002, the output channel count), then the time slots
    with the 1x1 / 1D mode and the kernel's start within its column."""
    vals: Values = []
    conv = f.op is not Op.PASSTHROUGH
    oned_sad = 0
    if conv:
        kc = kl.count[f.index]
        klen = (kc - 1) * quant
        koffs, oned_sad = divmod(9 * kl.offs[f.index], f.kernel[0] * f.kernel[1])
        koffs *= 8
    else:
        klen = koffs = 0
    tscnt = max(_timeslots(f, g) for g in groups)
    if rmap.cnt_diff_offs is None:
        mcnt = koffs << 16 | klen + koffs if conv else (f.out_expand - 1) * 8
        vals.append(("mcnt", mcnt, "kernel memory start and end"))
    else:
        if conv:
            vals.append(("mcnt1", klen + koffs, "kernel memory end"))
            vals.append(("mcnt2", koffs, "kernel memory start"))
        else:
            vals.append(("mcnt2", (f.out_expand - 1) * 8, "kernel memory start"))
        ochan = kl.ochan[f.index] - 1 if conv else tscnt
        vals.append(("ochan", ochan, "output channel count - 1"))
    oned = tscnt
    if f.op is Op.CONV1D:
        oned |= put("conv1d_kernel", f.kernel[0]) | put("conv1d", 1)
    elif (f.op in (Op.CONV2D, Op.LINEAR) and f.kernel == (1, 1)) or (not conv and f.operands == 1):
        oned |= put("one_by_one", 1)
    oned |= put("kernel_sad", oned_sad) | eltwise_oned(f)
    vals.append(("oned", oned, "time slots, 1x1 / 1D mode" + eltwise_meaning(f)))
    return vals


def _tram_post(f: LayerFacts, q: int, bl: BiasLayout, quant: int, flatten_prod: int) -> Values:
    """TRAM pointer max; post-processing (weight-size shift, output shift, bias, flags); the
    mask and processor enables."""
    conv = f.op is not Op.PASSTHROUGH
    if f.op is Op.CONV1D or (f.op in (Op.CONV2D, Op.LINEAR) and f.kernel == (1, 1)):
        tptr = flatten_prod << 16 | (2 * flatten_prod + 1) if flatten_prod >= 16 else 0
    else:  # a pooling-only layer's TRAM word count is 1
        tptr = tram_words(f) - 1
    post = put("weight_size", {1: 1, 2: 2, 4: 3}.get(quant, 0) if conv else 0)
    # The register holds the checkpoint's shift plus the shift of narrow weights, 8 - bits
    # (docs/firmware.md, post-processing; binary weights count as 1 bit).
    shift = f.output_shift + (implicit_shift(f.weight_bits) if f.has_weights else 0)
    post |= put("shift", (-shift) | 16 if shift < 0 else shift)
    place = bl.place.get(f.index)
    if place is not None and q == place[0]:
        post |= put("bias_enable", 1) | put("bias_offset", place[1])
    if not conv:
        post |= put("passthrough", 3 if f.operands == 1 else 1)
    if f.abs:
        post |= put("abs", 1)
    if flatten_prod >= 16:
        post |= put("flatten", 1) | put("flatten_high", flatten_prod >> 4)
    if f.op is Op.CONVTRANSPOSE2D:
        post |= put("transposed", 1)
    ena = f.in_map >> (16 * q) & 0xFFFF
    if conv:
        ena |= ena << 16
    return [
        ("tptr", tptr, "TRAM pointer max"),
        ("post", post, "post-processing: shift, bias"),
        ("ena", ena, "mask and processor enables"),
    ]


def _passthrough_instance(f: LayerFacts, q: int) -> int:
    quad = f.out_map >> (16 * q) & 0xFFFF
    if quad:
        return _ffs(f.out_map & 0xFFFF << (16 * q)) & ~3
    return 0
