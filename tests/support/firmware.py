"""The firmware comparisons' cases (tests/targets/max7800x/test_firmware.py and
benchmarks/firmware_states.py): the vendor demos with a golden, cnnforge's firmware for each,
the stored vendor state images, and cnnforge's own plans of the shipped models (device, input,
vendor flags)."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cnnforge.sim import simulate
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.device import get_device
from cnnforge.targets.max7800x.firmware.firmware import (
    Firmware,
    build_firmware,
    expected_image,
    fifo_stream,
)
from cnnforge.targets.max7800x.firmware.flash import ARM_CODEGEN, ARM_FLAGS, HOST, arm_sources
from cnnforge.targets.max7800x.firmware.hostrun import _RISCV_ONLY, StateImage
from cnnforge.targets.max7800x.firmware.options import FirmwareOptions

TESTS = Path(__file__).parents[1]
GOLDEN = TESTS / "golden" / "ai8x_demos"
STATES = TESTS / "data" / "firmware_state"
ARM_GCC = shutil.which("arm-none-eabi-gcc")
WARN = ["-Wall", "-Wextra", "-Werror"]
# Demos whose input arrives through the FIFOs (the vendor's --fifo).
FIFO = {"MAX78000-cats-dogs", "MAX78000-facedet_tinierssd"}

# Demos without --fifo also run with it added, stored as fifo-<variant>.npz: variant -> (demo,
# layers made to stream). Input through the FIFOs into a layer that does not stream (HWC and
# CHW), and into streaming layers (CHW, HWC; the MAX78002's other streaming formulas).
FIFO_VARIANTS = {
    "MAX78000-mnist": ("MAX78000-mnist", 0),
    "MAX78000-cifar-10": ("MAX78000-cifar-10", 0),
    "MAX78000-mnist-streaming": ("MAX78000-mnist", 2),
    "MAX78002-mnist-streaming": ("MAX78002-mnist", 2),
    "MAX78002-cats-dogs-streaming": ("MAX78002-cats-dogs", 2),
    "MAX78002-facedet_tinierssd-streaming": ("MAX78002-facedet_tinierssd", 1),
}

# Vendor runs of a demo with other code-generation options: case -> (demo golden, extra flags).
OPTION_CASES = {
    "MAX78000-mnist-zero-sram": ("MAX78000-mnist", ("--zero-sram",)),
    "MAX78002-mnist-zero-sram": ("MAX78002-mnist", ("--zero-sram",)),
    "MAX78000-mnist-riscv": ("MAX78000-mnist", ("--riscv", "--riscv-debug")),
    "MAX78002-mnist-riscv": ("MAX78002-mnist", ("--riscv", "--riscv-debug")),
}

# (model, device, input shape, vendor flags the YAML header names)
OWN = (
    ("unet-voc", "MAX78002", (3, 64, 64), ()),
    ("unet-large", "MAX78000", (48, 88, 88), ("--overlap-data",)),
    ("qat-unet", "MAX78000", (3, 32, 32), ()),
    ("cats-dogs", "MAX78000", (3, 128, 128), ("--fifo",)),
)


def own_sample(shape: tuple[int, ...]) -> np.ndarray:
    """A smooth int8 test pattern (it compresses well in the stored state images)."""
    c, h, w = np.meshgrid(*(np.arange(n) for n in shape), indexing="ij")
    return ((3 * h + 5 * w + 7 * c) % 256 - 128).astype(np.int64)


@functools.cache
def streamed_yaml(yaml: Path, layers: int) -> Path:
    """A copy of a vendor YAML whose first ``layers`` layers say ``streaming: true``."""
    head, *items = yaml.read_text(encoding="utf-8").split("\n  - ")
    for i in range(layers):
        first, _, rest = items[i].partition("\n")
        items[i] = f"{first}\n    streaming: true\n{rest}"
    out = Path(tempfile.mkdtemp(prefix="cnnforge_streamed_")) / yaml.name
    out.write_text("\n  - ".join([head, *items]), encoding="utf-8")
    return out


def demo_yaml(name: str, streamed: int = 0) -> Path:
    """A demo golden's YAML (``streamed``: its first layers made to stream)."""
    meta = json.loads(str(np.load(GOLDEN / "known" / f"{name}.npz")["meta"]))
    yaml = GOLDEN / "networks" / meta["yaml"]
    return streamed_yaml(yaml, streamed) if streamed else yaml


@functools.cache
def demo_firmware(name: str, fifo: bool = False, streamed: int = 0) -> Firmware:
    """cnnforge's firmware for a vendor demo golden (its YAML, trimmed checkpoint, sample), or
    for one of OPTION_CASES (the demo with more flags); ``fifo``: as if run with the vendor's
    --fifo added; ``streamed``: layers made to stream."""
    name, extra = OPTION_CASES.get(name, (name, ()))
    data = np.load(GOLDEN / "known" / f"{name}.npz")
    meta = json.loads(str(data["meta"]))
    x = data["input"].astype(np.int64)
    flags = [*meta["flags"], *extra, *(["--fifo"] if fifo else [])]
    trimmed = GOLDEN / "trained" / meta["trimmed"]
    return pair_firmware(demo_yaml(name, streamed), trimmed, x, meta["device"], flags)


def pair_firmware(
    yaml: Path, checkpoint: Path, x: np.ndarray, device: str, flags: Sequence[str]
) -> Firmware:
    """cnnforge's firmware for a vendor pair and sample, with the vendor's ``flags``."""
    model = read_ai8x(
        yaml,
        checkpoint,
        x.shape,
        device=device,
        overlap_data="--overlap-data" in flags,
        fifo="--fifo" in flags,
        calcx4="--calcx4" in flags,
        read_ahead="--read-ahead" in flags,
    )
    result = simulate(model.network, x, device=get_device(device))
    outputs = {k: v.numpy() for k, v in result.outputs.items()}
    options = FirmwareOptions.from_vendor_flags(flags)
    return build_firmware(model.network, model.plan, x, outputs, options)


def demo_pair_args(name: str, tmp_path: Path) -> list[str]:
    """``compile --ai8x-yaml Y --ai8x-checkpoint C --sample x.npy`` of a demo golden (its sample
    saved in ``tmp_path``)."""
    data = np.load(GOLDEN / "known" / f"{name}.npz")
    meta = json.loads(str(data["meta"]))
    np.save(tmp_path / "x.npy", data["input"])
    args = ["compile", "--ai8x-yaml", str(GOLDEN / "networks" / meta["yaml"])]
    args += ["--ai8x-checkpoint", str(GOLDEN / "trained" / meta["trimmed"])]
    return [*args, "--sample", str(tmp_path / "x.npy")]


def variant_firmware(variant: str) -> Firmware:
    """cnnforge's firmware for a FIFO_VARIANTS entry (the demo with --fifo added)."""
    demo, streamed = FIFO_VARIANTS[variant]
    return demo_firmware(demo, fifo=True, streamed=streamed)


def stored(name: str) -> StateImage:
    """The vendor firmware's state image stored for case ``name``."""
    return StateImage.load(STATES / f"{name}.npz")


def builds_with_warnings_as_errors(folder: Path, work: Path) -> None:
    """Every .c of the folder with -Wall -Wextra -Werror: host cc against the stand-in header
    (the RISC-V core's files with their RISC-V-only syntax dropped, as hostrun does), and the
    Cortex-M4's compiler for the files that run there."""
    for source in sorted(folder.glob("*.c")):
        text = source.read_text(encoding="utf-8")
        riscv = source.name == "main_riscv.c" or 'interrupt("machine")' in text
        for riscv_only, host in _RISCV_ONLY:
            text = text.replace(riscv_only, host)
        copy = work / source.name
        copy.write_text(text, encoding="utf-8")
        compilers = [["cc"]] + ([[ARM_GCC, *ARM_CODEGEN]] if ARM_GCC and not riscv else [])
        for cc in compilers:
            cmd = [*cc, *WARN, "-I", str(HOST), "-I", str(folder), "-c", str(copy)]
            proc = subprocess.run([*cmd, "-o", str(work / "x.o")], capture_output=True, text=True)
            assert proc.returncode == 0, proc.stderr[-2000:]


def equal_model(fw: Firmware, vendor: StateImage) -> None:
    """Every register and memory word, the input words, the FIFO stream, the known answers."""
    state, added = expected_image(fw)
    assert state == dict(vendor.state.tolist())
    assert added == dict(vendor.input.tolist())
    assert np.array_equal(fifo_stream(fw), vendor.fifo.reshape(-1, 2))
    assert np.array_equal(fw.kat, vendor.kat)


def arm_build(folder: Path) -> None:
    """Every generated .c compiles for the chip's Arm core with -Wall -Wextra -Werror."""
    assert ARM_GCC is not None
    for source in arm_sources(folder):
        cmd = [ARM_GCC, *ARM_FLAGS, "-I", str(HOST), "-I", str(folder), "-c", source]
        proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
