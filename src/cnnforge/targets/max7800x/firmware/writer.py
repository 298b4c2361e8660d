"""Render a ``Firmware`` as an MSDK project folder with the vendor tool's file names and API.

cnn.h / cnn.c / weights.h / main.c / sampledata.h / sampleoutput.h / softmax.c / Makefile /
project.mk. Every register write carries a comment saying what it sets; weights.h holds the
kernel loader's records and the bias bytes; main.c is the known-answer self-test.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from cnnforge.targets.max7800x.firmware.firmware import Firmware
from cnnforge.targets.max7800x.firmware.registers import Write, groups_used
from cnnforge.targets.max7800x.firmware.regmap import FIFO_DATA, FIFO_STAT, put

HEADER = """\
/*
 * {name} -- written by cnnforge for the {device} CNN accelerator ({what}).
 * SPDX-License-Identifier: Apache-2.0
 * Register fields: docs/firmware.md of cnnforge. Regenerate instead of editing.
 */
"""


def _hex_rows(values: Iterable[int], fmt: str = "0x{:08x}", per_line: int = 8) -> str:
    items = [fmt.format(int(v)) for v in values]
    rows = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return ", \\\n  ".join(rows)


def _define(name: str, values: Iterable[int], fmt: str = "0x{:08x}") -> str:
    return f"#define {name} {{ \\\n  {_hex_rows(values, fmt)} \\\n}}\n"


def _write(w: Write) -> str:
    if w.wait:
        return (
            f"  while ((*((volatile uint32_t *) 0x{w.addr:08x}) & 0x{w.value:08x}) != "
            f"0x{w.value:08x}); // {w.comment}\n"
        )
    return f"  *((volatile uint32_t *) 0x{w.addr:08x}) = 0x{w.value:08x}; // {w.comment}\n"


def cnn_h(fw: Firmware) -> str:
    outputs = fw.facts[-1]
    count = outputs.out_channels * outputs.pooled[0] * 0 + _unload_words(fw)
    return (
        HEADER.format(name="cnn.h", device=fw.device, what="API")
        + f"""
#ifndef CNNFORGE_CNN_H
#define CNNFORGE_CNN_H

#include <stdint.h>
typedef int32_t q31_t;
typedef int16_t q15_t;

/* Return codes */
#define CNN_FAIL 0
#define CNN_OK 1

/* 32-bit words cnn_unload copies out of the last layer */
#define CNN_NUM_OUTPUTS {count}

/* Timer that measures the inference, and the pins that show it on a scope */
#define CNN_INFERENCE_TIMER MXC_TMR0
#define CNN_START LED_On(1)
#define CNN_COMPLETE LED_Off(1)
#define SYS_START LED_On(0)
#define SYS_COMPLETE LED_Off(0)

/* Software softmax of the unloaded 32-bit outputs (softmax.c) */
void softmax_q17p14_q15(const q31_t *vec_in, const uint16_t dim_vec, q15_t *p_out);
void softmax_shift_q17p14_q15(q31_t *vec_in, const uint16_t dim_vec, uint8_t in_shift,
                              q15_t *p_out);

/* Time of the last inference (set by the interrupt handler) */
extern volatile uint32_t cnn_time;

/* Word copy used for the weights and the data */
void memcpy32(uint32_t *dst, const uint32_t *src, int n);

/* Power and clocks: on (clock source and divider of the MSDK), off */
int cnn_enable(uint32_t clock_source, uint32_t clock_divider);
int cnn_disable(void);
/* Bring the state machine into a known state (MAX78002: clear the registers) */
int cnn_init(void);
/* Configure every layer */
int cnn_configure(void);
/* Load the kernels and the bias values */
int cnn_load_weights(void);
int cnn_load_bias(void);
/* Start, stop, continue the accelerator */
int cnn_start(void);
int cnn_stop(void);
int cnn_continue(void);
/* Copy the last layer's output words */
int cnn_unload(uint32_t *out_buf);
/* Turn the external boost circuit on or off */
int cnn_boost_enable(mxc_gpio_regs_t *port, uint32_t pin);
int cnn_boost_disable(mxc_gpio_regs_t *port, uint32_t pin);
/* Interrupt handler: the accelerator finished */
void CNN_ISR(void);

#endif
"""
    )


def _unload_words(fw: Firmware) -> int:
    return sum(n for _, n in _unload_runs(fw))


def _unload_runs(fw: Firmware) -> list[tuple[int, int]]:
    """The output words as (address, count) runs in known-answer order (32-bit outputs:
    channel order)."""
    kat = fw.kat.tolist()
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(kat) and kat[i] != 0:
        addr, n = kat[i], kat[i + 2]
        out.append((addr, n))
        i += 3 + n
    return out


def cnn_c(fw: Firmware) -> str:
    rmap = fw.rmap
    groups = groups_used(fw.facts)
    first = groups[0]
    lines = [HEADER.format(name="cnn.c", device=fw.device, what="set-up and control")]
    lines.append(
        "\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
        '#include "mxc.h"\n#include "gcfr_regs.h"\n#include "cnn.h"\n#include "weights.h"\n\n'
    )
    ctl = {q: rmap.ctl(q, 0) for q in groups}
    lines.append(
        "void CNN_ISR(void)\n{\n  // Clear the done and interrupt flags of every quadrant\n"
    )
    flags = "(1 << 12) | (1 << 14) | 1" if fw.streaming else "(1 << 12) | 1"  # 14: streaming
    for q in groups:
        lines.append(f"  *((volatile uint32_t *) 0x{ctl[q]:08x}) &= ~({flags});\n")
    lines.append(
        "\n  CNN_COMPLETE;\n#ifdef CNN_INFERENCE_TIMER\n"
        "  cnn_time = MXC_TMR_SW_Stop(CNN_INFERENCE_TIMER);\n#else\n  cnn_time = 1;\n#endif\n}\n\n"
    )
    lines.append(
        "int cnn_continue(void)\n{\n  cnn_time = 0;\n"
        f"  *((volatile uint32_t *) 0x{ctl[first]:08x}) |= 1;"
        " // master quadrant: enable\n  return CNN_OK;\n}\n\n"
        f"int cnn_stop(void)\n{{\n  *((volatile uint32_t *) 0x{ctl[first]:08x}) &= ~1;"
        " // master quadrant: disable\n  return CNN_OK;\n}\n\n"
        "void memcpy32(uint32_t *dst, const uint32_t *src, int n)\n{\n"
        "  while (n-- > 0)\n    *dst++ = *src++;\n}\n\n"
    )
    lines.append(
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
    used_bias = [q for q, v in enumerate(fw.bias) if v]
    for q in used_bias:
        lines.append(f"static const uint8_t bias_{q}[] = BIAS_{q};\n")
    if used_bias:
        lines.append(
            "\nstatic void memcpy_8to32(uint32_t *dst, const uint8_t *src, int n)\n{\n"
            "  while (n-- > 0)\n    *dst++ = *src++;\n}\n\n"
        )
    lines.append("int cnn_load_bias(void)\n{\n")
    for q in used_bias:
        lines.append(
            f"  memcpy_8to32((uint32_t *) 0x{rmap.bias(q):08x}, bias_{q}, {len(fw.bias[q])});"
            f" // quadrant {q}: one bias byte per word\n"
        )
    lines.append("\n  return CNN_OK;\n}\n\n")
    lines.append("int cnn_init(void)\n{\n")
    lines += [_write(w) for w in fw.init]
    lines.append("\n  return CNN_OK;\n}\n\n")
    lines.append("int cnn_configure(void)\n{\n")
    current = None
    for w in fw.configure:
        head = w.comment.split(":")[0]
        if head != current:
            lines.append(f"\n  // {head[0].upper()}{head[1:]}\n")
            current = head
        lines.append(_write(Write(w.addr, w.value, w.comment.split(": ", 1)[1])))
    lines.append("\n  return CNN_OK;\n}\n\n")
    lines.append("int cnn_start(void)\n{\n  cnn_time = 0;\n\n")
    base = put("ctl_clocks", 1) | put("ctl_mexpress", 1) | put("ctl_streaming", fw.streaming)
    if fw.rmap.supports_pipeline:  # MAX78002: CHW input into a streaming first layer
        base |= put("ctl_chw_stream", fw.facts[0].streaming and fw.facts[0].chw)
    if fw.fifo:  # FIFO input (and a streaming first layer reading it)
        base |= put("ctl_ext_sync", 1) | put("ctl_fifo_streaming", fw.facts[0].streaming)
    fifo = put("ctl_fifo", fw.fifo)
    what = ", FIFO input" if fw.fifo else ""
    for q in groups:
        value = base | fifo | put("ctl_ext_sync", 1) | put("ctl_master", first)
        value |= put("ctl_enable", q != first)
        lines.append(_write(Write(ctl[q], value, f"quadrant {q}: external sync{what}, ready")))
    lines.append(
        "\n#ifdef CNN_INFERENCE_TIMER\n  MXC_TMR_SW_Start(CNN_INFERENCE_TIMER);\n#endif\n\n"
        "  CNN_START;\n"
    )
    if fw.fifo and fw.facts[0].in_map >> (16 * first) & 0xF:
        base |= fifo
    go = base | put("ctl_master", first) | put("ctl_enable", 1)
    lines.append(_write(Write(ctl[first], go, f"quadrant {first}: master enable")))
    lines.append("\n  return CNN_OK;\n}\n\n")
    runs = [v for run in _unload_runs(fw) for v in run] + [0]
    lines.append(
        "// The output words as (address, count) runs, 0 ends\n"
        f"static const uint32_t unload_runs[] = {{\n  {_hex_rows(runs)}\n}};\n\n"
        "int cnn_unload(uint32_t *out_buf)\n{\n"
        "  const uint32_t *run = unload_runs;\n  volatile uint32_t *addr;\n  uint32_t n;\n\n"
        "  while ((addr = (volatile uint32_t *) (uintptr_t) *run++) != 0)\n"
        "    for (n = *run++; n > 0; n--)\n      *out_buf++ = *addr++;\n\n"
        "  return CNN_OK;\n}\n\n"
    )
    lines.append(_POWER[fw.device])
    return "".join(lines)


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

  MXC_NVIC_SetVector(CNN_IRQn, CNN_ISR); // the accelerator's done interrupt

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
    "MAX78000": _ENABLE_COMMON.replace("{delay}", "").replace("{pll}", ""),
    "MAX78002": _ENABLE_COMMON.replace(
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
            out.append(_define(f"BIAS_{q}", values, "0x{:02x}"))
    words: list[np.ndarray] = []
    for addr, data in fw.kernels:
        words.append(np.array([addr, data.size], np.uint32))
        words.append(data)
    words.append(np.zeros(1, np.uint32))
    out.append(_define("KERNELS", np.concatenate(words).tolist()))
    return "".join(out)


def sampledata_h(fw: Firmware) -> str:
    out = [HEADER.format(name="sampledata.h", device=fw.device, what="sample input")]
    for i, words in enumerate([w for _, w in fw.inputs] or fw.fifo_inputs):
        out.append(_define(f"SAMPLE_INPUT_{i}", words.tolist()))
    return "".join(out)


def _load_input(fw: Firmware) -> str:
    """main.c's load_input: memcpy32 where the first layer reads, or word by word into the
    FIFOs (each write waits while its FIFO is full: FIFO status bit k)."""
    if not fw.fifo:
        out = ["\nvoid load_input(void)\n{\n"]
        out.append("  // The sample input, where the first layer reads it\n")
        for i, (addr, words) in enumerate(fw.inputs):
            out.append(f"  memcpy32((uint32_t *) 0x{addr:08x}, input_{i}, {words.size});\n")
        return "".join(out) + "}\n\n"
    n = max(w.size for w in fw.fifo_inputs)
    out = [
        "\nvoid load_input(void)\n{\n"
        "  // The sample input through the FIFOs, after cnn_start: the accelerator reads as it\n"
        "  // arrives (drop a wait when the source cannot outrun the network)\n"
        "  uint32_t i;\n"
        + "".join(f"  const uint32_t *in{k} = input_{k};\n" for k in range(len(fw.fifo_inputs)))
        + f"\n  for (i = 0; i < {n}; i++) {{\n"
    ]
    for k, words in enumerate(fw.fifo_inputs):
        body = (
            f"while ((*((volatile uint32_t *) 0x{FIFO_STAT:08x}) & {1 << k}) != 0)\n"
            f"      ; // FIFO {k} full\n"
            f"    *((volatile uint32_t *) 0x{FIFO_DATA + 4 * k:08x}) = *in{k}++;"
            f" // FIFO {k} data\n"
        )
        if words.size < n:  # a FIFO with fewer words stops early
            body = f"if (i < {words.size}) {{\n    " + body.replace("\n", "\n  ") + "}\n"
        out.append("    " + body)
    return "".join(out) + "  }\n}\n\n"


def sampleoutput_h(fw: Firmware) -> str:
    head = HEADER.format(name="sampleoutput.h", device=fw.device, what="known answers")
    return head + _define("SAMPLE_OUTPUT", fw.kat.tolist())


def main_c(fw: Firmware) -> str:
    out = [HEADER.format(name="main.c", device=fw.device, what="known-answer self-test")]
    out.append(
        "\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
        '#include "mxc.h"\n#include "cnn.h"\n#include "sampledata.h"\n#include "sampleoutput.h"\n\n'
        "volatile uint32_t cnn_time; // inference time, set by CNN_ISR\n\n"
        'void fail(void)\n{\n  printf("\\n*** FAIL ***\\n\\n");\n  while (1)\n    ;\n}\n\n'
    )
    for i, _ in enumerate(fw.inputs or fw.fifo_inputs):
        out.append(f"static const uint32_t input_{i}[] = SAMPLE_INPUT_{i};\n")
    out.append(_load_input(fw))
    out.append(
        "// (address, mask, count, values...) runs, 0 ends: the simulator's output for the sample\n"
        "static const uint32_t sample_output[] = SAMPLE_OUTPUT;\n\n"
        "int check_output(void)\n{\n"
        "  uint32_t mask, len, i;\n  volatile uint32_t *addr;\n"
        "  const uint32_t *ptr = sample_output;\n\n"
        "  while ((addr = (volatile uint32_t *) (uintptr_t) *ptr++) != 0) {\n"
        "    mask = *ptr++;\n    len = *ptr++;\n    for (i = 0; i < len; i++, addr++, ptr++)\n"
        "      if ((*addr & mask) != *ptr) {\n"
        '        printf("Mismatch at 0x%08x: expected 0x%08x, read 0x%08x\\n",\n'
        "               (unsigned) (uintptr_t) addr,\n"
        "               (unsigned) *ptr, (unsigned) (*addr & mask));\n"
        "        return CNN_FAIL;\n      }\n  }\n  return CNN_OK;\n}\n\n"
        "int main(void)\n{\n"
        "  MXC_ICC_Enable(MXC_ICC0);\n"
        "  MXC_SYS_Clock_Select(MXC_SYS_CLOCK_IPO);\n  SystemCoreClockUpdate();\n\n"
        '  printf("Waiting...\\n");\n'
        "  MXC_Delay(SEC(2)); // a debugger can still attach\n\n"
    )
    if fw.device == "MAX78002":
        out.append(
            "  MXC_GCR->ipll_ctrl |= MXC_F_GCR_IPLL_CTRL_EN; // the CNN runs from the PLL\n"
            "  cnn_enable(MXC_S_GCR_PCLKDIV_CNNCLKSEL_IPLL, MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV4);\n"
        )
    else:
        out.append(
            "  cnn_enable(MXC_S_GCR_PCLKDIV_CNNCLKSEL_PCLK, MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV1);\n"
        )
    out.append(
        "\n  cnn_init();\n  cnn_load_weights();\n  cnn_load_bias();\n  cnn_configure();\n"
        + (
            "  cnn_start();\n  load_input(); // through the FIFOs, while it runs\n\n"
            if fw.fifo
            else "  load_input();\n  cnn_start();\n\n"
        )
        + "  while (cnn_time == 0)\n    MXC_LP_EnterSleepMode();\n\n"
        "  if (check_output() != CNN_OK)\n    fail();\n"
        '  printf("\\n*** PASS ***\\n\\nInference time: %u us\\n", (unsigned) cnn_time);\n'
        "  cnn_disable();\n  return 0;\n}\n"
    )
    return "".join(out)


def makefile(fw: Firmware) -> str:
    return (
        "# Written by cnnforge. An MSDK project: `make` with MAXIM_PATH set builds it\n"
        f"# for the {fw.device}.\n"
        'ifeq "$(MAXIM_PATH)" ""\n$(error MAXIM_PATH must point to the MSDK)\nendif\n'
        f"TARGET ?= {fw.device}\nBOARD ?= EvKit_V1\n"
        "include ./project.mk\ninclude $(MAXIM_PATH)/Examples/$(TARGET)/CNN/Makefile.inc\n"
    )


def project_mk(fw: Firmware) -> str:
    return (
        "# Written by cnnforge: project settings for the MSDK build.\n"
        f"TARGET = {fw.device}\nIPATH += .\nVPATH += .\n"
        "# The CNN's weights live in flash; no RISC-V core in this project.\n"
    )


def write_folder(fw: Firmware, folder: Path) -> list[Path]:
    """Write the project files into ``folder``; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "cnn.h": cnn_h(fw),
        "cnn.c": cnn_c(fw),
        "weights.h": weights_h(fw),
        "main.c": main_c(fw),
        "sampledata.h": sampledata_h(fw),
        "sampleoutput.h": sampleoutput_h(fw),
        "softmax.c": SOFTMAX_C,
        "Makefile": makefile(fw),
        "project.mk": project_mk(fw),
    }
    written = []
    for name, text in files.items():
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
