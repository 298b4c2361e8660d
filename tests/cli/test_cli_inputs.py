"""CLI conventions for inputs and outputs: model-arg literals, float samples, calibration sets,
seeded untrained weights, piped tables, and the vendor-YAML note on in-place layers."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cnnforge.cli import main
from cnnforge.cli.common import parse_model_args
from cnnforge.errors import InputError
from cnnforge.samples import load_input_array
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.ai8x_yaml_writer import yaml_text
from cnnforge.targets.max7800x.wordsim import in_place_layers


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


# ---- --model-arg ---------------------------------------------------------------------------


def test_model_args_are_python_literals() -> None:
    args = parse_model_args(
        ["channels=(8,16,32,32)", "flat=8,16", "name=unet", "bn=true", "act=None", "lr=0.5",
         "sizes=[1, 2]", "quoted='a b'", "empty="]
    )
    assert args == {
        "channels": (8, 16, 32, 32),
        "flat": (8, 16),
        "name": "unet",
        "bn": True,
        "act": None,
        "lr": 0.5,
        "sizes": [1, 2],
        "quoted": "a b",
        "empty": "",
    }


def test_model_args_never_evaluate_code() -> None:
    args = parse_model_args(["x=__import__('os').getcwd()", "y=1+2j*open"])
    assert args == {"x": "__import__('os').getcwd()", "y": "1+2j*open"}


def test_model_arg_without_equals_is_an_error() -> None:
    with pytest.raises(InputError, match="key=value"):
        parse_model_args(["channels"])


@given(st.one_of(st.integers(), st.floats(allow_nan=False), st.text(), st.booleans(),
                 st.tuples(st.integers(), st.integers()), st.lists(st.integers(), max_size=4)))
def test_model_arg_literal_roundtrip(value) -> None:
    parsed = parse_model_args([f"v={value!r}"])["v"]
    assert parsed == value or (isinstance(value, str) and parsed == value.strip())


# ---- samples -------------------------------------------------------------------------------


def test_float_sample_is_scaled_by_128_half_to_even(tmp_path) -> None:
    path = tmp_path / "x.npy"
    np.save(path, np.array([[[0.5, -1.0, 1.0, 1 / 256, 3 / 256, -2.0]]], dtype=np.float32))
    read = load_input_array(path, "--sample")
    assert read.values.tolist() == [[[64, -128, 127, 0, 2, -128]]]
    assert read.converted_from_float and read.clamped == 2
    assert "floats x 128" in read.describe()


@pytest.mark.parametrize(
    ("array", "found"),
    [
        (np.array([[[300]]], dtype=np.int16), "int16 with values in [300, 300]"),
        (np.array([[["a"]]]), "dtype <U1"),
        (np.array([[[np.nan]]]), "NaN"),
        (np.zeros((5,), dtype=np.int8), "shape (5,)"),
    ],
)
def test_bad_sample_names_file_dtype_and_rule(tmp_path, capsys, array, found) -> None:
    path = tmp_path / "bad.npy"
    np.save(path, array)
    code, _, err = _run(
        ["compile", "unet-voc", "--ptq", "--sample", str(path), "-o", str(tmp_path / "o")], capsys
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(path) in err and found in err and "hint:" in err
    assert not (tmp_path / "o").exists()


def test_compile_reports_what_calibrated_ptq(tmp_path, capsys) -> None:
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (3, 16, 16)).astype(np.float32))
    np.save(tmp_path / "cal.npy", rng.uniform(-1, 1, (3, 3, 16, 16)).astype(np.float32))
    code, out, err = _run(
        ["compile", "qat-unet", "--ptq", "-i", "3,16,16", "--sample", str(tmp_path / "x.npy"),
         "--calibration", str(tmp_path / "cal.npy"), "-o", str(tmp_path / "o"), "--no-report"],
        capsys,
    )
    assert code == 0, err
    assert "calibrated on --calibration" in out and "3 samples" in out
    code, out, err = _run(
        ["compile", "qat-unet", "--ptq", "-i", "3,16,16", "--sample", str(tmp_path / "x.npy"),
         "-o", str(tmp_path / "o2"), "--no-report"],
        capsys,
    )
    assert code == 0 and "calibrated on the sample alone" in out


def test_calibration_shape_must_match_the_model(tmp_path, capsys) -> None:
    np.save(tmp_path / "x.npy", np.zeros((3, 16, 16), dtype=np.int8))
    np.save(tmp_path / "cal.npy", np.zeros((2, 1, 16, 16), dtype=np.int8))
    code, _, err = _run(
        ["compile", "qat-unet", "--ptq", "-i", "3,16,16", "--sample", str(tmp_path / "x.npy"),
         "--calibration", str(tmp_path / "cal.npy"), "-o", str(tmp_path / "o")],
        capsys,
    )
    assert code == 2 and "--calibration shape (2, 1, 16, 16)" in err and "cal.npy" in err


# ---- seeded untrained weights -------------------------------------------------------------


def test_simulate_without_checkpoint_is_reproducible(tmp_path, capsys) -> None:
    np.save(tmp_path / "x.npy", np.random.default_rng(0).integers(-128, 128, (3, 16, 16)))
    outputs = []
    for i in range(2):
        out = tmp_path / f"y{i}.npy"
        code, _, err = _run(
            ["simulate", "qat-unet", "-i", "3,16,16", "--input", str(tmp_path / "x.npy"),
             "--output", str(out)],
            capsys,
        )
        assert code == 0, err
        assert len(err.strip().splitlines()) == 1 and "torch.manual_seed(0)" in err
        outputs.append(np.load(out))
    assert np.array_equal(*outputs)


# ---- output that is not a terminal ---------------------------------------------------------


def test_piped_check_prints_one_line_per_violation() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cnnforge", "check", "unet-voc", "--device", "MAX78000",
         "-i", "3,64,64"],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 1, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if "kernel-memory" in line]
    assert len(rows) == 1 and "use MAX78002" in rows[0], proc.stdout
    # No wrapped cells: a continuation row would start with an empty first cell.
    assert not [line for line in proc.stdout.splitlines() if line.startswith("│ ") and
                line.split("│")[1].strip() == ""]


def test_check_json_dash_is_stdout(capsys) -> None:
    import json

    code, out, _ = _run(
        ["check", "unet-voc", "--device", "MAX78002", "-i", "3,64,64", "--json", "-"], capsys
    )
    assert code == 0
    assert json.loads(out[out.index("{") :])["fits"] is True


# ---- vendor YAML header: --overlap-data ----------------------------------------------------


def test_yaml_header_names_in_place_layers(ai8x_data) -> None:
    camvid = read_ai8x(
        ai8x_data / "networks" / "camvid-unet-large.yaml",
        ai8x_data / "trained" / "ai85-camvid-unet-large-q.pth.tar",
        overlap_data=True, device="MAX78000"
    )
    layers = in_place_layers(camvid.network, camvid.plan)
    assert layers, "the vendor's own U-Net writes over its dying inputs"
    text = yaml_text(camvid.network, camvid.plan)
    header = text[: text.index("arch:")]
    assert "--overlap-data" in header and layers[0] in header and "--no-in-place" in header
    mnist = read_ai8x(
        ai8x_data / "networks" / "mnist-chw-ai85.yaml",
        ai8x_data / "trained" / "ai85-mnist-qat8-q.pth.tar", device="MAX78000"
    )
    assert in_place_layers(mnist.network, mnist.plan) == ()
    assert "--overlap-data" not in yaml_text(mnist.network, mnist.plan)


def _overwrites_without_flag(network, plan) -> tuple[str, ...]:
    """The oracle: the validator's word-level run without --overlap-data, in-place refused."""
    import dataclasses

    from cnnforge.targets.max7800x.validate import validate_plan

    strict = dataclasses.replace(plan, allow_overlap=False)
    issues = validate_plan(network, strict, plan.device, in_place=False)
    return tuple(dict.fromkeys(x.layer for x in issues if x.rule == "overwrite"))


@pytest.mark.parametrize("model", ["unet-large", "unet-voc", "cats-dogs"])
def test_in_place_layers_equal_the_word_level_run(model) -> None:
    from cnnforge.frontend import load_network
    from cnnforge.models import default_input_shape
    from cnnforge.passes.lower import lower_to_hardware
    from cnnforge.quant.ptq import quantize_network
    from cnnforge.targets.max7800x.device import get_device
    from cnnforge.targets.max7800x.planner import plan_network

    device = get_device("MAX78000")
    shape = default_input_shape(model) if model != "unet-voc" else (3, 32, 32)
    lowered = lower_to_hardware(load_network(model, shape), device).network
    network, plan = plan_network(quantize_network(lowered, 4, device=device), device)
    assert in_place_layers(network, plan) == _overwrites_without_flag(network, plan)


def test_in_place_layers_of_the_vendor_unet_equal_the_word_level_run(ai8x_data) -> None:
    camvid = read_ai8x(
        ai8x_data / "networks" / "camvid-unet-large.yaml",
        ai8x_data / "trained" / "ai85-camvid-unet-large-q.pth.tar",
        overlap_data=True, device="MAX78000"
    )
    assert in_place_layers(camvid.network, camvid.plan) == _overwrites_without_flag(
        camvid.network, camvid.plan
    )


@given(
    st.sets(st.sampled_from(["softmax", "mlator", "no_unload", "zero_sram", "no_kat", "riscv",
                             "calcx4", "read_ahead", "overlap_data", "new_kernel_loader"])),
    st.none() | st.tuples(st.integers(0, 3), st.integers(0, 31)),
    st.none() | st.integers(1, 99),
)  # fmt: skip
def test_compile_reads_its_firmware_flags_as_the_vendor_tool_does(
    switches: set[str], boost: tuple[int, int] | None, checklines: int | None
) -> None:
    """The MAX7800x options compile declares (targets/max7800x/firmware/options.py) give the
    record the same vendor flags give, and the record gives those flags back."""
    from cnnforge.targets.max7800x.firmware.options import (
        CLI_OPTIONS,
        TARGET_OPTIONS,
        FirmwareOptions,
    )

    values = {o.name: o.default for o in CLI_OPTIONS} | {name: True for name in switches}
    values |= {"boost": None if boost is None else f"{boost[0]}.{boost[1]}",
               "max_checklines": checklines}  # fmt: skip
    options = TARGET_OPTIONS.read(values, True)[0]["firmware_options"]
    on = {n: n in switches for n in ("softmax", "mlator", "zero_sram", "riscv", "calcx4",
                                      "read_ahead", "overlap_data")}  # fmt: skip
    expected = FirmwareOptions(unload="no_unload" not in switches, kat="no_kat" not in switches,
                               boost=boost, max_checklines=checklines, **on)  # fmt: skip
    assert options == expected
    assert FirmwareOptions.from_vendor_flags(options.flags()) == options
