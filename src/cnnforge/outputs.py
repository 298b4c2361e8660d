"""Writing results safely: all-or-nothing output directories and files.

A failed command leaves no partial output behind and never overwrites without ``--overwrite``
(ARCHITECTURE.md "Errors"): everything is written to a temporary sibling, renamed at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from cnnforge.errors import EmitError


def _default_mode(base: int) -> int:
    """``base`` less the process umask: the mode a plain mkdir/open would have given."""
    mask = os.umask(0)
    os.umask(mask)
    return base & ~mask


@contextlib.contextmanager
def atomic_output_dir(path: Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory that becomes ``path`` only if the block succeeds."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise EmitError(
            f"output directory {path} already exists", hint="pass --overwrite or choose another -o"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    os.chmod(tmp, _default_mode(0o777))  # mkdtemp makes 0700; the result is an ordinary dir
    if path.exists():
        shutil.rmtree(path)
    os.replace(tmp, path)


@contextlib.contextmanager
def atomic_output_file(path: Path, overwrite: bool = True) -> Iterator[Path]:
    """Yield a temporary file path that replaces ``path`` only if the block succeeds."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise EmitError(f"output file {path} already exists", hint="pass --overwrite")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if tmp.exists():
        os.chmod(tmp, _default_mode(0o666))  # mkstemp makes 0600
    os.replace(tmp, path)
