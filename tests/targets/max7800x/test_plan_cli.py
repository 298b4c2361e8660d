"""``cnnforge plan``: outputs, vendor-plan validation, and bad input (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cnnforge.cli import main
from cnnforge.targets.max7800x.ai8x import load_ai8x
from cnnforge.targets.max7800x.validate import validate_plan

SIMPLE = """
import torch
from torch import nn


class Simple(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)
        self.c = nn.Conv2d(16, 4, 1)

    def forward(self, x):
        a = torch.relu(self.a(x))
        b = torch.relu(self.b(a))
        return self.c(torch.cat((b, a), 1))
"""


def _run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    return int(stop.value.code or 0)


@pytest.fixture
def simple(tmp_path: Path) -> str:
    path = tmp_path / "simple.py"
    path.write_text(SIMPLE)
    return f"{path}:Simple"


def test_plan_writes_the_vendor_pair_and_the_report(tmp_path, simple, capsys):
    out = tmp_path / "out"
    assert _run(["plan", simple, "-i", "3,16,16", "-d", "MAX78000", "-o", str(out)]) == 0
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert {"network.yaml", "plan.json", "plan.md", "kernels.png", "timeline.png"} <= names
    assert any(n.startswith("memory/layer00_") and n.endswith(".png") for n in names)
    assert any(n.endswith("-q.pth.tar") for n in names)
    assert any(n.startswith("sample_") and n.endswith(".npy") for n in names)
    doc = json.loads((out / "plan.json").read_text())
    assert doc["schema"] == "cnnforge-plan/1" and doc["metrics"]["cycles"] > 0
    assert "| # | layer |" in (out / "plan.md").read_text()
    ckpt = next(out.glob("*-q.pth.tar"))
    net, plan = load_ai8x(out / "network.yaml", ckpt, (3, 16, 16), device="MAX78000")
    assert validate_plan(net, plan, "MAX78000") == ()  # the written YAML re-imports valid
    assert "cycles (estimated)" in capsys.readouterr().out


def test_existing_output_needs_overwrite(tmp_path, simple, capsys):
    out = tmp_path / "out"
    out.mkdir()
    assert _run(["plan", simple, "-i", "3,16,16", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert _run(["plan", simple, "-i", "3,16,16", "-o", str(out), "--overwrite"]) == 0


def test_plan_that_does_not_fit_leaves_nothing(tmp_path, simple, capsys):
    out = tmp_path / "out"
    assert _run(["plan", simple, "-i", "3,120,120", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "data memory exhausted" in err and len(err.splitlines()) == 1
    assert not out.exists() and not list(tmp_path.glob(".out.*"))


def test_missing_output_is_bad_input(simple, capsys):
    assert _run(["plan", simple, "-i", "3,16,16"]) == 2
    assert "-o" in capsys.readouterr().err
    assert _run(["plan", simple, "-i", "3,16,16", "--validate-only"]) == 0


def test_vendor_plans_validate_only(ai8x_data, capsys):
    nets, trained = ai8x_data / "networks", ai8x_data / "trained"
    unet = [
        "--ai8x-yaml", str(nets / "camvid-unet-large.yaml"),
        "--ai8x-checkpoint", str(trained / "ai85-camvid-unet-large-q.pth.tar"),
        "-i", "48,48,48", "--validate-only",
    ]  # fmt: skip
    assert _run(["plan", *unet, "--allow-overlap"]) == 0
    assert "the plan is valid" in capsys.readouterr().out
    mnist = [
        "--ai8x-yaml", str(nets / "mnist-chw-ai85.yaml"),
        "--ai8x-checkpoint", str(trained / "ai85-mnist-qat8-q.pth.tar"), "--validate-only",
    ]  # fmt: skip
    assert _run(["plan", *mnist]) == 0


def test_broken_vendor_plan_is_reported(ai8x_data, tmp_path, capsys):
    text = (ai8x_data / "networks" / "camvid-unet-large.yaml").read_text()
    assert "out_offset: 0x4004" in text
    broken = tmp_path / "camvid-unet-large.yaml"
    broken.write_text(text.replace("out_offset: 0x4004", "out_offset: 0x4008"))
    ckpt = ai8x_data / "trained" / "ai85-camvid-unet-large-q.pth.tar"
    argv = ["plan", "--ai8x-yaml", str(broken), "--ai8x-checkpoint", str(ckpt)]
    assert _run([*argv, "-i", "48,48,48", "--validate-only", "--allow-overlap"]) == 1
    assert "issue(s)" in capsys.readouterr().out


def test_plan_from_a_quantized_checkpoint(tmp_path, simple):
    q = tmp_path / "q.pth"
    assert _run(["quantize", simple, "-i", "3,16,16", "-o", str(q)]) == 0
    out = tmp_path / "out"
    argv = ["plan", simple, "-i", "3,16,16", "--checkpoint", str(q), "-o", str(out)]
    assert _run(argv) == 0
    assert (out / "network.yaml").is_file() and (out / "plan.json").is_file()


def test_bad_options_are_one_line(tmp_path, simple, capsys):
    cases = (
        ["plan", simple, "-i", "3,16,16", "--weight-bits", "3", "--validate-only"],
        ["plan", "--ai8x-yaml", str(tmp_path / "x.yaml"), "--validate-only"],
        ["plan", "--validate-only"],
    )
    for argv in cases:
        assert _run(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error:") and len(err.splitlines()) == 1, err


def test_weight_bits_parser_shared_by_check_compile_plan():
    from cnnforge.cli.common import parse_weight_bits
    from cnnforge.errors import InputError

    assert [parse_weight_bits(t) for t in ("8", " 4 ", "2", "1", "auto", "AUTO")] == [
        8,
        4,
        2,
        1,
        "auto",
        "auto",
    ]
    assert [parse_weight_bits(t, binary=True) for t in ("binary", "bin", "-1")] == [-1, -1, -1]
    for text in ("3", "eight", "binary", "-1", ""):
        with pytest.raises(InputError, match="--weight-bits"):
            parse_weight_bits(text)
