"""Flash bytes of a firmware folder: the weights (weights.h's arrays) and the code.

Weights are counted exactly from the arrays weights.h holds (the kernel loader's records as 32-bit
words, the bias bytes). Code is measured when the Cortex-M4 toolchain is at hand: cnn.c, main.c
and softmax.c are built as the MSDK builds them, with the data headers (weights.h, sampledata.h,
sampleoutput.h) replaced by one-element arrays, and ``arm-none-eabi-size`` counts every section
that lands in flash except those arrays. With ``--riscv`` the flash holds two images: main.c's
(Cortex-M4) and the RISC-V core's (main_riscv.c, cnn.c, softmax.c); the latter is built with a
RISC-V compiler where one is on PATH, else with the Cortex-M4's as a stand-in (RV32IMC and
Thumb-2 code are of a size), and the line says which. Without the toolchain the code is an
estimate, and says so.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from cnnforge.owners import scratch_dir
from cnnforge.targets.max7800x.firmware.firmware import Firmware

HOST = Path(__file__).with_name("host")  # the stand-in MSDK headers
# The Cortex-M4F of both parts as the MSDK builds for it; the tests add warnings as errors.
ARM_CODEGEN = ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16", "-O2")
ARM_FLAGS = (*ARM_CODEGEN, "-Wall", "-Wextra", "-Werror")
SOURCES = ("cnn.c", "main.c", "softmax.c")  # the Cortex-M4's sources (softmax.c: --softmax)


def arm_sources(folder: Path) -> list[str]:
    """The Cortex-M4 sources a folder holds (with --riscv, main_riscv.c and cnn.c run on the
    RISC-V core and are not among them)."""
    riscv = (folder / "main_riscv.c").is_file()
    return [n for n in SOURCES if (folder / n).is_file() and not (riscv and n != "main.c")]


# The estimate: the fixed functions (enable, load loops, unload, check, main, softmax) and the
# bytes one register write costs in Thumb-2 on average (measured on the shipped models: 5-6).
_FIXED_CODE = 1300
_PER_WRITE = 6


@dataclass(frozen=True)
class FlashBytes:
    """Flash the firmware needs: weights and code, and how the code was counted."""

    weights: int
    code: int
    measured: bool  # False: ``code`` is an estimate
    how: str

    def line(self) -> str:
        """One line for the compile summary and the report."""
        return f"weights {self.weights:,} bytes, code {self.code:,} bytes ({self.how})"

    def to_dict(self) -> dict[str, object]:
        """summary.json's record (with the line the CLI and the report show)."""
        return {**asdict(self), "text": self.line()}


def weight_bytes(fw: Firmware) -> int:
    """Bytes of weights.h's arrays: KERNELS (address, count, words per record, 0 ends) as 32-bit
    words, and one byte per bias entry."""
    words = sum(2 + data.size for _, data in fw.kernels) + 1
    return 4 * words + sum(len(values) for values in fw.bias)


def estimate_code(fw: Firmware) -> int:
    """Code bytes without a compiler: fixed functions, register writes, the unload table."""
    writes = len(fw.init) + len(fw.configure)
    runs = 1
    kat = fw.kat.tolist()
    i = 0
    while i < len(kat) and kat[i] != 0:  # cnn_unload's (address, count) runs
        runs += 2
        i += 3 + kat[i + 2]
    return _FIXED_CODE + _PER_WRITE * writes + 4 * runs


def _stubs(fw: Firmware) -> dict[str, str]:
    """weights.h, sampledata.h, sampleoutput.h with every array one element long."""
    bias = "".join(f"#define BIAS_{q} {{ 0 }}\n" for q, v in enumerate(fw.bias) if v)
    data = "".join(f"#define SAMPLE_INPUT_{n} {{ 0 }}\n" for n in fw.input_names)
    return {
        "weights.h": "#define KERNELS { 0 }\n" + bias,
        "sampledata.h": data,
        "sampleoutput.h": "#define SAMPLE_OUTPUT { 0 }\n",
    }


def _data_section(name: str) -> bool:
    """A section of one of the stubbed data arrays (-fdata-sections names it after the array)."""
    arrays = ("kernels", "sample_output")
    prefixes = ("bias_", "input_")
    base = name.removeprefix(".rodata.")
    return name.startswith(".rodata.") and (base in arrays or base.startswith(prefixes))


# RISC-V compilers (the MSDK's xPack one, Debian's) and the RISC-V core's code generation
RISCV_GCCS = ("riscv-none-elf-gcc", "riscv64-unknown-elf-gcc")
RISCV_CODEGEN = ("-march=rv32imc", "-mabi=ilp32", "-O2")
_FLASH_SECTIONS = (".text", ".rodata", ".data", ".srodata", ".sdata")  # .s*: RISC-V small data


def riscv_sources(folder: Path) -> list[str]:
    """The RISC-V core's sources of a --riscv folder (none without main_riscv.c)."""
    if not (folder / "main_riscv.c").is_file():
        return []
    return [n for n in ("main_riscv.c", "cnn.c", "softmax.c") if (folder / n).is_file()]


def _code_bytes(work: Path, sources: list[str], gcc: str, size: str, codegen: tuple) -> int:
    """Flash bytes of the code of ``sources`` (in ``work``, data headers stubbed)."""
    # -w: the one-element stand-ins for the data arrays are read past their end.
    flags = [*codegen, "-w", "-ffunction-sections", "-fdata-sections", "-I", str(HOST)]
    procs = [
        subprocess.Popen(
            [gcc, *flags, "-c", src, "-o", f"{Path(src).stem}.o"],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for src in sources
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{Path(gcc).name} failed: {err.strip()[-300:]}")
    objects = [f"{Path(src).stem}.o" for src in sources]
    out = subprocess.run(
        [size, "-A", *objects], cwd=work, capture_output=True, text=True, check=True
    ).stdout
    total = 0
    for line in out.splitlines():
        parts = line.split()
        in_flash = len(parts) >= 2 and parts[0].startswith(_FLASH_SECTIONS)
        if in_flash and not _data_section(parts[0]):
            total += int(parts[1])
    return total


def measure_code(fw: Firmware, folder: Path, gcc: str, size: str) -> tuple[int, str]:
    """(code bytes, how) of the folder's sources (see the module text)."""
    from cnnforge.targets.max7800x.firmware.hostrun import _RISCV_ONLY

    with scratch_dir("flash") as tmp:
        work = Path(tmp)
        arm, riscv = arm_sources(folder), riscv_sources(folder)
        for name in {*arm, *riscv, "cnn.h"}:
            shutil.copy(folder / name, work / name)
        for name, text in _stubs(fw).items():
            (work / name).write_text(text, encoding="utf-8")
        code = _code_bytes(work, arm, gcc, size, ARM_CODEGEN)
        if not riscv:
            return code, "arm-none-eabi-size, Cortex-M4 -O2"
        rv_gcc = next(filter(None, map(shutil.which, RISCV_GCCS)), None)
        rv_size = rv_gcc and shutil.which(rv_gcc.removesuffix("gcc") + "size")
        if rv_gcc and rv_size:
            rv = _code_bytes(work, riscv, rv_gcc, rv_size, RISCV_CODEGEN)
            return code + rv, f"Cortex-M4 -O2 {code:,} + RISC-V -O2 {rv:,}, measured"
        for name in riscv:  # the Cortex-M4's compiler as the stand-in: no RISC-V-only syntax
            text = (work / name).read_text(encoding="utf-8")
            for riscv_only, host in _RISCV_ONLY:
                text = text.replace(riscv_only, host)
            (work / name).write_text(text, encoding="utf-8")
        rv = _code_bytes(work, riscv, gcc, size, ARM_CODEGEN)
        how = f"Cortex-M4 -O2 {code:,} + RISC-V image {rv:,} built as Cortex-M4 code"
        return code + rv, f"{how}: no RISC-V compiler"


def flash_bytes(fw: Firmware, folder: Path, measure: bool = True) -> FlashBytes:
    """The flash a written firmware folder needs; ``measure``: build it when the toolchain is
    on PATH (else, and when it fails, the estimate)."""
    weights = weight_bytes(fw)
    gcc, size = shutil.which("arm-none-eabi-gcc"), shutil.which("arm-none-eabi-size")
    if measure and gcc and size:
        try:
            code, how = measure_code(fw, folder, gcc, size)
        except (RuntimeError, OSError, subprocess.SubprocessError):
            pass
        else:
            return FlashBytes(weights, code, True, how)
    why = "no arm-none-eabi-gcc" if not (gcc and size) else "not built: pass --run"
    if measure and gcc and size:
        why = "the Cortex-M4 build failed"
    return FlashBytes(weights, estimate_code(fw), False, f"estimate, {why}")
