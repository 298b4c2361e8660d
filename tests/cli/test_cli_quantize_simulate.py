"""``cnnforge quantize`` and ``cnnforge simulate``: round trip on a tiny model, bad input exits 2
with one line and leaves no output behind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from cnnforge.checkpoint import load_quantized
from cnnforge.cli import main

TINY = """
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1)
        self.c3 = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        a = torch.relu(self.bn(self.c1(x)))
        b = torch.relu(self.c2(nn.functional.max_pool2d(a, 2)))
        b = nn.functional.interpolate(b, scale_factor=2)
        return self.c3(torch.cat([a, b], 1))
"""


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    return int(info.value.code), out, err


@pytest.fixture
def tiny(tmp_path: Path) -> str:
    (tmp_path / "tiny.py").write_text(TINY)
    torch.manual_seed(0)
    return f"{tmp_path / 'tiny.py'}:Tiny"


@pytest.fixture
def quantized(tiny: str, tmp_path: Path, capsys) -> Path:
    out = tmp_path / "q.pth"
    code, stdout, err = run(["quantize", tiny, "-i", "3,8,8", "-o", str(out)], capsys)
    assert code == 0, err
    assert "wrote" in stdout
    return out


def _input(tmp_path: Path, array: np.ndarray, name: str = "x.npy") -> Path:
    path = tmp_path / name
    np.save(path, array)
    return path


def test_quantize_writes_a_loadable_checkpoint(quantized: Path) -> None:
    net = load_quantized(quantized)
    assert net.is_quantized and net.is_hardware and net.input_shape == (3, 8, 8)


def test_simulate_network_and_layers(quantized: Path, tmp_path: Path, capsys) -> None:
    from cnnforge.sim import simulate

    x = np.random.default_rng(0).integers(-128, 128, (2, 3, 8, 8)).astype(np.int8)
    xin = _input(tmp_path, x)
    y_path, layers = tmp_path / "y.npy", tmp_path / "layers"
    argv = [
        "simulate",
        "--network",
        str(quantized),
        "--input",
        str(xin),
        "--output",
        str(y_path),
        "--layers",
        str(layers),
    ]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    net = load_quantized(quantized)
    expected = simulate(net, torch.from_numpy(x.astype(np.int64)), device=None).outputs[
        net.outputs[0]
    ]
    np.testing.assert_array_equal(np.load(y_path), expected.numpy())
    assert len(list(layers.glob("*.npy"))) == len(net)
    code, _, err = run(argv, capsys)  # outputs exist now
    assert code == 2 and "already exists" in err


def test_simulate_single_image_and_model_source(
    tiny: str, quantized: Path, tmp_path: Path, capsys
) -> None:
    x = np.random.default_rng(1).integers(-128, 128, (3, 8, 8))
    xin = _input(tmp_path, x)
    y1, y2 = tmp_path / "y1.npy", tmp_path / "y2.npy"
    code, _, err = run(
        [
            "simulate",
            tiny,
            "--checkpoint",
            str(quantized),
            "--input",
            str(xin),
            "--output",
            str(y1),
        ],
        capsys,
    )
    assert code == 0, err
    assert np.load(y1).shape == (2, 8, 8)
    code, _, err = run(
        ["simulate", "--network", str(quantized), "--input", str(xin), "--output", str(y2)], capsys
    )
    assert code == 0, err
    np.testing.assert_array_equal(np.load(y1), np.load(y2))
    y3 = tmp_path / "y3.npy"  # --cpu: the CPU even where a GPU is present, the same numbers
    argv = ["simulate", "--network", str(quantized), "--input", str(xin), "--output", str(y3)]
    code, _, err = run([*argv, "--cpu"], capsys)
    assert code == 0, err
    np.testing.assert_array_equal(np.load(y3), np.load(y2))


@pytest.mark.parametrize(
    ("array", "match"),
    [
        (np.full((3, 8, 8), np.inf, np.float32), "dtype float32 with NaN or infinite"),
        (np.full((3, 8, 8), 128, np.int16), "values in [128, 128]"),
        (np.zeros((3, 8, 8), np.complex64), "dtype complex64"),
        (np.zeros((3, 4, 4), np.int8), "shape"),
        (np.zeros((8,), np.int8), "shape"),
    ],
)
def test_simulate_bad_input(quantized: Path, tmp_path: Path, capsys, array, match) -> None:
    xin = _input(tmp_path, array)
    y = tmp_path / "y.npy"
    code, _, err = run(
        ["simulate", "--network", str(quantized), "--input", str(xin), "--output", str(y)], capsys
    )
    assert code == 2 and match in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not y.exists()


def test_simulate_bad_sources(quantized: Path, tiny: str, tmp_path: Path, capsys) -> None:
    xin = _input(tmp_path, np.zeros((3, 8, 8), np.int8))
    y = str(tmp_path / "y.npy")
    cases = [
        (["--input", str(xin), "--output", y], "no network"),
        (["--network", str(quantized), tiny, "--input", str(xin), "--output", y], "not both"),
        (
            ["--network", str(tmp_path / "none.pth"), "--input", str(xin), "--output", y],
            "not found",
        ),
        (["--network", str(xin), "--input", str(xin), "--output", y], "NumPy .npy array"),
        (
            ["--network", str(quantized), "--input", str(tmp_path / "no.npy"), "--output", y],
            "not found",
        ),
    ]
    for args, match in cases:
        code, _, err = run(["simulate", *args], capsys)
        assert code == 2 and match in err, (args, err)
        assert err.count("\n") == 1
    assert not Path(y).exists()


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--weight-bits", "3"], "3-bit"),
        (["--weight-bits", "eight"], "--weight-bits"),
        (["--clip", "median"], "clip method"),
        (["--device", "MAX99"], "MAX99"),
        (["--checkpoint", "/nonexistent/float.pth"], "float.pth"),
        (["--weight-bits", "nolayer=4"], "unknown layers"),
    ],
)
def test_quantize_bad_input(tiny: str, tmp_path: Path, capsys, extra, match) -> None:
    out = tmp_path / "q.pth"
    code, _, err = run(["quantize", tiny, "-i", "3,8,8", "-o", str(out), *extra], capsys)
    assert code == 2 and match in err, err
    assert err.count("\n") == 1
    assert not out.exists()


def test_quantize_refuses_to_overwrite(quantized: Path, tiny: str, capsys) -> None:
    before = quantized.read_bytes()
    code, _, err = run(["quantize", tiny, "-i", "3,8,8", "-o", str(quantized)], capsys)
    assert code == 2 and "already exists" in err
    assert quantized.read_bytes() == before
    code, _, err = run(
        [
            "quantize",
            tiny,
            "-i",
            "3,8,8",
            "-o",
            str(quantized),
            "--overwrite",
            "--weight-bits",
            "4",
            "--weight-bits",
            "c3=8",
        ],
        capsys,
    )
    assert code == 0, err
    net = load_quantized(quantized)
    assert net.layer("c3").quant.weight_bits == 8 and net.layer("c1").quant.weight_bits == 4


def test_simulate_refuses_what_the_device_lacks(tmp_path: Path, capsys) -> None:
    """Binary weights exist only on MAX78002: one line naming the layer, exit 2."""
    from cnnforge.checkpoint import save_quantized
    from cnnforge.ir import Layer, Network, Op, Quantized

    w = np.where(np.random.default_rng(0).random((2, 3, 3, 3)) < 0.5, -1, 1).astype(np.int64)
    layer = Layer(
        name="binconv",
        op=Op.CONV2D,
        out_shape=(2, 4, 4),
        in_channels=3,
        out_channels=2,
        kernel_size=(3, 3),
        stride=(1, 1),
        padding=(1, 1),
        dilation=(1, 1),
        weight=w.astype(np.float32),
        quant=Quantized(-1, w, None, 0),
    )
    path = tmp_path / "bin.pth"
    save_quantized(Network("bin", (3, 4, 4), (layer,)), path)
    xin = _input(tmp_path, np.zeros((3, 4, 4), np.int8))
    y = tmp_path / "y.npy"
    base = ["simulate", "--network", str(path), "--input", str(xin), "--output", str(y)]
    code, _, err = run([*base, "--device", "MAX78000"], capsys)
    assert code == 2 and "binconv" in err and err.count("\n") == 1, err
    assert not y.exists()
    code, _, err = run([*base, "--device", "MAX78002"], capsys)
    assert code == 0, err


QAT_MODEL = """
import torch
from torch import nn
import cnnforge.nn as qnn


class Qat(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = qnn.Conv2d(3, 4, activation="relu", batchnorm=True)
        self.c2 = qnn.Conv2d(4, 4, pool="max", activation="relu", weight_bits=4)
        self.up = qnn.ConvTranspose2d(4, 4, activation="relu")
        self.add = qnn.Add()
        self.head = qnn.Conv2d(8, 2, 1, padding=0, wide=True)

    def forward(self, x):
        a = self.c1(x)
        b = self.add(self.up(self.c2(a)), a)
        return self.head(torch.cat([a, b], 1))
"""


def test_qat_checkpoint_keeps_its_integers(tmp_path: Path, capsys) -> None:
    """QAT import: MODEL + a state_dict saved in the quantized stage -> the module's integers."""
    import importlib.util

    import cnnforge.nn as qnn

    (tmp_path / "qat.py").write_text(QAT_MODEL)
    spec = importlib.util.spec_from_file_location("qat_model_b2", tmp_path / "qat.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(3)
    model = module.Qat()
    model.train()
    model(torch.randn(4, 3, 8, 8) * 0.5)  # BN statistics
    qnn.enable_qat(model, qnn.QATPolicy(weight_bits=8))
    qnn.set_quantized_eval(model)
    torch.save(model.state_dict(), tmp_path / "qat.pth")
    q = tmp_path / "q.pth"
    argv = [
        "quantize",
        f"{tmp_path / 'qat.py'}:Qat",
        "-i",
        "3,8,8",
        "-o",
        str(q),
        "--checkpoint",
        str(tmp_path / "qat.pth"),
    ]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    x = np.random.default_rng(2).integers(-128, 128, (2, 3, 8, 8))
    xin, y = _input(tmp_path, x), tmp_path / "y.npy"
    code, _, err = run(
        ["simulate", "--network", str(q), "--input", str(xin), "--output", str(y)], capsys
    )
    assert code == 0, err
    head = model.head.quantized_params()
    # wide: Q17.14 for 8 bits (docs/hardware/arithmetic.md R1.7)
    factor = 128 * 2.0 ** (head.weight_bits - 1)
    expected = model(torch.from_numpy(x).float() / 128).double() * factor
    np.testing.assert_array_equal(np.load(y), expected.numpy().astype(np.int64))
    assert load_quantized(q).layer("c2").quant.weight_bits == 4


def test_quantize_with_calibration(tiny: str, tmp_path: Path, capsys) -> None:
    calib = _input(tmp_path, np.random.default_rng(4).integers(-128, 128, (4, 3, 8, 8)), "c.npy")
    out = tmp_path / "q.pth"
    argv = ["quantize", tiny, "-i", "3,8,8", "-o", str(out), "--calibration", str(calib)]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    doc = torch.load(out, weights_only=True)
    assert set(doc["output_scales"]) == set(load_quantized(out).outputs)
    bad = _input(tmp_path, np.full((4, 3, 8, 8), np.nan), "bad.npy")
    code, _, err = run(
        ["quantize", tiny, "-i", "3,8,8", "-o", str(tmp_path / "r.pth"), "--calibration", str(bad)],
        capsys,
    )
    assert code == 2 and "--calibration" in err
