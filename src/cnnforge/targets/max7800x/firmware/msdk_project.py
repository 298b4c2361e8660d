"""The MSDK project files of the firmware folder, as the vendor tool writes them for a network.

Without ``--riscv``: the MSDK's project template, ``Makefile`` (part and board, the MSDK's
``libs.mk`` and the part's CMSIS rules ``<part>.mk``, every ``.c`` of the folder) and an empty
``project.mk`` for the user's settings. With ``--riscv``: the dual-core build of the MSDK's
RISC-V CNN examples, ``Makefile`` (joins both images), ``Makefile.ARM`` (main.c) and
``Makefile.RISCV`` (main_riscv.c, cnn.c, softmax.c). Learned from the vendor tool's
the vendor tool's project templates and Makefiles and from the MSDK's CNN examples; the templates
are cnnforge's own (``templates/*.j2``). docs/firmware.md says how to build and flash.
"""

from __future__ import annotations

import functools
from importlib import resources

import jinja2

from cnnforge.targets.max7800x.device import MAX78000, MAX78002
from cnnforge.targets.max7800x.firmware.firmware import Firmware

# Where the folder sits when MAXIM_PATH is not set: the MSDK's Examples/<part>/CNN/<name>/.
DEPTH = "../../../../"
BOARD = "EvKit_V1"  # the evaluation kit of both parts (BOARD=FTHR_RevA: the MAX78000 feather)
# The compiler switches the vendor's projects define, per core
ARM_DEFINES = ("MXC_ASSERT_ENABLE", "ARM_MATH_CM4")
RISCV_DEFINES = ("MXC_ASSERT_ENABLE", "RV32")
# The end of the flash the RISC-V image may use (the part's flash: 512 KiB / 2.5 MiB)
FLASH_END = {MAX78000.name: 0x10080000, MAX78002.name: 0x10280000}

MAKE_HEADER = """\
# {name} -- written by cnnforge for the {device} CNN accelerator ({what}).
# SPDX-License-Identifier: Apache-2.0
# How to build and flash: docs/firmware.md of cnnforge. {advice}
"""
REGENERATE = "Regenerate instead of editing."


def template_text(name: str) -> str:
    """The text of templates/``name`` as stored (softmax.c is copied into the folder as is)."""
    folder = resources.files("cnnforge.targets.max7800x.firmware")
    return folder.joinpath("templates", name).read_text("utf-8")


@functools.cache
def templates(c_source: bool = False) -> jinja2.Environment:
    """The firmware's jinja2 templates (templates/); ``c_source``: a tag's line leaves no trace
    (trim_blocks, lstrip_blocks), so C templates read as the C they write."""
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(template_text),
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=c_source,
        lstrip_blocks=c_source,
    )


def _render(
    template: str, name: str, fw: Firmware, what: str, advice: str = REGENERATE, **values: object
) -> str:
    header = MAKE_HEADER.format(name=name, device=fw.device, what=what, advice=advice)
    common = {"target": fw.device, "target_lc": fw.device.lower(), "board": BOARD, "depth": DEPTH}
    return templates().get_template(template).render(header=header, **common, **values)


def build_files(fw: Firmware) -> dict[str, str]:
    """{file name: text} of the folder's build files (see the module text)."""
    if fw.options.riscv:
        return _dual_core(fw)
    makefile = _render(
        "Makefile.j2",
        "Makefile",
        fw,
        "the MSDK project build",
        vpaths=(".", "src"),
        ipaths=(".", "include"),
        defines=ARM_DEFINES,
        float_abi="softfp",
    )
    mine = "Your own settings go here."
    project = _render("project.mk.j2", "project.mk", fw, "the project's build settings", mine)
    return {"Makefile": makefile, "project.mk": project}


def _dual_core(fw: Firmware) -> dict[str, str]:
    """--riscv: the top Makefile and one Makefile per core."""
    project = fw.device.lower()
    riscv_sources = ["main_riscv.c", "cnn.c", *(["softmax.c"] if fw.options.softmax else [])]
    cores = {
        "Makefile.ARM": ("Cortex-M4", ["main.c"], ARM_DEFINES, False),
        "Makefile.RISCV": ("RISC-V", riscv_sources, RISCV_DEFINES, True),
    }
    files = {
        "Makefile": _render(
            "Makefile.dual.j2",
            "Makefile",
            fw,
            "the MSDK dual-core build",
            project=project,
            flash_end=f"0x{FLASH_END[fw.device]:08x}",
        )
    }
    for name, (core, sources, defines, riscv) in cores.items():
        files[name] = _render(
            "Makefile.core.j2",
            name,
            fw,
            f"the {core} image",
            core_name=core,
            sources=sources,
            defines=[f"-D{d}" for d in defines],
            riscv=riscv,
            project=project,
        )
    return files
