"""All-or-nothing outputs: nothing left on failure, no overwrite without permission, usual modes,
and --overwrite replaces only what cnnforge wrote (the manifest)."""

import json
import os
import stat

import pytest

from cnnforge.errors import EmitError
from cnnforge.outputs import (
    MANIFEST,
    atomic_output_dir,
    atomic_output_file,
    atomic_outputs,
    check_target,
    safe_file_stem,
)


def test_failed_block_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), atomic_output_dir(tmp_path / "out") as work:
        (work / "partial.txt").write_text("x")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_failure_removes_the_parents_it_created(tmp_path):
    (tmp_path / "a").mkdir()
    with pytest.raises(RuntimeError), atomic_output_dir(tmp_path / "a" / "b" / "c" / "d"):
        raise RuntimeError("boom")
    assert [p.name for p in tmp_path.iterdir()] == ["a"]
    assert list((tmp_path / "a").iterdir()) == []


def test_several_outputs_appear_together_or_not_at_all(tmp_path):
    with pytest.raises(RuntimeError), atomic_outputs() as out:
        out.file(tmp_path / "first.txt").write_text("1")
        (out.directory(tmp_path / "d") / "x").write_text("2")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    with atomic_outputs() as out:
        out.file(tmp_path / "first.txt").write_text("1")
        (out.directory(tmp_path / "d") / "x").write_text("2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "first.txt"]
    assert json.loads((tmp_path / "d" / MANIFEST).read_text())["files"] == ["x"]


def test_existing_dir_needs_overwrite_and_a_manifest(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_text("mine")
    with pytest.raises(EmitError, match="already exists"), atomic_output_dir(tmp_path / "out"):
        pass
    with pytest.raises(EmitError, match="did not write"):
        check_target(tmp_path / "out", directory=True, overwrite=True)
    assert (tmp_path / "out" / "keep").read_text() == "mine"
    (tmp_path / "out" / "keep").unlink()  # an empty directory may be replaced
    with atomic_output_dir(tmp_path / "out", overwrite=True) as work:
        (work / "new").write_text("n")
    with atomic_output_dir(tmp_path / "out", overwrite=True) as work:  # cnnforge's own: replaced
        (work / "newer").write_text("n")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [MANIFEST, "newer"]
    (tmp_path / "out" / "notes.txt").write_text("user's")
    with pytest.raises(EmitError, match=r"notes\.txt"):
        check_target(tmp_path / "out", directory=True, overwrite=True)


@pytest.mark.parametrize("where", [".", "..", "/"])
def test_refuses_the_current_directory_and_above(tmp_path, monkeypatch, where):
    monkeypatch.chdir(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"files": []}))
    with pytest.raises(EmitError, match=r"current directory|root directory"):
        check_target(where, directory=True, overwrite=True)
    assert (tmp_path / MANIFEST).exists()


def test_refuses_a_home_directory(monkeypatch, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(EmitError, match="home directory"):
        check_target(home, directory=True, overwrite=True)


def test_refuses_paths_through_symbolic_links(tmp_path, monkeypatch):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    for path in ("link/out", "link", tmp_path / "link" / "f.txt"):
        with pytest.raises(EmitError, match="symbolic link"):
            check_target(path, directory=True, overwrite=False)
    assert list((tmp_path / "real").iterdir()) == []


def test_file_targets(tmp_path):
    (tmp_path / "f.txt").write_text("old")
    with pytest.raises(EmitError, match="already exists"):
        check_target(tmp_path / "f.txt", directory=False, overwrite=False)
    with pytest.raises(EmitError, match="not a regular file"):
        check_target(tmp_path, directory=False, overwrite=True)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(EmitError, match="not a regular file"):
        check_target(tmp_path / "fifo", directory=False, overwrite=True)
    with pytest.raises(EmitError, match="not a directory"):
        check_target(tmp_path / "f.txt" / "x", directory=False, overwrite=True)


def test_safe_file_stem():
    assert safe_file_stem("../../escaped") == "escaped"
    assert safe_file_stem("/abs/path") == "abs-path"
    assert safe_file_stem("a\\") == "a"
    assert safe_file_stem("...") == "network"
    assert len(safe_file_stem("x" * 1000)) == 64


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
