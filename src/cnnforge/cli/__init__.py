"""The ``cnnforge`` command line: a thin layer that parses arguments and calls library functions.

Each command module registers itself on ``app`` when imported (cli/commands.py imports the one
run); errors of the ``CnnforgeError`` family become one line on stderr and exit status 2.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import sys
import traceback
import warnings

import typer

from cnnforge.cli.app import app, build_command
from cnnforge.cli.commands import register
from cnnforge.cli.common import err_console
from cnnforge.cli.interrupts import exit_status, interrupted_line, interrupts_raise
from cnnforge.errors import CnnforgeError, InputError, Interrupted, Note, plain_text
from cnnforge.resources import is_resource_error, memory_limit_set, parse_memory, resource_error

#: The option every command takes (cli/app.py), before or after the command's name.
MAX_MEMORY = "--max-memory"


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
    """One plain line on stderr (no markup, emoji or highlighting: ``file.yaml:100:``); under
    torchrun it names its rank (``error: rank 1: ...``): every rank's stderr shares a terminal."""
    rank = _torchrun_rank()
    if rank is not None:
        text = f"error: rank {rank}: {text.removeprefix('error: ')}"
    _warning_line(text)


def _warning_line(text: str) -> None:
    err_console.print(plain_text(text), markup=False, emoji=False, highlight=False, soft_wrap=True)


def _torchrun_rank() -> int | None:
    """This process's rank when torchrun started several, else None (read from torchrun's
    environment, so that no torch import is needed to print an error)."""
    try:
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            return int(os.environ.get("RANK", "0"))
    except ValueError:
        pass
    return None


#: The cyclic collector's thresholds for the program (Python's: 700, 10, 10). Importing torch
#: allocates ~1M objects that live to the end: with the defaults ~350 collections (2 full ones)
#: find almost no garbage and cost ~0.1 s of CPU, ~5% of a vendor-pair compile.
GC_THRESHOLDS = (50_000, 10, 10)


def run() -> None:
    """The program's entry point (``cnnforge``, ``python -m cnnforge``): ``main``, then a quick
    exit. Tearing down torch's modules at interpreter exit costs ~0.3 s of CPU, a sixth of a
    vendor-pair compile; once the streams are flushed nothing is left to do, unless worker
    processes or threads are still running (then the normal exit waits for them)."""
    gc.set_threshold(*GC_THRESHOLDS)
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
    """Run the app: cnnforge errors become one line and exit status 2; warnings and notes are
    shown (one line each) only when the command succeeds, so an error stays one line."""
    with warnings.catch_warnings(record=True) as caught, interrupts_raise():
        warnings.simplefilter("default")
        code = _run(argv)
    if code == 0 and not _torchrun_rank():  # one process, or rank 0: the others are quiet
        for w in caught:
            kind = "note" if issubclass(w.category, Note) else f"warning: {w.category.__name__}"
            _warning_line(f"{kind}: {w.message}")
    sys.exit(code)


def _run(argv: list[str] | None) -> int:
    """The command's exit status (errors printed as one line)."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        args, limit = _max_memory(args)
        with memory_limit_set(limit):
            register(args)  # the module of the command run (all for help, errors)
            code = build_command().main(args=args, standalone_mode=False, prog_name="cnnforge")
    except CnnforgeError as exc:
        _error_line(f"error: {exc.one_line()}")
        return 2
    except Interrupted as exc:  # Ctrl-C, SIGTERM (cli/interrupts.py): rank 0 speaks for all
        if not _torchrun_rank():
            _error_line(interrupted_line(exc, args))
        return exit_status(exc)
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
    except OSError as exc:
        return _os_error(exc)
    except MemoryError as exc:  # past the estimates (resources.py): the machine ran out
        return _out_of_memory(exc)
    except RuntimeError as exc:
        if _torch_write_failed(exc):
            return _write_failed(exc)
        if "can't allocate memory" not in str(exc) and "not enough memory" not in str(exc):
            return _internal(exc)
        return _out_of_memory(exc)
    except Exception as exc:  # a bug: still one line, unless debugging
        return _internal(exc)
    if code == 130:  # typer turns KeyboardInterrupt (Ctrl-C or model code) into status 130
        return _interrupt_line()
    return code if isinstance(code, int) else 0


def _os_error(exc: OSError) -> int:
    """What the machine refused (space, quota, files, permissions; a name too long): one line,
    status 2; any other OSError is a bug."""
    if is_resource_error(exc):
        _error_line(f"error: {resource_error(exc, doing='').one_line()}")
        return 2
    if exc.errno not in (errno.ENAMETOOLONG,):
        return _internal(exc)
    name = str(exc.filename or "")
    shown = f"{name[:60]}... ({len(name)} characters)" if len(name) > 60 else name
    _error_line(
        f"error: {shown}: the file name is longer than the file system allows "
        "(hint: choose a shorter path)"
    )
    return 2


def _internal(exc: Exception) -> int:
    """A bug: one line and status 70 (the traceback with CNNFORGE_DEBUG=1)."""
    if os.environ.get("CNNFORGE_DEBUG"):
        raise exc
    _error_line(
        f"internal error: {type(exc).__name__}: {exc} (a bug in cnnforge; "
        "rerun with CNNFORGE_DEBUG=1 for a traceback)"
    )
    return 70


def _out_of_memory(exc: Exception) -> int:
    """An allocation the estimates let through failed: one line, status 2."""
    what = " ".join(str(exc).split())
    need = what[what.find("you tried") :].split(".")[0] if "you tried" in what else what[:120]
    _error_line(
        f"error: the request ran out of memory ({need or type(exc).__name__}) (hint: a smaller "
        "--input-shape or model; --max-memory SIZE refuses such requests before the work)"
    )
    return 2


def _torch_write_failed(exc: RuntimeError) -> bool:
    """torch's zip writer failing (a full disk, a file size limit): it names no file or errno."""
    text = str(exc)
    return "inline_container" in text or "PytorchStreamWriter failed" in text


def _write_failed(exc: RuntimeError) -> int:
    """A torch file write that failed somewhere cnnforge does not write through durable.py."""
    import shutil

    free = shutil.disk_usage(".").free
    first = " ".join(str(exc).split())[:120]
    _error_line(
        f"error: writing a torch file failed ({first}); the disk is probably full "
        f"({free / 2**20:.1f} MB free here) or a file size limit was reached (hint: free some "
        "space, or check ulimit -f)"
    )
    return 2


def _max_memory(args: list[str]) -> tuple[list[str], int | None]:
    """``args`` without ``--max-memory SIZE`` (anywhere before ``--``), and SIZE in bytes."""
    rest: list[str] = []
    limit = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        if arg == MAX_MEMORY or arg.startswith(MAX_MEMORY + "="):
            value = arg.partition("=")[2] if "=" in arg else None
            if value is None:
                if i + 1 >= len(args):
                    raise InputError(f"{MAX_MEMORY} needs a size", hint="e.g. --max-memory 8G")
                value = args[i + 1]
                i += 1
            limit = parse_memory(value, MAX_MEMORY)
        else:
            rest.append(arg)
        i += 1
    return rest, limit


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
