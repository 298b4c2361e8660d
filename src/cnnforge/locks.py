"""One writer per output: an advisory ``fcntl.flock`` on ``.NAME.cnnforge-lock`` beside it; a
second run is refused with the holder's pid, and a killed holder's lock is free."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
from pathlib import Path

from cnnforge.errors import EmitError

#: Lock files are named ``.NAME.cnnforge-lock``.
LOCK_SUFFIX = ".cnnforge-lock"
#: Longer names are cut to this many characters and told apart by a hash of the whole name.
NAME_CHARS = 40
_TRIES = 20


class OutputBusy(EmitError):
    """Another run is writing the same output."""

    default_hint = "wait for that run to end, or choose another output path"


def lock_path(path: Path | str) -> Path:
    """The lock file of output ``path``: ``.NAME.cnnforge-lock`` beside it."""
    path = Path(path)
    name = path.name or "output"
    if len(name) > NAME_CHARS:
        digest = hashlib.sha1(name.encode("utf-8", "surrogateescape")).hexdigest()[:8]
        name = f"{name[:NAME_CHARS]}-{digest}"
    return path.parent / f".{name}{LOCK_SUFFIX}"


class OutputLock:
    """The lock of one output path, held from ``acquire`` to ``release`` (a context manager)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.file = lock_path(self.path)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise ``OutputBusy`` naming the output and the holder's pid."""
        for _ in range(_TRIES):
            fd = _open(self.file)
            if not _try_lock(fd):
                holder = _holder(fd)
                os.close(fd)
                who = f"pid {holder}" if holder else "a process that has not said its pid yet"
                raise OutputBusy(
                    f"another cnnforge run ({who}) is writing it", where=str(self.path)
                )
            if _same_file(fd, self.file):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode("ascii"))
                self._fd = fd
                return
            os.close(fd)  # the file was removed and made anew since we opened it
        raise OutputBusy("the lock file keeps changing", where=str(self.file))

    def release(self) -> None:
        """Remove the lock file and let go (nothing is left beside the output)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.file.unlink()
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _open(file: Path) -> int:
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(file, flags, 0o644)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _same_file(fd: int, file: Path) -> bool:
    try:
        now = os.stat(file, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)


def _holder(fd: int) -> int | None:
    """The pid the holder wrote (None while it has not yet)."""
    with contextlib.suppress(OSError, ValueError):
        text = os.pread(fd, 32, 0).decode("ascii").strip()
        return int(text) if text else None
    return None


def remove_stale_locks(directory: Path | str) -> None:
    """Remove the lock files in ``directory`` that no run holds (their runs were killed): each
    is taken, checked to be the file at its path, removed and let go, as a holder would."""
    try:
        names = [e.name for e in os.scandir(directory) if e.name.endswith(LOCK_SUFFIX)]
    except OSError:
        return
    for name in names:
        file = Path(directory) / name
        with contextlib.suppress(OSError):
            if file.lstat().st_uid != os.getuid():
                continue
            fd = os.open(file, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
            try:
                if _try_lock(fd) and _same_file(fd, file):
                    file.unlink()
            finally:
                os.close(fd)
