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
from cnnforge.targets.max7800x.device import MAX78000, MAX78002
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


def _write(w: Write) -> str:
    if w.check:
        return (
            f"  if ((*((volatile uint32_t *) 0x{w.addr:08x}) & 0x{w.value:08x}) != 0)"
            f" return CNN_FAIL; // {w.comment}\n"
        )
    if w.wait:
        return (
            f"  while ((*((volatile uint32_t *) 0x{w.addr:08x}) & 0x{w.value:08x}) != "
            f"0x{w.value:08x}); // {w.comment}\n"
        )
    return f"  *((volatile uint32_t *) 0x{w.addr:08x}) = 0x{w.value:08x}; // {w.comment}\n"


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
    """The set-up and control functions, each register write with what it sets."""
    return "".join(
        [
            HEADER.format(name="cnn.c", device=fw.device, what="set-up and control"),
            "\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
            '#include "mxc.h"\n#include "gcfr_regs.h"\n#include "cnn.h"\n#include "weights.h"\n\n',
            _isr(fw),
            _continue_stop(fw),
            _load_weights(),
            _load_bias(fw),
            _function("cnn_init", "".join(_write(w) for w in fw.init)),
            _function("cnn_configure", _configure(fw)),
            _start(fw),
            _unload(fw) if fw.options.writes_unload else "",
            _power(fw),
        ]
    )


def _function(name: str, body: str) -> str:
    return f"int {name}(void)\n{{\n{body}\n  return CNN_OK;\n}}\n\n"


def _quadrant_ctl(fw: Firmware) -> dict[int, int]:
    """Each used quadrant's control register; the first is the master."""
    return {q: fw.rmap.ctl(q, 0) for q in groups_used(fw.facts)}


def _isr(fw: Firmware) -> str:
    """The done interrupt: clear the quadrants' flags, stop the timer (RISC-V: its own name and
    attribute, and the pending interrupt and event cleared)."""
    flags = "(1 << 12) | (1 << 14) | 1" if fw.streaming else "(1 << 12) | 1"  # 14: streaming
    clear = "".join(
        f"  *((volatile uint32_t *) 0x{addr:08x}) &= ~({flags});\n"
        for addr in _quadrant_ctl(fw).values()
    )
    head = (
        'void __attribute__((interrupt("machine"))) CNN_IRQHandler(void)'
        if fw.options.riscv
        else "void CNN_ISR(void)"
    )
    riscv = (
        "\n  NVIC_ClearPendingIRQ(CNN_IRQn);\n  NVIC_ClearPendingEVENT(CNN_IRQn);\n"
        if fw.options.riscv
        else ""
    )
    return (
        f"{head}\n{{\n  // Clear the done and interrupt flags of every quadrant\n{clear}"
        "\n  CNN_COMPLETE;\n#ifdef CNN_INFERENCE_TIMER\n"
        "  cnn_time = MXC_TMR_SW_Stop(CNN_INFERENCE_TIMER);\n#else\n  cnn_time = 1;\n#endif\n"
        f"{riscv}}}\n\n"
    )


def _continue_stop(fw: Firmware) -> str:
    master = next(iter(_quadrant_ctl(fw).values()))
    return (
        "int cnn_continue(void)\n{\n  cnn_time = 0;\n"
        f"  *((volatile uint32_t *) 0x{master:08x}) |= 1;"
        " // master quadrant: enable\n  return CNN_OK;\n}\n\n"
        f"int cnn_stop(void)\n{{\n  *((volatile uint32_t *) 0x{master:08x}) &= ~1;"
        " // master quadrant: disable\n  return CNN_OK;\n}\n\n"
        "void memcpy32(uint32_t *dst, const uint32_t *src, int n)\n{\n"
        "  while (n-- > 0)\n    *dst++ = *src++;\n}\n\n"
    )


def _load_weights() -> str:
    return (
        "static const uint32_t kernels[] = KERNELS;\n\n"
        "int cnn_load_weights(void)\n{\n"
        "  // Records of (address, word count, words): the address's low bits select the first\n"
        "  // 72-bit kernel column; writing 1 to its byte 1 sets the loader's column pointer,\n"
        "  // the words then stream 9-byte columns in.\n"
        "  uint32_t len;\n  volatile uint32_t *addr;\n  const uint32_t *ptr = kernels;\n\n"
        "  while ((addr = (volatile uint32_t *) (uintptr_t) *ptr++) != 0) {\n"
        "    *((volatile uint8_t *) ((uintptr_t) addr | 1)) = 0x01;\n"
        "    len = *ptr++;\n    while (len-- > 0)\n      *addr++ = *ptr++;\n  }\n\n"
        "  return CNN_OK;\n}\n\n"
    )


def _load_bias(fw: Firmware) -> str:
    used = [q for q, v in enumerate(fw.bias) if v]
    out = [f"static const uint8_t bias_{q}[] = BIAS_{q};\n" for q in used]
    if used:
        out.append(
            "\nstatic void memcpy_8to32(uint32_t *dst, const uint8_t *src, int n)\n{\n"
            "  while (n-- > 0)\n    *dst++ = *src++;\n}\n\n"
        )
    body = "".join(
        f"  memcpy_8to32((uint32_t *) 0x{fw.rmap.bias(q):08x}, bias_{q}, {len(fw.bias[q])});"
        f" // quadrant {q}: one bias byte per word\n"
        for q in used
    )
    return "".join(out) + _function("cnn_load_bias", body)


def _configure(fw: Firmware) -> str:
    """cnn_configure's body: the layer registers, a comment line per layer and quadrant."""
    lines = []
    current = None
    for w in fw.configure:
        head, meaning = w.comment.split(": ", 1)
        head = head.split(":")[0]
        if head != current:
            lines.append(f"\n  // {head[0].upper()}{head[1:]}\n")
            current = head
        lines.append(_write(Write(w.addr, w.value, meaning)))
    return "".join(lines)


def _start(fw: Firmware) -> str:
    """cnn_start: the slave quadrants armed first, then the master enabled (streaming, CHW
    streaming input on the MAX78002 and FIFO input set their bits in both writes)."""
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
    arm = "".join(
        _write(Write(addr, base | fifo | put("ctl_ext_sync", 1) | put("ctl_master", first)
                     | put("ctl_enable", q != first), f"quadrant {q}: external sync{what}, ready"))
        for q, addr in ctl.items()
    )  # fmt: skip
    if fw.fifo and fw.facts[0].in_map >> (16 * first) & 0xF:
        base |= fifo
    go = _write(
        Write(ctl[first], base | put("ctl_master", first) | put("ctl_enable", 1),
              f"quadrant {first}: master enable")
    )  # fmt: skip
    return (
        f"int cnn_start(void)\n{{\n  cnn_time = 0;\n\n{arm}"
        "\n#ifdef CNN_INFERENCE_TIMER\n  MXC_TMR_SW_Start(CNN_INFERENCE_TIMER);\n#endif\n\n"
        f"  CNN_START;\n{go}\n  return CNN_OK;\n}}\n\n"
    )


def _unload(fw: Firmware) -> str:
    if fw.unload_parts:  # --mlator
        return mlator.unload_c(fw.unload_parts, fw.rmap)
    runs = [v for run in _unload_runs(fw) for v in run] + [0]
    return (
        "// The output words as (address, count) runs, 0 ends\n"
        f"static const uint32_t unload_runs[] = {{\n  {_hex_rows(runs)}\n}};\n\n"
        "int cnn_unload(uint32_t *out_buf)\n{\n"
        "  const uint32_t *run = unload_runs;\n  volatile uint32_t *addr;\n  uint32_t n;\n\n"
        "  while ((addr = (volatile uint32_t *) (uintptr_t) *run++) != 0)\n"
        "    for (n = *run++; n > 0; n--)\n      *out_buf++ = *addr++;\n\n"
        "  return CNN_OK;\n}\n\n"
    )


def _power(fw: Firmware) -> str:
    """cnn_enable / cnn_disable / boost; the done interrupt's vector (RISC-V: enabled instead)."""
    irq = (
        "  // The accelerator's done interrupt (and event, to wake the core)\n"
        "  __enable_irq();\n  NVIC_EnableIRQ(CNN_IRQn);\n  NVIC_EnableEVENT(CNN_IRQn);\n"
        if fw.options.riscv
        else "  MXC_NVIC_SetVector(CNN_IRQn, CNN_ISR); // the accelerator's done interrupt\n"
    )
    return _POWER[fw.device].replace("{irq}", irq)


_ENABLE_COMMON = """\
int cnn_enable(uint32_t clock_source, uint32_t clock_divider)
{
  // Reset the four power domains, power them, unmask the memories, end isolation
  MXC_GCFR->reg3 = 0xf;
  MXC_GCFR->reg1 = 0xf;
  MXC_GCFR->reg0 = 0xf;
{delay}  MXC_GCFR->reg2 = 0x0;
  MXC_GCFR->reg3 = 0x0;
{pll}
  // CNN clock source and divider
  MXC_GCR->pclkdiv = (MXC_GCR->pclkdiv
                      & ~(MXC_F_GCR_PCLKDIV_CNNCLKDIV | MXC_F_GCR_PCLKDIV_CNNCLKSEL))
                     | clock_divider | clock_source;
  MXC_SYS_ClockEnable(MXC_SYS_PERIPH_CLOCK_CNN);

{irq}
  return CNN_OK;
}

int cnn_disable(void)
{
  MXC_SYS_ClockDisable(MXC_SYS_PERIPH_CLOCK_CNN);

  // Reset, isolate, power off, mask the memories
  MXC_GCFR->reg3 = 0xf;
  MXC_GCFR->reg2 |= 0xf;
  MXC_GCFR->reg0 = 0x0;
  MXC_GCFR->reg1 = 0x0;
  MXC_GCFR->reg3 = 0x0;

  return CNN_OK;
}

static int boost(mxc_gpio_regs_t *port, uint32_t pin, int on)
{
  mxc_gpio_cfg_t gpio_out;
  gpio_out.port = port;
  gpio_out.mask = pin;
  gpio_out.pad = MXC_GPIO_PAD_NONE;
  gpio_out.func = MXC_GPIO_FUNC_OUT;
  MXC_GPIO_Config(&gpio_out);
  if (on)
    MXC_GPIO_OutSet(gpio_out.port, gpio_out.mask);
  else
    MXC_GPIO_OutClr(gpio_out.port, gpio_out.mask);
  return CNN_OK;
}

int cnn_boost_enable(mxc_gpio_regs_t *port, uint32_t pin)
{
  return boost(port, pin, 1);
}

int cnn_boost_disable(mxc_gpio_regs_t *port, uint32_t pin)
{
  return boost(port, pin, 0);
}
"""
_POWER = {
    MAX78000.name: _ENABLE_COMMON.replace("{delay}", "").replace("{pll}", ""),
    MAX78002.name: _ENABLE_COMMON.replace(
        "{delay}", "  MXC_Delay(MSEC(10)); // load switches\n"
    ).replace(
        "{pll}",
        "\n  if (clock_source == MXC_S_GCR_PCLKDIV_CNNCLKSEL_IPLL)\n"
        "    while ((MXC_GCR->ipll_ctrl & MXC_F_GCR_IPLL_CTRL_RDY) != MXC_F_GCR_IPLL_CTRL_RDY)\n"
        "      ; // the PLL locks\n",
    ),
}


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
        files["softmax.c"] = SOFTMAX_C
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


SOFTMAX_C = """\
/*
 * softmax.c -- written by cnnforge: software softmax of the accelerator's 32-bit outputs.
 * SPDX-License-Identifier: Apache-2.0
 * Inputs are Q17.14 fixed point, outputs Q15; exp(x) is evaluated as 2^(x / ln 2).
 */
#include <stdint.h>
#include "mxc.h"
#include "cnn.h"

static q31_t exp2_q14(q31_t x) /* 2^(x / 2^14) in Q14 for x <= 0 */
{
  int32_t whole = -((-x) >> 14), frac = x - whole * (1 << 14); /* frac in [0, 2^14) */
  /* 2^f ~ 1 + f (0.6565 + 0.3435 f) on [0, 1): error below 0.3 % */
  int64_t f = frac, poly = (1 << 14) + ((f * (10757 + ((5628 * f) >> 14))) >> 14);
  if (whole <= -31) return 0;
  return (q31_t) (poly >> (-whole));
}

void softmax_q17p14_q15(const q31_t *vec_in, const uint16_t dim_vec, q15_t *p_out)
{
  q31_t max = vec_in[0];
  int64_t sum = 0;
  uint16_t i;
  for (i = 1; i < dim_vec; i++)
    if (vec_in[i] > max) max = vec_in[i];
  for (i = 0; i < dim_vec; i++) /* x / ln 2 in Q14: 23637 / 2^14 ~ 1 / ln 2 */
    sum += exp2_q14((q31_t) (((int64_t) (vec_in[i] - max) * 23637) >> 14));
  for (i = 0; i < dim_vec; i++) {
    int64_t e = exp2_q14((q31_t) (((int64_t) (vec_in[i] - max) * 23637) >> 14));
    int64_t q = sum > 0 ? (e << 15) / sum : 0;
    p_out[i] = (q15_t) (q > 32767 ? 32767 : q);
  }
}

void softmax_shift_q17p14_q15(q31_t *vec_in, const uint16_t dim_vec, uint8_t in_shift, q15_t *p_out)
{
  uint16_t i;
  for (i = 0; i < dim_vec; i++)
    vec_in[i] <<= in_shift;
  softmax_q17p14_q15(vec_in, dim_vec, p_out);
}
"""
