"""``cnnforge simulate --firmware`` and ``inspect --yaml``: a firmware folder's network, read
back (issue 26), simulated against the folder's own known answer, and written as a vendor pair.

The folders are cnnforge's firmware for the vendor demos (their state equals the vendor tool's
stored state images, test_firmware_inspect.py) and ``compile qat-unet --firmware``.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings

from cnnforge.api.targets import compile_model
from cnnforge.errors import PlanError
from cnnforge.pipeline import CompileOptions
from cnnforge.quant.ptq import quantize_network
from cnnforge.sim import simulate
from cnnforge.targets.max7800x.device import get_device
from cnnforge.targets.max7800x.firmware.firmware import build_firmware
from cnnforge.targets.max7800x.firmware.interpret import read_state
from cnnforge.targets.max7800x.firmware.options import FirmwareOptions
from cnnforge.targets.max7800x.firmware.selftest import run_self_test
from cnnforge.targets.max7800x.firmware.writer import write_folder
from cnnforge.targets.max7800x.firmware_read import read_firmware
from cnnforge.targets.max7800x.planner import plan_network
from support.cli import run_cli
from support.firmware import (
    FIFO,
    FIFO_VARIANTS,
    GOLDEN,
    OWN,
    demo_firmware,
    own_sample,
    pair_firmware,
    variant_firmware,
)
from support.firmware_cases import CASES, case_firmware
from support.plan import networks, with_weights

DEMOS = sorted(p.stem for p in (GOLDEN / "known").glob("*.npz") if p.stem not in FIFO)
LARGE = {n for n in DEMOS if "unet" in n or "tinierssd" in n or "cifar" in n}
QUICK = ["MAX78000-mnist", "MAX78002-mnist", "MAX78000-kws20_v3"]
# Input through the FIFOs: the --fifo demos and the demos run with --fifo added (streaming too).
FIFO_CASES = sorted(FIFO) + [f"fifo-{v}" for v in FIFO_VARIANTS]


def _demo(name: str, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp(name)
    write_folder(demo_firmware(name), folder)
    return folder


def _fifo_demo(name: str, tmp_path_factory) -> tuple[Path, np.ndarray]:
    """(cnnforge's folder of a FIFO case, the golden input it streams)."""
    variant = name.removeprefix("fifo-")
    fw = variant_firmware(variant) if name != variant else demo_firmware(name)
    folder = tmp_path_factory.mktemp(name)
    write_folder(fw, folder)
    demo = FIFO_VARIANTS[variant][0] if name != variant else name
    return folder, np.load(GOLDEN / "known" / f"{demo}.npz")["input"]


def _fifo_param(name: str):
    slow = "tinierssd" in name or "cifar" in name
    return pytest.param(name, marks=[pytest.mark.slow] if slow else [])


@pytest.fixture(scope="module")
def mnist(tmp_path_factory) -> Path:
    return _demo("MAX78000-mnist", tmp_path_factory)


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[pytest.mark.slow] if n in LARGE else []) for n in DEMOS]
)
def test_simulate_firmware_holds_the_known_answer(name: str, tmp_path_factory, capsys) -> None:
    """decode -> network -> simulate equals the firmware's known answer bit for bit (the vendor
    simulator's, the golden's), on the firmware's own sample, read back exactly."""
    folder = _demo(name, tmp_path_factory)
    code, out, err = run_cli(["simulate", "--firmware", str(folder)], capsys)
    assert code == 0, err
    assert re.search(r"known answer \(sampleoutput\.h\): PASS, \d+ words equal", out), out
    x = read_firmware(folder, None).sample()
    assert np.array_equal(x, np.load(GOLDEN / "known" / f"{name}.npz")["input"])


@pytest.mark.parametrize("name", [_fifo_param(n) for n in FIFO_CASES])
def test_simulate_firmware_reads_the_fifo_stream(name: str, tmp_path_factory, capsys) -> None:
    """Input through the FIFOs (streaming first layers, or a whole frame): the decoded layers
    stream as the plan did, the sample is read back from load_input's FIFO writes, and the known
    answer holds."""
    folder, want = _fifo_demo(name, tmp_path_factory)
    code, out, err = run_cli(["simulate", "--firmware", str(folder)], capsys)
    assert code == 0, err
    assert re.search(r"known answer \(sampleoutput\.h\): PASS, \d+ words equal", out), out
    decoded = read_firmware(folder, None)
    assert np.array_equal(decoded.sample(), want)
    assert decoded.layers[0].fifo and decoded.plan.fifo
    streamed = FIFO_VARIANTS.get(name.removeprefix("fifo-"), (name, None))[1]
    planned = [p.streaming for p in decoded.plan.placements]
    assert [ly.streaming for ly in decoded.layers] == planned
    if streamed is not None:  # the variants: their first ``streamed`` layers stream
        assert planned == [i < streamed for i in range(len(planned))]


def test_simulate_firmware_with_input_and_output(mnist: Path, tmp_path: Path, capsys) -> None:
    x = np.load(GOLDEN / "known" / "MAX78000-mnist.npz")["input"]
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npy"
    args = ["simulate", "--firmware", str(mnist), "--input", str(tmp_path / "x.npy")]
    code, text, err = run_cli([*args, "--output", str(out)], capsys)
    assert code == 0, err
    assert "known answer" not in text and "5 layers decoded" in text
    golden = np.load(GOLDEN / "known" / "MAX78000-mnist.npz")
    want = golden["output"] if "output" in golden.files else None
    got = np.load(out)
    assert got.shape == (10,)
    if want is not None:
        assert np.array_equal(got.reshape(-1), np.asarray(want).reshape(-1))
    np.save(tmp_path / "bad.npy", np.zeros((2, 5, 5), np.int64))
    code, _, err = run_cli(["simulate", "--firmware", str(mnist), "--input",
                            str(tmp_path / "bad.npy")], capsys)  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1 and "shape" in err


def test_simulate_firmware_fails_on_a_wrong_known_answer(
    mnist: Path, tmp_path: Path, capsys
) -> None:
    """A known-answer word changed by hand: FAIL with the counts and the first word, exit 1."""
    bad = tmp_path / "bad"
    shutil.copytree(mnist, bad)
    text = (bad / "sampleoutput.h").read_text()
    m = re.search(r"(0x[0-9a-fA-F]{8}), (0x[0-9a-fA-F]{8}), 0x0*([1-9]\d*), (0x[0-9a-fA-F]{8})",
                  text)  # fmt: skip
    assert m, text[:400]
    value = int(m.group(4), 16) ^ int(m.group(2), 16) & 0x0000_00FF or 1
    new = m.group(0)[: m.start(4) - m.start(0)] + f"0x{value:08x}"
    (bad / "sampleoutput.h").write_text(text.replace(m.group(0), new, 1))
    code, out, _ = run_cli(["simulate", "--firmware", str(bad)], capsys)
    assert code == 1
    assert re.search(r"FAIL, 1 of \d+ words differ; first 0x[0-9a-f]{8}: ", out), out


def test_simulate_firmware_bad_folders_are_one_line_exit_2(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(["simulate", "--firmware", str(empty)], capsys)
    assert code == 2 and "no cnn.c" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["simulate", "--output", str(tmp_path / "y.npy")], capsys)
    assert code == 2 and "--input" in err and len(err.strip().splitlines()) == 1


HOSTILE = {
    "absolute": '#include "/etc/passwd"',
    "parent": '#include "../outside.h"',
    "comment": "# /* hidden */ include <../../etc/hostname>",
    "digraph": '%:include "/etc/hostname"',
    "continued": '#inc\\\nlude "/etc/hostname"',
    "computed": '#define F "/etc/passwd"\n#include F',
    "next": "#include_next <stdio.h>",
    "has_include": '#if __has_include("/etc/passwd")\n#endif',
    "dependency": '#pragma GCC dependency "/etc/passwd"',
    "link": '#include "link.h"',
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_includes_outside_the_folder_are_refused_before_cpp(
    case: str, mnist: Path, tmp_path: Path, capsys
) -> None:
    """`inspect` runs cpp over untrusted text: a directive reading outside the folder is refused
    before cpp runs (one line, exit 2, file:line), for inspect and simulate --firmware."""
    bad = tmp_path / case
    shutil.copytree(mnist, bad)
    (tmp_path / "outside.h").write_text("#error read\n")
    (bad / "link.h").symlink_to(tmp_path / "outside.h")
    lines = HOSTILE[case].count("\n")
    (bad / "weights.h").write_text(HOSTILE[case] + "\n" + (bad / "weights.h").read_text())
    for command in (["inspect"], ["simulate", "--firmware"]):
        code, _, err = run_cli([*command, str(bad)], capsys)
        assert code == 2, err
        assert len(err.strip().splitlines()) == 1, err
        assert re.search(rf"weights\.h:{lines + 1 if case == 'computed' else 1}: ", err), err
        assert "refused" in err or "links outside" in err, err
        assert "#error" not in err


def test_inspect_yaml_round_trips_through_compile(mnist: Path, tmp_path: Path, capsys) -> None:
    """decode -> `inspect --yaml` (+ checkpoint) -> `compile --ai8x-yaml --firmware` -> the same
    state, input and known answer as the folder read."""
    _round_trip(mnist, tmp_path, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in DEMOS if n != "MAX78000-mnist"])
def test_inspect_yaml_round_trips_every_demo(name: str, tmp_path_factory, tmp_path, capsys):
    _round_trip(_demo(name, tmp_path_factory), tmp_path, capsys)


@pytest.mark.parametrize("name", [_fifo_param(n) for n in FIFO_CASES])
def test_inspect_yaml_round_trips_the_fifo_cases(name: str, tmp_path_factory, tmp_path, capsys):
    """The streaming flags in the YAML, --fifo on the command line: the same state and FIFO
    stream again."""
    folder, _ = _fifo_demo(name, tmp_path_factory)
    _round_trip(folder, tmp_path, capsys)
    streams = FIFO_VARIANTS.get(name.removeprefix("fifo-"), (name, 1))[1] > 0
    assert ("streaming: true" in (tmp_path / "decoded.yaml").read_text()) == streams


def _round_trip(folder: Path, tmp_path: Path, capsys) -> None:
    y = tmp_path / "decoded.yaml"
    code, _, err = run_cli(["inspect", str(folder), "--yaml", str(y)], capsys)
    assert code == 0, err
    decoded = read_firmware(folder, None)
    np.save(tmp_path / "x.npy", decoded.sample())
    args = ["compile", "--ai8x-yaml", str(y), "--ai8x-checkpoint", str(y.with_suffix(".pth.tar"))]
    args += ["--sample", str(tmp_path / "x.npy"), "-o", str(tmp_path / "out"), "--firmware"]
    args += ["--fifo"] if decoded.layers[0].fifo else []
    code, _, err = run_cli([*args, "--device", decoded.device, "--no-report"], capsys)
    assert code == 0, err
    again = read_state(tmp_path / "out" / "firmware", decoded.device)
    # the known-answer table's length follows --max-checklines, which a YAML does not carry
    assert dataclasses.replace(again, kat=decoded.image.kat).differences(decoded.image) == []
    assert again.input.tolist() == decoded.image.input.tolist()


@pytest.mark.parametrize(
    ("model", "device", "shape", "flags"),
    [pytest.param(*own, marks=[] if own[0] == "qat-unet" else [pytest.mark.slow]) for own in OWN],
)
def test_inspect_yaml_round_trips_own_plans(model, device, shape, flags, tmp_path, capsys):
    """cnnforge's own plans place biases in layer order in a quadrant (not the vendor's
    size order): the YAML names each bias quadrant (bias_group), so compile places them at the
    same offsets again (issue 26)."""
    np.save(tmp_path / "s.npy", own_sample(shape))
    options = CompileOptions(
        output=tmp_path / "own", model=model, device=device, ptq=True, sample=tmp_path / "s.npy",
        report=False, firmware=True, fifo="--fifo" in flags,
        firmware_options=FirmwareOptions.from_vendor_flags(flags),
    )  # fmt: skip
    compile_model(options)
    _round_trip(tmp_path / "own" / "firmware", tmp_path, capsys)


@pytest.mark.parametrize("fifo", [False, True])
def test_simulate_firmware_of_compiles_own_output(fifo: bool, tmp_path: Path, capsys) -> None:
    """`compile qat-unet --ptq --firmware [--fifo]`: its folder, simulated, holds its known
    answer. With --fifo the first layer streams and its bias sits one entry after its offset
    on the MAX78000 (the hardware reads it there): read back from there, not shifted."""
    sample = tmp_path / "x.npy"
    np.save(sample, own_sample((3, 32, 32)))
    options = CompileOptions(output=tmp_path / "out", model="qat-unet", device="MAX78000",
                             ptq=True, sample=sample, report=False, firmware=True,
                             fifo=fifo)  # fmt: skip
    compile_model(options)
    folder = tmp_path / "out" / "firmware"
    code, out, err = run_cli(["simulate", "--firmware", str(folder)], capsys)
    assert code == 0, err
    assert "PASS" in out
    decoded = read_firmware(folder, None)
    assert decoded.layers[0].streaming == fifo
    first = decoded.network.layers[0].quant
    assert first is not None and first.bias is not None and np.any(first.bias != 0)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(networks())
def test_random_planned_networks_simulate_back(network) -> None:
    """Random planned networks -> firmware -> decode -> recover, on both parts: the recovered
    network, on the firmware's own (random) sample read back, holds the known answer the planned
    network's simulation wrote."""
    q = quantize_network(with_weights(network), 8, device=None)
    x = np.random.default_rng(0).integers(-128, 128, network.input_shape)
    done = 0
    for device in ("MAX78000", "MAX78002"):
        try:
            planned, plan = plan_network(q, device)
            result = simulate(planned, x, device=get_device(device))
            outs = {k: v.numpy() for k, v in result.outputs.items()}
            fw = build_firmware(planned, plan, x, outs)
        except (PlanError, NotImplementedError, ValueError):
            continue
        event(f"element-wise layers: {any(f.operands > 1 for f in fw.facts)}")
        with tempfile.TemporaryDirectory() as name:
            write_folder(fw, Path(name))
            decoded = read_firmware(Path(name), device)
            _, test = run_self_test(decoded)
        assert np.array_equal(decoded.sample(), x)
        assert test is not None and test.passed, (device, test)
        done += 1
    assume(done)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_case_simulates_back(name: str, tmp_path: Path, capsys) -> None:
    """cnnforge's firmware of every small-network case (element-wise layers of every kind,
    depthwise convolutions with bias and broadcast, narrow and binary weights, calcx4 and
    read-ahead, streaming 1x1 layers) read back holds its own known answer; element-wise
    layers with their operands (interleaved at the read pointer; the operation, operand count
    and pooling order from the 1D register) and producers."""
    fw = case_firmware(name)
    write_folder(fw, tmp_path)
    code, out, err = run_cli(["simulate", "--firmware", str(tmp_path)], capsys)
    assert code == 0, err
    assert "PASS" in out
    decoded = read_firmware(tmp_path, None)
    for f, ly in zip(fw.facts, decoded.network.layers, strict=True):
        assert (len(ly.inputs) if ly.eltwise is not None else 1) == f.operands
        assert (ly.eltwise.value if ly.eltwise is not None else "") == f.eltwise


AUTOENCODER = """\
arch: conv1d_mlp
dataset: motor
layers:
  - {processors: 0xffffffffffffffff, out_offset: 0x2000, operation: conv1d, kernel_size: 1,
     pad: 0, activate: ReLU, data_format: HWC}
  - {processors: 0xffffffffffffffff, out_offset: 0x0000, operation: conv1d, kernel_size: 3,
     pad: 0, activate: ReLU}
  - {processors: 0xffffffffffffffff, out_offset: 0x2000, operation: mlp, activate: ReLU}
  - {processors: 0x00000000ffffffff, out_offset: 0x0000, operation: mlp, activate: ReLU}
  - {processors: 0x000000000000000f, out_offset: 0x2000, operation: mlp, activate: None}
"""


def test_conv1d_then_linear_layers_simulate_back(tmp_path: Path, capsys) -> None:
    """Conv1d layers down to a length of 1, then linear layers (the vendor's motor-fault
    autoencoder's shape): the 1x1 layers' registers are those of a 2-D 1x1 convolution; read
    back as linear layers on the Conv1d's 1-D output, they hold the known answer."""
    import torch

    (tmp_path / "n.yaml").write_text(AUTOENCODER)
    rng = np.random.default_rng(3)
    shapes = [(128, 256, 1), (64, 128, 3), (32, 64), (4, 32), (16, 4)]
    state = {}
    for i, shape in enumerate(shapes):
        state[f"l{i}.op.weight"] = torch.from_numpy(rng.integers(-128, 128, shape).astype("f4"))
        state[f"l{i}.op.bias"] = torch.from_numpy(rng.integers(-64, 64, shape[0]).astype("f4"))
        state[f"l{i}.output_shift"] = torch.tensor([-3.0])
    torch.save({"arch": "conv1d_mlp", "epoch": 1, "state_dict": state}, tmp_path / "n.pth.tar")
    x = rng.integers(-128, 128, (256, 3))
    fw = pair_firmware(tmp_path / "n.yaml", tmp_path / "n.pth.tar", x, "MAX78000", [])
    write_folder(fw, tmp_path / "fw")
    code, out, err = run_cli(["simulate", "--firmware", str(tmp_path / "fw")], capsys)
    assert code == 0, err
    assert "PASS" in out
    ops = [ly.op for ly in read_firmware(tmp_path / "fw", None).network.layers]
    assert [op.value for op in ops] == ["conv1d", "conv1d", "linear", "linear", "linear"]
