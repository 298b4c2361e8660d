"""The sample input as data-memory words, and the known-answer table of the output.

Input (not through the FIFOs): HWC packs the (up to) four channels of one instance into a word
per pixel, passes interleaved per pixel; CHW keeps each channel in its own instance, four pixels
per word. Known answers: per output pixel and instance, the word the last layer writes (8-bit:
four channels' bytes, masked to the processors that hold one; 32-bit: a word per channel),
sorted by mask then address and grouped into runs (address, mask, count, values...), 0 ends.
Learned from the vendor tool's izer/load.py, izer/unload.py and izer/apbaccess.py.
"""

from __future__ import annotations

import numpy as np

from cnnforge.targets.max7800x.firmware.facts import LayerFacts
from cnnforge.targets.max7800x.firmware.regmap import APB_BASE, RegisterMap


def _ffs(x: int) -> int:
    return (x & -x).bit_length() - 1


def input_blocks(f: LayerFacts, x: np.ndarray, rmap: RegisterMap) -> list[tuple[int, np.ndarray]]:
    """(address, 32-bit words) blocks that put the sample ``x`` (C, H, W) where ``f`` reads."""
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
            blocks.append((rmap.sram(p, f.in_offset), words.astype(np.uint32)))
        return blocks
    thresh = f.in_expand_thresh
    c = 0
    per_instance: dict[int, list[np.ndarray]] = {}
    for ch in range(0, 64 * f.in_expand, 4):
        lanes = (f.in_map >> (ch % 64)) & 0xF
        if not lanes:
            continue
        words = np.zeros(pixels, np.uint32)
        this_c = c
        for i in range(4):
            if lanes >> i & 1:
                if this_c < channels:
                    words |= u8[this_c] << (8 * i)
                this_c += 1
        per_instance.setdefault(ch % 64, []).append(words)
        c += lanes.bit_count()
        if c >= thresh * f.in_expand:
            break
    for p, passes in sorted(per_instance.items()):
        merged = np.stack(passes, axis=1).reshape(-1)  # pixel-major, passes interleaved
        blocks.append((rmap.sram(p, f.in_offset), merged.astype(np.uint32)))
    return blocks


def known_answers(
    outputs: list[tuple[LayerFacts, np.ndarray]], rmap: RegisterMap, max_count: int | None = None
) -> np.ndarray:
    """The known-answer table of the output layers: (layer, its output (C, H, W)) pairs."""
    checks: list[tuple[int, int, int]] = []
    for f, y in outputs:
        checks += _checks(f, y, rmap)
    return _table(sorted(checks), max_count)


def _checks(f: LayerFacts, y: np.ndarray, rmap: RegisterMap) -> list[tuple[int, int, int]]:
    """(mask, address, value) of every output word of layer ``f``."""
    y = np.asarray(y).astype(np.int64)
    y = y.reshape(y.shape[0], -1)
    channels, pixels = y.shape
    out_size = 4 if f.wide else 1
    width = f.out_expand * out_size
    start = _ffs(f.out_map) & ~3
    checks: list[tuple[int, int, int]] = []  # (mask, address, value)
    for doffs in range(pixels):
        this_map = f.out_map >> start
        poffs = start
        c = 0
        while c < channels:
            if c % f.out_expand_thresh == 0:
                poffs, this_map = start, f.out_map >> start
            this_c = c
            expand = c // f.out_expand_thresh
            proc = poffs & ~3
            vals = [0] * 4
            present = False
            for i in range(4):
                if this_map & 1:
                    present = True
                    if c < channels:
                        vals[i] = int(y[c, doffs])
                    c += 1
                this_map >>= 1
            word = (doffs * width + expand * out_size) * (f.write_gap + 1)
            addr = rmap.sram(proc, f.out_offset + 4 * word)
            if present:
                n = min(c - this_c, channels - this_c)
                if out_size == 1:
                    val = sum((v & 0xFF) << (8 * i) for i, v in enumerate(vals))
                    mask = 0xFFFFFFFF
                    if n != 4:
                        mask = ((1 << (8 * n)) - 1) << (8 * (_ffs(f.out_map >> proc) % 4))
                    checks.append((mask, addr, val & mask))
                else:
                    for i in range(min(n, out_size)):
                        checks.append((0xFFFFFFFF, addr + 4 * i, vals[i] & 0xFFFFFFFF))
            poffs += 4
    return checks


def _table(checks: list[tuple[int, int, int]], max_count: int | None) -> np.ndarray:
    out: list[int] = []
    run: list[int] = []
    mask = addr0 = nxt = 0
    for total, (m, a, v) in enumerate(checks, 1):
        if m != mask or a != nxt:
            if run:
                out += [addr0, mask, len(run), *run]
            run, mask, addr0, nxt = [], m, a, a
        run.append(v)
        nxt += 4
        if max_count is not None and total > max_count:
            break
    if run:
        out += [addr0, mask, len(run), *run]
    out.append(0)
    return np.array(out, dtype=np.uint32)


__all__ = ["APB_BASE", "input_blocks", "known_answers"]
