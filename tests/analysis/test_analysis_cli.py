"""``cnnforge analyze`` end to end: output, JSON/Markdown files, and one-line errors (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from support.cli import run_cli

MODELS = """
import torch
from torch import nn

class Tiny(nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3, padding=1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))

class Branchy(nn.Module):
    def forward(self, x):
        if x.mean() > 0:
            return x
        return x + x

class Vgg(nn.Module):
    def __init__(self):
        super().__init__()
        layers, c = [], 3
        for out in (8, 16, 16, 16):
            layers += [nn.Conv2d(c, out, 3, padding=1), nn.ReLU(),
                       nn.Conv2d(out, out, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
            c = out
        self.features = nn.Sequential(*layers[:-1])

    def forward(self, x):
        return self.features(x)
"""


@pytest.fixture
def models_py(tmp_path: Path) -> Path:
    path = tmp_path / "models.py"
    path.write_text(textwrap.dedent(MODELS))
    return path


def test_analyze_prints_the_seed_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["analyze", "unet-voc", "--input-shape", "3,64,64"], capsys)
    assert code == 0
    assert "parameters: 486,613" in out and "MACs: 48,496,640" in out
    code, out, _ = run_cli(["analyze", "unet-voc", "-i", "3,64,64", "--count", "thop"], capsys)
    assert "MACs (thop count): 55,787,520" in out


def test_json_and_markdown_files(
    models_py: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    js, md = tmp_path / "a.json", tmp_path / "a.md"
    args = ["analyze", f"{models_py}:Tiny", "-i", "3,8,8", "--model-arg", "width=2"]
    code, out, _ = run_cli([*args, "--json", str(js), "--markdown", str(md)], capsys)
    assert code == 0 and "parameters: 56" in out
    doc = json.loads(js.read_text())
    assert doc["schema"] == "cnnforge-analysis/1" and doc["count"] == "true"
    assert [row["name"] for row in doc["layers"]] == ["conv", "relu", "pool"]
    pool = doc["layers"][2]
    assert (pool["rf_size"], pool["rf_stride"], pool["rf_offset"]) == ([4, 4], [2, 2], [1.5, 1.5])
    assert pool["out_shape"] == [2, 4, 4] and pool["act_bytes_int8"] == 4 * 16
    assert doc["totals"]["params"] == 56 and doc["totals"]["macs"] == 2 * 64 * 27
    assert md.read_text().startswith("# Tiny (input 3x8x8)")


def test_receptive_fields_past_the_input_as_matconvnet(
    models_py: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A VGG-style stack on 32x32: the fourth stage's fields are 36, 52 and 68 pixels."""
    code, out, _ = run_cli(["analyze", f"{models_py}:Vgg", "-i", "3,32,32", "--json", "-"], capsys)
    assert code == 0
    sizes = [row["rf_size"][0] for row in json.loads(out)["layers"] if row["op"] != "relu"]
    assert sizes == [3, 5, 6, 10, 14, 16, 24, 32, 36, 52, 68]


def test_json_to_stdout_is_only_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["analyze", "unet-voc", "--json", "-"], capsys)  # default 3x64x64
    assert code == 0 and json.loads(out)["totals"]["params"] == 486_613


def test_checkpoint_option(
    models_py: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = {"conv.weight": torch.zeros(4, 3, 3, 3), "conv.bias": torch.zeros(4)}
    torch.save({"state_dict": state}, tmp_path / "ok.pth")
    args = ["analyze", f"{models_py}:Tiny", "-i", "3,8,8", "--checkpoint", str(tmp_path / "ok.pth")]
    assert run_cli(args, capsys)[0] == 0


def bad_inputs(models_py: Path, tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """Each bad input: (arguments, text the one-line message must contain)."""
    torch.save({"conv.weight": torch.zeros(5, 3, 3, 3)}, tmp_path / "bad.pth")
    tiny = f"{models_py}:Tiny"
    return {
        "missing file": (["nowhere/model.py:Net", "-i", "3,8,8"], "no such model file"),
        "unknown name": (["unet-xyz", "-i", "3,8,8"], "unknown model name 'unet-xyz'"),
        "untraceable": ([f"{models_py}:Branchy", "-i", "3,8,8"], f"{models_py}:16"),
        "wrong shape": ([tiny, "-i", "4,8,8"], "conv: shape propagation fails at conv"),
        "bad shape text": ([tiny, "-i", "3,eight,8"], "is not a list of integers"),
        "checkpoint": (
            [tiny, "-i", "3,8,8", "--checkpoint", str(tmp_path / "bad.pth")],
            "bad.pth: checkpoint does not match the model; missing: conv.bias",
        ),
        "count": ([tiny, "-i", "3,8,8", "--count", "flops"], "unknown count mode"),
        "weight bits": ([tiny, "-i", "3,8,8", "--weight-bits", "3"], "weight bits 3"),
        "model arg": ([tiny, "-i", "3,8,8", "--model-arg", "depth=2"], "depth=2"),
    }


@pytest.mark.parametrize(
    "case",
    ["missing file", "unknown name", "untraceable", "wrong shape", "bad shape text", "checkpoint",
     "count", "weight bits", "model arg"],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2(
    case: str, models_py: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, text = bad_inputs(models_py, tmp_path)[case]
    out_json = tmp_path / "never.json"
    code, out, err = run_cli(["analyze", *args, "--json", str(out_json)], capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and text in err
    assert "Traceback" not in out + err and not out_json.exists()


def test_subprocess_error_has_no_traceback(models_py: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cnnforge", "analyze", f"{models_py}:Branchy", "-i", "3,8,8"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "torch.fx cannot trace Branchy" in proc.stderr


def test_vendor_yaml_and_checkpoint(ai8x_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The vendor's own count for the fakept U-Net: 282,220 parameters
    (docs/hardware/checkpoint-format.md §6)."""
    yaml = ai8x_data / "networks" / "camvid-unet-large-fakept.yaml"
    ckpt = ai8x_data / "trained" / "ai85-camvid-unet-large-fakept-q.pth.tar"
    args = ["analyze", "--ai8x-yaml", str(yaml), "--ai8x-checkpoint", str(ckpt), "--json", "-"]
    code, out, _ = run_cli(args, capsys)
    doc = json.loads(out)
    assert code == 0 and doc["totals"]["params"] == 282_220
    assert doc["totals"]["param_bytes_quantized"] == 282_220  # 8-bit weights + 8-bit biases
    enc2 = doc["layers"][4]  # max pool 2/2 fused before the 3x3 conv: field 2 + 2 * 3 = 8
    assert (enc2["rf_size"], enc2["rf_stride"], enc2["rf_offset"]) == ([8, 8], [2, 2], [1.5, 1.5])


def test_model_and_vendor_yaml_are_exclusive(
    ai8x_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    yaml = ai8x_data / "networks" / "mnist-chw-ai85.yaml"
    code, _, err = run_cli(["analyze", "unet-voc", "--ai8x-yaml", str(yaml)], capsys)
    assert code == 2 and err.count("\n") == 1
