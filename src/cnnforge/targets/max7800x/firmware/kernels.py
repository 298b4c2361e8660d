"""Kernel memory: where each layer's weights go, the 72-bit columns they fill, the load stream.

A layer's kernels sit in the processors of its input mask, from one start column (a multiple of
4) for all of them: the lowest start where every used processor is free for the layer's length;
on the MAX78002, a layer whose input processors are all large (0/16/32/48) first tries the top
of the large memory. Layers whose input mask is all 64 processors are placed first. Columns hold
9 bytes; the first byte written lands in the column's last byte. The firmware loads the columns
with the "express" loader: per processor, each run of consecutive columns is one record (the
address with the column index in its low bits, the word count, the 9-byte columns packed big-end
first into 32-bit words). A layer whose kernels repeat an earlier layer's uses its columns
(dedup.py). Learned from the vendor tool's kernel packer and register writer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cnnforge.ir import BINARY_BITS
from cnnforge.targets.max7800x.firmware.dedup import kernel_duplicates
from cnnforge.targets.max7800x.firmware.facts import LayerFacts
from cnnforge.targets.max7800x.firmware.regmap import RegisterMap
from cnnforge.targets.max7800x.firmware.speedups import (
    calcx4_order,
    physical_columns,
    quarter_columns,
)

FREE = -1


def _ffs(x: int) -> int:
    return (x & -x).bit_length() - 1


def _fls(x: int) -> int:
    return x.bit_length() - 1


@dataclass
class KernelLayout:
    """Per layer: start column, length, kernel count; per processor: the columns' bytes."""

    offs: dict[int, int] = field(default_factory=dict)  # layer index -> first column
    length: dict[int, int] = field(default_factory=dict)  # columns per processor
    count: dict[int, int] = field(default_factory=dict)  # kernels per processor (kern_count)
    ochan: dict[int, int] = field(default_factory=dict)  # output-channel kernels (kern_ochan)
    owner: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int32))
    data: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 9), np.uint8))
    # calcx4 layers: layer index -> columns per quarter of kernel memory (speedups.py)
    quarters: dict[int, int] = field(default_factory=dict)


def _reshaped(f: LayerFacts) -> np.ndarray:
    """The weights as rows of kernels: (out * in, ksize); flatten: (out * T, pixels * passes).
    Binary weights (-1/+1) are stored as one bit: 1 for -1, 0 for +1."""
    w = np.asarray(f.weights).astype(np.int64)
    if f.weight_bits == BINARY_BITS:
        w = np.clip(w, -1, 0)
    if f.calcx4 and not f.flatten:
        w = calcx4_order(w)
    if f.flatten:
        t = f.in_expand_thresh
        return (
            w.reshape(f.out_channels, f.in_expand, -1)
            .swapaxes(1, 2)
            .reshape(f.out_channels * t, -1)
        )
    return w.reshape(-1, f.ksize)


def _counts(f: LayerFacts, rows: np.ndarray) -> tuple[int, int, int, int]:
    """(kc, kern_count, kern_ochan, kern_len) of a weight layer."""
    qfactor = 8 // f.quant
    in_exp = 1 if f.flatten else f.in_expand
    start_col = _ffs(f.out_map) % 4
    first_out = _ffs(f.out_map) - (start_col if f.out_expand > 1 else 0)
    if f.groups == 1:
        kc = (1 + _fls(f.out_map) - first_out) * f.out_expand * in_exp
        count = ochan = kc + start_col * f.out_expand * in_exp
    else:
        kc = in_exp
        count = kc + start_col * in_exp
        ochan = (1 + _fls(f.out_map) - first_out) * in_exp + start_col * in_exp
    if f.flatten:
        per = rows.shape[1]
        unused = (f.out_expand * f.out_map.bit_count() - f.out_channels) * per
        kc = kc * per - unused
        count = count * per - unused
        ochan = count
    ksize = 1 if f.flatten else f.ksize
    res = (kc % qfactor) * ksize * (qfactor - 1)
    length = (kc * ksize * f.quant + res + 71) // 72
    return kc, count, ochan, length


def layout(
    facts: list[LayerFacts], rmap: RegisterMap, duplicates: dict[int, int] | None = None
) -> KernelLayout:
    """Place and fill the kernels of every weight layer (``duplicates``: the layers that use an
    earlier layer's columns, as a firmware's registers say; default: dedup.py's choice)."""
    width = max(rmap.kernel_columns_large, rmap.kernel_columns_small)
    out = KernelLayout(
        owner=np.full((64, width), FREE, np.int32),
        data=np.zeros((64, width, 9), np.uint8),
    )
    used = np.zeros((64, width), np.int32)  # bytes filled per column
    order = [f for f in facts if f.in_map == (1 << 64) - 1] + [
        f for f in facts if f.in_map != (1 << 64) - 1
    ]
    same = kernel_duplicates(facts) if duplicates is None else duplicates
    for f in order:
        if not f.has_weights or f.index in same:
            continue
        rows = _reshaped(f)
        _, count, ochan, length = _counts(f, rows)
        after_plain = f.calcx4 and f.index > 0 and not facts[f.index - 1].calcx4
        offs = _find(f, length, out.owner, rmap, after_plain)
        out.offs[f.index], out.count[f.index], out.ochan[f.index] = offs, count, ochan
        if f.calcx4:
            out.quarters[f.index] = quarter_columns(f)
        fill = _fill_bytes if f.quant == 8 and not f.flatten and f.groups == 1 else _fill
        out.length[f.index] = fill(f, rows, offs, length, out, used)
    for index, first in same.items():  # the vendor's deduplicated kernels: the first's columns
        out.offs[index], out.count[index] = out.offs[first], out.count[first]
        out.ochan[index], out.length[index] = out.ochan[first], out.length[first]
        if first in out.quarters:
            out.quarters[index] = out.quarters[first]
    return out


def _find(
    f: LayerFacts, length: int, owner: np.ndarray, rmap: RegisterMap, after_plain: bool = False
) -> int:
    """The first column of the layer's kernels (``after_plain``: a calcx4 layer after one
    without: the vendor searches from the bottom only and takes 4 x the column it finds)."""
    procs = [p for p in range(64) if f.in_map >> p & 1]
    large = rmap.kernel_columns_large > rmap.kernel_columns_small and all(
        p % 16 == 0 for p in procs
    )
    one_bank = rmap.weight_mask_banks and f.groups > 1  # depthwise: one memory instance
    if large and (not one_bank or length <= rmap.kernel_bank_small) and not after_plain:
        top = _search(procs, rmap.kernel_columns_large - 1, length, owner, rmap, True, one_bank)
        if top >= 0:
            return (top - (length - 1)) & ~3
    start = _search(procs, 0, length, owner, rmap, False, one_bank)
    if start < 0:
        raise ValueError(f"layer {f.name}: kernel memory exhausted")
    start = (4 * start if after_plain else start + 3) & ~3
    if start + length > min(rmap.kernel_columns(p) for p in procs):  # only after 4 x
        raise NotImplementedError(
            f"calcx4 in layer {f.name}: 4 x its first kernel column passes the kernel memory"
        )
    return start


def _bank_mask(rmap: RegisterMap, col: int) -> int:
    """The vendor's memory-instance mask at column ``col``: the large instances below the small
    memory's end, the small ones above."""
    small = col + 1 >= rmap.kernel_columns_small
    return (rmap.kernel_bank_small if small else rmap.kernel_bank_large) - 1


def _in_one_bank(offs: int, length: int, rmap: RegisterMap, reverse: bool) -> int:
    """``offs`` moved so that the run of ``length`` columns stays in one memory instance (the
    vendor's search for depthwise kernels, quirks included); -1 where it cannot."""
    if reverse:
        mask = _bank_mask(rmap, offs - 1)
        if (offs - 1) & ~mask != (offs - length) & ~mask:
            offs &= ~mask
        return offs
    mask = _bank_mask(rmap, offs + 1)
    if (offs + 1) & ~mask != (offs + length) & ~mask:
        offs = ((offs + mask) & ~mask) - 1
    mask = _bank_mask(rmap, offs + 1)
    if (offs + 1) & ~mask != (offs + length) & ~mask:
        return -1
    return offs


def _search(
    procs: list[int],
    offs: int,
    length: int,
    owner: np.ndarray,
    rmap: RegisterMap,
    reverse: bool,
    one_bank: bool = False,
) -> int:
    """The vendor's greedy search: first (or last) aligned column free on all ``procs``
    (``one_bank``: the run inside one memory instance)."""
    step = -4 if reverse else 4

    def fits(p: int, o: int) -> bool:
        return o >= 0 if reverse else o + length <= rmap.kernel_columns(p)

    first = procs[0]
    while owner[first, offs] != FREE:
        offs += step
        if not fits(first, offs):
            return -1
    i = 0
    while i < len(procs):
        p = procs[i]
        if one_bank:
            offs = _in_one_bank(offs, length, rmap, reverse)
            if offs < 0:
                return -1
        span = range(offs, offs - length, -1) if reverse else range(offs, offs + length)
        for col in span:
            if owner[p, col] != FREE:
                offs = (col - 1) & ~3 if reverse else (col + 1 + 3) & ~3
                if not fits(p, offs):
                    return -1
                i = -1
                break
        i += 1
    return offs


def _fill(
    f: LayerFacts, rows: np.ndarray, offs: int, length: int, out: KernelLayout, used: np.ndarray
) -> int:
    """Write the layer's kernel bytes column by column; the layer's length (flatten: as filled)."""
    qfactor = 8 // f.quant
    proc_mask = (1 << qfactor) - 1
    in_exp = 1 if f.flatten else f.in_expand
    ksize = 1 if f.flatten else f.ksize
    start_col = _ffs(f.out_map) % 4
    this_map_init = f.out_map >> _ffs(f.out_map)

    def add(p: int, col_target: int, b: int) -> int:
        col = offs + col_target
        if used[p, col] == 0:
            out.owner[p, col] = f.index
        out.data[p, col, 8 - used[p, col]] = b & 0xFF
        used[p, col] += 1
        return col_target + 1 if used[p, col] == 9 else col_target

    for ch, p in enumerate(_input_processors(f)):
        m = 0
        col_target, col_bytes = divmod(start_col * ksize * in_exp, 9)
        for _ in range(col_bytes // qfactor):
            col_target = add(p, col_target, 0)
        for expand in range(f.out_expand if f.groups == 1 else 1):
            this_map = this_map_init
            if f.groups == 1:
                col, stop = expand * f.out_expand_thresh, (expand + 1) * f.out_expand_thresh
            else:
                col, stop = expand, expand + 1
            while col < stop:
                if this_map != 0:
                    while this_map & proc_mask == 0:
                        col_target += 1
                        this_map >>= qfactor
                this_map >>= qfactor
                for ie in range(in_exp):
                    for b in _pass_bytes(f, rows, ch, m, ie):
                        col_target = add(p, col_target, b)
                col += 1 if f.flatten else qfactor
                m += 1 if f.flatten else qfactor
        col_target = _past_partial(used, p, offs, col_target)
        while col_target - start_col < length:
            col_target = add(p, col_target, 0)
        if f.flatten:
            length = col_target
    return length


def _pass_bytes(f: LayerFacts, rows: np.ndarray, ch: int, m: int, ie: int) -> list[int]:
    """The bytes that input pass ``ie`` of input channel ``ch`` adds for output channel ``m``
    (and the next ones a byte packs below 8 bits), in the order they are written; zeros where
    the pass has no kernel."""
    bits = f.quant
    qfactor = 8 // bits
    in_exp = 1 if f.flatten else f.in_expand
    in_chan = f.in_expand_thresh if f.flatten else f.in_channels
    ksize = 1 if f.flatten else f.ksize
    value_mask = (1 << bits) - 1
    nrows = rows.shape[0]
    in_ch = in_chan * qfactor if f.flatten else in_chan
    src = ch + m * in_ch
    if not (ie * f.in_expand_thresh + ch < in_ch and src < nrows):
        return [0] * (ksize // qfactor)
    k = [] if f.flatten else np.zeros(ksize, np.int64)
    n = 0
    for i in range(qfactor):
        if m < f.out_channels:
            idx = n + ie * qfactor
            koffs = src + (idx % in_exp) * f.in_expand_thresh + (idx // in_exp) * in_chan
            if koffs < nrows:
                kern = rows[koffs] & value_mask
                if f.flatten:
                    k = list(k) + list(kern)
                else:
                    k |= kern << (i * bits)
            n += 1
    if not f.flatten:
        return [int(k[ksize - i - 1]) for i in range(ksize)]
    k = list(k) + [0] * (-len(k) % qfactor)
    packed = []
    for i in range(len(k) // qfactor):
        e = 0
        for j in range(qfactor):
            e |= int(k[i * qfactor + j]) << (j * bits)
        packed.append(e)
    return packed


def _input_processors(f: LayerFacts) -> list[int]:
    """The processors of the layer's input mask in order: processor ``p`` of index ``ch`` holds
    input channel ``ch``'s kernels."""
    return [p for p in range(64) if f.in_map >> p & 1]


def _past_partial(used: np.ndarray, p: int, offs: int, col_target: int) -> int:
    """The column target moved past a partly filled column (the padding starts on a fresh one)."""
    if offs + col_target < used.shape[1] and used[p, offs + col_target] > 0:
        return col_target + 1
    return col_target


def _fill_bytes(
    f: LayerFacts, rows: np.ndarray, offs: int, length: int, out: KernelLayout, used: np.ndarray
) -> int:
    """``_fill`` for 8-bit kernels, a run of whole kernels at a time (the same bytes, faster)."""
    ksize = f.ksize
    in_exp, t_in = f.in_expand, f.in_expand_thresh
    in_ch, nrows, out_ch = f.in_channels, rows.shape[0], f.out_channels
    start_col = _ffs(f.out_map) % 4
    table = np.concatenate(
        [(rows[:, ::-1] & 0xFF).astype(np.uint8), np.zeros((1, ksize), np.uint8)]
    )
    zero = nrows  # the row of zeros

    def put(p: int, col_target: int, data: np.ndarray) -> int:
        """Stream ``data`` into the columns from ``col_target`` on; the next column target."""
        if data.size == 0:
            return col_target
        first = offs + col_target
        k = int(used[p, first]) + np.arange(data.size)
        cols = first + k // 9
        out.data[p, cols, 8 - k % 9] = data
        out.owner[p, cols] = f.index
        total = int(used[p, first]) + data.size
        used[p, first : first + total // 9] = 9
        if total % 9:
            used[p, first + total // 9] = total % 9
        return col_target + total // 9

    segments = _out_segments(f)
    ie_offs = np.arange(in_exp) * t_in
    for ch, p in enumerate(_input_processors(f)):
        col_target, col_bytes = divmod(start_col * ksize * in_exp, 9)
        col_target = put(p, col_target, np.zeros(col_bytes, np.uint8))
        for lo, hi, gap in segments:
            ms = np.arange(lo, hi)
            src = ch + ms * in_ch
            koffs = src[:, None] + ie_offs[None, :]
            ok = (ie_offs + ch < in_ch)[None, :] & ((src < nrows) & (ms < out_ch))[:, None]
            picks = np.where(ok & (koffs < nrows), koffs, zero).reshape(-1)
            col_target = put(p, col_target, table[picks].reshape(-1)) + gap
        col_target = _past_partial(used, p, offs, col_target)
        put(p, col_target, np.zeros(9 * max(0, start_col + length - col_target), np.uint8))
    return length


def _out_segments(f: LayerFacts) -> list[tuple[int, int, int]]:
    """The output map's gaps, the same for every processor: runs of output channels [lo, hi)
    whose kernels stream back to back, then ``gap`` columns skipped."""
    segments: list[tuple[int, int, int]] = []
    m = lo = 0
    for _ in range(f.out_expand):
        this_map = f.out_map >> _ffs(f.out_map)
        for _ in range(f.out_expand_thresh):
            if this_map != 0 and this_map & 1 == 0:
                gap = 0
                while this_map & 1 == 0:
                    gap += 1
                    this_map >>= 1
                segments.append((lo, m, gap))
                lo = m
            this_map >>= 1
            m += 1
    segments.append((lo, m, 0))
    return segments


def load_records(
    kl: KernelLayout, rmap: RegisterMap, skip_zero: bool = False
) -> list[tuple[int, np.ndarray]]:
    """The express loader's records: (address with the column in its low bits, 32-bit words).
    ``skip_zero`` (--zero-sram: the memory is zeroed first) leaves out all-zero columns. A
    calcx4 layer's columns go to their place in the four quarters (speedups.py)."""
    records = []
    written = kl.owner != FREE
    if skip_zero:
        written &= kl.data.any(axis=2)
    for p in range(64):
        virtual = np.flatnonzero(written[p])
        if virtual.size == 0:
            continue
        place = physical_columns(kl.owner[p], kl.offs, kl.quarters, virtual, rmap)
        order = np.argsort(place, kind="stable")
        cols, data = place[order], kl.data[p, virtual[order]]
        runs = np.split(np.arange(cols.size), np.flatnonzero(np.diff(cols) != 1) + 1)
        for run in runs:
            raw = data[run].reshape(-1)
            raw = np.concatenate([raw, np.zeros(-raw.size % 4, np.uint8)])
            base = rmap.kernel(p, 0)
            records.append((base | (int(cols[run[0]]) * 4), raw.view(">u4").astype(np.uint32)))
    return records
