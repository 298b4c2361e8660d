"""What a person reads first (issue 31): help without type noise, shipped models' own shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnnforge.cli.app import build_command
from support.cli import run_cli

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
