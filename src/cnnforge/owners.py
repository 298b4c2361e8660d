"""Who made a staging or temporary folder (``.cnnforge-owner.json``: pid, start time, boot, user,
host), so the next run removes only dead cnnforge runs' leftovers (docs/faults.md)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The marker file inside every folder a run may leave behind when killed.
MARKER = ".cnnforge-owner.json"
#: Temporary folders are named ``cnnforge-WHAT-XXXXXXXX`` in the temporary directory.
SCRATCH_PREFIX = "cnnforge-"
_PROGRAM = "cnnforge"
#: A marker is a few hundred bytes; anything larger is not ours.
_MARKER_BYTES = 4096


def _read_text(path: str) -> str | None:
    with contextlib.suppress(OSError, UnicodeDecodeError), open(path, encoding="ascii") as f:
        return f.read()
    return None


def _boot_id() -> str | None:
    text = _read_text("/proc/sys/kernel/random/boot_id")
    return text.strip() if text else None


def _start_time(pid: int) -> tuple[bool, int | None]:
    """Whether process ``pid`` exists (a zombie does not count) and its start time (clock ticks
    since boot, ``/proc/PID/stat`` field 22; None where there is no ``/proc``)."""
    if not os.path.isdir("/proc/self"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False, None
        except PermissionError:
            return True, None  # another user's process holds the pid: alive, not ours to judge
        return True, None
    text = _read_text(f"/proc/{pid}/stat")
    if text is None:
        return False, None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) ": state is field 3
    return fields[0] != "Z", int(fields[19])


def this_process() -> dict[str, Any]:
    """The marker of the running process (the fields ``is_dead_owner`` compares)."""
    return {
        "program": _PROGRAM,
        "pid": os.getpid(),
        "started": _start_time(os.getpid())[1],
        "boot": _boot_id(),
        "uid": os.getuid(),
        "host": socket.gethostname(),
    }


def write_marker(folder: Path, **extra: Any) -> None:
    """Mark ``folder`` as this process's (``extra``: what the sweep needs to know more)."""
    data = (json.dumps({**this_process(), **extra}) + "\n").encode("ascii")
    path = os.path.join(folder, MARKER)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)  # a few hundred bytes: one write, or an error
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)


def read_marker(folder: Path | str) -> dict[str, Any] | None:
    """``folder``'s marker, or None when it has none (or one that is not cnnforge's)."""
    path = os.path.join(folder, MARKER)
    with contextlib.suppress(OSError, ValueError):
        if os.lstat(path).st_size <= _MARKER_BYTES and os.path.isfile(path):
            doc = json.loads(Path(path).read_text("ascii"))
            if isinstance(doc, dict) and doc.get("program") == _PROGRAM:
                return doc
    return None


def is_dead_owner(marker: dict[str, Any]) -> bool:
    """Whether ``marker`` names a process of this user, on this host, that no longer runs."""
    try:
        pid, uid = int(marker["pid"]), int(marker["uid"])
    except (KeyError, TypeError, ValueError):
        return False
    if uid != os.getuid() or marker.get("host") != socket.gethostname():
        return False
    boot = _boot_id()
    if boot is not None and marker.get("boot") not in (None, boot):
        return True  # made before the last reboot
    alive, started = _start_time(pid)
    if not alive:
        return True
    return started is not None and marker.get("started") not in (None, started)  # pid reused


def dead_leftovers(directory: Path | str, match: str) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The folders in ``directory`` whose name contains ``match`` and whose marker names a dead
    process of this user (with the marker); nothing when ``directory`` cannot be listed."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        if match not in entry.name:
            continue
        with contextlib.suppress(OSError):
            if not entry.is_dir(follow_symlinks=False):
                continue
        marker = read_marker(entry.path)
        if marker is not None and is_dead_owner(marker):
            yield Path(entry.path), marker


def remove_tree(path: Path) -> None:
    """Remove ``path`` (a folder or file), ignoring what is gone; a folder's marker goes last, so
    a removal cut short leaves a marked folder the next sweep removes."""
    path = Path(path)
    if not path.is_dir() or path.is_symlink():
        with contextlib.suppress(OSError):
            path.unlink()
        return
    with contextlib.suppress(OSError):
        for entry in os.scandir(path):
            if entry.name == MARKER:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    with contextlib.suppress(OSError):
        if set(os.listdir(path)) <= {MARKER}:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path / MARKER)
            path.rmdir()


class FdReserve:
    """A few file descriptors held back so a run that failed with EMFILE can still remove its
    staged folders."""

    def __init__(self, count: int = 2) -> None:
        self._fds: list[int] = []
        with contextlib.suppress(OSError):  # none left already: the work itself will say so
            for _ in range(count):
                self._fds.append(os.open(os.devnull, os.O_RDONLY))

    def release(self) -> None:
        while self._fds:
            os.close(self._fds.pop())

    def __enter__(self) -> FdReserve:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def sweep_scratch(directory: Path | str | None = None) -> None:
    """Remove the temporary folders dead cnnforge runs of this user left in ``directory``
    (default: the temporary directory)."""
    for path, _ in dead_leftovers(directory or tempfile.gettempdir(), SCRATCH_PREFIX):
        if path.name.startswith(SCRATCH_PREFIX):
            remove_tree(path)


@contextlib.contextmanager
def scratch_dir(what: str, *, keep: bool = False) -> Iterator[Path]:
    """A marked temporary folder ``cnnforge-WHAT-XXXXXXXX`` for the block, removed when it ends
    (with ``keep``, a result kept on success); killed runs' folders are removed first."""
    sweep_scratch()
    with FdReserve() as reserve:
        path = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{what}-"))
        succeeded = False
        try:
            write_marker(path)
            yield path
            succeeded = True
        finally:
            reserve.release()
            if succeeded and keep:
                with contextlib.suppress(FileNotFoundError):
                    (path / MARKER).unlink()
            else:
                remove_tree(path)
