"""The firmware reader's answers to folders it cannot or need not check (issue 38): each one line
naming the firmware's own file:line or register, exit 2 (or, with nothing to check, a plain
statement and exit 0)."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from cnnforge.targets.max7800x.firmware.regmap import MAPS
from cnnforge.targets.max7800x.firmware.writer import write_folder
from support.cli import run_cli
from support.firmware import demo_firmware


@pytest.fixture(scope="module")
def mnist(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("mnist")
    write_folder(demo_firmware("MAX78000-mnist"), folder)
    return folder


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_a_set_up_function_that_calls_itself_is_one_line(mnist: Path, tmp_path: Path, capsys):
    """cnn_init calling itself: the call nesting is refused at the call (cnn.c:LINE), not a
    Python RecursionError."""
    bad = tmp_path / "bad"
    shutil.copytree(mnist, bad)
    text = (bad / "cnn.c").read_text()
    head, _, rest = text.partition("int cnn_init(void)\n{\n")
    line = head.count("\n") + 3
    (bad / "cnn.c").write_text(f"{head}int cnn_init(void)\n{{\n  cnn_init();\n{rest}")
    for command in (["inspect"], ["simulate", "--firmware"]):
        code, _, err = run_cli([*command, str(bad)], capsys)
        assert code == 2
        msg = _one_line(err)
        assert f"cnn.c:{line}: calls nest more than" in msg and "cnn_init calls itself" in msg


def test_a_folder_without_a_known_answer_says_so(tmp_path: Path, capsys):
    """--no-kat: no sampleoutput.h table; simulate --firmware runs and says there is nothing to
    check (exit 0), never "FAIL, 0 of 0 words"."""
    fw = demo_firmware("MAX78000-mnist")
    fw = dataclasses.replace(fw, options=dataclasses.replace(fw.options, kat=False))
    write_folder(fw, tmp_path)
    assert not (tmp_path / "sampleoutput.h").exists()
    code, out, err = run_cli(["simulate", "--firmware", str(tmp_path)], capsys)
    assert code == 0, err
    assert "known answer: none in the folder" in out and "FAIL" not in out


def test_diff_names_the_missing_folder(mnist: Path, tmp_path: Path, capsys):
    missing = tmp_path / "missing"
    plain = tmp_path / "plain"
    plain.mkdir()
    pairs = ((mnist, missing, missing), (missing, mnist, missing), (mnist, plain, plain))
    for a, b, named in pairs:
        code, _, err = run_cli(["diff", str(a), str(b)], capsys)
        assert code == 2
        msg = _one_line(err)
        assert msg.startswith(f"error: {named}: "), msg
        assert ("no such folder" if named == missing else "no cnn.c") in msg


def test_inspect_with_the_other_device_names_the_folders_device(mnist: Path, capsys):
    for command in (["inspect"], ["simulate", "--firmware"]):
        code, _, err = run_cli([*command, str(mnist), "--device", "MAX78002"], capsys)
        assert code == 2
        msg = _one_line(err)
        assert "this is MAX78000 firmware" in msg and "not MAX78002" in msg, msg
        assert "clocks" not in msg


def test_a_network_the_reader_refuses_names_the_register(mnist: Path, tmp_path: Path, capsys):
    """Layer 0's rows register says pad 3 (the field holds it; a 3x3 convolution cannot use it):
    the refusal names that layer's register, not the temporary YAML the recovery reads."""
    bad = tmp_path / "bad"
    shutil.copytree(mnist, bad)
    rmap = MAPS["MAX78000"]
    addr = rmap.layer(0, 0, "rows")
    text = (bad / "cnn.c").read_text()
    m = re.search(rf"\(\(volatile uint32_t \*\) 0x{addr:08x}\) = 0x([0-9a-f]{{8}});", text)
    assert m, text[:2000]
    value = int(m.group(1), 16)
    pad = value >> rmap.pad_cnt_offs & 3
    size = (value & 0xFFFF) - 2 * pad + 1
    new = (size - 1 | 3 << rmap.pad_cnt_offs) + 6
    changed = m.group(0).replace(m.group(1), f"{new:08x}")
    (bad / "cnn.c").write_text(text.replace(m.group(0), changed))
    code, _, err = run_cli(["simulate", "--firmware", str(bad)], capsys)
    assert code == 2
    msg = _one_line(err)
    assert re.search(r"register 0x5010[0-9a-f]{4}: layer 0: ", msg), msg
    assert "decoded.yaml" not in msg and "pad 3" in msg
