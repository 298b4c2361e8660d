"""What a person reads first (issue 31): help without type noise, shipped models' own shapes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cnnforge.cli.app import build_command
from cnnforge.cli.commands import register
from support.cli import run_cli

register()  # every command (a run imports its own alone)
COMMANDS = sorted(build_command().commands)


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_shows_no_type_noise(command: str | None, capsys) -> None:
    argv = ["--help"] if command is None else [command, "--help"]
    code, out, _ = run_cli(argv, capsys)
    assert code == 0
    options = out[out.index("Options") :]
    for noise in ("<bool>", "<str>", "<int>", "<float>", "<Path>"):
        assert noise not in options, (command, noise)
    assert "--help" in options


def test_quantize_takes_a_shipped_models_own_input_shape(tmp_path: Path, capsys) -> None:
    code, _, err = run_cli(["quantize", "qat-unet", "-o", str(tmp_path / "q.pth")], capsys)
    assert code == 0, err
    assert (tmp_path / "q.pth").is_file()
    code, _, err = run_cli(
        ["quantize", f"{Path(__file__)}:Nothing", "-o", str(tmp_path / "r.pth")], capsys
    )
    assert code == 2 and "needs --input-shape" in err


class _Plain(torch.nn.Module):
    """Plain torch, no QAT layers: evaluate scores its float row alone."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 5, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def test_evaluate_scores_a_float_only_model_and_says_why_alone(tmp_path: Path, capsys) -> None:
    torch.manual_seed(0)
    torch.save(_Plain().state_dict(), tmp_path / "plain.pth")
    argv = ["evaluate", f"{Path(__file__)}:_Plain", "--checkpoint", str(tmp_path / "plain.pth"),
            "--length", "4", "--size", "16"]  # fmt: skip
    code, out, err = run_cli(argv, capsys)
    assert code == 0, err
    assert "float" in out and "qat-eval and bit-exact: not scored" in out
    assert "bit-exact │" not in out


def test_check_prints_the_verdict_and_violations_first(capsys) -> None:
    """The plain VOC U-Net: the verdict and its one violation come before anything else; the
    rewrites are one summary line, their table only with --verbose."""
    code, out, _ = run_cli(["check", "unet-voc"], capsys)
    assert code == 1
    lines = out.splitlines()
    assert "does not fit" in lines[0] and "1 violation(s)" in lines[0]
    assert "kernel-memory" in out and out.index("kernel-memory") < out.index("rewrites (exact)")
    assert "Rewrites applied" not in out and "(--verbose lists them)" in out
    code, out, _ = run_cli(["check", "unet-voc", "--verbose"], capsys)
    assert code == 1 and "Rewrites applied (exact)" in out
