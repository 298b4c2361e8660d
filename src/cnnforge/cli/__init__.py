"""The ``cnnforge`` command line: a thin layer that parses arguments and calls library functions.

Each command lives in its own module and registers itself on ``app``. Errors of the
``CnnforgeError`` family become one line on stderr and exit status 2; nothing else of the
program's logic lives here.
"""

from __future__ import annotations

import contextlib
import os
import sys

import typer

from cnnforge import __version__
from cnnforge.cli.common import err_console
from cnnforge.errors import CnnforgeError

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


# Command modules register themselves on ``app`` when imported (one module per command).
from cnnforge.cli import commands  # noqa: E402, F401


def _usage_line(exc: typer.TyperException) -> str:
    """One line for a typer usage error: the message and where ``--help`` tells more."""
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", None) or "cnnforge"
    message = " ".join(exc.format_message().split())
    return f"error: {message} (hint: see '{path} --help')"


def run() -> None:
    """The program's entry point (``cnnforge``, ``python -m cnnforge``): ``main``, then a quick
    exit. Tearing down torch's modules at interpreter exit costs ~0.3 s of CPU, a sixth of a
    vendor-pair compile; once the streams are flushed nothing is left to do, unless worker
    processes or threads are still running (then the normal exit waits for them)."""
    try:
        main()
    except SystemExit as exc:
        if isinstance(exc.code, int | None) and _nothing_running():
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to add
                    stream.flush()
            os._exit(exc.code or 0)
        raise


def _nothing_running() -> bool:
    """No child processes, no live non-daemon threads, no torch.distributed group."""
    import threading

    mp = sys.modules.get("multiprocessing")
    if mp is not None and mp.active_children():
        return False
    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon for t in threading.enumerate()):
        return False
    dist = sys.modules.get("torch.distributed")
    return dist is None or not (dist.is_available() and dist.is_initialized())


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning cnnforge errors into one line and exit status 2."""
    try:
        code = app(args=argv, standalone_mode=False, prog_name="cnnforge")
    except CnnforgeError as exc:
        err_console.print(f"error: {exc.one_line()}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Abort:
        err_console.print("aborted", markup=False)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # usage errors: typer's message on one line, exit 2
        err_console.print(_usage_line(exc), markup=False, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # a bug: still one line, unless debugging
        if os.environ.get("CNNFORGE_DEBUG"):
            raise
        err_console.print(
            f"internal error: {type(exc).__name__}: {exc} (a bug in cnnforge; "
            "rerun with CNNFORGE_DEBUG=1 for a traceback)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(70)
    sys.exit(code if isinstance(code, int) else 0)
