"""cnnforge's MAX7800x firmware against the vendor tool's, register for register.

tests/data/firmware_state holds, per vendor demo, the state the vendor tool's firmware leaves on
the host after cnn_init, cnn_load_weights, cnn_load_bias, cnn_configure and load_input (every
non-zero register and memory word), the words the sample input adds, the FIFO stream and the
known-answer table -- numbers only, captured by ``benchmarks/firmware_states.py --capture``.
cnnforge writes its own firmware for the same YAML + checkpoint + sample (the trimmed goldens of
tests/golden/ai8x_demos) and must leave the same state: in its Python model for every demo, and
by building and running its C on the host for a few.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cnnforge.pipeline import CompileOptions, compile_model
from cnnforge.targets.max7800x.firmware.firmware import build_firmware, expected_image
from cnnforge.targets.max7800x.firmware.hostrun import HostRunError, run_setup
from cnnforge.targets.max7800x.firmware.writer import write_folder
from support.cli import run_cli
from support.firmware import FIFO, GOLDEN, OWN, STATES, demo_firmware, own_sample, stored

KNOWN = sorted((GOLDEN / "known").glob("*.npz"))
# Small enough to build and run in a few seconds.
HOST_RUN = ["MAX78000-mnist", "MAX78002-mnist", "MAX78000-kws20_v3", "MAX78002-kws20_v3_1"]
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no host C compiler")
ARM_GCC = shutil.which("arm-none-eabi-gcc")
# The Cortex-M4 of both parts, as the MSDK builds for it, warnings as errors.
ARM_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16", "-O2"]
ARM_FLAGS += ["-Wall", "-Wextra", "-Werror"]


def test_every_demo_has_a_state_image() -> None:
    names = {p.stem for p in KNOWN}
    stored = {p.stem for p in STATES.glob("*.npz")}
    assert names <= stored
    assert sum(p.stat().st_size for p in STATES.glob("*.npz")) < 5_000_000


@pytest.mark.parametrize("name", [p.stem for p in KNOWN if p.stem not in FIFO])
def test_model_equals_vendor(name: str) -> None:
    """Every register and memory word, the input words and the known answers."""
    fw = demo_firmware(name)
    state, added = expected_image(fw)
    vendor = stored(name)
    assert state == dict(vendor.state.tolist())
    assert added == dict(vendor.input.tolist())
    assert np.array_equal(fw.kat, vendor.kat)
    assert len(vendor.fifo) == 0


@pytest.mark.parametrize("name", sorted(FIFO))
def test_fifo_input_is_refused_not_written_wrong(name: str) -> None:
    with pytest.raises(NotImplementedError, match="FIFO"):
        demo_firmware(name)


@needs_cc
@pytest.mark.parametrize("name", HOST_RUN)
def test_host_run_equals_vendor(name: str, tmp_path: Path) -> None:
    """cnnforge's C, built and run on the host, leaves the vendor firmware's state."""
    fw = demo_firmware(name)
    write_folder(fw, tmp_path)
    mine = run_setup(tmp_path, fw.device)
    assert mine.differences(stored(name)) == []


def _folder(tmp_path: Path, init: str, load_input: str) -> Path:
    """A minimal firmware folder whose set-up runs ``init`` and ``load_input`` bodies."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cnn.h").write_text("#include <stdint.h>\n", encoding="utf-8")
    (tmp_path / "sampleoutput.h").write_text("#define SAMPLE_OUTPUT { 0 }\n", encoding="utf-8")
    body = "int cnn_load_weights(void) { return 1; }\nint cnn_load_bias(void) { return 1; }\n"
    body += "int cnn_configure(void) { return 1; }\n"
    (tmp_path / "cnn.c").write_text(
        f"#include <stdint.h>\nint cnn_init(void) {{ {init} return 1; }}\n{body}", encoding="utf-8"
    )
    (tmp_path / "main.c").write_text(
        f"#include <stdint.h>\nvoid load_input(void) {{ {load_input} }}\n"
        "int main(void) { return 0; }\n",
        encoding="utf-8",
    )
    return tmp_path


@needs_cc
def test_harness_answers_the_clear_and_times_out_on_other_waits(tmp_path: Path) -> None:
    reg = "(*((volatile uint32_t *) 0x5100000cUL))"
    clear = f"{reg} = 0x1c80; while (({reg} & 0x2000000) == 0); {reg} = 0;"
    image = run_setup(_folder(tmp_path / "a", clear, ""), "MAX78002")
    assert 0x5100000C not in dict(image.state.tolist())
    stuck = "while ((*((volatile uint32_t *) 0x51000004UL) & 1) == 0);"
    with pytest.raises(HostRunError, match="timed out"):
        run_setup(_folder(tmp_path / "b", stuck, ""), "MAX78002", wait_ms=200)


@needs_cc
def test_harness_records_the_fifo_stream(tmp_path: Path) -> None:
    fifo = "(*((volatile uint32_t *) 0x50000008UL))"
    full = "(*((volatile uint32_t *) 0x50000004UL) & 1)"
    load = f"for (uint32_t i = 1; i <= 5; i++) {{ while ({full} != 0); {fifo} = i; }}"
    image = run_setup(_folder(tmp_path, "", load), "MAX78000")
    assert image.fifo.tolist() == [[0x50000008, i] for i in range(1, 6)]


@pytest.mark.skipif(ARM_GCC is None, reason="arm-none-eabi-gcc absent (.ci/run installs it)")
@pytest.mark.parametrize("name", [p.stem for p in KNOWN if p.stem not in FIFO])
def test_builds_for_the_cortex_m4_without_warnings(name: str, tmp_path: Path) -> None:
    """Every generated .c compiles for the chip's Arm core with -Wall -Wextra -Werror."""
    write_folder(demo_firmware(name), tmp_path)
    host = Path(__file__).parents[3] / "src/cnnforge/targets/max7800x/firmware/host"
    for source in sorted(p.name for p in tmp_path.glob("*.c")):
        cmd = [ARM_GCC, *ARM_FLAGS, "-I", str(host), "-I", str(tmp_path), "-c", source]
        proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize(
    "model,device,shape",
    [
        pytest.param(m, d, s, marks=[pytest.mark.slow] if m != "qat-unet" else [])
        for m, d, s, _ in OWN
    ],
)
def test_own_plan_equals_vendor(model: str, device: str, shape: tuple, tmp_path: Path) -> None:
    """``compile MODEL --ptq --firmware``: the firmware it writes leaves the state that the vendor
    tool's firmware for the YAML + checkpoint it also writes leaves (stored image)."""
    sample = tmp_path / "x.npy"
    np.save(sample, own_sample(shape))
    options = CompileOptions(output=tmp_path / "out", model=model, device=device, ptq=True,
                             sample=sample, report=False, firmware=True)  # fmt: skip
    state = compile_model(options)
    assert (tmp_path / "out" / "firmware" / "cnn.c").is_file()
    fw = build_firmware(state.network, state.plan, state.sample, state.answer)
    mine, added = expected_image(fw)
    vendor = stored(f"own-{device}-{model}")
    assert mine == dict(vendor.state.tolist())
    assert added == dict(vendor.input.tolist())
    assert np.array_equal(fw.kat, vendor.kat)


@needs_cc
def test_cli_compile_firmware_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/firmware.md: `compile --ai8x-yaml Y --ai8x-checkpoint C --sample x --firmware --run`
    writes OUT/firmware/, checks its set-up on the host, and it equals the vendor's."""
    data = np.load(GOLDEN / "known" / "MAX78000-mnist.npz")
    np.save(tmp_path / "x.npy", data["input"])
    out = tmp_path / "out"
    args = ["compile", "--ai8x-yaml", str(GOLDEN / "networks" / "mnist-chw-ai85.yaml")]
    args += ["--ai8x-checkpoint", str(GOLDEN / "trained" / "ai85-mnist-qat8-q.int8.pth.tar")]
    args += ["--sample", str(tmp_path / "x.npy"), "-o", str(out), "--firmware", "--run"]
    code, _, err = run_cli([*args, "--no-report"], capsys)
    assert code == 0, err
    names = {p.name for p in (out / "firmware").iterdir()}
    assert {"cnn.h", "cnn.c", "weights.h", "main.c", "sampledata.h", "sampleoutput.h"} <= names
    assert run_setup(out / "firmware", "MAX78000").differences(stored("MAX78000-mnist")) == []


def test_cli_firmware_refuses_fifo_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A network the writer does not cover yet: one line, exit 2, no OUT/."""
    data = np.load(GOLDEN / "known" / "MAX78000-cats-dogs.npz")
    np.save(tmp_path / "x.npy", data["input"])
    args = ["compile", "--ai8x-yaml", str(GOLDEN / "networks" / "cats-dogs-hwc.yaml")]
    args += ["--ai8x-checkpoint", str(GOLDEN / "trained" / "ai85-catsdogs-qat8-q.int8.pth.tar")]
    args += ["--sample", str(tmp_path / "x.npy"), "-o", str(tmp_path / "out"), "--firmware"]
    code, _, err = run_cli([*args, "--no-report"], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "FIFOs" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_cli_firmware_is_for_max7800x_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "compile",
        "qat-unet",
        "--device",
        "HLS",
        "--ptq",
        "-o",
        str(tmp_path / "o"),
        "--firmware",
    ]
    code, _, err = run_cli(args, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "MAX78000/MAX78002" in err
    assert not (tmp_path / "o").exists()
