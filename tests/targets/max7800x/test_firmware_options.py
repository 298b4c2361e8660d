"""The vendor tool's code-generation options on ``compile`` (docs/firmware.md, "Options").

Options that change the accelerator state are held to the vendor's state images
(tests/data/firmware_state): ``--zero-sram`` (MAX78000-/MAX78002-mnist-zero-sram), ``--riscv``
(the vendor's mnist-riscv demo), ``--new-kernel-loader`` / ``--max-checklines`` (the camvid_unet
and aisegment_unet demos, captured with them: test_firmware.py); ``--mlator``:
test_firmware_mlator.py. Options that
change only the C text are run: the folder's own main, built for the host against a fake
accelerator (hostrun.run_main), prints what the option promises; every .c builds with -Werror.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.targets.max7800x.firmware.firmware import expected_image
from cnnforge.targets.max7800x.firmware.hostrun import run_main, run_setup
from cnnforge.targets.max7800x.firmware.options import FirmwareOptions, parse_boost
from cnnforge.targets.max7800x.firmware.writer import _hex_rows, write_folder
from support.cli import run_cli
from support.firmware import (
    GOLDEN,
    OPTION_CASES,
    builds_with_warnings_as_errors,
    demo_firmware,
    stored,
)

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no host C compiler")
MNIST = [
    "--ai8x-yaml",
    str(GOLDEN / "networks" / "mnist-chw-ai85.yaml"),
    "--ai8x-checkpoint",
    str(GOLDEN / "trained" / "ai85-mnist-qat8-q.int8.pth.tar"),
]


@pytest.mark.parametrize("case", sorted(OPTION_CASES))
def test_option_state_equals_vendor(case: str) -> None:
    """--zero-sram, --riscv: every register and memory word, input words, known answers."""
    fw = demo_firmware(case)
    state, added = expected_image(fw)
    vendor = stored(case)
    assert state == dict(vendor.state.tolist())
    assert added == dict(vendor.input.tolist())
    assert np.array_equal(fw.kat, vendor.kat)


@needs_cc
@pytest.mark.parametrize("case", sorted(OPTION_CASES))
def test_option_host_run_equals_vendor(case: str, tmp_path: Path) -> None:
    """The C written with the option, built and run on the host (the BIST waits of
    --zero-sram answered by the harness), leaves the vendor firmware's state."""
    fw = demo_firmware(case)
    write_folder(fw, tmp_path)
    assert run_setup(tmp_path, fw.device).differences(stored(case)) == []


def _compile(tmp_path: Path, capsys: pytest.CaptureFixture[str], *options: str) -> Path:
    data = np.load(GOLDEN / "known" / "MAX78000-mnist.npz")
    np.save(tmp_path / "x.npy", data["input"])
    out = tmp_path / "out"
    args = ["compile", *MNIST, "--sample", str(tmp_path / "x.npy"), "-o", str(out), "--no-report"]
    code, _, err = run_cli([*args, *options], capsys)
    assert code == 0, err
    return out / "firmware"


@needs_cc
def test_softmax_and_boost_run_on_the_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--softmax: main.c unloads the outputs and prints the softmax per class (softmax.c);
    --boost 2.5: the boost pin is driven around the inference."""
    folder = _compile(tmp_path, capsys, "--softmax", "--boost", "2.5")
    assert (folder / "softmax.c").is_file()
    main = (folder / "main.c").read_text()
    assert "cnn_boost_enable(MXC_GPIO2, MXC_GPIO_PIN_5)" in main
    assert "cnn_boost_disable(MXC_GPIO2, MXC_GPIO_PIN_5)" in main
    printed = run_main(folder, "MAX78000")
    assert "*** PASS ***" in printed
    classes = [line for line in printed.splitlines() if "-> Class" in line]
    assert len(classes) == 10
    # The vendor's sample is a 7: the class with the largest output takes (almost) all.
    assert "Class 7: 100.0%" in printed or "Class 7: 99." in printed
    assert run_setup(folder, "MAX78000").differences(stored("MAX78000-mnist")) == []
    builds_with_warnings_as_errors(folder, tmp_path)


@needs_cc
def test_no_kat_no_unload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--no-kat: no sampleoutput.h, no check; --no-unload: no cnn_unload; state unchanged."""
    folder = _compile(tmp_path, capsys, "--no-kat", "--no-unload")
    assert not (folder / "sampleoutput.h").exists() and not (folder / "softmax.c").exists()
    assert "check_output" not in (folder / "main.c").read_text()
    assert "int cnn_unload" not in (folder / "cnn.c").read_text() + (folder / "cnn.h").read_text()
    printed = run_main(folder, "MAX78000")
    assert "*** DONE (no known-answer check) ***" in printed and "PASS" not in printed
    image = run_setup(folder, "MAX78000")
    assert image.differences(stored("MAX78000-mnist"), limit=20) == [
        "known-answer table differs (1 vs 20 words)"
    ]
    builds_with_warnings_as_errors(folder, tmp_path)


@needs_cc
def test_max_checklines_checks_fewer_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--max-checklines 3: the known answer stops after the run holding word 4 (the vendor's
    cut); cnn_unload still copies every output."""
    folder = _compile(tmp_path, capsys, "--max-checklines", "3")
    kat = run_setup(folder, "MAX78000").kat
    assert kat.size < stored("MAX78000-mnist").kat.size
    assert "#define CNN_NUM_OUTPUTS 10" in (folder / "cnn.h").read_text()
    assert "*** PASS ***" in run_main(folder, "MAX78000")


@needs_cc
def test_riscv_layout_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--riscv: main.c boots the RISC-V core, main_riscv.c runs the self-test there."""
    folder = _compile(tmp_path, capsys, "--riscv", "--softmax")
    assert (folder / "main_riscv.c").is_file()
    assert "urvbootaddr" in (folder / "main.c").read_text()
    assert "SRCS  = main_riscv.c cnn.c" in (folder / "Makefile.RISCV").read_text()
    assert not (folder / "project.mk").exists()  # the dual-core build of the MSDK's examples
    assert "*** PASS ***" in run_main(folder, "MAX78000")
    assert run_setup(folder, "MAX78000").differences(stored("MAX78000-mnist-riscv")) == []
    builds_with_warnings_as_errors(folder, tmp_path)


@pytest.mark.parametrize(
    "args,where",
    [
        (["--softmax", "--no-firmware"], "--no-firmware"),
        (["--boost", "9.1"], "--boost"),
        (["--boost", "two"], "--boost"),
        (["--overlap-data", "--no-in-place"], "--no-in-place"),
        (["--max-checklines", "0"], "--max-checklines"),
    ],
)
def test_option_refusals(
    args: list[str], where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An option the network or the other options cannot honour: one line, exit 2, no OUT/."""
    data = np.load(GOLDEN / "known" / "MAX78000-mnist.npz")
    np.save(tmp_path / "x.npy", data["input"])
    out = tmp_path / "out"
    cli = ["compile", *MNIST, "--sample", str(tmp_path / "x.npy"), "-o", str(out), *args]
    code, _, err = run_cli(cli, capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and where in err and "hint" in err
    assert "Traceback" not in err
    assert not out.exists()


def test_softmax_refused_for_8_bit_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The mnist demo with its last layer's ``output_width: 32`` dropped: 8-bit outputs."""
    yaml = (GOLDEN / "networks" / "mnist-chw-ai85.yaml").read_text(encoding="utf-8")
    (tmp_path / "net.yaml").write_text(yaml.replace("output_width: 32", ""), encoding="utf-8")
    np.save(tmp_path / "x.npy", np.load(GOLDEN / "known" / "MAX78000-mnist.npz")["input"])
    args = ["compile", "--ai8x-yaml", str(tmp_path / "net.yaml"), *MNIST[2:]]
    args += ["--sample", str(tmp_path / "x.npy"), "-o", str(tmp_path / "o"), "--softmax"]
    code, _, err = run_cli(args, capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "32-bit" in err and "--softmax" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("option", ["--softmax", "--riscv", "--zero-sram"])
def test_firmware_options_are_for_max7800x_only(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["compile", "qat-unet", "--device", "HLS", "--ptq", "-o", str(tmp_path / "o"), option]
    code, _, err = run_cli(args, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "MAX78000/MAX78002" in err and option in err
    assert not (tmp_path / "o").exists()


def test_vendor_flags_round_trip() -> None:
    options = FirmwareOptions(
        softmax=True, unload=False, zero_sram=True, boost=(2, 5), kat=False, max_checklines=8
    )
    assert FirmwareOptions.from_vendor_flags(options.flags()) == options
    assert parse_boost("0x2.5") == (2, 5)


@given(st.lists(st.integers(0, 2**32 - 1), max_size=40), st.sampled_from([2, 8]))
@settings(max_examples=60, deadline=None)
def test_hex_rows_equals_the_plain_formatting(values: list[int], digits: int) -> None:
    """The numpy formatting of weights.h's tables equals the one-item-at-a-time one."""
    values = [v & ((1 << (4 * digits)) - 1) for v in values]
    items = [f"0x{v:0{digits}x}" for v in values]
    rows = [", ".join(items[i : i + 8]) for i in range(0, len(items), 8)]
    assert _hex_rows(values, digits) == ", \\\n  ".join(rows)


RESIDUAL = """
import torch.nn as nn


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        a = nn.functional.relu(self.a(x))
        return self.head(a + nn.functional.relu(self.b(a)))
"""


def test_default_firmware_is_a_note_where_the_writer_does_not_cover_the_network(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Firmware by default: a network the writer does not cover (the MAX78000's pair, its add
    folded into a convolution with bias, on the MAX78002, where the vendor tool refuses that)
    compiles, without firmware/, and the summary says why; --firmware makes it an error."""
    (tmp_path / "res.py").write_text(RESIDUAL, encoding="utf-8")
    np.save(tmp_path / "x.npy", np.zeros((3, 16, 16), np.int8))
    common = ["--no-report", "--sample", str(tmp_path / "x.npy"), "-o"]
    made = ["compile", f"{tmp_path / 'res.py'}:Residual", "--ptq", "--device", "MAX78000"]
    code, _, err = run_cli([*made, *common, str(tmp_path / "pair")], capsys)
    assert code == 0, err
    pair = tmp_path / "pair" / "ai8x"
    args = ["compile", "--ai8x-yaml", str(pair / "Residual.yaml"), "--ai8x-checkpoint"]
    args += [str(pair / "Residual-q.pth.tar"), "--device", "MAX78002", "-i", "3,16,16", *common]
    code, out, err = run_cli([*args, str(tmp_path / "out")], capsys)
    assert code == 0, err
    assert not (tmp_path / "out" / "firmware").exists()
    assert "firmware/ not written" in " ".join(out.split())
    code, _, err = run_cli([*args, str(tmp_path / "o2"), "--firmware"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "element-wise" in err
    assert not (tmp_path / "o2").exists()


@pytest.mark.parametrize("option", ["--zero-sram", "--riscv"])
def test_inspect_reads_the_folder(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cnnforge inspect`` reads a folder written with the option (the BIST waits answered,
    the RISC-V core's main_riscv.c read): the same five layers."""
    folder = _compile(tmp_path, capsys, option)
    code, out, err = run_cli(["inspect", str(folder)], capsys)
    assert code == 0, err
    assert "32-bit out" in out and "conv2d" in out
