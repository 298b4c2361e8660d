"""Writing results safely: outputs staged and renamed into place only when all are complete, and
never deleting what cnnforge did not write (the ``MANIFEST`` lists what it wrote)."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cnnforge.durable import fsync_dir, replace_bytes
from cnnforge.errors import CnnforgeError, EmitError, Interrupted
from cnnforge.locks import OutputLock
from cnnforge.owners import FdReserve, remove_tree
from cnnforge.resources import DISK_FULL, ResourceError, is_resource_error, resource_error
from cnnforge.staging import (
    RESERVED,
    locked,
    make_parents,
    new_stage,
    newest_file,
    put_in_place,
    settle_stage,
    sync_tree,
    take_back,
    tree_bytes,
)
from cnnforge.version import __version__

#: The file in each output directory that lists what cnnforge wrote there (JSON).
MANIFEST = ".cnnforge-manifest.json"
#: The manifest while it is rewritten (durable.replace_bytes), left by a run killed then.
MANIFEST_TMP = MANIFEST + ".tmp"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


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
            if rel in (MANIFEST, MANIFEST_TMP) or (
                name == MANIFEST and _listed_dir(str(Path(rel).parent), dirs)
            ):
                continue  # a nested output's own manifest (the demo's compile/) is cnnforge's
            if entry.is_symlink() or not (
                (entry.is_file() and (rel in listed or _cached(rel, listed)))
                or (entry.is_dir() and (_listed_dir(rel, dirs) or _cached(rel, listed)))
            ):
                return rel
    return None


def _cached(rel: str, listed: set[str]) -> bool:
    """``rel`` is Python's bytecode cache of a listed ``.py`` file (``__pycache__/NAME.*.pyc``,
    written when adapt loads its adapted.py), or the ``__pycache__`` folder holding one."""
    path = Path(rel)
    if path.name == "__pycache__":
        return any(Path(f).suffix == ".py" and Path(f).parent == path.parent for f in listed)
    module = path.name.split(".")[0]
    return (
        path.parent.name == "__pycache__"
        and path.suffix == ".pyc"
        and str(path.parent.parent / f"{module}.py").removeprefix("./") in listed
    )


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
    path: Path  # the final path
    stage: Path  # the staging folder beside it: .NAME.cnnforge-XXXXXXXX (with the owner marker)
    directory: bool

    @property
    def staged(self) -> Path:
        """Where the output is written until it is put in place (inside the staging folder)."""
        return self.stage / self.path.name


class OutputSet:
    """The outputs of one command, staged beside their final paths, locked, swept and marked with
    this process, so a killed run leaves nothing the next run does not remove."""

    def __init__(self) -> None:
        self._targets: list[_Target] = []
        self._made: list[Path] = []  # parent directories this command created, outermost first
        self._locks: list[OutputLock] = []
        self._reserve = FdReserve()  # the clean-up works even when the run used up every fd

    def directory(self, path: Path | str, overwrite: bool = False) -> Path:
        """A temporary directory that becomes ``path`` (with a manifest) on success."""
        return self._add(Path(path), overwrite, directory=True)

    def file(self, path: Path | str, overwrite: bool = False) -> Path:
        """A temporary file path that becomes ``path`` on success."""
        return self._add(Path(path), overwrite, directory=False)

    def owns(self, filename: object) -> bool:
        """Whether ``filename`` (from an OSError) lies in one of the staged outputs."""
        return self.shown(filename) is not None

    def shown(self, filename: object) -> str | None:
        """``filename`` (a staged path) as the user will see it: under its final path."""
        if not isinstance(filename, str | os.PathLike):
            return None
        text = os.fsdecode(filename)
        for t in self._targets:
            for base in (str(t.staged), str(t.stage)):
                if text == base or text.startswith(f"{base}{os.sep}"):
                    return str(t.path) + text[len(base) :]
        return None

    def __iter__(self) -> Iterator[_Target]:
        return iter(self._targets)

    def _add(self, path: Path, overwrite: bool, *, directory: bool) -> Path:
        if any(t.path == path for t in self._targets):
            raise EmitError("the same output path is given twice", where=str(path))
        if path.name in RESERVED:
            raise EmitError(f"{path.name} is a name cnnforge keeps for itself", where=str(path))
        check_target(path, directory=directory, overwrite=overwrite)  # cheap refusals first
        try:
            self._made += make_parents(path.parent)
            self._locks.append(locked(path))
            check_target(path, directory=directory, overwrite=overwrite)  # now under the lock
            stage = new_stage(path)
        except OSError as exc:
            raise resource_error(exc, shown=str(path)) from None
        target = _Target(path, stage, directory)
        self._targets.append(target)
        if directory:
            target.staged.mkdir()
        else:
            os.close(os.open(target.staged, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return target.staged

    def commit(self) -> None:
        """Move every staged output into place; on any failure restore what was there."""
        for t in self._targets:
            if t.directory:
                _write_manifest(t.staged)
            os.chmod(t.staged, _default_mode(0o777 if t.directory else 0o666))  # mkdtemp: 0700
            sync_tree(t.staged)
        moved: list[_Target] = []
        try:
            for t in self._targets:
                put_in_place(t.stage, t.path)
                moved.append(t)
        except BaseException as exc:  # a failed rename, or Ctrl-C between two: all or none
            for done in reversed(moved):
                take_back(done.stage, done.path)
            if not isinstance(exc, OSError):
                raise
            raise EmitError(
                f"cannot put the output in place: {exc.strerror or exc}", where=str(t.path)
            ) from None
        for t in self._targets:
            fsync_dir(t.path.parent)
        self._finish()

    def abort(self) -> None:
        """Remove every staged output, the locks and the parent directories this command made."""
        self._reserve.release()
        for t in self._targets:
            settle_stage(t.stage, t.path)
        self._finish()

    def resource_error(self, exc: OSError) -> CnnforgeError:
        """``exc`` (raised while the outputs were written) as one line naming the output file:
        the file the error names, else the file written last (a failed ``write`` names none)."""
        shown = self.shown(exc.filename)
        if exc.errno in DISK_FULL:  # the file written last, and a lower bound of the need
            shown = shown or self.shown(newest_file(t.stage for t in self))
            if not hasattr(exc, "written"):
                exc.written = sum(tree_bytes(t.stage) for t in self)  # type: ignore[attr-defined]
        return resource_error(exc, shown=shown)

    def _finish(self) -> None:
        self._reserve.release()
        for t in self._targets:
            remove_tree(t.stage)
        for lock in reversed(self._locks):
            lock.release()
        self._locks.clear()
        for folder in reversed(self._made):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if still empty
        self._made.clear()


def _write_manifest(folder: Path) -> None:
    top = folder / MANIFEST
    files = [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p != top]
    write_manifest(folder, files)


def write_manifest(folder: Path, files: list[str] | tuple[str, ...]) -> None:
    """``folder``'s manifest listing ``files`` (paths relative to it) as cnnforge's."""
    doc = {"written_by": f"cnnforge {__version__}", "files": sorted(files)}
    replace_bytes(folder / MANIFEST, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))


@contextlib.contextmanager
def atomic_outputs() -> Iterator[OutputSet]:
    """Stage several outputs: all appear if the block succeeds, none if not; an ``OSError`` becomes
    one line naming the output and what ran out (resources.resource_error)."""
    outputs = OutputSet()
    try:
        yield outputs
    except ResourceError as exc:  # from an output staged inside one of ours: name it as ours
        outputs.abort()
        raise exc.renamed(outputs.shown(exc.path)) from None
    except OSError as exc:
        error = None
        if outputs.owns(exc.filename) or (exc.filename is None and is_resource_error(exc)):
            error = outputs.resource_error(exc)
        outputs.abort()
        if error is not None:
            raise error from None
        raise
    except BaseException:
        outputs.abort()
        raise
    try:
        outputs.commit()
    except OSError as exc:
        error = outputs.resource_error(exc)
        outputs.abort()
        raise error from None
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


class RunDirectory:
    """A directory a long command writes in as it goes (``train``, ``adapt``): one writer, staged
    until its first checkpoint (``commit``), then continued with ``--resume``."""

    def __init__(
        self, path: Path | str, files: tuple[str, ...], *, overwrite: bool, resume: bool
    ) -> None:
        self.final = Path(path)
        self.path = self.final  # where to write now: inside the stage until committed
        self.files = files
        self.overwrite, self.resume = overwrite, resume
        self._stage: Path | None = None
        self._lock: OutputLock | None = None
        self._made: list[Path] = []
        self._reserve = FdReserve()

    @property
    def committed(self) -> bool:
        return self._stage is None

    def shown(self, filename: object) -> str | None:
        """``filename`` as the user will see it: a staged path under the final one."""
        if not isinstance(filename, str | os.PathLike):
            return None
        text, staged = os.fsdecode(filename), str(self.path)
        if self._stage is not None and (text == staged or text.startswith(staged + os.sep)):
            return str(self.final) + text[len(staged) :]
        return text

    def open(self) -> None:
        """Lock and check the directory; stage a new run, or claim an existing one to resume."""
        self._check()
        try:
            self._made = make_parents(self.final.parent)
            self._lock = locked(self.final)
            self._check()  # now under the lock
            if self.resume and self.final.is_dir():
                write_manifest(self.final, self.files)
                _remove_partial(self.final, self.files)
                return
            self._stage = new_stage(self.final)
            self.path = self._stage / self.final.name
            self.path.mkdir()
            write_manifest(self.path, self.files)
        except OSError as exc:
            self.close()
            raise resource_error(exc, shown=str(self.final)) from None
        except BaseException:
            self.close()
            raise

    def _check(self) -> None:
        if not (self.overwrite or self.resume) and os.path.lexists(self.final):
            raise _refuse(
                self.final,
                "output directory already exists",
                "--resume continues its run, --overwrite starts over, or choose another",
            )
        check_target(self.final, directory=True, overwrite=self.overwrite or self.resume)

    def commit(self) -> None:
        """The staged run becomes the directory (replacing the old run with ``overwrite``)."""
        if self._stage is None:
            return
        sync_tree(self.path)
        try:
            put_in_place(self._stage, self.final)
        except OSError as exc:
            take_back(self._stage, self.final)
            raise resource_error(exc, shown=str(self.final)) from None
        stage, self._stage, self.path = self._stage, None, self.final  # in place: a run now
        fsync_dir(self.final.parent)
        remove_tree(stage)

    def close(self) -> None:
        """An uncommitted run is removed; the lock and the parents made for nothing go."""
        self._reserve.release()
        if self._stage is not None:
            settle_stage(self._stage, self.final)
            self._stage, self.path = None, self.final
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        for folder in reversed(self._made):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if still empty
        self._made = []


def _remove_partial(folder: Path, files: tuple[str, ...]) -> None:
    """The temporary files (``*.tmp``) a killed run left in ``folder``."""
    for name in files:
        if name.endswith(".tmp"):
            with contextlib.suppress(FileNotFoundError):
                (folder / name).unlink()


@contextlib.contextmanager
def run_directory(
    path: Path | str, files: tuple[str, ...], *, overwrite: bool, resume: bool
) -> Iterator[RunDirectory]:
    """A ``RunDirectory`` opened for the block: committed when the block succeeds, closed
    whatever happens (an uncommitted run leaves nothing)."""
    run = RunDirectory(path, files, overwrite=overwrite, resume=resume)
    run.open()
    try:
        yield run
        run.commit()
    except Interrupted as exc:  # the CLI's hint: --resume once there is a run to continue
        exc.resumable = run.committed
        raise
    except OSError as exc:  # a full disk, a vanished directory: named under its final path
        if not is_resource_error(exc):
            raise
        raise resource_error(exc, shown=run.shown(exc.filename)) from None
    finally:
        run.close()
