"""Files that survive a power cut whole: written beside their path, fsynced, renamed into place
(docs/faults.md); a full disk is named with its errno, checked before large writes."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import shutil
from pathlib import Path
from typing import Any

#: Writes larger than this check the free space first (``shutil.disk_usage`` is one statvfs).
CHECK_BYTES = 1 << 20


def fsync_dir(directory: Path | str) -> None:
    """Flush ``directory``'s entries (a rename or a new file in it) to the disk."""
    with contextlib.suppress(OSError):  # some file systems cannot open or sync a directory
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def require_space(path: Path | str, need: int) -> None:
    """An ``OSError`` (ENOSPC, with ``needed`` and ``free`` set) when the file system of
    ``path``'s directory has less than ``need`` bytes free for this user."""
    if need <= CHECK_BYTES:
        return
    try:
        free = shutil.disk_usage(Path(path).parent).free
    except OSError:
        return  # the write itself will say what is wrong
    if free < need:
        exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        exc.needed, exc.free = need, free  # type: ignore[attr-defined]
        raise exc


def write_bytes(path: Path | str, data: bytes, *, sync: bool = True) -> None:
    """Write ``data`` to ``path`` (a new file or one replaced in place), flushed to the disk.
    A failed write's ``OSError`` names ``path`` and carries ``needed`` (the bytes asked for)."""
    require_space(path, len(data))
    try:
        with open(path, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
    except OSError as exc:
        exc.filename = exc.filename or str(path)
        exc.needed = getattr(exc, "needed", len(data))  # type: ignore[attr-defined]
        raise


def replace_bytes(path: Path | str, data: bytes, temporary: Path | str | None = None) -> None:
    """``path`` becomes ``data`` whole or stays as it was: written to ``temporary`` (default
    ``path`` + ``.tmp``), flushed, renamed over ``path``, and the directory flushed."""
    path = Path(path)
    tmp = Path(temporary) if temporary is not None else path.with_name(path.name + ".tmp")
    try:
        write_bytes(tmp, data)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        exc.filename = str(path)  # the file the user knows, not its temporary name
        raise
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def torch_bytes(obj: Any) -> bytes:
    """``obj`` as ``torch.save`` writes it (the bytes, in memory)."""
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def save_torch(obj: Any, path: Path | str) -> None:
    """``torch.save(obj, path)`` with the file and its errors named as every other write's."""
    write_bytes(path, torch_bytes(obj))
