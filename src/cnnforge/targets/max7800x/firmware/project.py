"""The application side of the firmware folder: main.c (and main_riscv.c).

main.c is the known-answer self-test on the Cortex-M4; with ``--riscv`` (the vendor's mnist-riscv
layout) main.c only boots the RISC-V core, and main_riscv.c runs the same self-test there. The
options of the vendor tool decide what the self-test does: ``--no-kat`` drops the check,
``--softmax`` unloads the output and prints the softmax per class, ``--no-unload`` leaves
cnn_unload out, ``--boost P.N`` drives the boost pin while the accelerator runs.
"""

from __future__ import annotations

from cnnforge.targets.max7800x.device import MAX78002
from cnnforge.targets.max7800x.firmware.firmware import HEADER, Firmware
from cnnforge.targets.max7800x.firmware.regmap import FIFO_DATA, FIFO_STAT

_INCLUDES = "\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"


def application(fw: Firmware) -> dict[str, str]:
    """{name: text}: main.c, and with --riscv main_riscv.c."""
    if fw.options.riscv:
        return {"main.c": _arm_boot(fw), "main_riscv.c": _self_test(fw, "main_riscv.c")}
    return {"main.c": _self_test(fw, "main.c")}


def _header(name: str, device: str, what: str) -> str:
    return HEADER.format(name=name, device=device, what=what)


def _self_test(fw: Firmware, name: str) -> str:
    """load_input, check_output (unless --no-kat), softmax_layer (--softmax) and main."""
    o = fw.options
    core = "RISC-V" if o.riscv else "Cortex-M4"
    out = [_header(name, fw.device, f"known-answer self-test on the {core}")]
    out.append(_INCLUDES + '#include "mxc.h"\n#include "cnn.h"\n#include "sampledata.h"\n')
    if o.kat:
        out.append('#include "sampleoutput.h"\n')
    out.append(
        "\nvolatile uint32_t cnn_time; // inference time, set by the done interrupt\n\n"
        'void fail(void)\n{\n  printf("\\n*** FAIL ***\\n\\n");\n  while (1)\n    ;\n}\n\n'
    )
    section = '__attribute__((section(".rvflash_section"))) ' if o.riscv else ""
    for n in fw.input_names:
        out.append(f"{section}static const uint32_t input_{n}[] = SAMPLE_INPUT_{n};\n")
    out.append(_load_input(fw))
    if o.kat:
        out.append(_CHECK_OUTPUT)
    if o.softmax:
        out.append(_softmax_layer(fw))
    elif o.unload:
        out.append("static uint32_t ml_data[CNN_NUM_OUTPUTS]; // the unloaded output words\n\n")
    out.append(_main(fw))
    return "".join(out)


def _load_input(fw: Firmware) -> str:
    """main.c's load_input: memcpy32 where the first layer reads, or word by word into the
    FIFOs (each write waits while its FIFO is full: FIFO status bit k)."""
    if not fw.fifo:
        out = ["\nvoid load_input(void)\n{\n"]
        out.append("  // The sample input, where the first layer reads it\n")
        for n, (addr, words) in zip(fw.input_names, fw.inputs, strict=True):
            out.append(f"  memcpy32((uint32_t *) 0x{addr:08x}, input_{n}, {words.size});\n")
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


_CHECK_OUTPUT = (
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
)


def _softmax_layer(fw: Firmware) -> str:
    """cnn_unload into ml_data, then the softmax (Q17.14 in; fewer than 8 weight bits: the
    outputs are shifted up by 8 - bits first, as the vendor's softmax_layer does)."""
    last = fw.facts[-1]
    shift = 8 - last.quant  # 8 for layers without weights
    call = (
        "softmax_q17p14_q15((const q31_t *) ml_data, CNN_NUM_OUTPUTS, ml_softmax);"
        if shift == 0
        else f"softmax_shift_q17p14_q15((q31_t *) ml_data, CNN_NUM_OUTPUTS, {shift}, ml_softmax);"
    )
    return (
        "// The classification: the output words and their softmax (Q15)\n"
        "static int32_t ml_data[CNN_NUM_OUTPUTS];\nstatic q15_t ml_softmax[CNN_NUM_OUTPUTS];\n\n"
        "void softmax_layer(void)\n{\n  cnn_unload((uint32_t *) ml_data);\n"
        f"  {call}\n}}\n\n"
    )


def _main(fw: Firmware) -> str:
    o = fw.options
    out = ["int main(void)\n{\n"]
    if o.softmax:
        out.append("  int i, digs, tens;\n\n")
    if o.riscv:
        out.append("  MXC_ICC_Enable(MXC_ICC1); // the RISC-V core's cache\n\n")
    else:
        out.append(
            "  MXC_ICC_Enable(MXC_ICC0);\n"
            "  MXC_SYS_Clock_Select(MXC_SYS_CLOCK_IPO);\n  SystemCoreClockUpdate();\n\n"
            '  printf("Waiting...\\n");\n'
            "  MXC_Delay(SEC(2)); // a debugger can still attach\n\n"
        )
    if fw.device == MAX78002.name:  # its CNN runs from the PLL
        out.append(
            "  MXC_GCR->ipll_ctrl |= MXC_F_GCR_IPLL_CTRL_EN; // the CNN runs from the PLL\n"
            "  cnn_enable(MXC_S_GCR_PCLKDIV_CNNCLKSEL_IPLL, MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV4);\n"
        )
    else:
        out.append(
            "  cnn_enable(MXC_S_GCR_PCLKDIV_CNNCLKSEL_PCLK, MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV1);\n"
        )
    if o.boost is not None:
        port, pin = o.boost
        out.append(
            f"  cnn_boost_enable(MXC_GPIO{port}, MXC_GPIO_PIN_{pin}); // P{port}.{pin}: boost on\n"
        )
    # RISC-V: wait for the interrupt (a basic asm statement is volatile already)
    sleep = '    __asm__("wfi");\n' if o.riscv else "    MXC_LP_EnterSleepMode();\n"
    out.append(
        "\n  cnn_init();\n  cnn_load_weights();\n  cnn_load_bias();\n  cnn_configure();\n"
        + (
            "  cnn_start();\n  load_input(); // through the FIFOs, while it runs\n\n"
            if fw.fifo
            else "  load_input();\n  cnn_start();\n\n"
        )
        + f"  while (cnn_time == 0)\n{sleep}\n"
    )
    if o.boost is not None:
        port, pin = o.boost
        out.append(
            f"  cnn_boost_disable(MXC_GPIO{port}, MXC_GPIO_PIN_{pin}); // P{port}.{pin}: off\n\n"
        )
    if o.kat:
        out.append("  if (check_output() != CNN_OK)\n    fail();\n")
    if o.softmax:
        out.append("  softmax_layer();\n")
    elif o.unload:
        out.append("  cnn_unload(ml_data);\n")
    verdict = "PASS" if o.kat else "DONE (no known-answer check)"
    out.append(
        f'  printf("\\n*** {verdict} ***\\n\\nInference time: %u us\\n", (unsigned) cnn_time);\n'
        "  cnn_disable();\n"
    )
    if o.softmax:
        out.append(
            '\n  printf("Classification results:\\n");\n'
            "  for (i = 0; i < CNN_NUM_OUTPUTS; i++) {\n"
            "    digs = (1000 * ml_softmax[i] + 0x4000) >> 15; // per mille, rounded\n"
            "    tens = digs % 10;\n    digs = digs / 10;\n"
            '    printf("[%7d] -> Class %d: %d.%d%%\\n", (int) ml_data[i], i, digs, tens);\n'
            "  }\n"
        )
    if o.riscv:
        out.append(
            "\n  MXC_SEMA->irq0 = MXC_F_SEMA_IRQ0_EN | MXC_F_SEMA_IRQ0_CM4_IRQ;"
            " // wake the Cortex-M4\n"
        )
    out.append("  return 0;\n}\n")
    return "".join(out)


def _arm_boot(fw: Firmware) -> str:
    """--riscv: the Cortex-M4 sets the RISC-V core's boot address, starts it and sleeps until
    main_riscv.c signals the end through the semaphore interrupt."""
    return (
        _header("main.c", fw.device, "Cortex-M4: boots the RISC-V core")
        + _INCLUDES
        + '#include "mxc.h"\n#include "fcr_regs.h"\n#include "sema_regs.h"\n\n'
        "extern volatile void const *__FlashStart_; // the RISC-V image (linker file)\n\n"
        "void WakeISR(void)\n{\n"
        "  MXC_SEMA->irq0 = MXC_F_SEMA_IRQ0_EN & ~MXC_F_SEMA_IRQ0_CM4_IRQ; // acknowledge\n}\n\n"
        "int main(void)\n{\n"
        "  MXC_ICC_Enable(MXC_ICC0);\n"
        "  MXC_SYS_Clock_Select(MXC_SYS_CLOCK_IPO);\n  SystemCoreClockUpdate();\n\n"
        "  MXC_FCR->urvbootaddr = (uint32_t) (uintptr_t) &__FlashStart_; // RISC-V boots here\n"
        "  MXC_SYS_ClockEnable(MXC_SYS_PERIPH_CLOCK_SMPHR); // the semaphores it signals with\n"
        "  MXC_NVIC_SetVector(RISCV_IRQn, WakeISR);\n\n"
        "  MXC_Delay(SEC(2)); // a debugger can still attach\n\n"
        "  MXC_SYS_ClockEnable(MXC_SYS_PERIPH_CLOCK_CPU1); // start the RISC-V core\n"
        "  MXC_LP_EnterSleepMode(); // until it is done\n\n"
        "  return 0;\n}\n"
    )

