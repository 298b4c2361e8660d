"""The vendor tool's own test suite, its stored subset (issue 38; benchmarks/vendor_tests.py
measures all of it where the vendor tool is set up, and ``--capture`` stores these): per
(configuration, part) the vendor pair, its sample, the vendor tool's known answer and its
firmware's state image. Each case holds the benchmark's columns it passed when it was stored:
cnnforge reads the pair and simulates the known answer; its firmware leaves the vendor's state;
the vendor's state decodes and simulates to its own known answer; cnnforge's folder too."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from cnnforge.targets.max7800x.firmware.interpret import read_state
from cnnforge.targets.max7800x.firmware.selftest import run_self_test
from cnnforge.targets.max7800x.firmware.writer import write_folder
from cnnforge.targets.max7800x.firmware_read import decode_firmware_image, read_firmware
from support.vendor_store import STORE, StoredCase, load_stored, stored_names
from support.vendor_suite import family

NAMES = stored_names()


@pytest.fixture(scope="module", params=NAMES)
def case(request) -> StoredCase:
    return load_stored(STORE / f"{request.param}.npz")


def test_the_stored_subset_covers_each_family_on_both_parts() -> None:
    cases = [load_stored(STORE / f"{n}.npz") for n in NAMES]
    covered = {(c.family, c.device) for c in cases}
    # the random-weight demos are too large to store (~750 KiB each); the vendor's demos with
    # checkpoints are stored as state images by tests/support/firmware.py
    for fam in ("conv1d", "upsample", "passthrough", "wide", "eltwise", "mlp/flatten",
                "pooling", "multipass", "conv2d"):  # fmt: skip
        assert {(fam, "MAX78000"), (fam, "MAX78002")} <= covered, fam
    assert all(c.family in (family(c.name), "demo") for c in cases)


def test_the_pair_simulates_to_the_vendors_known_answer(case: StoredCase, tmp_path: Path) -> None:
    if "reads" not in case.expect:
        pytest.skip(f"{case.name}: not read when stored")
    model = case.read(tmp_path)
    outputs = case.outputs(model)
    if "sim" in case.expect:
        assert case.difference(model, outputs) == ""


def test_the_firmware_leaves_the_vendors_state(case: StoredCase, tmp_path: Path) -> None:
    """cnnforge's firmware for the pair, written and read back (interpret.py): every register
    and memory word, the input, the FIFO writes and the known-answer table equal the vendor's."""
    if "state" not in case.expect:
        pytest.skip(f"{case.name}: the writer did not match it when stored")
    model = case.read(tmp_path / "pair")
    write_folder(case.firmware(model, case.outputs(model)), tmp_path / "fw")
    ours = read_state(tmp_path / "fw", case.device)
    assert case.image is not None
    assert ours.differences(case.image, limit=3) == []


def test_the_vendors_state_decodes_to_its_known_answer(case: StoredCase) -> None:
    if "decode" not in case.expect:
        pytest.skip(f"{case.name}: not decoded when stored")
    assert case.image is not None
    _, test = run_self_test(decode_firmware_image(case.image, case.records))
    assert test is not None and test.passed, test


def test_cnnforges_folder_decodes_to_its_own_known_answer(case: StoredCase, tmp_path: Path):
    if "own" not in case.expect:
        pytest.skip(f"{case.name}: its folder did not read back when stored")
    model = case.read(tmp_path / "pair")
    write_folder(case.firmware(model, case.outputs(model)), tmp_path / "fw")
    decoded = read_firmware(tmp_path / "fw", case.device)
    _, test = run_self_test(decoded)
    assert test is not None and test.passed, test
    # the registers round a multi-pass input's channels up to whole passes: those read 0
    x = decoded.sample()
    want = case.sample.reshape(case.sample.shape[0], -1)
    got = x.reshape(x.shape[0], -1)
    assert np.array_equal(got[: want.shape[0]], want) and not got[want.shape[0] :].any()


def test_a_stored_case_round_trips(case: StoredCase, tmp_path: Path) -> None:
    """The store keeps the numbers exactly (what the other tests read)."""
    from support.vendor_store import save_stored

    again = load_stored(save_stored(dataclasses.replace(case), tmp_path))
    assert again.yaml_text == case.yaml_text and again.expect == case.expect
    assert all(np.array_equal(again.state[k], v) for k, v in case.state.items())
    assert again.image is not None and case.image is not None
    assert again.image.differences(case.image) == []


def test_the_snoop_registers_are_written_and_a_layer_link_is_not_decoded(tmp_path: Path) -> None:
    """The MAX78002 case with `snoop` leaves the vendor's snoop registers (what
    test_the_firmware_leaves_the_vendors_state checks for every stored case); the same state with
    layer 0 linked to layer 3 (the vendor's `snoop_sequence`: conditional execution) is refused
    in one line naming the register, not decoded as if its layers ran in order."""
    from cnnforge.targets.max7800x.ai8x import read_ai8x
    from cnnforge.targets.max7800x.ai8x_yaml_writer import yaml_text
    from cnnforge.targets.max7800x.firmware.decode import DecodeError, decode_state
    from cnnforge.targets.max7800x.firmware.regmap import MAPS

    case = load_stored(STORE / "MAX78002-snoop-count.npz")
    assert case.image is not None and {"state", "own"} <= set(case.expect)
    state = {int(a): int(v) for a, v in case.image.state}
    rmap = MAPS["MAX78002"]
    assert state[rmap.ctl(0, 0x42020)] == 0x201001  # snoop 1 address 1, as the YAML says
    decode_state(state, "MAX78002")
    model = case.read(tmp_path)  # the registers travel on in the YAML cnnforge writes
    (tmp_path / "again.yaml").write_text(yaml_text(model.network, model.plan))
    again = read_ai8x(tmp_path / "again.yaml", tmp_path / "pair-q.pth.tar", case.sample.shape,
                      device="MAX78002")  # fmt: skip
    assert again.plan.snoop == model.plan.snoop and len(model.plan.snoop) == 32
    for q in range(4):
        state[rmap.layer(q, 0, "next")] = 1 << 7 | 3
    with pytest.raises(DecodeError, match=r"^register 0x51100000: layer 0 links to layer 3"):
        decode_state(state, "MAX78002")


def test_a_layer_reading_memory_no_layer_writes_is_refused_by_name() -> None:
    """A later layer reading where no layer writes and the input does not lie (the vendor's
    rolling `data_buffer`, kept by the firmware's own code: kinetics) is refused in one line
    naming its read-pointer register, not misread as a second network input."""
    from cnnforge.targets.max7800x.firmware.decode import DecodeError
    from cnnforge.targets.max7800x.firmware.regmap import MAPS

    case = load_stored(STORE / "MAX78002-depthwise-multipass-70ch.npz")
    assert case.image is not None
    rmap = MAPS["MAX78002"]
    state = {int(a): int(v) for a, v in case.image.state}
    moved = {rmap.layer(q, 1, "rptr_base") for q in range(4)} & set(state)
    assert moved
    state.update({a: 0x6000 // 4 for a in moved})
    image = dataclasses.replace(case.image, state=np.array(sorted(state.items()), np.uint32))
    where = f"register 0x{rmap.layer(0, 1, 'rptr_base'):08x}: layer 1 reads offset 0x6000"
    with pytest.raises(DecodeError, match=rf"^{where} .*`data_buffer`\): not read back$"):
        decode_firmware_image(image, case.records)
