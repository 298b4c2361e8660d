"""``cnnforge inspect``: a firmware folder read without compiling or running it (issue 26).

The interpreter's state equals the host-run harness's word for word (and so the vendor's stored
state image) on every firmware of the table cnnforge writes; bad input is one line, exit 2.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from cnnforge.api.targets import compile_model
from cnnforge.cli import main as cli_main
from cnnforge.pipeline import CompileOptions
from cnnforge.targets.max7800x.firmware.decode import decode_state
from cnnforge.targets.max7800x.firmware.facts import network_facts
from cnnforge.targets.max7800x.firmware.hostrun import run_setup
from cnnforge.targets.max7800x.firmware.interpret import FirmwareError, read_state
from cnnforge.targets.max7800x.firmware.regmap import MAPS
from cnnforge.targets.max7800x.firmware.writer import write_folder
from support.decode import differences
from support.firmware import GOLDEN, OWN, demo_firmware, own_sample, stored

DEMOS = sorted(p.stem for p in (GOLDEN / "known").glob("*.npz"))
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no host C compiler")


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for name in DEMOS:
        out[name] = tmp_path_factory.mktemp(name)
        write_folder(demo_firmware(name), out[name])
    return out


def _equal(a, b) -> list[str]:
    out = a.differences(b)
    if a.kat.tolist() != b.kat.tolist():
        out.append("known-answer tables differ")
    if a.fifo.tolist() != b.fifo.tolist():
        out.append("FIFO streams differ")
    return out


@pytest.mark.parametrize("name", DEMOS)
def test_interpreter_equals_the_vendor_state(name: str, folders: dict[str, Path]) -> None:
    fw = demo_firmware(name)
    mine = read_state(folders[name], fw.device)
    assert mine.differences(stored(name)) == []
    assert mine.kat.tolist() == stored(name).kat.tolist()


@needs_cc
@pytest.mark.parametrize("name", ["MAX78000-mnist", "MAX78002-mnist", "MAX78002-kws20_v3_1"])
def test_interpreter_equals_the_host_run(name: str, folders: dict[str, Path]) -> None:
    fw = demo_firmware(name)
    assert _equal(read_state(folders[name], fw.device), run_setup(folders[name], fw.device)) == []


def _run(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        cli_main(args)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_cli_inspect_prints_a_row_per_layer_and_json(folders, capsys) -> None:
    rc, out, _ = _run(["inspect", str(folders["MAX78000-mnist"])], capsys)
    assert rc == 0
    assert "MAX78000, 5 layers" in out
    rc, out, _ = _run(["inspect", str(folders["MAX78002-cifar-10"]), "--json", "-"], capsys)
    data = json.loads(out)
    assert data["device"] == "MAX78002" and len(data["layers"]) == 11


def _bad(tmp_path: Path, folders, name: str, old: str, new: str) -> Path:
    bad = tmp_path / name
    shutil.copytree(folders["MAX78000-mnist"], bad)
    text = (bad / "cnn.c").read_text()
    assert old in text
    (bad / "cnn.c").write_text(text.replace(old, new, 1))
    return bad


def test_bad_folders_are_one_line_exit_2(tmp_path: Path, folders, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    rc, _, err = _run(["inspect", str(empty)], capsys)
    assert rc == 2 and "no cnn.c" in err and len(err.strip().splitlines()) == 1
    marker = tmp_path / "ran"
    cases = {
        "system": ("int cnn_init(void)\n{\n",
                   f'int cnn_init(void)\n{{\n  system("touch {marker}");\n',
                   r"cnn\.c:\d+: call to system"),
        "pointer": ("int cnn_init(void)\n{\n",
                    "int cnn_init(void)\n{\n  uint32_t *p = (uint32_t *) &cnn_time;\n  *p = 1;\n",
                    r"cnn\.c:\d+: .*(not read|run time)"),
        "loop": ("int cnn_init(void)\n{\n", "int cnn_init(void)\n{\n  while (1);\n",
                 r"cnn\.c:\d+: the set-up runs past"),
        "range": ("int cnn_configure(void)\n{\n",
                  "int cnn_configure(void)\n{\n  *((volatile uint32_t *) 0x50100008) = 40;\n",
                  r"register 0x5[0-9a-f]{7}: (last layer|the quadrants' layer counts)"),
    }  # fmt: skip
    for name, (old, new, pattern) in cases.items():
        bad = _bad(tmp_path, folders, name, old, new)
        rc, _, err = _run(["inspect", str(bad)], capsys)
        assert rc == 2, name
        assert len(err.strip().splitlines()) == 1, err
        assert re.search(pattern, err), (name, err)
    assert not marker.exists()


def test_the_step_bound_is_the_loops_bound(folders) -> None:
    with pytest.raises(FirmwareError, match="past 1000 steps"):
        read_state(folders["MAX78000-mnist"], "MAX78000", max_steps=1000)


def test_cli_diff_names_the_first_layer_and_register(tmp_path: Path, folders, capsys) -> None:
    a = folders["MAX78000-mnist"]
    rc, out, _ = _run(["diff", str(a), str(a)], capsys)
    assert rc == 0 and "5 layers are equal" in out
    b = tmp_path / "b"
    shutil.copytree(a, b)
    text = (b / "cnn.c").read_text()
    reg = MAPS["MAX78000"].layer(0, 3, "post")
    line = next(ln for ln in text.splitlines() if f"0x{reg:08x}) = " in ln)
    value = int(line.split("= ")[1].split(";")[0], 16)
    (b / "cnn.c").write_text(
        text.replace(line, line.replace(f"0x{value:08x}", f"0x{value ^ 1 << 13:08x}"))
    )
    rc, out, _ = _run(["diff", str(a), str(b)], capsys)
    assert rc == 1
    assert re.match(
        rf"layer 3: output shift -?\d+ vs -?\d+ \(register 0x{reg:08x}\)", out.strip()
    ), out


@pytest.mark.parametrize(
    ("model", "device", "shape"),
    [
        pytest.param(m, d, s, marks=[pytest.mark.slow] if m != "qat-unet" else [])
        for m, d, s, _ in OWN
    ],
)
def test_interpreter_reads_compiles_own_firmware(
    model: str, device: str, shape: tuple, tmp_path: Path
) -> None:
    """``compile MODEL --ptq --firmware``: its folder, read, is the stored vendor state, and
    decodes to the plan's layers."""
    sample = tmp_path / "x.npy"
    np.save(sample, own_sample(shape))
    options = CompileOptions(output=tmp_path / "out", model=model, device=device, ptq=True,
                             sample=sample, report=False, firmware=True)  # fmt: skip
    state = compile_model(options)
    mine = read_state(tmp_path / "out" / "firmware", device)
    vendor = stored(f"own-{device}-{model}")
    assert _equal(mine, vendor) == []
    facts = network_facts(state.network, state.target_state.plan)
    got = decode_state(dict(mine.state.tolist()), device)
    assert differences(got, facts, device, exact=False) == []


@pytest.mark.parametrize(
    ("case", "layer", "flag", "bias"),
    [("depthwise-MAX78002-mobilenet", 1, "depthwise", r"(q\d@\d+ ?)+"),
     ("eltwise-MAX78002-add", None, r"add of 2", None)],
)  # fmt: skip
def test_inspect_names_depthwise_and_element_wise_layers(case, layer, flag, bias, tmp_path):
    """The table says which layers are depthwise (broadcasting or not) or element-wise (the
    operation and its operands), and where a depthwise layer's per-channel bias lies (one
    slice per quadrant: q@first entry), as the registers say."""
    from cnnforge.targets.max7800x.firmware.inspect import read_folder, rows
    from support.firmware_cases import case_firmware

    write_folder(case_firmware(case), tmp_path)
    table = rows(read_folder(tmp_path, None)[2])
    hits = [r for r in table if re.search(flag, r[-1])]
    assert hits, table
    if layer is not None:
        assert hits[0][0] == str(layer) and re.fullmatch(bias, hits[0][-2]), hits[0]
