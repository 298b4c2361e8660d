"""Staging folders ``.NAME.cnnforge-XXXXXXXX/`` where an output is written until complete, and
``sweep``, which settles those a killed run left (docs/faults.md)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from cnnforge.durable import fsync_dir
from cnnforge.locks import OutputBusy, OutputLock, remove_stale_locks
from cnnforge.owners import MARKER, dead_leftovers, remove_tree, write_marker

#: Staging folders are named ``.NAME.cnnforge-XXXXXXXX`` (NAME cut to this many characters).
STAGE_NAME_CHARS = 40

#: Names inside a staging folder besides the output: the owner marker and the replaced output.
REPLACED = ".cnnforge-replaced"
RESERVED = frozenset({MARKER, REPLACED})
#: The part of a staging folder's name after the output's name.
STAGE_TAG = ".cnnforge-"


def make_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; the ones this call created, outermost first
    (one another run made meanwhile is that run's)."""
    made = []
    for missing in reversed([p for p in (folder, *folder.parents) if not p.exists()]):
        try:
            missing.mkdir()
        except FileExistsError:
            continue
        made.append(missing)
    return made


def locked(path: Path) -> OutputLock:
    """``path``'s lock, taken; its directory swept of what killed runs left (``sweep``)."""
    lock = OutputLock(path)
    lock.acquire()
    try:
        sweep(path.parent, held=path)
    except BaseException:
        lock.release()
        raise
    return lock


def new_stage(path: Path) -> Path:
    """A staging folder beside ``path``, marked with this process and the output's name."""
    prefix = f".{path.name[:STAGE_NAME_CHARS]}{STAGE_TAG}"
    stage = Path(tempfile.mkdtemp(prefix=prefix, dir=path.parent))
    try:
        write_marker(stage, target=path.name)
    except BaseException:
        remove_tree(stage)
        raise
    return stage


def put_in_place(stage: Path, path: Path) -> None:
    """``stage``'s output becomes ``path``; what ``path`` held moves into the stage first, so a
    kill between the two renames leaves it there for ``settle_stage`` to put back."""
    if os.path.lexists(path):
        os.replace(path, stage / REPLACED)
    os.replace(stage / path.name, path)


def take_back(stage: Path, path: Path) -> None:
    """Undo ``put_in_place``: the output back into the stage, what was there back in place."""
    if not os.path.lexists(stage / path.name) and os.path.lexists(path):
        os.replace(path, stage / path.name)
    if os.path.lexists(stage / REPLACED) and not os.path.lexists(path):
        os.replace(stage / REPLACED, path)


def settle_stage(stage: Path, path: Path) -> None:
    """Remove a staging folder; what it holds of a replaced output goes back to ``path`` if
    nothing else is there (a run killed in the middle of ``put_in_place``)."""
    with contextlib.suppress(OSError):
        if os.path.lexists(stage / REPLACED) and not os.path.lexists(path):
            os.replace(stage / REPLACED, path)
    remove_tree(stage)


def sweep(directory: Path, held: Path | None = None) -> None:
    """Settle the staging folders dead runs of this user left in ``directory`` and remove their
    lock files; another output's stage is settled under its lock, or left if held."""
    for stage, marker in dead_leftovers(directory, STAGE_TAG):
        name = marker.get("target")
        if not stage.name.startswith(".") or not isinstance(name, str) or os.sep in name:
            continue
        path = directory / name
        if held is not None and path == held:
            settle_stage(stage, path)
            continue
        with contextlib.suppress(OutputBusy), OutputLock(path):
            settle_stage(stage, path)
    remove_stale_locks(directory)


def sync_tree(path: Path) -> None:
    """Flush every file and folder under ``path`` (and ``path``) to the disk."""
    if path.is_dir():
        for root, _, files in os.walk(path):
            for name in files:
                _fsync_file(Path(root) / name)
            fsync_dir(root)
    else:
        _fsync_file(path)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def newest_file(folders: Iterator[Path]) -> str | None:
    """The file modified last under ``folders`` (the one being written when a write failed)."""
    newest: tuple[float, str] | None = None
    for folder in folders:
        for root, _, files in os.walk(folder):
            for name in files:
                if name == MARKER:
                    continue
                with contextlib.suppress(OSError):
                    when = (os.stat(os.path.join(root, name)).st_mtime_ns, os.path.join(root, name))
                    newest = max(newest, when) if newest else when
    return newest[1] if newest else None


def tree_bytes(folder: Path) -> int:
    """The bytes of the files under ``folder``."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in set(files) - {MARKER}:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total
