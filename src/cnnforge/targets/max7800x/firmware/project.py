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
from cnnforge.targets.max7800x.firmware.msdk_project import templates
from cnnforge.targets.max7800x.firmware.regmap import FIFO_DATA, FIFO_STAT


def application(fw: Firmware) -> dict[str, str]:
    """{name: text}: main.c, and with --riscv main_riscv.c."""
    if fw.options.riscv:
        return {"main.c": _arm_boot(fw), "main_riscv.c": _self_test(fw, "main_riscv.c")}
    return {"main.c": _self_test(fw, "main.c")}


def _header(name: str, device: str, what: str) -> str:
    return HEADER.format(name=name, device=device, what=what)


def _self_test(fw: Firmware, name: str) -> str:
    """load_input, check_output (unless --no-kat), softmax_layer (--softmax) and main
    (templates/main.c.j2)."""
    o = fw.options
    core = "RISC-V" if o.riscv else "Cortex-M4"
    return (
        templates(c_source=True)
        .get_template("main.c.j2")
        .render(
            header=_header(name, fw.device, f"known-answer self-test on the {core}"),
            o=o,
            fifo=fw.fifo,
            pll=fw.device == MAX78002.name,  # its CNN runs from the PLL
            section='__attribute__((section(".rvflash_section"))) ' if o.riscv else "",
            input_names=fw.input_names,
            inputs=[]
            if fw.fifo
            else [(n, a, w.size) for n, (a, w) in zip(fw.input_names, fw.inputs, strict=True)],
            fifo_words=[w.size for w in fw.fifo_inputs] if fw.fifo else [],
            fifo_stat=FIFO_STAT,
            fifo_data=FIFO_DATA,
            softmax_shift=8 - fw.facts[-1].quant if o.softmax else 0,  # 8: no weights
        )
    )


def _arm_boot(fw: Firmware) -> str:
    """--riscv: the Cortex-M4 sets the RISC-V core's boot address, starts it and sleeps until
    main_riscv.c signals the end through the semaphore interrupt (templates/main_boot.c.j2)."""
    header = _header("main.c", fw.device, "Cortex-M4: boots the RISC-V core")
    return templates(c_source=True).get_template("main_boot.c.j2").render(header=header)
