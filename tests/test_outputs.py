"""All-or-nothing outputs: nothing left on failure, no overwrite without permission, usual modes."""

import os
import stat

import pytest

from cnnforge.errors import EmitError
from cnnforge.outputs import atomic_output_dir, atomic_output_file


def test_failed_block_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), atomic_output_dir(tmp_path / "out") as work:
        (work / "partial.txt").write_text("x")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_existing_dir_needs_overwrite(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_text("mine")
    with pytest.raises(EmitError, match="already exists"), atomic_output_dir(tmp_path / "out"):
        pass
    assert (tmp_path / "out" / "keep").read_text() == "mine"
    with atomic_output_dir(tmp_path / "out", overwrite=True) as work:
        (work / "new").write_text("n")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["new"]


def test_modes_follow_the_umask(tmp_path):
    mask = os.umask(0o022)
    try:
        with atomic_output_dir(tmp_path / "d") as work:
            pass
        with atomic_output_file(tmp_path / "f.txt") as tmp:
            tmp.write_text("x")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "f.txt").stat().st_mode) == 0o644
    del work
