"""Running the command line in-process."""

from __future__ import annotations

import pytest

from cnnforge.cli import main


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``cnnforge`` in-process: (exit status, stdout, stderr)."""
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err
