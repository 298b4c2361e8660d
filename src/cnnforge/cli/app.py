"""The typer ``app`` every command module registers itself on (apart from cli/__init__.py, which
imports the commands, so that no module of the CLI imports its own package back)."""

from __future__ import annotations

import typer

from cnnforge.version import __version__

app = typer.Typer(
    name="cnnforge",
    help="Compile PyTorch CNNs for the MAX78000/MAX78002: analyze, check, quantize, plan, "
    "simulate bit-exactly, emit vendor YAML + checkpoint and portable C.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
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
) -> None:
    """cnnforge: from a plain PyTorch CNN to a MAX78000/MAX78002 deployment."""
