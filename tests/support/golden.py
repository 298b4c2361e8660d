"""Golden (snapshot) files: compare what a test produced with the reviewed copy in tests/.

With ``CNNFORGE_REGEN_GOLDEN=1`` the helpers write the new expectation and skip the test, so a
regenerating run can never pass by comparing the files with themselves; rerun without it (and
review ``git diff``) to compare.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REGEN_ENV = "CNNFORGE_REGEN_GOLDEN"


def regenerating() -> bool:
    """Whether this run rewrites the golden files instead of comparing with them."""
    return os.environ.get(REGEN_ENV, "") not in ("", "0")


def _regenerated(what: Path) -> None:
    pytest.skip(f"regenerated {what}: rerun without {REGEN_ENV} to compare, review git diff")


def check_text(path: Path, text: str) -> None:
    """``text`` equals the golden file ``path`` (regenerating: write it, then skip)."""
    if regenerating():
        path.write_text(text)
        _regenerated(path)
    assert path.is_file(), f"{path} missing: regenerate it with {REGEN_ENV}=1 and review it"
    assert text == path.read_text(), f"{path.name} differs from the golden file {path}"


def folder_files(folder: Path) -> dict[str, bytes]:
    """The plain files directly in ``folder``, by name (sorted)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def check_files(folder: Path, files: dict[str, bytes]) -> None:
    """``files`` (name -> bytes) equal the golden folder exactly: same names, same bytes.

    Regenerating writes them (dropping golden files the emitter no longer writes), then skips.
    """
    if regenerating():
        folder.mkdir(parents=True, exist_ok=True)
        for stale in set(folder_files(folder)) - set(files):
            (folder / stale).unlink()
        for name, data in files.items():
            (folder / name).write_bytes(data)
        _regenerated(folder)
    assert folder.is_dir(), f"{folder} missing: regenerate it with {REGEN_ENV}=1 and review it"
    assert files == folder_files(folder), f"the emitted files differ from the golden {folder}"
