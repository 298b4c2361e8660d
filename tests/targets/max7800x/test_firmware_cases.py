"""Element-wise layers (add, sub, xor, or; 2 and 3 operands; one pass or several; pooling first
and last; alone or before a convolution or a transposed one; apart from a convolution with
bias on the MAX78002, and its average-pool reset layer), residual networks after a streaming
first layer, streaming 1x1 convolutions, depthwise convolutions (MAX78002; with and without
bias, broadcast or not, over several passes, after an add), 4-, 2-, 1-bit and binary weights,
calcx4 and read-ahead in cnnforge's firmware against the vendor tool's, register for register.

The cases are support/firmware_cases.py's: small networks compiled with ``--ptq --firmware``
(and the vendor pair cnnforge writes for one, its subtractions made xor / or); the vendor tool's
firmware for the same YAML + checkpoint + sample (+ --fifo) left the state stored in
tests/data/firmware_state/<case>.npz (``benchmarks/firmware_states.py --only cases --capture``;
``--only cases:NAME`` for one).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from cnnforge.targets.max7800x.firmware.hostrun import run_setup
from cnnforge.targets.max7800x.firmware.writer import write_folder
from support.cli import run_cli
from support.firmware import ARM_GCC, arm_build, equal_model, own_sample, stored
from support.firmware_cases import CASES, MODELS, Case, case_firmware, compiled

NAMES = list(CASES)


@pytest.mark.parametrize("case", NAMES)
def test_model_equals_vendor(case: str) -> None:
    """Every register and memory word, the input words and the known answers."""
    equal_model(case_firmware(case), stored(case))


@pytest.mark.skipif(shutil.which("cc") is None, reason="no host C compiler")
@pytest.mark.parametrize("case", NAMES)
def test_host_run_equals_vendor(case: str, tmp_path: Path) -> None:
    """cnnforge's C, built and run on the host, leaves the vendor firmware's state."""
    fw = case_firmware(case)
    write_folder(fw, tmp_path)
    assert run_setup(tmp_path, fw.device).differences(stored(case)) == []


@pytest.mark.skipif(ARM_GCC is None, reason="arm-none-eabi-gcc absent (.ci/run installs it)")
@pytest.mark.parametrize("case", NAMES)
def test_builds_for_the_cortex_m4_without_warnings(case: str, tmp_path: Path) -> None:
    write_folder(case_firmware(case), tmp_path)
    arm_build(tmp_path)


def test_oned_register_says_what_it_does() -> None:
    """cnn.c's comments name the operation, its operands and the pooling order."""
    _, out = compiled(Case("Mixed", "MAX78000"))
    text = (out / "firmware" / "cnn.c").read_text(encoding="utf-8")
    assert "element-wise sub of 2 operands (pool first)" in text
    assert "element-wise sub of 2 operands (pool last)" in text
    assert "element-wise add of 3 operands, then the conv2d" in text


def test_max78002_keeps_element_wise_apart_from_a_convolution_with_bias() -> None:
    """The vendor tool refuses element-wise + convolution + bias in one layer on the MAX78002
    (one pass too): the planner keeps such an add a layer of its own there, folds it on the
    MAX78000."""

    def folded(device: str) -> list[str]:
        facts = compiled(Case("Mixed", device))[0].facts
        return [f.name for f in facts if f.operands > 1 and f.has_weights and f.bias is not None]

    assert folded("MAX78000") and not folded("MAX78002")


def test_cli_refuses_a_pair_with_element_wise_in_a_convolution_with_bias_on_the_max78002(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The MAX78000's pair (the add folded into a convolution with bias) on the MAX78002:
    --firmware is a one-line error naming it, exit 2, no OUT/."""
    _, out = compiled(Case("Mixed", "MAX78000"))
    np.save(tmp_path / "x.npy", own_sample((3, 16, 16)))
    args = ["compile", "--ai8x-yaml", str(out / "ai8x" / "Mixed.yaml"), "--ai8x-checkpoint"]
    args += [str(out / "ai8x" / "Mixed-q.pth.tar"), "--device", "MAX78002", "-i", "3,16,16"]
    args += ["--sample", str(tmp_path / "x.npy"), "-o", str(tmp_path / "out"), "--no-report"]
    code, _, err = run_cli([*args, "--firmware"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "before a convolution with bias on the MAX78002" in err
    assert not (tmp_path / "out").exists()


def test_streaming_1x1_runs_as_a_padded_3x3() -> None:
    """cnn.c of a streaming 1x1 convolution: a 3x3 window padded by 1 (its TRAM words)."""
    fw = case_firmware("stream1x1-MAX78000-first")
    first = fw.facts[0]
    assert first.streaming and first.kernel == (3, 3) and first.padding == (1, 1)
    assert first.weights is not None and not first.weights[:, :, 0].any()


@pytest.mark.skipif(shutil.which("cc") is None, reason="no host C compiler")
@pytest.mark.parametrize(
    ("model", "device", "shape", "extra"),
    [
        ("MobileNet", "MAX78002", (3, 16, 16), []),  # depthwise with bias, broadcast
        ("ResStream", "MAX78000", (3, 32, 32), ["--fifo"]),  # residual after a streaming layer
    ],
)
def test_compile_run_passes_with_its_firmware(
    model: str,
    device: str,
    shape: tuple[int, ...],
    extra: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The user's command: --run's self-test PASSes and the firmware's set-up, run on the
    host, leaves the plan's state."""
    np.save(tmp_path / "x.npy", own_sample(shape))
    code, out, err = run_cli(
        ["compile", f"{MODELS}:{model}", "--ptq", "--device", device, "-i",
         ",".join(map(str, shape)), "--sample", str(tmp_path / "x.npy"), "-o",
         str(tmp_path / "out"), "--no-report", "--firmware", "--run", *extra],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "PASS" in out and (tmp_path / "out" / "firmware" / "cnn.c").is_file()
