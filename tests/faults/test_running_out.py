"""The machine runs out or refuses (docs/faults.md): a full file system (a small tmpfs as root;
else a file size limit, RLIMIT_FSIZE, in the child), a read-only folder, exhausted file
descriptors, an output folder removed while the run writes it. Each: one line naming the file
and what ran out, exit 2, nothing left."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest

from support.faults import (
    Place,
    environment,
    finish,
    jobs,
    limit,
    mounted_tmpfs,
    one_error_line,
    place,
    read_lines_until,
    staged,
    wait_for,
)

#: A file system this small holds neither a tiny compile's output (~600 KB) nor a tiny
#: training run's first checkpoints (~180 KB); a file size limit this small stops both.
FULL_FS = {"compile": "256k", "train": "128k"}
FILE_SIZE_LIMIT = 64 * 1024


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "full"), [("compile", "tmpfs"), ("train", "tmpfs"), ("compile", "file-size-limit")]
)
def test_a_full_file_system_is_one_line_naming_the_file(
    name: str, full: str, tmp_path: Path
) -> None:
    """On a tmpfs too small for the output (mounted when the tests run as root), or under a
    file size limit (RLIMIT_FSIZE, anywhere), the run ends with one line: what ran out,
    writing which file, and how much was needed."""
    job = jobs(tmp_path)[name]
    disk = tmp_path / "disk"
    size = FULL_FS[name] if full == "tmpfs" else None
    with mounted_tmpfs(disk, f"size={size}") if size else contextlib.nullcontext(True) as ready:
        if not ready:
            pytest.skip("no tmpfs can be mounted here (not root): the file-size-limit case runs")
        disk.mkdir(exist_ok=True)
        where = Place(disk, environment(tmp_path / "tmp"))  # $TMPDIR not on the small disk
        preexec = limit("RLIMIT_FSIZE", FILE_SIZE_LIMIT) if size is None else None
        line = one_error_line(where.run(job.command(where.out), preexec))
        ran_out = "no space left on device" if size else "file size limit exceeded"
        assert f"{ran_out} writing {where.out}/" in line and "needed" in line, line
        assert where.leftovers() == []


@pytest.mark.slow
def test_a_read_only_folder_is_one_line(tmp_path: Path) -> None:
    """A read-only file system (root: a tmpfs mounted ro), else a folder without write
    permission: one line naming the output, exit 2, nothing left."""
    job, where = jobs(tmp_path)["compile"], place(tmp_path)
    folder = where.work / "ro"
    with mounted_tmpfs(folder, "size=1m,ro") as mounted:
        if not mounted:
            if os.geteuid() == 0:
                pytest.skip("root ignores permissions and this machine mounts no tmpfs")
            folder.chmod(0o555)
        line = one_error_line(where.run(job.command(folder / "out")))
        what = "read-only file system" if mounted else "permission denied"
        assert f"{what} writing {folder / 'out'}" in line, line
        assert list(folder.iterdir()) == [] and where.leftovers("ro") == []


@pytest.mark.slow
@pytest.mark.parametrize("files", [9, 12])
def test_too_few_file_descriptors_is_one_line(files: int, tmp_path: Path) -> None:
    """``ulimit -n`` this low stops a compile (its C build, or before): one line naming the
    limit, exit 2, nothing left."""
    job, where = jobs(tmp_path)["compile"], place(tmp_path)
    line = one_error_line(where.run(job.command(where.out), limit("RLIMIT_NOFILE", files)))
    assert "too many open files" in line and f"the limit is {files}" in line, line
    assert where.leftovers() == []


@pytest.mark.slow
def test_a_run_directory_removed_mid_run_is_one_line(tmp_path: Path) -> None:
    """Training whose -o is removed after its first epoch: the next write says so."""
    job, where = jobs(tmp_path)["train"], place(tmp_path)
    proc = where.start(job.command(where.out))
    read_lines_until(proc, "float")
    shutil.rmtree(where.out)
    line = one_error_line(finish(proc))
    assert f"a file or folder vanished writing {where.out}/" in line, line
    assert where.leftovers() == []


@pytest.mark.slow
def test_a_staging_folder_removed_mid_run_is_one_line(tmp_path: Path) -> None:
    """A compile whose staging folder another program removes: exit 2, one line, nothing."""
    job, where = jobs(tmp_path)["compile"], place(tmp_path)
    proc = where.start(job.command(where.out))
    wait_for(lambda: staged(where.out), proc, "the staged output")
    for stage in where.work.glob(".out.cnnforge-*"):
        if stage.is_dir():
            shutil.rmtree(stage)
    one_error_line(finish(proc))
    assert where.leftovers() == []
