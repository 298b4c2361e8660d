"""Render a ``Firmware`` as an MSDK project folder with the vendor tool's file names and API.

cnn.h / cnn.c / weights.h / main.c / sampledata.h / sampleoutput.h / softmax.c / Makefile /
project.mk (--riscv: main_riscv.c, Makefile.ARM and Makefile.RISCV instead of project.mk).
Every register write carries a comment saying what it sets; weights.h holds the kernel
loader's records and the bias bytes; main.c is the known-answer self-test.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from cnnforge.ir import BINARY_BITS
from cnnforge.targets.max7800x.device import MAX78002
from cnnforge.targets.max7800x.firmware import mlator, msdk_project, project
from cnnforge.targets.max7800x.firmware.data import table_runs
from cnnforge.targets.max7800x.firmware.firmware import HEADER, Firmware
from cnnforge.targets.max7800x.firmware.registers import Write, groups_used
from cnnforge.targets.max7800x.firmware.regmap import put

_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)


def _hex_rows(values: Iterable[int] | np.ndarray, digits: int = 8, per_line: int = 8) -> str:
    """``0x...`` items, ``per_line`` to a line (continued with a backslash), in one pass of
    numpy over the words: the tables of weights.h and sampledata.h hold up to millions."""
    words = np.asarray(values if isinstance(values, np.ndarray) else list(values), np.uint64)
    n = words.size
    if n == 0:
        return ""
    shifts = np.arange(4 * (digits - 1), -1, -4, dtype=np.uint64)
    item = np.empty((n, digits + 4), np.uint8)  # "0x" + digits + ", "
    item[:, 0], item[:, 1] = ord("0"), ord("x")
    item[:, 2 : 2 + digits] = _DIGITS[((words[:, None] >> shifts) & 0xF).astype(np.intp)]
    item[:, -2], item[:, -1] = ord(","), ord(" ")
    rows, rest = divmod(n, per_line)
    parts = []
    if rows:
        full = item[: rows * per_line].reshape(rows, -1)
        tail = np.frombuffer(b"\\\n  ", np.uint8)  # after a full line's last ", "
        parts.append(np.hstack([full, np.broadcast_to(tail, (rows, tail.size))]).tobytes())
    if rest:
        parts.append(item[rows * per_line :].tobytes())
    text = b"".join(parts).decode("ascii")
    return text[: -len(", \\\n  ")] if not rest else text[:-2]


def _define(name: str, values: Iterable[int] | np.ndarray, digits: int = 8) -> str:
    return f"#define {name} {{ \\\n  {_hex_rows(values, digits)} \\\n}}\n"


def cnn_h(fw: Firmware) -> str:
    """cnn.h, the API of cnn.c (templates/cnn.h.j2)."""
    return (
        msdk_project.templates(c_source=True)
        .get_template("cnn.h.j2")
        .render(
            header=HEADER.format(name="cnn.h", device=fw.device, what="API"),
            count=_unload_words(fw),
            unload=fw.options.writes_unload,
            isr=not fw.options.riscv,
        )
    )


def _unload_words(fw: Firmware) -> int:
    if fw.unload_parts:
        return sum(p.words for p in fw.unload_parts)
    return sum(n for _, n in _unload_runs(fw))


def _unload_runs(fw: Firmware) -> list[tuple[int, int]]:
    """The output words as (address, count) runs in known-answer order (32-bit outputs:
    channel order)."""
    return table_runs(fw.kat if fw.outputs is None else fw.outputs)


def cnn_c(fw: Firmware) -> str:
    """The set-up and control functions, each register write with what it sets
    (templates/cnn.c.j2)."""
    ctl = _quadrant_ctl(fw)
    arm, go = _start_writes(fw)
    o = fw.options
    return (
        msdk_project.templates(c_source=True)
        .get_template("cnn.c.j2")
        .render(
            header=HEADER.format(name="cnn.c", device=fw.device, what="set-up and control"),
            riscv=o.riscv,
            quadrant_ctl=list(ctl.values()),
            # the done flag and the interrupt flag (bit 14: streaming's too)
            done_flags="(1 << 12) | (1 << 14) | 1" if fw.streaming else "(1 << 12) | 1",
            master=next(iter(ctl.values())),
            bias=[(q, fw.rmap.bias(q), len(v)) for q, v in enumerate(fw.bias) if v],
            init=fw.init,
            configure=_configure_sections(fw),
            arm=arm,
            go=go,
            mlator_unload=mlator.unload_c(fw.unload_parts, fw.rmap)
            if o.writes_unload and fw.unload_parts
            else "",
            unload_runs=_hex_rows([v for run in _unload_runs(fw) for v in run] + [0])
            if o.writes_unload and not fw.unload_parts
            else "",
            pll=fw.device == MAX78002.name,  # load switches settle; its CNN may run from the PLL
        )
    )


def _quadrant_ctl(fw: Firmware) -> dict[int, int]:
    """Each used quadrant's control register; the first is the master."""
    return {q: fw.rmap.ctl(q, 0) for q in groups_used(fw.facts)}


def _configure_sections(fw: Firmware) -> list[tuple[str, list[Write]]]:
    """cnn_configure's layer registers as (title, writes) per layer and quadrant, each write's
    comment cut to what it sets."""
    sections: list[tuple[str, list[Write]]] = []
    for w in fw.configure:
        head, meaning = w.comment.split(": ", 1)
        head = head.split(":")[0]
        title = f"{head[0].upper()}{head[1:]}"
        if not sections or sections[-1][0] != title:
            sections.append((title, []))
        sections[-1][1].append(Write(w.addr, w.value, meaning))
    return sections


def _start_writes(fw: Firmware) -> tuple[list[Write], Write]:
    """cnn_start's writes: the slave quadrants armed first, then the master enabled (streaming,
    CHW streaming input on the MAX78002 and FIFO input set their bits in both writes)."""
    ctl = _quadrant_ctl(fw)
    first = next(iter(ctl))
    base = put("ctl_clocks", 1) | put("ctl_mexpress", 1) | put("ctl_streaming", fw.streaming)
    base |= put("ctl_binary", any(f.weight_bits == BINARY_BITS for f in fw.facts if f.has_weights))
    if fw.rmap.supports_pipeline:  # MAX78002: CHW input into a streaming first layer
        base |= put("ctl_chw_stream", fw.facts[0].streaming and fw.facts[0].chw)
    if fw.fifo:  # FIFO input (and a streaming first layer reading it)
        base |= put("ctl_ext_sync", 1) | put("ctl_fifo_streaming", fw.facts[0].streaming)
    fifo = put("ctl_fifo", fw.fifo)
    what = ", FIFO input" if fw.fifo else ""
    arm = [
        Write(addr, base | fifo | put("ctl_ext_sync", 1) | put("ctl_master", first)
              | put("ctl_enable", q != first), f"quadrant {q}: external sync{what}, ready")
        for q, addr in ctl.items()
    ]  # fmt: skip
    if fw.fifo and fw.facts[0].in_map >> (16 * first) & 0xF:
        base |= fifo
    go = Write(ctl[first], base | put("ctl_master", first) | put("ctl_enable", 1),
               f"quadrant {first}: master enable")  # fmt: skip
    return arm, go


def weights_h(fw: Firmware) -> str:
    out = [HEADER.format(name="weights.h", device=fw.device, what="kernels and bias")]
    for q, values in enumerate(fw.bias):
        if values:
            out.append(_define(f"BIAS_{q}", values, 2))
    words: list[np.ndarray] = []
    for addr, data in fw.kernels:
        words.append(np.array([addr, data.size], np.uint32))
        words.append(data)
    words.append(np.zeros(1, np.uint32))
    out.append(_define("KERNELS", np.concatenate(words)))
    return "".join(out)


def sampledata_h(fw: Firmware) -> str:
    out = [HEADER.format(name="sampledata.h", device=fw.device, what="sample input")]
    blocks = [w for _, w in fw.inputs] or fw.fifo_inputs
    for n, words in zip(fw.input_names, blocks, strict=True):
        out.append(_define(f"SAMPLE_INPUT_{n}", words))
    return "".join(out)


def sampleoutput_h(fw: Firmware) -> str:
    head = HEADER.format(name="sampleoutput.h", device=fw.device, what="known answers")
    return head + _define("SAMPLE_OUTPUT", fw.kat)


def folder_files(fw: Firmware) -> dict[str, str]:
    """{file name: text} of the project, as the options ask (--no-kat: no sampleoutput.h;
    --softmax: softmax.c; --riscv: main.c boots main_riscv.c, which runs the self-test)."""
    o = fw.options
    files = {"cnn.h": cnn_h(fw), "cnn.c": cnn_c(fw), "weights.h": weights_h(fw)}
    files.update(project.application(fw))
    files["sampledata.h"] = sampledata_h(fw)
    if o.kat:
        files["sampleoutput.h"] = sampleoutput_h(fw)
    if o.softmax:
        files["softmax.c"] = msdk_project.template_text("softmax.c")
    files.update(msdk_project.build_files(fw))
    return files


def write_folder(fw: Firmware, folder: Path) -> list[Path]:
    """Write the project files into ``folder``; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in folder_files(fw).items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
