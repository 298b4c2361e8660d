"""Flash bytes of the firmware (targets/max7800x/firmware/flash.py): the weights are exactly
weights.h's arrays, the code is measured with the Cortex-M4 toolchain (else an estimate that
says so), and ``compile --firmware`` prints both and puts them in report.html and summary.json."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cnnforge.targets.max7800x.firmware import flash
from cnnforge.targets.max7800x.firmware.flash import ARM_CODEGEN, HOST, flash_bytes, weight_bytes
from cnnforge.targets.max7800x.firmware.writer import write_folder
from support.cli import run_cli
from support.firmware import GOLDEN, demo_firmware

ARM_GCC = shutil.which("arm-none-eabi-gcc")
ARM_SIZE = shutil.which("arm-none-eabi-size")
needs_arm = pytest.mark.skipif(
    ARM_GCC is None or ARM_SIZE is None, reason="arm-none-eabi-gcc absent (.ci/run installs it)"
)


def _sections(obj: Path) -> dict[str, int]:
    assert ARM_SIZE is not None
    out = subprocess.run([ARM_SIZE, "-A", str(obj)], capture_output=True, text=True, check=True)
    rows = [line.split() for line in out.stdout.splitlines()]
    return {r[0]: int(r[1]) for r in rows if len(r) >= 2 and r[0].startswith(".")}


@needs_arm
@pytest.mark.parametrize("name", ["MAX78000-mnist", "MAX78002-kws20_v3_1"])
def test_weight_bytes_are_the_arrays_of_weights_h(name: str, tmp_path: Path) -> None:
    """The kernel records and bias arrays, as the Arm compiler lays them out in flash."""
    assert ARM_GCC is not None
    fw = demo_firmware(name)
    write_folder(fw, tmp_path)
    cmd = [ARM_GCC, *ARM_CODEGEN, "-fdata-sections", "-I", str(HOST), "-c", "cnn.c"]
    subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)
    sections = _sections(tmp_path / "cnn.o")
    arrays = {k: v for k, v in sections.items() if k == ".rodata.kernels" or "bias_" in k}
    assert ".rodata.kernels" in arrays
    assert weight_bytes(fw) == sum(arrays.values())


@needs_arm
def test_code_is_measured_without_the_data_arrays(tmp_path: Path) -> None:
    fw = demo_firmware("MAX78000-mnist")
    write_folder(fw, tmp_path)
    measured = flash_bytes(fw, tmp_path)
    assert measured.measured and "arm-none-eabi-size" in measured.how
    # The code is far smaller than the data (kernels, sample input, known answers) ...
    assert 1000 < measured.code < weight_bytes(fw)
    # ... and the estimate without a compiler is in its neighbourhood.
    estimate = flash.estimate_code(fw)
    assert measured.code / 2 < estimate < measured.code * 2


@needs_arm
def test_riscv_code_counts_both_images(tmp_path: Path) -> None:
    """--riscv: main.c (Cortex-M4) and the RISC-V image (main_riscv.c, cnn.c, softmax.c) both
    sit in flash; without a RISC-V compiler the latter is built as Cortex-M4 code, and the
    line says so."""
    plain, riscv = tmp_path / "plain", tmp_path / "riscv"
    write_folder(demo_firmware("MAX78000-mnist"), plain)
    fw = demo_firmware("MAX78000-mnist-riscv")
    write_folder(fw, riscv)
    one, two = flash_bytes(demo_firmware("MAX78000-mnist"), plain), flash_bytes(fw, riscv)
    assert two.measured and "RISC-V" in two.how
    # the self-test moved to the RISC-V image; the Cortex-M4 image only boots it
    assert two.code > one.code
    if not any(map(shutil.which, flash.RISCV_GCCS)):
        assert "built as Cortex-M4 code: no RISC-V compiler" in two.how
        assert two.code < 1.5 * one.code


def test_without_the_toolchain_code_is_an_estimate_that_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(flash.shutil, "which", lambda _: None)
    fw = demo_firmware("MAX78000-mnist")
    write_folder(fw, tmp_path)
    got = flash_bytes(fw, tmp_path)
    assert not got.measured and got.how == "estimate, no arm-none-eabi-gcc"
    assert got.code == flash.estimate_code(fw) and got.weights == weight_bytes(fw)
    assert "estimate" in got.to_dict()["text"]


def test_cli_compile_firmware_prints_flash_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """README/docs: `compile ... --firmware` gives the flash bytes of weights and code in its
    summary, summary.json and report.html (without --run the code is an estimate)."""
    data = np.load(GOLDEN / "known" / "MAX78000-mnist.npz")
    np.save(tmp_path / "x.npy", data["input"])
    out = tmp_path / "out"
    args = ["compile", "--ai8x-yaml", str(GOLDEN / "networks" / "mnist-chw-ai85.yaml")]
    args += ["--ai8x-checkpoint", str(GOLDEN / "trained" / "ai85-mnist-qat8-q.int8.pth.tar")]
    args += ["--sample", str(tmp_path / "x.npy"), "-o", str(out), "--firmware"]
    code, printed, err = run_cli(args, capsys)
    assert code == 0, err
    record = json.loads((out / "summary.json").read_text(encoding="utf-8"))["flash"]
    assert record["weights"] == weight_bytes(demo_firmware("MAX78000-mnist"))
    assert record["code"] > 0 and not record["measured"] and "pass --run" in record["how"]
    assert "firmware flash" in printed and f"{record['weights']:,} bytes" in printed
    assert record["text"] in (out / "report.html").read_text(encoding="utf-8")
