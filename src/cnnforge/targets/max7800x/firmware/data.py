"""The sample input as data-memory words, and the known-answer table of the output.

Input (not through the FIFOs): HWC packs the (up to) four channels of one instance into a word
per pixel, passes interleaved per pixel; CHW keeps each channel in its own instance, four pixels
per word. Known answers: per output pixel and instance, the word the last layer writes (8-bit:
four channels' bytes, masked to the processors that hold one; 32-bit: a word per channel),
sorted by mask then address and grouped into runs (address, mask, count, values...), 0 ends.
Learned from the vendor tool's input loader, unload code and register writer.
"""

from __future__ import annotations

import numpy as np

from cnnforge.targets.max7800x.firmware.facts import LayerFacts
from cnnforge.targets.max7800x.firmware.regmap import APB_BASE, RegisterMap


def _ffs(x: int) -> int:
    return (x & -x).bit_length() - 1


def input_blocks(f: LayerFacts, x: np.ndarray, rmap: RegisterMap) -> list[tuple[int, np.ndarray]]:
    """(address, 32-bit words) blocks that put the sample ``x`` (C, H, W) where ``f`` reads."""
    return [(addr, words) for _, addr, words in processor_blocks(f, x, rmap)]


def processor_blocks(
    f: LayerFacts, x: np.ndarray, rmap: RegisterMap
) -> list[tuple[int, int, np.ndarray]]:
    """``input_blocks`` with the processor each block is named after, as the vendor names its
    arrays (``SAMPLE_INPUT_<p>``): CHW, the channel's processor; HWC, the first processor of
    the group of four whose data-memory instance holds the block. A first element-wise layer
    (``f.operands`` > 1) reads its operands interleaved: word ``(pixel x passes + pass) x
    operands + k`` holds operand k's channels (ir.Layer.split_operands)."""
    x = np.asarray(x).astype(np.int64).reshape(x.shape[0], -1)
    channels, pixels = x.shape
    u8 = (x & 0xFF).astype(np.uint32)
    blocks = []
    if f.chw:
        if f.in_expand > 1:
            raise NotImplementedError("multi-pass CHW input")
        procs = [p for p in range(64) if f.in_map >> p & 1]
        for c, p in enumerate(procs[:channels]):
            data = np.concatenate([u8[c], np.zeros(-pixels % 4, np.uint32)]).reshape(-1, 4)
            words = data[:, 0] | data[:, 1] << 8 | data[:, 2] << 16 | data[:, 3] << 24
            blocks.append((p, rmap.sram(p, f.in_offset), words.astype(np.uint32)))
        return blocks
    thresh = f.in_expand_thresh
    # A first element-wise layer reads its operands interleaved: the input's consecutive channel
    # groups (split), or the whole input again for each operand (`in_sequences` [-1, -1]).
    k_all, per_operand = f.operands, f.in_channels
    c = 0
    per_instance: dict[int, list[np.ndarray]] = {}
    for ch in range(0, 64 * f.in_expand, 4):
        lanes = (f.in_map >> (ch % 64)) & 0xF
        if not lanes:
            continue
        for k in range(k_all):  # pixel-major, then passes, then operands
            words = np.zeros(pixels, np.uint32)
            this_c = c
            for i in range(4):
                if lanes >> i & 1:
                    if this_c < per_operand:
                        words |= u8[(k * per_operand) % channels + this_c] << (8 * i)
                    this_c += 1
            per_instance.setdefault(ch % 64, []).append(words)
        c += lanes.bit_count()
        if c >= thresh * f.in_expand:
            break
    for p, passes in sorted(per_instance.items()):
        merged = np.stack(passes, axis=1).reshape(-1)  # pixel-major, passes interleaved
        blocks.append((p, rmap.sram(p, f.in_offset), merged.astype(np.uint32)))
    return blocks


def fifo_blocks(f: LayerFacts, x: np.ndarray) -> list[np.ndarray]:
    """The words each FIFO carries for the sample ``x`` (C, H, W), FIFO k feeding quadrant k's first
    processors: HWC, per pixel the (up to) four channels of the quadrant's processors 0-3 in one
    word; CHW, one channel per FIFO, four pixels per word (the vendor tool's input loader)."""
    x = np.asarray(x).astype(np.int64).reshape(x.shape[0], -1)
    channels, pixels = x.shape
    u8 = (x & 0xFF).astype(np.uint32)
    quadrants = [q for q in range(4) if f.in_map >> (16 * q) & (1 if f.chw else 0xF)]
    out = []
    if f.chw:
        for c, _ in zip(range(channels), quadrants, strict=False):
            data = np.concatenate([u8[c], np.zeros(-pixels % 4, np.uint32)]).reshape(-1, 4)
            out.append(data[:, 0] | data[:, 1] << 8 | data[:, 2] << 16 | data[:, 3] << 24)
        return [w.astype(np.uint32) for w in out]
    _check_hwc_fifo_lanes(f.in_map, channels)
    for j, q in enumerate(quadrants[: (channels + 3) // 4]):
        lanes = f.in_map >> (16 * q) & 0xF
        words = np.zeros(pixels, np.uint32)
        for b in range(4):  # a lane without a processor skips its channel, as the vendor's
            if lanes >> b & 1 and 4 * j + b < channels:
                words |= u8[4 * j + b] << (8 * b)
        out.append(words)
    return out


def _check_hwc_fifo_lanes(in_map: int, channels: int) -> None:
    """HWC through the FIFOs: one word carries channels 4k..4k+3 to quadrant k's processors
    0-3; the layer reads channel c on its c-th input processor. Where the two differ (input
    processors spread over the quadrants), a channel would be dropped or misplaced: refused."""
    procs = [p for p in range(64) if in_map >> p & 1][:channels]
    carried = [16 * (c // 4) + c % 4 for c in range(channels)]
    if procs != carried:
        raise NotImplementedError(
            f"HWC input through the FIFOs on processors {in_map:#018x}: channels go to "
            f"processors {procs} but the FIFO words carry them to {carried} (HWC FIFO input "
            "must use processors 0-3 of the first quadrants)"
        )


def known_answers(
    outputs: list[tuple[LayerFacts, np.ndarray]], rmap: RegisterMap, max_count: int | None = None
) -> np.ndarray:
    """The known-answer table of the output layers: (layer, its output (C, H, W)) pairs."""
    parts = [_checks(f, y, rmap) for f, y in outputs]
    masks = np.concatenate([m for m, _, _ in parts])
    addrs = np.concatenate([a for _, a, _ in parts])
    values = np.concatenate([v for _, _, v in parts])
    order = np.lexsort((addrs, masks))
    return _table(masks[order], addrs[order], values[order], max_count)


def _checks(f: LayerFacts, y: np.ndarray, rmap: RegisterMap) -> tuple[np.ndarray, ...]:
    """(masks, addresses, values) of every output word of layer ``f``, for all pixels at once:
    the channel-to-word mapping is the same for every pixel."""
    y = np.asarray(y).astype(np.int64)
    y = y.reshape(y.shape[0], -1)
    channels, pixels = y.shape
    out_size = 4 if f.wide else 1
    width = f.out_expand * out_size
    start = _ffs(f.out_map) & ~3
    step = 4 * width * (f.write_gap + 1)  # bytes between pixels
    pix = np.arange(pixels, dtype=np.int64)
    masks, addrs, values = [], [], []
    this_map, poffs, c = f.out_map >> start, start, 0
    while c < channels:
        if c % f.out_expand_thresh == 0:
            poffs, this_map = start, f.out_map >> start
        this_c, expand, proc = c, c // f.out_expand_thresh, poffs & ~3
        lanes = []  # (lane, channel) for the lanes that hold a processor
        for i in range(4):
            if this_map & 1:
                lanes.append((i, c))
                c += 1
            this_map >>= 1
        base = rmap.sram(proc, f.out_offset + 4 * expand * out_size * (f.write_gap + 1))
        if lanes:
            n = min(c - this_c, channels - this_c)
            if out_size == 1:
                val = np.zeros(pixels, np.int64)
                for i, ch in lanes:
                    if ch < channels:
                        val |= (y[ch] & 0xFF) << (8 * i)
                mask = 0xFFFFFFFF
                if n != 4:
                    mask = ((1 << (8 * n)) - 1) << (8 * (_ffs(f.out_map >> proc) % 4))
                masks.append(np.full(pixels, mask, np.int64))
                addrs.append(base + step * pix)
                values.append(val & mask)
            else:
                vals = {
                    i: y[ch] if ch < channels else np.zeros(pixels, np.int64) for i, ch in lanes
                }
                for i in range(min(n, out_size)):
                    masks.append(np.full(pixels, 0xFFFFFFFF, np.int64))
                    addrs.append(base + step * pix + 4 * i)
                    values.append(vals.get(i, np.zeros(pixels, np.int64)) & 0xFFFFFFFF)
        poffs += 4
    if not masks:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    return np.concatenate(masks), np.concatenate(addrs), np.concatenate(values)


def _table(
    masks: np.ndarray, addrs: np.ndarray, values: np.ndarray, max_count: int | None
) -> np.ndarray:
    """Runs of consecutive addresses with one mask: (address, mask, count, values...), 0 ends.
    With ``max_count`` the table stops after the run holding word max_count + 1."""
    if max_count is not None:
        masks, addrs, values = (
            masks[: max_count + 1],
            addrs[: max_count + 1],
            values[: max_count + 1],
        )
    breaks = np.flatnonzero((np.diff(masks) != 0) | (np.diff(addrs) != 4)) + 1
    out: list[int] = []
    for lo, hi in zip(np.r_[0, breaks], np.r_[breaks, len(addrs)], strict=True):
        if hi > lo:
            out += [int(addrs[lo]), int(masks[lo]), int(hi - lo), *values[lo:hi].tolist()]
    out.append(0)
    return np.array(out, dtype=np.uint32)


def table_runs(table: np.ndarray) -> list[tuple[int, int]]:
    """The (address, count) runs of a known-answer table, in its order."""
    words = table.tolist()
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(words) and words[i] != 0:
        out.append((words[i], words[i + 2]))
        i += 3 + words[i + 2]
    return out


__all__ = [
    "APB_BASE",
    "fifo_blocks",
    "input_blocks",
    "known_answers",
    "processor_blocks",
    "table_runs",
]
