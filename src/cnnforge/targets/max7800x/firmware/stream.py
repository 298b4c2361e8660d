"""The streaming and FIFO register values: stream start, the read pointer's deltas, the rollover,
the TRAM of streaming layers, the input frame size and the FIFO control (docs/firmware.md).

Learned from the vendor tool's backend (the MAX78000 formulas, and the
MAX78002's "new streaming" ones with its default --debug-new-streaming and pipeline) and checked
word for word on the host against the vendor's firmware (tests/data/firmware_state: the --fifo
demos, their --fifo variants, cnnforge's own cats-dogs plan). The rollover is the plan's own
figure (targets/max7800x/streaming.py), the same formulas.
"""

from __future__ import annotations

from cnnforge.ir import Op
from cnnforge.targets.max7800x.firmware.facts import LayerFacts
from cnnforge.targets.max7800x.firmware.regmap import RegisterMap, put
from cnnforge.targets.max7800x.streaming import INCREASE_START

Value = tuple[str, int, str]  # (register, value, meaning)


def fifo_control(f: LayerFacts, channels: int, rmap: RegisterMap) -> int:
    """FIFO control: the vendor's fixed settings, and FIFO k on when the input has a channel k
    and processor 16 k reads (the vendor's test, channel by channel, of ``channel % 4``)."""
    val = put("fifo_setting_a", 2) | put("fifo_setting_b", 2) | put("fifo_ready_sel", 0)
    val |= put("fifo_cpl", rmap.require_fifo_cpl)
    fifos = 0
    for k in range(min(channels, 4)):
        if f.in_map >> (16 * k) & 1:
            fifos |= 1 << k
    return val | put("fifo_enable", fifos)


def frame_words(f: LayerFacts) -> int:
    """Words of one input frame per FIFO: a pixel per word (HWC), four per word (CHW)."""
    pixels = f.in_dims[0] * f.in_dims[1]
    return _big(pixels, f)


def _big(words: int, f: LayerFacts) -> int:
    """CHW ("big data") input packs four pixels a word."""
    return (words + 3) // 4 if f.chw else words


def tram_words(f: LayerFacts) -> int:
    """TRAM words a layer uses (the vendor's tram_max): the padded pooled columns the kernel
    slides over (transposed: the upsampled ones); a pooling-only layer 1."""
    if f.op is Op.PASSTHROUGH:
        return 1
    if f.op is Op.CONVTRANSPOSE2D:
        span = (f.pooled[1] - 1) * f.stride[1] + 1 + f.output_padding[1] + 2 * f.padding[1]
        return max(0, span - f.kernel[1]) + 1
    return max(0, f.pooled[1] + 2 * f.padding[1] - f.kernel[1]) + 1


def after_streams(facts: list[LayerFacts], f: LayerFacts) -> Value:
    """A streaming layer's TRAM follows the streaming layers' before it (their words x passes)."""
    before = sum(tram_words(g) * g.in_expand for g in facts[: f.index])
    tptr = tram_words(f) - 1 + before | put("tram_start", before)
    return ("tptr", tptr, f"TRAM pointer max, after {before} words of the layers before")


def stream_values(
    facts: list[LayerFacts], f: LayerFacts, fifo: bool, rmap: RegisterMap
) -> list[Value]:
    """Stream start, deltas and (FIFO input, streaming) rollover of layer ``f``."""
    new = rmap.new_streaming
    start, delta1, delta2 = (_new if new else _old)(facts, f, fifo)
    # passes of the streaming layers before (a tcalc layer's rounded up to 4: speedups.py)
    invol = sum((g.in_expand + 3) & ~3 if g.tcalc else g.in_expand for g in facts[: f.index])
    invol = invol if f.index > 0 and f.streaming else 0
    delta = put("stream_delta2", delta2) | put("stream_delta1", delta1)
    vals = [
        ("stream_start", put("stream_start", start), f"stream start after {start} words"),
        (
            "stream_delta",
            delta | put("stream_invol", invol),
            f"stream deltas: {delta1} per column, {delta2} per row, passes before {invol}",
        ),
    ]
    if fifo and f.streaming:  # the plan's buffer (streaming.rollover_words)
        vals.append(("rollover", put("rollover", f.rollover), f"rollover after {f.rollover} words"))
    return vals


def _old(facts: list[LayerFacts], f: LayerFacts, fifo: bool) -> tuple[int, int, int]:
    """MAX78000: (start, delta 1, delta 2)."""
    start = delta1 = delta2 = 0
    if f.index == 0 and fifo:
        if f.streaming:
            start = (f.pool[0] - 1) * f.in_dims[1] + f.pool[1]
            delta1 = (f.pool_stride[1] - 1) * f.operands
            delta2 = (f.pool[0] - 1) * f.in_dims[1] * f.operands
        else:  # the whole frame arrives first
            start = frame_words(f)
        start *= f.pool[0]
    elif f.streaming:
        prev = facts[f.index - 1]
        row = prev.pooled[1] + 2 * prev.padding[1]  # the previous layer's padded output row
        start = row * (prev.kernel[0] - 1 + f.pool[0] - 1) + prev.kernel[1] - 1 + f.pool[1]
        start += INCREASE_START
        delta1 = f.pool_stride[1] * f.operands
        delta2 = (f.pool_stride[0] - 1) * row + f.pool[1] * f.operands
    return start, delta1, delta2


def _new(facts: list[LayerFacts], f: LayerFacts, fifo: bool) -> tuple[int, int, int]:
    """MAX78002 ("new streaming"): (start, delta 1, delta 2) from the padded input row, the
    pooling window's row and column steps and the columns the pooling leaves over."""
    if not f.streaming:
        return (frame_words(f) if f.index == 0 and fifo else 0), 0, 0
    cols, pad = f.in_dims[1], f.padding[1]
    padded = cols + 2 * pad
    row_inc = max(f.pool[0] * f.pool_dilation[0], f.pool_stride[0])
    col_inc = max(f.pool[1] * f.pool_dilation[1], f.pool_stride[1])
    last = f.index == len(facts) - 1 or not facts[f.index + 1].streaming
    if f.index == 0:
        effective = cols // f.pool_stride[1]
        if effective * f.pool_stride[1] + f.pool[1] - 1 > cols:
            effective -= 1
        skipped = max(0, cols - effective * f.pool_stride[1])
        if f.pool_stride[0] == 1 and f.pool[0] == 1:
            start = col_inc
        else:  # read-ahead: a pooling stride later (speedups.py)
            start = (row_inc * padded + pad + 2 * col_inc) * f.operands
            start += f.pool_stride[1] if f.read_ahead else 0
        delta1 = f.pool_stride[1] * f.operands - (f.pool_stride[0] == 1 and f.pool[0] == 1)
        delta1 = _big(delta1, f)
        if f.pool_stride[0] == 1:
            delta2 = delta1 + skipped
        else:
            delta2 = (f.pool_stride[0] - 1) * cols + skipped + f.pool[1] - 1
        delta2 = _big(delta2, f)
        delta2 += delta2 > 0  # the pipeline (on by default) reads one word ahead
        return _big(start, f), delta1, delta2
    effective = cols // col_inc
    if effective * f.pool_stride[1] + f.pool[1] > cols:
        effective -= 1
    adjust = 0 if col_inc == 1 else cols - effective * col_inc
    start = (pad or f.pool_stride[0]) * padded + (row_inc * padded + pad + 2 * col_inc) * f.operands
    start += f.pool_stride[1] if f.read_ahead else 0
    if last:
        start += adjust * f.pool_stride[1]
    delta1 = _big(f.pool_stride[1] * f.operands, f)
    row_step = delta1 if f.pool_stride[0] == 1 else (f.pool_stride[0] - 1) * cols
    return _big(start, f), delta1, _big(row_step + adjust, f)
