"""The firmware folder's build files are the MSDK project the vendor tool writes for the same
network: the same includes, variables and rules (tests/data/msdk_project.json, the vendor's
facts stored by ``benchmarks/sdk_build.py --capture``), for both parts, with and without
--riscv; each carries cnnforge's header; GNU make reads them and hands the MSDK's rules the
folder's sources (an SDK stand-in). benchmarks/sdk_build.py builds them in a real SDK."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from cnnforge.targets.max7800x.firmware.project import application
from cnnforge.targets.max7800x.firmware.writer import sampledata_h, write_folder
from support.firmware import demo_firmware
from support.msdk_project import BUILD_FILES, CASES, STORE, folder_facts, stored_facts

# tests/support/firmware.py's demo (or option case) for each stored vendor case
_OURS = {
    "MAX78000": "MAX78000-mnist",
    "MAX78002": "MAX78002-mnist",
    "MAX78000-riscv": "MAX78000-mnist-riscv",
    "MAX78002-riscv": "MAX78002-mnist-riscv",
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for case, name in _OURS.items():
        out[case] = tmp_path_factory.mktemp(case) / "firmware"
        write_folder(demo_firmware(name), out[case])
    return out


def test_every_stored_case_is_compared() -> None:
    assert set(stored_facts()) == set(CASES) == set(_OURS)


@pytest.mark.parametrize("case", sorted(_OURS))
def test_build_files_say_what_the_vendors_say(case: str, folders: dict[str, Path]) -> None:
    ours, theirs = folder_facts(folders[case]), stored_facts()[case]
    assert sorted(ours) == sorted(theirs)
    for name, facts in theirs.items():
        for kind, items in facts.items():
            assert ours[name][kind] == items, (name, kind)


@pytest.mark.parametrize("case", sorted(_OURS))
def test_build_files_carry_the_header(case: str, folders: dict[str, Path]) -> None:
    device = CASES[case][0]
    for name in BUILD_FILES:
        path = folders[case] / name
        if path.is_file():
            head = path.read_text(encoding="utf-8").splitlines()[:2]
            assert head[0].startswith(f"# {name} -- written by cnnforge for the {device} ")
            assert head[1] == "# SPDX-License-Identifier: Apache-2.0"


def _stand_in_sdk(root: Path, device: str) -> None:
    """libs.mk and the part's rules file, the latter printing what the project hands it."""
    rules = root / "Libraries" / "CMSIS" / "Device" / "Maxim" / device / "Source" / "GCC"
    rules.mkdir(parents=True)
    (root / "Libraries" / "libs.mk").write_text("LIBS_SEEN = yes\n", encoding="utf-8")
    (rules / f"{device.lower()}.mk").write_text(
        "show:\n\t@echo SRCS=$(sort $(notdir $(filter %.c,$(SRCS))))\n"
        "\t@echo LIBS=$(LIBS_SEEN) TARGET=$(TARGET_LC) LINKER=$(notdir $(LINKERFILE))\n"
        "\t@echo FLAGS=$(PROJ_CFLAGS) OPT=$(MXC_OPTIMIZE_CFLAGS)\n",
        encoding="utf-8",
    )


@pytest.mark.parametrize("case", ["MAX78000", "MAX78002"])
def test_make_hands_the_msdk_the_folders_sources(
    case: str, folders: dict[str, Path], tmp_path: Path
) -> None:
    """make with MAXIM_PATH reads project.mk, libs.mk and the part's rules file (here a
    stand-in that prints what it got): every .c of the folder, the vendor's flags."""
    _stand_in_sdk(tmp_path / "sdk", case)
    run = subprocess.run(
        ["make", "show", f"MAXIM_PATH={tmp_path / 'sdk'}"],
        cwd=folders[case],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "SRCS=cnn.c main.c softmax.c" in run.stdout
    assert f"LIBS=yes TARGET={case.lower()} LINKER={case.lower()}.ld" in run.stdout
    assert "-DMXC_ASSERT_ENABLE -DARM_MATH_CM4" in run.stdout and "OPT=-O2" in run.stdout


NAMES = json.loads((STORE.with_name("sample_input_names.json")).read_text(encoding="utf-8"))


@pytest.mark.parametrize("demo", sorted(NAMES))
def test_sample_input_names_are_the_vendors(demo: str) -> None:
    """sampledata.h's SAMPLE_INPUT_<n> and main.c's input_<n> are numbered as the vendor's
    (the processor a block is loaded for; FIFO k: k): a main.c kept from an earlier folder, or
    written for the vendor's, still builds against a new sampledata.h."""
    fw = demo_firmware(demo)
    assert fw.input_names == NAMES[demo]
    data, main = sampledata_h(fw), application(fw)["main.c"]
    assert re.findall(r"#define SAMPLE_INPUT_(\d+)", data) == [str(n) for n in NAMES[demo]]
    for n in NAMES[demo]:
        assert f"static const uint32_t input_{n}[] = SAMPLE_INPUT_{n};" in main
