"""Link test against a real SDK: cnnforge's firmware folders and the vendor tool's, built.

For a few vendor demos (cnnforge's firmware from the demo's golden, the vendor tool's from the
demo's own YAML, checkpoint and flags) and cnnforge's own plans (compiled with --ptq
--firmware; the vendor tool run on the YAML + checkpoint cnnforge wrote), both folders are
built into a Cortex-M4 image inside the SDK and ``arm-none-eabi-size`` counts text, data and
bss. One row per network and part: both images' sizes and cnnforge's over the vendor's.

    python benchmarks/sdk_build.py --sdk PATH [--only mnist] [--device MAX78000] [--keep DIR]
    python benchmarks/sdk_build.py --capture   (the vendor tool: store its build files' facts)
    python benchmarks/sdk_build.py --smoke     (no SDK needed)

The SDK is the MSDK (``Libraries/libs.mk``: each folder builds with its own Makefile, as a user
runs it: ``make MAXIM_PATH=PATH``) or the 2021 MAX78000 SDK (MaximIntegratedAI/MAX78000_SDK,
which predates that build system: both folders are built with one Makefile of the SDK's own
examples' form, written here, and ``MXC_NVIC_SetVector``, which both folders call and that SDK
names ``NVIC_SetVector``, defined to it on the compiler's command line). A folder is built in
``Examples/<part>/CNN/`` of the SDK (and removed after). The RISC-V images of ``--riscv`` need
the MSDK's RISC-V compiler and are not among the cases. The vendor tool runs where it is set up
(``IZER``, default /tmp/izer); without it only cnnforge's images are built.

``--capture`` runs the vendor tool on the mnist demo for both parts, with and without
``--riscv``, and stores what its build files say (tests/support/msdk_project.py) in
tests/data/msdk_project.json, and for every demo with a golden the numbers of its sample-input
arrays (``SAMPLE_INPUT_<n>``) in tests/data/sample_input_names.json: the test data of
tests/targets/max7800x/test_firmware_project.py.
``--smoke`` needs neither SDK nor vendor tool: cnnforge's mnist folder, its build files' facts
against the stored vendor facts, and its Cortex-M4 sources compiled against the stand-in MSDK
headers of the host check (object sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from firmware_states import own_pair
from tests.support.firmware import GOLDEN, OWN, demo_firmware
from tests.support.msdk_project import CASES, STORE, folder_facts, stored_facts
from vendor_oracle import RUNNER, Demo, demos, run_vendor

from cnnforge.targets.max7800x.firmware.flash import ARM_CODEGEN, HOST, arm_sources
from cnnforge.targets.max7800x.firmware.writer import write_folder

GOLDEN_KNOWN = GOLDEN / "known"
NAMES = STORE.with_name("sample_input_names.json")  # demo -> the vendor's SAMPLE_INPUT numbers
DEMOS = ("mnist", "cifar-10", "kws20_v3", "camvid_unet", "cats-dogs")
OWN_MODELS = ("qat-unet", "cats-dogs")


@dataclass(frozen=True)
class Image:
    """An image's sizes (arm-none-eabi-size, Berkeley format), or why there is none."""

    text: int = 0
    data: int = 0
    bss: int = 0
    error: str = ""

    def cells(self) -> str:
        if self.error:
            return f"{'-':>8} {'-':>6} {'-':>6}"
        return f"{self.text:8} {self.data:6} {self.bss:6}"


# The build of a folder in the 2021 SDK, in the form of its own CNN examples' Makefiles.
_MAKEFILE_2021 = """\
PROJECT = {project}
TARGET = {target}
TARGET_UC := {target}
TARGET_LC := {project}
COMPILER = GCC
BOARD ?= EvKit_V1
LIBS_DIR = {sdk}/Libraries
CMSIS_ROOT = $(LIBS_DIR)/CMSIS
export CMSIS_ROOT
SRCS = {sources}
VPATH = .
VPATH += $(CMSIS_ROOT)/Device/Maxim/$(TARGET_UC)/Source
IPATH = .
PROJ_CFLAGS += -DMXC_ASSERT_ENABLE -DARM_MATH_CM4 -Wall -Wcast-align
PROJ_CFLAGS += -DMXC_NVIC_SetVector=NVIC_SetVector
MXC_OPTIMIZE_CFLAGS = -O2
BOARD_DIR = $(LIBS_DIR)/Boards/$(TARGET_UC)/$(BOARD)
include $(BOARD_DIR)/board.mk
PERIPH_DRIVER_DIR = $(LIBS_DIR)/PeriphDrivers
include $(PERIPH_DRIVER_DIR)/periphdriver.mk
export PERIPH_DRIVER_DIR
include $(CMSIS_ROOT)/Device/Maxim/$(TARGET_UC)/Source/$(COMPILER)/$(TARGET_LC).mk
"""


def build(folder: Path, sdk: Path, device: str, name: str, jobs: int) -> Image:
    """The Cortex-M4 image of ``folder`` built in the SDK (see the module text)."""
    work = sdk / "Examples" / device / "CNN" / f"cnnforge-sdk-build-{name}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(folder, work)
    project = device.lower()
    if not (sdk / "Libraries" / "libs.mk").is_file():  # the 2021 SDK
        sources = " ".join(arm_sources(work))
        text = _MAKEFILE_2021.format(project=project, target=device, sdk=sdk, sources=sources)
        (work / "Makefile").write_text(text, encoding="utf-8")
    env = {**os.environ, "MAXIM_PATH": str(sdk)}
    try:
        proc = subprocess.run(
            ["make", f"-j{jobs}"], cwd=work, env=env, capture_output=True, text=True, timeout=900
        )
        elf = work / "build" / f"{project}.elf"
        if proc.returncode != 0 or not elf.is_file():
            lines = [ln for ln in proc.stderr.splitlines() if "rror" in ln] or [proc.stderr]
            return Image(error=lines[0].strip()[-120:] or "make failed")
        size = subprocess.run(
            ["arm-none-eabi-size", "--format=berkeley", str(elf)],
            capture_output=True, text=True, check=True,
        ).stdout.splitlines()[1].split()  # fmt: skip
        return Image(int(size[0]), int(size[1]), int(size[2]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def vendor_demo(device: str, prefix: str) -> Demo | None:
    izer = Path(os.environ.get("IZER", "/tmp/izer"))
    if not (izer / "ai8xize.py").is_file() or not RUNNER.is_file():
        return None
    found = [d for d in demos(izer, device) if d.prefix == prefix and d.checkpoint.is_file()]
    return found[0] if found else None


def cases(devices: list[str], only: list[str] | None, keep: Path):
    """(device, name, cnnforge's folder, the vendor's folder or None, note) per network."""
    for device in devices:
        for prefix in DEMOS:
            if only and prefix not in only:
                continue
            name = f"{device}-{prefix}"
            ours = keep / name / "ours"
            try:
                write_folder(demo_firmware(name), ours)
            except (FileNotFoundError, KeyError):
                continue  # no golden of this demo on this part
            demo = vendor_demo(device, prefix)
            note = "" if demo else "vendor tool or checkpoint absent"
            if demo:
                note = run_vendor(demo, keep / name / "vendor", False)[2]
            vendor = keep / name / "vendor" / "net"
            yield device, prefix, ours, vendor if vendor.is_dir() else None, note
        for model, dev, shape, flags in OWN:
            if dev != device or model not in OWN_MODELS or (only and f"own:{model}" not in only):
                continue
            if vendor_demo(device, "mnist") is None:
                continue  # the pair is compared only where the vendor tool runs
            folder = keep / f"{device}-own-{model}"
            error, note = own_pair(model, device, shape, flags, folder)
            vendor = folder / "vendor" / "net"
            label = f"own {model}" + (" --fifo" if "--fifo" in flags else "")
            if not error:
                yield device, label, folder / "ours" / "firmware", vendor, note
            else:
                print(f"{device:9} {label:22} {error}")


def capture() -> int:
    """Run the vendor tool for tests/support/msdk_project.CASES and store its build files'
    facts; and for every demo with a golden, the numbers of its SAMPLE_INPUT_<n> arrays."""
    demo = vendor_demo("MAX78000", "mnist")
    if demo is None:
        print("the vendor tool is not set up (IZER); nothing captured")
        return 1
    facts: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="sdk_build_capture_") as tmp:
        for case, (device, flags) in CASES.items():
            run = Demo(device, "mnist", demo.yaml, demo.checkpoint, demo.sample,
                       (*demo.flags, *flags))  # fmt: skip
            note = run_vendor(run, Path(tmp) / case, False)[2]
            if note:
                print(f"{case}: {note}")
                return 1
            facts[case] = folder_facts(Path(tmp) / case / "net")
            print(f"{case:16} {', '.join(sorted(facts[case]))}")
        names = {}
        for golden in sorted(GOLDEN_KNOWN.glob("*.npz")):
            device, prefix = golden.stem.split("-", 1)
            found = vendor_demo(device, prefix)
            if found is None or run_vendor(found, Path(tmp) / golden.stem, False)[2]:
                print(f"{golden.stem}: not run")
                continue
            text = (Path(tmp) / golden.stem / "net" / "sampledata.h").read_text(encoding="utf-8")
            names[golden.stem] = [int(n) for n in re.findall(r"#define SAMPLE_INPUT_(\d+)", text)]
            print(f"{golden.stem:28} SAMPLE_INPUT_{names[golden.stem]}")
    STORE.write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    NAMES.write_text(json.dumps(names, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"stored {STORE} and {NAMES}")
    return 0


def smoke() -> int:
    """No SDK: cnnforge's mnist folder, its facts against the vendor's, its objects' sizes."""
    stored = stored_facts()["MAX78000"]
    with tempfile.TemporaryDirectory(prefix="sdk_build_smoke_") as tmp:
        folder = Path(tmp) / "firmware"
        write_folder(demo_firmware("MAX78000-mnist"), folder)
        same = folder_facts(folder) == stored
        print(f"MAX78000 mnist: build files say what the vendor's say: {'yes' if same else 'NO'}")
        gcc = shutil.which("arm-none-eabi-gcc")
        if gcc is None:
            print("no arm-none-eabi-gcc: objects not built")
            return 0 if same else 1
        objects = []
        for source in arm_sources(folder):
            obj = Path(tmp) / f"{Path(source).stem}.o"
            cmd = [gcc, *ARM_CODEGEN, "-I", str(HOST), "-I", str(folder), "-c", source, "-o"]
            subprocess.run([*cmd, str(obj)], cwd=folder, check=True, capture_output=True)
            objects.append(str(obj))
        sizes = (
            subprocess.run(
                ["arm-none-eabi-size", "--totals", *objects],
                capture_output=True,
                text=True,
                check=True,
            )
            .stdout.splitlines()[-1]
            .split()
        )
        print(f"objects against the stand-in MSDK headers: text {sizes[0]} data {sizes[1]} "
              f"bss {sizes[2]} (no SDK: not linked)")  # fmt: skip
    return 0 if same else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdk", type=Path, help="the MSDK or the 2021 MAX78000 SDK")
    parser.add_argument("--device", action="append", choices=("MAX78000", "MAX78002"))
    parser.add_argument("--only", action="append", help="demo prefix or own:MODEL (repeatable)")
    parser.add_argument("--keep", type=Path, help="keep both tools' folders here")
    parser.add_argument("--jobs", type=int, default=2, help="make -j (default 2)")
    parser.add_argument("--capture", action="store_true", help="store the vendor's build facts")
    parser.add_argument("--smoke", action="store_true", help="no SDK: what can be checked")
    args = parser.parse_args(argv)
    if args.capture:
        return capture()
    if args.smoke or args.sdk is None:
        return smoke()
    sdk = args.sdk.resolve()
    msdk = (sdk / "Libraries" / "libs.mk").is_file()
    devices = args.device or (["MAX78000", "MAX78002"] if msdk else ["MAX78000"])
    keep = args.keep or Path(tempfile.mkdtemp(prefix="sdk_build_"))
    print(f"SDK {sdk} ({'MSDK, each folder its own Makefile' if msdk else '2021 SDK'})")
    print(f"{'device':9} {'network':22} {'cnnforge text':>13} {'data':>6} {'bss':>6} | "
          f"{'vendor text':>11} {'data':>6} {'bss':>6} | {'text ratio':>10}  note")  # fmt: skip
    bad = 0
    for device, label, ours, vendor, note in cases(devices, args.only, keep):
        mine = build(ours, sdk, device, "cnnforge", args.jobs)
        theirs = build(vendor, sdk, device, "vendor", args.jobs) if vendor else Image(error=note)
        ratio = f"{mine.text / theirs.text:10.3f}" if theirs.text and mine.text else f"{'-':>10}"
        why = mine.error or theirs.error or note
        print(f"{device:9} {label:22} {mine.cells():>27} | {theirs.cells():>25} | {ratio}  {why}",
              flush=True)  # fmt: skip
        bad += bool(mine.error)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
