"""The typer ``app`` every command module registers itself on (apart from cli/__init__.py, which
imports the commands, so that no module of the CLI imports its own package back)."""

from __future__ import annotations

import typing
from typing import Any

import typer

from cnnforge.cli.common import PIPE_WIDTH, console
from cnnforge.version import __version__

#: Piped (not a terminal), ``--help`` is click's plain text at no width limit, like every other
#: output; rich's help panels are drawn to a width (80 columns in a pipe).
_PLAIN_HELP = not console.is_terminal

#: What ``--help`` shows after an option that takes a value (a flag shows nothing).
_METAVARS = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "Path": "PATH", "bool": ""}

app = typer.Typer(
    name="cnnforge",
    help="Compile PyTorch CNNs for the MAX78000/MAX78002: analyze, check, quantize, plan, "
    "simulate bit-exactly, emit vendor YAML + checkpoint and portable C.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None if _PLAIN_HELP else "rich",
    context_settings={"max_content_width": PIPE_WIDTH, "terminal_width": PIPE_WIDTH}
    if _PLAIN_HELP
    else {},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cnnforge {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", callback=_version, is_eager=True
    ),
    max_memory: str = typer.Option(
        None,
        "--max-memory",
        help="Refuse requests estimated to need more memory than SIZE (512M, 8G; default: the "
        "memory available now). Accepted before or after the command name.",
    ),
) -> None:
    """cnnforge: from a plain PyTorch CNN to a MAX78000/MAX78002 deployment."""


def build_command() -> Any:
    """The click command of ``app`` (the commands imported so far: cli/commands.py) with plain
    help: no type column for flags (``--version`` is no ``<bool>``), one word for what an option
    takes (TEXT, INTEGER, NUMBER, PATH), read from the command function's annotations (public
    API only: typer's own helpers for this differ between its versions)."""
    command = typer.main.get_command(app)
    functions = {c.name: c.callback for c in app.registered_commands}
    if app.registered_callback is not None:
        functions[None] = app.registered_callback.callback
    named = [(None, command), *getattr(command, "commands", {}).items()]
    for name, cmd in named:
        hints = typing.get_type_hints(functions[name]) if functions.get(name) else {}
        help_option = cmd.get_help_option(typer.Context(cmd))  # cached by the command
        for param in (*cmd.params, help_option):
            if param is None or param.param_type_name != "option":
                continue
            if param.is_flag:
                param.metavar = ""
            elif param.metavar is None:
                param.metavar = _metavar(hints.get(param.name))
    return command


def _metavar(annotation: Any) -> str:
    """TEXT, INTEGER, NUMBER, PATH (a list: its items') for an option's annotation."""
    if typing.get_origin(annotation) is list:
        (annotation,) = typing.get_args(annotation)
    bare = getattr(annotation, "__name__", "str")
    return _METAVARS.get(bare, bare.upper())
