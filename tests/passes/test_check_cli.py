"""``cnnforge check`` end to end: exit 0 fits / 1 does not / 2 bad input, tables, JSON."""

from __future__ import annotations

import json
import textwrap

import pytest

from cnnforge.cli import main


def _run(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(
        textwrap.dedent(
            """
            import torch
            from torch import nn

            class Small(nn.Module):
                def __init__(self, k=3):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 8, k, padding=k // 2)
                    self.act = nn.ReLU()
                    self.head = nn.Conv2d(8, 4, 1)

                def forward(self, x):
                    return self.head(self.act(self.conv(x)))

            class Sorts(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 8, 3, padding=1)

                def forward(self, x):
                    return torch.cumsum(self.conv(x), dim=1)
            """
        )
    )
    return path


def test_fits_exit_0_and_json_file(model_file, tmp_path, capsys) -> None:
    out_json = tmp_path / "report.json"
    code, out, _ = _run(
        ["check", f"{model_file}:Small", "-i", "3,16,16", "--json", str(out_json)], capsys
    )
    assert code == 0 and "fits" in out
    doc = json.loads(out_json.read_text())
    assert doc["fits"] is True and doc["device"] == "MAX78000"
    assert [r["rule"] for r in doc["rewrites"]] == ["fuse-activation"]
    assert doc["violations"] == [] and doc["kernel_memory"]["words_needed"] > 0


def test_does_not_fit_exit_1_with_json_stdout(model_file, capsys) -> None:
    args = ["check", f"{model_file}:Small", "-i", "3,16,16", "--model-arg", "k=5"]
    code, out, _ = _run([*args, "--json", "-"], capsys)
    assert code == 1
    doc = json.loads(out)
    (v,) = doc["violations"]
    assert (v["layer"], v["module_path"], v["rule"]) == ("conv", "conv", "kernel-size")
    assert v["actual"] == "5x5" and "two 3x3 convs" in v["hint"]
    code, out, _ = _run(args, capsys)
    assert code == 1 and "kernel-size" in out and "does not fit" in out


def test_unet_voc_auto_lists_widths(capsys) -> None:
    args = ["check", "unet-voc", "-d", "MAX78000", "-i", "3,64,64", "--weight-bits", "auto"]
    code, out, _ = _run([*args, "--json", "-"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["weight_bits_mode"] == "auto" and doc["weight_bits"]["bottleneck.3"] == 4
    code, _, _ = _run(["check", "unet-voc", "-d", "max78000", "-i", "3,64,64"], capsys)
    assert code == 1


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["-d", "MAX99999"], "unknown device"),
        (["--weight-bits", "3"], "--weight-bits"),
        (["-i", "3,x"], "--input-shape"),
    ],
)
def test_bad_input_one_line_exit_2(model_file, capsys, args, needle) -> None:
    base = ["check", f"{model_file}:Small", "-i", "3,16,16"]
    code, out, err = _run([*base, *args], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err


def test_unmappable_op_is_a_violation_naming_module_and_op(model_file, capsys) -> None:
    code, out, _ = _run(["check", f"{model_file}:Sorts", "-i", "3,8,8", "--json", "-"], capsys)
    violations = json.loads(out)["violations"]
    assert code == 1 and any("torch.cumsum" in v["actual"] for v in violations)
    assert all(v["hint"] for v in violations)


def test_missing_model_exit_2(tmp_path, capsys) -> None:
    code, _, err = _run(["check", str(tmp_path / "nope.py:Net"), "-i", "3,8,8"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_vendor_pair_and_shipped_default_shape(ai8x_data, capsys) -> None:
    args = [
        "check",
        "--ai8x-yaml",
        str(ai8x_data / "networks/mnist-chw-ai85.yaml"),
        "--ai8x-checkpoint",
        str(ai8x_data / "trained/ai85-mnist-qat8-q.pth.tar"),
        "-i",
        "1,28,28",
        "--json",
        "-",
    ]
    code, out, _ = _run(args, capsys)
    assert code == 0 and json.loads(out)["hardware_layers"] == 5
    code, out, _ = _run(["check", "unet-large", "--json", "-"], capsys)  # 48x88x88 by default
    assert code == 0 and json.loads(out)["fits"]
    code, _, err = _run(["check", "unet-voc", "--ai8x-yaml", "x.yaml"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
