"""The vendor pair on the command line (`--ai8x-yaml Y --ai8x-checkpoint C` of simulate, analyze,
check): known answers reproduced; bad input is one line on stderr, exit status 2, no output."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from cnnforge.cli import main

MNIST = ("networks/mnist-chw-ai85.yaml", "trained/ai85-mnist-qat8-q.pth.tar")


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    return info.value.code, out, err


def vendor_args(ai8x: Path, yaml_path: Path | None = None) -> list[str]:
    return [
        "--ai8x-yaml",
        str(yaml_path or ai8x / MNIST[0]),
        "--ai8x-checkpoint",
        str(ai8x / MNIST[1]),
    ]


def test_simulate_vendor_pair_matches_known_answer(ai8x_data, tmp_path, capsys):
    golden = ai8x_data / "golden" / "mnist"
    out = tmp_path / "y.npy"
    argv = ["simulate", *vendor_args(ai8x_data), "--input", str(golden / "input.npy")]
    code, _, err = run([*argv, "--output", str(out)], capsys)
    assert code == 0, err
    expected = np.load(golden / "expected.npy")
    assert np.array_equal(np.load(out).reshape(expected.shape), expected)


def test_analyze_and_check_vendor_pair(ai8x_data, capsys):
    code, out, err = run(["analyze", *vendor_args(ai8x_data), "--input-shape", "1,28,28"], capsys)
    assert code == 0, err
    assert "layer4" in out
    code, out, err = run(["check", *vendor_args(ai8x_data), "--input-shape", "1,28,28"], capsys)
    assert code == 0, err


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("pad: 2", "pad: [2", "YAML syntax error"),
        ("pad: 2", "kernel: 3", "unknown key 'kernel'"),
        ("pad: 2", "pad: 2\n    pad: 1", "duplicate key 'pad'"),
        ("  - op: mlp", "  - op: mlp\n    processors: 0xfff\n  - op: mlp", "has 6 layers with"),
        ("processors: 0x0000000000000fff", "processors: 0xffff", "has 16"),
        ("pad: 2", "pad: 0\n    kernel_size: 1x1", "does not match the checkpoint's"),
        ("  - op: mlp", "  - op: mlp\n    in_sequences: [1]", "takes 192 input channels"),
    ],
)
def test_bad_vendor_yaml_is_one_line_exit_2(ai8x_data, tmp_path, capsys, old, new, message):
    text = (ai8x_data / MNIST[0]).read_text()
    assert old in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(old, new, 1))
    shutil.copy(ai8x_data / "samples" / "sample_mnist.npy", tmp_path / "sample_mnist.npy")
    out = tmp_path / "y.npy"
    argv = ["simulate", *vendor_args(ai8x_data, bad), "--input", str(tmp_path / "sample_mnist.npy")]
    code, _, err = run([*argv, "--output", str(out)], capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err
    assert "bad.yaml:" in err and "Traceback" not in err
    assert not out.exists()


def test_half_a_pair_is_refused(ai8x_data, tmp_path, capsys):
    argv = ["simulate", "--ai8x-yaml", str(ai8x_data / MNIST[0]), "--input"]
    argv += [str(ai8x_data / "samples" / "sample_mnist.npy"), "--output", str(tmp_path / "y.npy")]
    code, _, err = run(argv, capsys)
    assert code == 2 and "must be given together" in err and err.count("\n") == 1
