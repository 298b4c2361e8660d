"""The ``cnnforge`` command line: a thin layer that parses arguments and calls library functions.

Each command lives in its own module and registers itself on ``app``. Errors of the
``CnnforgeError`` family become one line on stderr and exit status 2; nothing else of the
program's logic lives here.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
import warnings

import typer

# Command modules register themselves on ``app`` (cli/app.py) when imported, one per command.
from cnnforge.cli import commands  # noqa: F401
from cnnforge.cli.app import app, build_command
from cnnforge.cli.common import err_console
from cnnforge.errors import CnnforgeError, plain_text


def _usage_line(exc: typer.TyperException, argv: list[str]) -> str:
    """One line for a typer usage error: the message and where ``--help`` tells more."""
    path = getattr(getattr(exc, "ctx", None), "command_path", None)
    if not path or path == "cnnforge":
        names = {c.name or c.callback.__name__ for c in app.registered_commands if c.callback}
        command = next((a for a in argv if a in names), None)
        path = f"cnnforge {command}" if command else "cnnforge"
    message = " ".join(exc.format_message().split())
    return f"error: {message} (hint: see '{path} --help')"


def _error_line(text: str) -> None:
    """One plain line on stderr: no markup, emoji codes or highlighting (``file.yaml:100:``)."""
    err_console.print(plain_text(text), markup=False, emoji=False, highlight=False, soft_wrap=True)


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
    """Entry point: run the app, turning cnnforge errors into one line and exit status 2.

    Warnings raised while a command runs are shown after it succeeds (one line each) and
    dropped when it fails, so an error stays one line. ``sys.exit`` or ``KeyboardInterrupt``
    raised by the user's model code is an error naming where, not a silent exit.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        code = _run(argv)
    if code == 0:
        for w in caught:
            _error_line(f"warning: {w.category.__name__}: {w.message}")
    sys.exit(code)


def _run(argv: list[str] | None) -> int:
    """The command's exit status (errors printed as one line)."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        code = build_command().main(args=args, standalone_mode=False, prog_name="cnnforge")
    except CnnforgeError as exc:
        _error_line(f"error: {exc.one_line()}")
        return 2
    except typer.Abort:
        _error_line("aborted")
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    except typer.TyperException as exc:  # usage errors: typer's message on one line, exit 2
        _error_line(_usage_line(exc, args))
        return exc.exit_code
    except (KeyboardInterrupt, SystemExit) as exc:
        return _interrupted(exc)
    except Exception as exc:  # a bug: still one line, unless debugging
        if os.environ.get("CNNFORGE_DEBUG"):
            raise
        _error_line(
            f"internal error: {type(exc).__name__}: {exc} (a bug in cnnforge; "
            "rerun with CNNFORGE_DEBUG=1 for a traceback)"
        )
        return 70
    if code == 130:  # typer turns KeyboardInterrupt (Ctrl-C or model code) into status 130
        return _interrupt_line()
    return code if isinstance(code, int) else 0


def _interrupted(exc: KeyboardInterrupt | SystemExit) -> int:
    """``sys.exit``/``KeyboardInterrupt`` raised by the user's model code: one line, exit 2;
    from elsewhere (a closed pipe, Ctrl-C) the usual status."""
    where = _model_frame(exc)
    if where is None:
        if isinstance(exc, KeyboardInterrupt):
            return _interrupt_line()
        return exc.code if isinstance(exc.code, int) else 1
    what = "called sys.exit" if isinstance(exc, SystemExit) else "raised KeyboardInterrupt"
    args = f"({exc.code!r})" if isinstance(exc, SystemExit) else ""
    _error_line(
        f"error: {where}: the model code {what}{args} (hint: a model file must not exit or "
        "interrupt; guard script code with `if __name__ == '__main__':`)"
    )
    return 2


def _interrupt_line() -> int:
    _error_line("error: interrupted (hint: run the command again to finish it)")
    return 130


def _model_frame(exc: BaseException) -> str | None:
    """``file:line`` of the innermost frame outside Python, installed packages and cnnforge."""
    skip = tuple({sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(__file__))})
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        name = frame.filename
        if not name.startswith(skip) and not name.startswith("<") and "-packages" not in name:
            found = f"{name}:{frame.lineno}"
    return found
