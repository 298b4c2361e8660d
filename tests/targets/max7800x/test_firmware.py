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
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cnnforge.api.targets import compile_model
from cnnforge.pipeline import CompileOptions
from cnnforge.pipeline.state import CompileState
from cnnforge.targets.max7800x.firmware.firmware import build_firmware
from cnnforge.targets.max7800x.firmware.hostrun import HostRunError, run_setup
from cnnforge.targets.max7800x.firmware.writer import write_folder
from support.cli import run_cli
from support.firmware import (
    ARM_GCC,
    FIFO,
    FIFO_VARIANTS,
    GOLDEN,
    OWN,
    STATES,
    arm_build,
    demo_firmware,
    equal_model,
    own_sample,
    stored,
    variant_firmware,
)

KNOWN = sorted((GOLDEN / "known").glob("*.npz"))
# Small enough to build and run in a few seconds (cats-dogs: its input through the FIFO).
HOST_RUN = ["MAX78000-mnist", "MAX78002-mnist", "MAX78000-kws20_v3", "MAX78002-kws20_v3_1"]
HOST_RUN += ["MAX78000-cats-dogs"]
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no host C compiler")
needs_arm = pytest.mark.skipif(
    ARM_GCC is None, reason="arm-none-eabi-gcc absent (.ci/run installs it)"
)
OwnCompiled = Callable[[str], tuple[CompileState, Path]]


@pytest.fixture(scope="session")
def own_compiled(tmp_path_factory: pytest.TempPathFactory) -> OwnCompiled:
    """``compile MODEL --ptq --firmware`` of an own plan, once per session: (state, OUT)."""
    done: dict[str, tuple[CompileState, Path]] = {}

    def get(model: str) -> tuple[CompileState, Path]:
        if model not in done:
            _, device, shape, _ = next(o for o in OWN if o[0] == model)
            folder = tmp_path_factory.mktemp(f"own-{model}")
            np.save(folder / "x.npy", own_sample(shape))
            options = CompileOptions(output=folder / "out", model=model, device=device,
                                     ptq=True, sample=folder / "x.npy", report=False,
                                     firmware=True)  # fmt: skip
            done[model] = (compile_model(options), folder / "out")
        return done[model]

    return get


def test_every_demo_has_a_state_image() -> None:
    names = {p.stem for p in KNOWN}
    stored = {p.stem for p in STATES.glob("*.npz")}
    assert names <= stored
    assert sum(p.stat().st_size for p in STATES.glob("*.npz")) < 5_000_000


@pytest.mark.parametrize("name", [p.stem for p in KNOWN])
def test_model_equals_vendor(name: str) -> None:
    """Every register and memory word, the input words, the FIFO stream (the --fifo demos:
    cats-dogs, facedet_tinierssd) and the known answers."""
    vendor = stored(name)
    equal_model(demo_firmware(name), vendor)
    assert (len(vendor.fifo) > 0) == (name in FIFO)


@pytest.mark.parametrize("name", list(FIFO_VARIANTS))
def test_fifo_variant_equals_vendor(name: str) -> None:
    """A demo run with --fifo added: its input (HWC and CHW) through the FIFOs into a layer
    that does not stream, or (mnist-streaming) CHW input into two streaming layers."""
    equal_model(variant_firmware(name), stored(f"fifo-{name}"))


@needs_cc
@pytest.mark.parametrize("name", ["MAX78000-mnist", "MAX78000-mnist-streaming"])
def test_fifo_variant_host_run_equals_vendor(name: str, tmp_path: Path) -> None:
    """The CHW FIFO path of load_input, built and run on the host."""
    fw = variant_firmware(name)
    write_folder(fw, tmp_path)
    assert run_setup(tmp_path, fw.device).differences(stored(f"fifo-{name}")) == []


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


@needs_arm
@pytest.mark.parametrize(
    "name", [p.stem for p in KNOWN] + [f"fifo-{n}" for n in FIFO_VARIANTS]
)  # fmt: skip
def test_builds_for_the_cortex_m4_without_warnings(name: str, tmp_path: Path) -> None:
    """Every row of ``firmware_states.py --ours`` of a vendor demo (the --fifo ones too)."""
    variant = name.removeprefix("fifo-")
    fw = variant_firmware(variant) if name != variant else demo_firmware(name)
    write_folder(fw, tmp_path)
    arm_build(tmp_path)


@needs_arm
@pytest.mark.parametrize("model", [m for m, *_ in OWN])
def test_own_plan_builds_for_the_cortex_m4(model: str, own_compiled: OwnCompiled) -> None:
    """cnnforge's own plans (compiled once per session) build with -Werror too."""
    arm_build(own_compiled(model)[1] / "firmware")


@pytest.mark.parametrize(
    "model,device",
    [pytest.param(m, d, marks=[pytest.mark.slow] if m != "qat-unet" else []) for m, d, _, _ in OWN],
)
def test_own_plan_equals_vendor(model: str, device: str, own_compiled: OwnCompiled) -> None:
    """``compile MODEL --ptq --firmware``: the firmware it writes leaves the state that the vendor
    tool's firmware for the YAML + checkpoint it also writes leaves (stored image; cats-dogs
    streams its input through the FIFO)."""
    state, out = own_compiled(model)
    assert (out / "firmware" / "cnn.c").is_file()
    fw = build_firmware(state.network, state.target_state.plan, state.sample, state.answer)
    equal_model(fw, stored(f"own-{device}-{model}"))


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


def _cats_dogs_args(tmp_path: Path) -> list[str]:
    data = np.load(GOLDEN / "known" / "MAX78000-cats-dogs.npz")
    np.save(tmp_path / "x.npy", data["input"])
    args = ["compile", "--ai8x-yaml", str(GOLDEN / "networks" / "cats-dogs-hwc.yaml")]
    args += ["--ai8x-checkpoint", str(GOLDEN / "trained" / "ai85-catsdogs-qat8-q.int8.pth.tar")]
    return [*args, "--sample", str(tmp_path / "x.npy"), "-o", str(tmp_path / "out"), "--no-report"]


@needs_cc
def test_cli_firmware_streams_through_the_fifo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/firmware.md: the vendor's cats-dogs pair (its first layers stream) with --fifo
    --firmware --run: load_input writes the FIFO, and the set-up equals the vendor's."""
    code, out, err = run_cli([*_cats_dogs_args(tmp_path), "--fifo", "--firmware", "--run"], capsys)
    assert code == 0, err
    assert "firmware flash" in out and ("arm-none-eabi-size" if ARM_GCC else "estimate") in out
    main = (tmp_path / "out" / "firmware" / "main.c").read_text(encoding="utf-8")
    assert "0x50000008" in main and main.index("cnn_start();") < main.index("load_input();")
    image = run_setup(tmp_path / "out" / "firmware", "MAX78000")
    assert image.differences(stored("MAX78000-cats-dogs")) == []


@pytest.mark.parametrize(
    "args,why",
    [
        (["kws20_v3", "--device", "MAX78000"], "at most 16 HWC input channels"),
        (["qat-unet", "--device", "HLS", "--ptq"], "MAX78000/MAX78002"),
        (["qat-unet", "--ptq", "--model-arg", "in_channels=20", "-i", "20,32,32"], "at most 16"),
    ],
)
def test_cli_fifo_refused_when_the_first_layer_cannot_stream(
    args: list[str], why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--fifo`` on a network whose first layer cannot stream (a vendor pair: kws20's 128
    input channels; a model with 20), or for a device without FIFOs: one line with a hint,
    exit 2, no OUT/."""
    if args[0] == "kws20_v3":
        data = np.load(GOLDEN / "known" / "MAX78000-kws20_v3.npz")
        np.save(tmp_path / "x.npy", data["input"])
        args = ["--ai8x-yaml", str(GOLDEN / "networks" / "kws20-v3-hwc.yaml"),
                "--ai8x-checkpoint", str(GOLDEN / "trained" / "ai85-kws20_v3-qat8-q.int8.pth.tar"),
                "--sample", str(tmp_path / "x.npy"), *args[1:]]  # fmt: skip
    elif "in_channels=20" in args:
        np.save(tmp_path / "x.npy", own_sample((20, 32, 32)))
        args = [*args, "--sample", str(tmp_path / "x.npy")]
    out = tmp_path / "out"
    code, _, err = run_cli(["compile", *args, "-o", str(out), "--fifo", "--no-report"], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and why in err and "hint: drop --fifo" in err
    assert "Traceback" not in err and not out.exists()


def test_cli_fifo_on_a_model_streams_its_first_layer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compile MODEL --fifo``: the first layer streams from the FIFO (qat-unet needs no
    streaming otherwise), the firmware writes the FIFO, and a model that cannot is refused."""
    np.save(tmp_path / "x.npy", own_sample((3, 32, 32)))
    args = ["compile", "qat-unet", "--ptq", "--device", "MAX78000", "--sample"]
    args += [str(tmp_path / "x.npy"), "-o", str(tmp_path / "out"), "--no-report"]
    code, out, err = run_cli([*args, "--fifo", "--firmware"], capsys)
    assert code == 0, err
    assert "(--fifo)" in out
    assert "0x50000008" in (tmp_path / "out" / "firmware" / "main.c").read_text(encoding="utf-8")


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


@needs_cc
def test_run_check_names_a_wrong_fifo_write(tmp_path: Path) -> None:
    """``--firmware --run``'s host check compares the FIFO stream too: a sample word changed in
    sampledata.h is named by its FIFO write."""
    from cnnforge.errors import EmitError
    from cnnforge.targets.max7800x.firmware_step import _check_on_host

    fw = variant_firmware("MAX78000-mnist")
    write_folder(fw, tmp_path)
    data = tmp_path / "sampledata.h"
    first = f"0x{int(fw.fifo_inputs[0][0]):08x}"
    data.write_text(data.read_text(encoding="utf-8").replace(first, "0x12345678", 1), "utf-8")
    with pytest.raises(EmitError, match="FIFO write 0 of load_input is 0x12345678"):
        _check_on_host(fw, tmp_path)


def test_hwc_fifo_input_on_spread_processors_is_refused_by_name() -> None:
    """HWC through the FIFOs packs channels 4k..4k+3 for quadrant k's processors 0-3; a first
    layer reading its channels on processors 0, 16 and 32 (the vendor's
    fifostream-group-notvga64x48-hwc) would get channels 1 and 2 never loaded: the writer
    refuses it in one line naming the processors, never writes it; the packed map is written."""
    from types import SimpleNamespace

    from cnnforge.targets.max7800x.firmware.data import fifo_blocks

    x = np.arange(3 * 4 * 4).reshape(3, 4, 4) - 20
    spread = SimpleNamespace(in_map=1 | 1 << 16 | 1 << 32, chw=False)
    with pytest.raises(NotImplementedError, match=r"processors \[0, 16, 32\] but the FIFO"):
        fifo_blocks(spread, x)
    (words,) = fifo_blocks(SimpleNamespace(in_map=0b111, chw=False), x)
    first = [int(v) & 0xFF for v in x[:, 0, 0]]
    assert int(words[0]) == first[0] | first[1] << 8 | first[2] << 16
