"""``--mlator``: cnn_unload reads an 8-bit output channel by channel through the mlator register.

The mlator (a quadrant's control register REG_MLAT) returns one byte lane of four consecutive
data-memory words per 32-bit read, so one channel's H x W bytes come out as ceil(H*W / 4) words in
channel-major order. Learned from the vendor tool's embedded ``cnn_unload`` (its
unload code, ``unload``) and its device description (REG_MLAT, LREG_WPTR_BASE, LREG_LCTL2, READY_SEL
= 0 on both parts). Per channel the vendor writes layer 0's write pointer base of the quadrant (the
pixel index, 0 at a channel's start), layer 0's LCTL2 (the pass), CTL = READY_SEL << 1 | 1 << 3 | 1
<< 16 (load the pointer) | lane << 17 (the byte), reads the mlator once to prime it, then once per
four pixels, and writes CTL = READY_SEL << 1 | 1 << 3 (off).

cnnforge writes that sequence, value for value, only for an output layer where the vendor's other
mlator path agrees with it: its RTL-simulation check (the vendor tool's unload code, ``verify``)
writes the channel's whole SRAM offset (instance, quadrant and out_offset included) as the pointer,
the same number only for an output at offset 0 in processors 0-3. The vendor's own out_buf index
(row * H + col) and channel count (one per processor lane) are the pixel's and the channel's only
for a square (or 1-row / 1-column) frame whose C channels sit in processors 0..C-1; with a write gap
the pixels are not in the consecutive words the mlator reads. Any other output layer is unloaded
plainly, with a note saying why (as the vendor's "Ignoring --mlator" warnings do for 32-bit outputs
and small or odd frames).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cnnforge.targets.max7800x.firmware.data import known_answers, table_runs
from cnnforge.targets.max7800x.firmware.facts import LayerFacts
from cnnforge.targets.max7800x.firmware.regmap import RegisterMap

READY_SEL = 0  # the vendor's READY_SEL on both parts
CTL_OFF = READY_SEL << 1 | 1 << 3  # CTL with the mlator off
CTL_LOAD = 1 << 16  # mlatorld: load the write pointer into the mlator
CTL_LANE = 17  # bits 17-18: the byte (processor of the instance) each read returns


@dataclass(frozen=True)
class Channel:
    """One output channel as the mlator reads it."""

    quadrant: int
    lane: int  # byte 0..3 of the data-memory word
    pointer: int  # layer 0's write pointer base: the pixel index of the first read (0)
    increment: int  # layer 0's LCTL2: the pass (0)
    reads: int  # ceil(H * W / 4): reads after the prime


@dataclass(frozen=True)
class Part:
    """One output layer in cnn_unload: through the mlator (``channels``) or plainly (``runs``,
    the plain unload's (address, words) runs of this layer)."""

    index: int
    name: str
    shape: tuple[int, int, int]  # C, H, W
    channels: tuple[Channel, ...] = ()
    runs: tuple[tuple[int, int], ...] = ()

    @property
    def words(self) -> int:
        return sum(c.reads for c in self.channels) + sum(n for _, n in self.runs)


def reason(f: LayerFacts, shape: tuple[int, int, int]) -> str:
    """'' when cnn_unload reads output layer ``f`` (its output ``shape``) through the mlator;
    else why it is unloaded plainly (the note's text)."""
    c, h, w = shape
    pixels = h * w
    if f.wide:
        return "it writes 32-bit output (the vendor ignores --mlator too)"
    if c > 1 and pixels % 4:
        return f"its {h}x{w} frame is not a multiple of 4 pixels (the vendor ignores --mlator too)"
    if pixels < 4:
        return "it has fewer than 4 pixels per channel (the vendor ignores --mlator too)"
    disagree = "the vendor's cnn_unload and its RTL check write different SRAM pointers"
    if f.out_offset:
        return f"its output is at offset 0x{f.out_offset:04x}: {disagree}"
    if f.out_map >> 4:
        return f"its channels are in processors {_span(f.out_map)}, not 0-3: {disagree}"
    if f.write_gap:
        return f"it writes with a gap ({f.write_gap}): its pixels are not in consecutive words"
    if f.out_map != (1 << c) - 1:
        return (
            f"its channels are in processors {_span(f.out_map)}: the vendor's cnn_unload numbers "
            "the channels by processor, its out_buf would have holes"
        )
    if h != w and h > 1 and w > 1:
        return (
            f"its {h}x{w} frame is not square: the vendor's cnn_unload places the words at "
            "row * H + col, out of order"
        )
    return ""


def unload_parts(
    checked: list[tuple[LayerFacts, np.ndarray]], rmap: RegisterMap
) -> tuple[tuple[Part, ...], tuple[str, ...]]:
    """cnn_unload's output layers (layer order) and a note per layer unloaded plainly; no parts
    when no layer is read through the mlator (cnn_unload is then the plain one)."""
    parts: list[Part] = []
    notes: list[str] = []
    for f, y in checked:
        shape = _shape(y)
        why = reason(f, shape)
        if why:
            notes.append(f"--mlator: layer {f.name} is unloaded plainly: {why}")
            runs = tuple(table_runs(known_answers([(f, y)], rmap)))
            parts.append(Part(f.index, f.name, shape, runs=runs))
            continue
        reads = -(-shape[1] * shape[2] // 4)
        channels = tuple(Channel(0, lane, 0, 0, reads) for lane in range(shape[0]))
        parts.append(Part(f.index, f.name, shape, channels=channels))
    if not any(p.channels for p in parts):
        return (), tuple(notes)
    return tuple(parts), tuple(notes)


def unload_c(parts: tuple[Part, ...], rmap: RegisterMap) -> str:
    """cnn_unload over ``parts``: a table per layer and the loop that reads it."""
    tables, calls = [], []
    for p in parts:
        what = f"layer {p.name}, {p.shape[0]} x {p.shape[1]} x {p.shape[2]}"
        if p.channels:
            tables.append(_channel_table(p, rmap))
            call = f"unload_mlator(mlator_{p.index}, {len(p.channels)}, out_buf)"
            calls.append((call, f"{what}, 8-bit: through the mlator, channel by channel"))
        else:
            runs = [v for run in p.runs for v in run] + [0]
            rows = ", ".join(f"0x{v:08x}" for v in runs)
            tables.append(
                f"// {what}: its output words as (address, count) runs, 0 ends\n"
                f"static const uint32_t unload_{p.index}[] = {{ {rows} }};\n\n"
            )
            calls.append((f"unload_words(unload_{p.index}, out_buf)", f"{what}: word by word"))
    body = "".join(
        f"  {'' if i == len(calls) - 1 else 'out_buf = '}{call}; // {what}\n"
        for i, (call, what) in enumerate(calls)
    )
    helpers = _MLATOR_LOOP.replace("CTL_OFF", f"0x{CTL_OFF:08x}")
    if any(p.runs for p in parts):
        helpers += _WORDS_LOOP
    return (
        "".join(tables)
        + helpers
        + "int cnn_unload(uint32_t *out_buf)\n{\n"
        + body
        + "\n  return CNN_OK;\n}\n\n"
    )


def _channel_table(p: Part, rmap: RegisterMap) -> str:
    rows = []
    for ch in p.channels:
        q = ch.quadrant
        values = (
            rmap.ctl(q, 0),
            rmap.ctl(q, rmap.mlator_reg),
            rmap.layer(q, 0, "wptr_base"),
            rmap.layer(q, 0, "lctl2"),
            CTL_OFF | CTL_LOAD | ch.lane << CTL_LANE,
            ch.pointer,
            ch.increment,
            ch.reads,
        )
        text = ", ".join(f"0x{v:08x}" for v in values[:7])
        rows.append(f"  {text}, {values[7]}, // channel {ch.lane}: byte {ch.lane}\n")
    return (
        f"// --mlator, layer {p.name}: 8 words per channel: its quadrant's CTL and mlator\n"
        "// registers, layer 0's write pointer base and LCTL2; the CTL value that loads the\n"
        "// pointer and picks the byte; the pointer (the first pixel) and LCTL2 values; reads\n"
        "// after the prime\n"
        f"static const uint32_t mlator_{p.index}[] = {{\n" + "".join(rows) + "};\n\n"
    )


_MLATOR_LOOP = """\
// Each channel through the mlator: set the SRAM pointer, turn the mlator on (load the pointer,
// pick the byte), prime it with one read; each further read returns the channel's byte of four
// consecutive pixels; then turn it off. Leaves layer 0's write pointer base and LCTL2 changed:
// cnn_configure before the next inference.
static uint32_t *unload_mlator(const uint32_t *channel, uint32_t channels, uint32_t *out_buf)
{
  uint32_t c, n;

  for (c = 0; c < channels; c++) {
    const uint32_t *m = channel + 8 * c;
    volatile uint32_t *ctrl = (volatile uint32_t *) (uintptr_t) m[0];
    volatile uint32_t *mlat = (volatile uint32_t *) (uintptr_t) m[1];

    *((volatile uint32_t *) (uintptr_t) m[2]) = m[5]; // SRAM pointer: the first pixel
    *((volatile uint32_t *) (uintptr_t) m[3]) = m[6]; // pointer increment: the pass
    *ctrl = m[4]; // mlator on: load the pointer, this byte
    (void) *mlat; // prime
    for (n = m[7]; n > 0; n--)
      *out_buf++ = *mlat; // four pixels of this channel
    *ctrl = CTL_OFF; // mlator off
  }
  return out_buf;
}

"""

_WORDS_LOOP = """\
// A layer unloaded plainly: its output words as they are in data memory.
static uint32_t *unload_words(const uint32_t *run, uint32_t *out_buf)
{
  volatile uint32_t *addr;
  uint32_t n;

  while ((addr = (volatile uint32_t *) (uintptr_t) *run++) != 0)
    for (n = *run++; n > 0; n--)
      *out_buf++ = *addr++;
  return out_buf;
}

"""


def _shape(y: np.ndarray) -> tuple[int, int, int]:
    dims = tuple(int(d) for d in np.shape(y))
    c, h, w = (*dims, 1, 1)[:3]
    return c, h, w


def _span(mask: int) -> str:
    procs = [p for p in range(64) if mask >> p & 1]
    return f"{procs[0]}-{procs[-1]}" if len(procs) > 1 else str(procs[0])
