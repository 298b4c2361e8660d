"""cli/coercion.py gives every option the value (or the error) typer's own coercion gives, for
the texts and defaults a command line brings, without importing pydantic for the plain ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.cli import coercion
from cnnforge.cli.app import build_command
from cnnforge.cli.commands import register
from support.paths import REPO

register()
COMMAND = build_command()  # every command


def _params() -> list[tuple[Any, Any]]:
    """(command, parameter) of every typer parameter of every command."""
    out = []
    for cmd in COMMAND.commands.values():
        out += [(cmd, p) for p in cmd.params if getattr(p, "type_descriptor", None) is not None]
    return out


PARAMS = _params()
KINDS = sorted({str(p.type_descriptor.annotation) for _, p in PARAMS})

#: Texts a command line may bring: numbers (signs, zeros, spaces, exponents), paths, words.
TEXTS = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.from_regex(r"[ +-]?0*[0-9]{0,4}(\.[0-9]{0,3})?(e[+-]?[0-9])? ?", fullmatch=True),
    st.sampled_from(["", "-", "--", ".", "/", "a b", "x.npy", "~", "ünï", "1_000", "0x10"]),
    st.text(max_size=8),
)


def _outcome(run: Any) -> tuple[str, Any]:
    try:
        value = run()
    except typer.BadParameter as exc:
        return "error", exc.format_message()
    except Exception as exc:  # compared, whatever it is
        return "raises", f"{type(exc).__name__}: {exc}"
    return "value", (type(value), value)


def _both(cmd: Any, param: Any, value: Any) -> tuple[tuple, tuple]:
    from typer._coercion import build_runtime_param

    ctx = typer.Context(cmd)
    descriptor = param.type_descriptor
    typer_own = build_runtime_param(descriptor)
    plain = coercion._Plain(descriptor.parameter_info, descriptor.annotation, descriptor)
    return (
        _outcome(lambda: plain.coerce(value, param=param, ctx=ctx)),
        _outcome(lambda: typer_own.coerce(value, param=param, ctx=ctx)),
    )


def test_every_kind_of_option_is_covered() -> None:
    assert {"<class 'str'>", "<class 'int'>", "<class 'pathlib.Path'>", "list[str]"} <= set(KINDS)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PARAMS), TEXTS)
def test_texts_coerce_as_typer_coerces_them(where: tuple[Any, Any], text: str) -> None:
    cmd, param = where
    value = (text,) if param.multiple or param.nargs == -1 else text
    ours, typers = _both(cmd, param, value)
    assert ours == typers, (param.name, value)


@pytest.mark.parametrize("where", PARAMS, ids=lambda w: f"{w[0].name}.{w[1].name}")
def test_defaults_and_paths_coerce_as_typer_coerces_them(where: tuple[Any, Any], tmp_path) -> None:
    cmd, param = where
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0)
    values = [param.default, None, str(tmp_path), str(tmp_path / "absent"), str(locked), 7, 0.5]
    for value in values:
        value = (value,) if (param.multiple or param.nargs == -1) and value is not None else value
        ours, typers = _both(cmd, param, value)
        assert ours == typers, (param.name, value)


def test_a_command_runs_without_pydantic(tmp_path: Path) -> None:
    """A command whose options are plain (paths, integers, text) never imports pydantic."""
    code = (
        "import sys\nfrom cnnforge.cli import main\ntry:\n    main(sys.argv[1:])\n"
        "except SystemExit as exc:\n    print('CODE', exc.code, 'pydantic' in sys.modules)\n"
    )
    args = ["analyze", "unet-voc", "-i", "3,32,32", "--max-memory", "8G"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    result = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.stdout.strip().splitlines()[-1] == "CODE 0 False", result.stdout + result.stderr
