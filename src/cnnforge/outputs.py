"""Writing results safely: all-or-nothing outputs, and never deleting what cnnforge did not write.

Every command stages its outputs (directories and files) in temporary siblings and renames them
into place only when all of them are complete (ARCHITECTURE.md "Errors"): a failure leaves
nothing behind — no temporary entry, no first file of several, no parent directory created for
the output. Each output directory carries a manifest (``MANIFEST``) listing what cnnforge wrote;
``--overwrite`` replaces a directory only when it holds nothing else. Refused, each with a
one-line reason: the current directory (or one above it), a home directory, ``/``, a non-empty
directory without the manifest, a path through a symbolic link, a target that is not a regular
file or directory.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cnnforge import __version__
from cnnforge.errors import EmitError

#: The file in each output directory that lists what cnnforge wrote there (JSON).
MANIFEST = ".cnnforge-manifest.json"
#: Temporary entries are named ``.NAME.cnnforge-XXXX`` (NAME cut to this many characters).
STAGE_NAME_CHARS = 40
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
#: Write errors that are about the disk, not about a file being read.
_DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def safe_file_stem(name: str, default: str = "network") -> str:
    """``name`` usable as one file name component: other characters become ``-``, no leading
    dots, at most 64 characters (vendor ``arch``/layer names reach file names through this)."""
    stem = _UNSAFE.sub("-", name)[:64].strip("-.")
    return stem or default


def _default_mode(base: int) -> int:
    """``base`` less the process umask: the mode a plain mkdir/open would have given."""
    mask = os.umask(0)
    os.umask(mask)
    return base & ~mask


def _refuse(path: Path, why: str, hint: str) -> EmitError:
    return EmitError(why, where=str(path), hint=hint)


def _check_links(path: Path) -> None:
    """No component of ``path`` as written (relative: below the current directory) is a link."""
    base = Path() if not path.is_absolute() else Path(path.anchor)
    parts = path.parts[1:] if path.is_absolute() else path.parts
    for part in parts:
        base = base / part
        if base.is_symlink():
            raise _refuse(
                path,
                f"the output path goes through the symbolic link {base}",
                "cnnforge writes only through real directories; give the link's target instead",
            )


def _protected(resolved: Path) -> str | None:
    """Why ``resolved`` may never be replaced (``/``, a home, the current directory or above)."""
    cwd = Path.cwd().resolve()
    if resolved == Path(resolved.anchor):
        return "is the root directory"
    if resolved == cwd or resolved in cwd.parents:
        return "is the current directory or holds it"
    homes = {Path.home().resolve(), Path("/root"), Path("/home"), Path("/Users")}
    if resolved in homes or resolved.parent in (Path("/home"), Path("/Users")):
        return "is a home directory"
    return None


def _unlisted(directory: Path) -> str | None:
    """The first entry of ``directory`` that its manifest does not list (None: all listed)."""
    try:
        doc = json.loads((directory / MANIFEST).read_text("utf-8"))
        listed = {f for f in doc["files"] if isinstance(f, str)}
    except (OSError, ValueError, KeyError, TypeError):
        return MANIFEST
    dirs = {str(Path(f).parent) for f in listed} | {"."}
    for root, subdirs, files in os.walk(directory):  # links are not followed
        for name in sorted([*subdirs, *files]):
            entry = Path(root) / name
            rel = str(entry.relative_to(directory))
            if rel == MANIFEST or (name == MANIFEST and _listed_dir(str(Path(rel).parent), dirs)):
                continue  # a nested output's own manifest (the demo's compile/) is cnnforge's
            if entry.is_symlink() or not (
                (entry.is_file() and rel in listed) or (entry.is_dir() and _listed_dir(rel, dirs))
            ):
                return rel
    return None


def _listed_dir(rel: str, dirs: set[str]) -> bool:
    return any(d == rel or d.startswith(rel + os.sep) for d in dirs)


def check_target(path: Path | str, *, directory: bool, overwrite: bool) -> None:
    """Refuse an output ``path`` that cnnforge may not (re)place; cheap, call it before the work."""
    path = Path(path)
    try:
        _check_target(path, directory, overwrite)
    except OSError as exc:  # a name too long, a loop of links, a permission ...
        raise EmitError(
            f"cannot use this output path: {exc.strerror or exc}",
            where=str(path)[:200],
            hint="choose another output path",
        ) from None


def _check_target(path: Path, directory: bool, overwrite: bool) -> None:
    _check_links(path)
    resolved = path.resolve()
    if not path.exists():
        if path.parent.exists() and not path.parent.is_dir():
            raise _refuse(path, f"{path.parent} is not a directory", "choose another output path")
        return
    kind = "directory" if directory else "file"
    if directory and not path.is_dir():
        raise _refuse(path, "exists and is not a directory", "choose another -o")
    if not directory and not path.is_file():
        raise _refuse(path, "exists and is not a regular file", f"give a {kind} name")
    if not overwrite:
        raise _refuse(path, f"output {kind} already exists", "pass --overwrite or choose another")
    why = _protected(resolved) if directory else None
    if why:
        raise _refuse(path, f"refusing to replace it: it {why}", "give a new directory as -o")
    if directory and any(path.iterdir()):
        stray = _unlisted(path)
        if stray == MANIFEST:
            raise _refuse(
                path,
                f"refusing to replace a directory cnnforge did not write (no {MANIFEST})",
                "remove it yourself or choose another -o",
            )
        if stray is not None:
            raise _refuse(
                path,
                f"refusing to replace it: it holds {stray!r}, which cnnforge did not write",
                "move that file away or choose another -o",
            )


@dataclass
class _Target:
    path: Path
    stage: Path
    directory: bool


class OutputSet:
    """The outputs of one command, staged beside their final paths (see ``atomic_outputs``)."""

    def __init__(self) -> None:
        self._targets: list[_Target] = []
        self._made: list[Path] = []  # parent directories this command created, outermost first

    def directory(self, path: Path | str, overwrite: bool = False) -> Path:
        """A temporary directory that becomes ``path`` (with a manifest) on success."""
        return self._add(Path(path), overwrite, directory=True)

    def file(self, path: Path | str, overwrite: bool = False) -> Path:
        """A temporary file path that becomes ``path`` on success."""
        return self._add(Path(path), overwrite, directory=False)

    def owns(self, filename: object) -> bool:
        """Whether ``filename`` (from an OSError) lies in one of the staged outputs."""
        if not isinstance(filename, str | os.PathLike):
            return False
        text = os.fspath(filename)
        return any(text == str(t.stage) or text.startswith(f"{t.stage}{os.sep}") for t in self)

    def __iter__(self) -> Iterator[_Target]:
        return iter(self._targets)

    def _add(self, path: Path, overwrite: bool, *, directory: bool) -> Path:
        if any(t.path == path for t in self._targets):
            raise EmitError("the same output path is given twice", where=str(path))
        check_target(path, directory=directory, overwrite=overwrite)
        parent = path.parent
        try:
            missing = [p for p in (parent, *parent.parents) if not p.exists()]
            for folder in reversed(missing):
                folder.mkdir()
                self._made.append(folder)
            prefix = f".{path.name[:STAGE_NAME_CHARS]}.cnnforge-"
            if directory:
                stage = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
            else:
                fd, name = tempfile.mkstemp(prefix=prefix, dir=parent)
                os.close(fd)
                stage = Path(name)
        except OSError as exc:
            raise EmitError(
                f"cannot write there: {exc.strerror or exc}",
                where=str(path),
                hint="choose a writable output path",
            ) from None
        self._targets.append(_Target(path, stage, directory))
        return stage

    def commit(self) -> None:
        """Move every staged output into place; on any failure restore what was there."""
        for t in self._targets:
            if t.directory:
                _write_manifest(t.stage)
                os.chmod(t.stage, _default_mode(0o777))  # mkdtemp makes 0700
            elif t.stage.exists():
                os.chmod(t.stage, _default_mode(0o666))  # mkstemp makes 0600
        moved: list[tuple[_Target, Path | None]] = []
        try:
            for t in self._targets:
                backup = None
                if t.path.exists():
                    backup = t.path.with_name(f".{t.path.name[:STAGE_NAME_CHARS]}.cnnforge-old-")
                    backup = backup.with_name(backup.name + secrets.token_hex(4))
                    os.replace(t.path, backup)
                moved.append((t, backup))
                os.replace(t.stage, t.path)
        except OSError as exc:
            for t, backup in reversed(moved):
                if not t.stage.exists() and t.path.exists():
                    os.replace(t.path, t.stage)
                if backup is not None:
                    os.replace(backup, t.path)
            raise EmitError(
                f"cannot put the output in place: {exc.strerror or exc}", where=str(exc.filename)
            ) from None
        for _, backup in moved:
            if backup is not None:
                _remove(backup)

    def abort(self) -> None:
        """Remove every staged output and the parent directories this command created."""
        for t in self._targets:
            _remove(t.stage)
        for folder in reversed(self._made):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if still empty


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def _write_manifest(folder: Path) -> None:
    top = folder / MANIFEST
    files = [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p != top]
    write_manifest(folder, files)


def write_manifest(folder: Path, files: list[str] | tuple[str, ...]) -> None:
    """``folder``'s manifest listing ``files`` (paths relative to it) as cnnforge's."""
    doc = {"written_by": f"cnnforge {__version__}", "files": sorted(files)}
    (folder / MANIFEST).write_text(json.dumps(doc, indent=1) + "\n", "utf-8")


def claim_directory(
    path: Path | str, files: tuple[str, ...], *, overwrite: bool, resume: bool = False
) -> Path:
    """A directory a long command writes in place, file by file (``train``'s checkpoints).

    The rules of every other writer (``check_target``): an existing directory needs
    ``overwrite`` (start again: the listed files are removed) or ``resume`` (continue), and
    must hold only what cnnforge wrote; the current directory, a home or ``/`` are refused. The
    directory gets a manifest listing ``files`` (all it may ever hold), so a later run, and every
    other command, recognizes it as cnnforge's.
    """
    path = Path(path)
    check_target(path, directory=True, overwrite=overwrite or resume)
    try:
        if path.exists() and overwrite and not resume:
            for name in files:
                with contextlib.suppress(FileNotFoundError):
                    (path / name).unlink()
        path.mkdir(parents=True, exist_ok=True)
        write_manifest(path, files)
    except OSError as exc:
        raise EmitError(
            f"cannot write there: {exc.strerror or exc}",
            where=str(path),
            hint="choose a writable output path",
        ) from None
    return path


@contextlib.contextmanager
def atomic_outputs() -> Iterator[OutputSet]:
    """Stage several outputs; all appear if the block succeeds, none (and no leftovers) if not.

    An ``OSError`` about a staged path becomes an ``EmitError`` (disk full, permissions).
    """
    outputs = OutputSet()
    try:
        yield outputs
    except OSError as exc:
        outputs.abort()
        if outputs.owns(exc.filename) or exc.errno in _DISK_ERRORS:
            raise EmitError(f"writing the output failed: {exc.strerror or exc}") from None
        raise
    except BaseException:
        outputs.abort()
        raise
    try:
        outputs.commit()
    except BaseException:
        outputs.abort()
        raise


@contextlib.contextmanager
def atomic_output_dir(path: Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory that becomes ``path`` only if the block succeeds."""
    with atomic_outputs() as outputs:
        yield outputs.directory(path, overwrite)


@contextlib.contextmanager
def atomic_output_file(path: Path, overwrite: bool = True) -> Iterator[Path]:
    """Yield a temporary file path that replaces ``path`` only if the block succeeds."""
    with atomic_outputs() as outputs:
        yield outputs.file(path, overwrite)
