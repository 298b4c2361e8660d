"""The machinery of docs/faults.md, piece by piece (the suite that kills, starves and races the
commands themselves is tests/faults/): owner markers and who counts as dead, the sweep of what
killed runs left, the writer lock, durable writes, the one-line resource errors, the run
directory of train/adapt, and the signal handling of the CLI."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cnnforge import durable, owners
from cnnforge.cli.interrupts import continue_command, interrupted_line, interrupts_raise
from cnnforge.errors import EmitError, Interrupted
from cnnforge.locks import OutputBusy, OutputLock, lock_path, remove_stale_locks
from cnnforge.outputs import (
    MANIFEST,
    atomic_output_dir,
    atomic_outputs,
    run_directory,
    write_manifest,
)
from cnnforge.resources import ResourceError, resource_error, tool_ran_out
from cnnforge.staging import REPLACED
from support.cli import run_cli


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    return int(child.stdout)


def _mark(folder: Path, **fields) -> Path:
    """``folder`` made, with a marker of this process changed by ``fields``."""
    folder.mkdir(parents=True)
    doc = {**owners.this_process(), **fields}
    (folder / owners.MARKER).write_text(json.dumps(doc))
    return folder


# ---- owners ---------------------------------------------------------------------------------


def test_only_a_dead_process_of_this_user_on_this_host_is_dead() -> None:
    me = owners.this_process()
    assert not owners.is_dead_owner(me)
    assert owners.is_dead_owner({**me, "pid": _dead_pid()})
    assert owners.is_dead_owner({**me, "started": (me["started"] or 0) + 1})  # pid reused
    assert owners.is_dead_owner({**me, "boot": "another boot"})
    assert not owners.is_dead_owner({**me, "pid": _dead_pid(), "uid": os.getuid() + 1})
    assert not owners.is_dead_owner({**me, "pid": _dead_pid(), "host": "elsewhere"})
    assert not owners.is_dead_owner({"pid": "x"})


def test_the_temporary_directory_is_swept_of_dead_runs_folders_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = _mark(tmp_path / "cnnforge-build-dead", pid=_dead_pid())
    (dead / "main.o").write_bytes(b"x")
    live = _mark(tmp_path / "cnnforge-build-live")
    foreign = _mark(tmp_path / "cnnforge-build-theirs", pid=_dead_pid(), uid=os.getuid() + 1)
    unmarked = tmp_path / "cnnforge-build-unmarked"
    unmarked.mkdir()
    with owners.scratch_dir("build") as scratch:
        assert (scratch / owners.MARKER).is_file()
    assert not dead.exists() and not scratch.exists()
    assert live.exists() and foreign.exists() and unmarked.exists()


def test_a_kept_scratch_folder_loses_its_marker_and_a_failed_one_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with owners.scratch_dir("compile", keep=True) as kept:
        (kept / "out").mkdir()
    assert sorted(p.name for p in kept.iterdir()) == ["out"]
    with pytest.raises(RuntimeError), owners.scratch_dir("compile", keep=True) as failed:
        raise RuntimeError
    assert not failed.exists()


def test_a_removal_cut_short_keeps_the_marker(tmp_path: Path, monkeypatch) -> None:
    folder = _mark(tmp_path / "cnnforge-x", pid=_dead_pid())
    (folder / "sub").mkdir()
    (folder / "sub" / "f").write_text("x")
    monkeypatch.setattr(owners.shutil, "rmtree", lambda *a, **k: None)  # e.g. no fd left
    owners.remove_tree(folder)
    assert (folder / owners.MARKER).exists()  # the next sweep finds it
    monkeypatch.undo()
    owners.sweep_scratch(tmp_path)
    assert not folder.exists()


# ---- staging and the sweep of an output's folder ---------------------------------------------


def test_a_dead_runs_stage_is_removed_and_a_replaced_output_put_back(tmp_path: Path) -> None:
    stage = _mark(tmp_path / ".out.cnnforge-abcd1234", pid=_dead_pid(), target="out")
    old = stage / REPLACED  # killed between the two renames of --overwrite
    old.mkdir()
    write_manifest(old, ["a.txt"])
    (old / "a.txt").write_text("the old output")
    other = _mark(tmp_path / ".y.cnnforge-abcd1234", pid=_dead_pid(), target="y")
    (other / "y").mkdir()
    live = _mark(tmp_path / ".z.cnnforge-abcd1234", target="z")
    with atomic_output_dir(tmp_path / "new") as work:
        (work / "f").write_text("x")
    assert (tmp_path / "out" / "a.txt").read_text() == "the old output"
    assert not stage.exists() and not other.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".z.cnnforge-abcd1234", "new", "out"]


def test_a_dead_stage_of_an_output_another_run_holds_is_left_to_it(tmp_path: Path) -> None:
    stage = _mark(tmp_path / ".busy.cnnforge-abcd1234", pid=_dead_pid(), target="busy")
    with OutputLock(tmp_path / "busy"), atomic_output_dir(tmp_path / "new"):
        pass
    assert stage.exists()
    with atomic_output_dir(tmp_path / "again"):
        pass
    assert not stage.exists()


def test_overwrite_replaces_whole_and_leaves_no_stage_or_lock(tmp_path: Path) -> None:
    for text in ("first", "second"):
        with atomic_output_dir(tmp_path / "out", overwrite=True) as work:
            (work / "f.txt").write_text(text)
            assert lock_path(tmp_path / "out").exists()
    assert (tmp_path / "out" / "f.txt").read_text() == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# ---- the lock ---------------------------------------------------------------------------------


def test_a_second_writer_is_refused_naming_the_holder(tmp_path: Path) -> None:
    with OutputLock(tmp_path / "out"):
        with pytest.raises(OutputBusy, match=f"pid {os.getpid()}"):
            OutputLock(tmp_path / "out").acquire()
        with (
            pytest.raises(OutputBusy, match=str(tmp_path / "out")),
            atomic_output_dir(tmp_path / "out"),
        ):
            pass
    assert list(tmp_path.iterdir()) == []  # the lock file goes with the lock


def test_a_killed_holders_lock_file_is_removed_by_the_next_writer(tmp_path: Path) -> None:
    stale = lock_path(tmp_path / "old")
    stale.write_text("12345\n")  # its holder was killed: no one holds the lock
    held = OutputLock(tmp_path / "held")
    held.acquire()
    remove_stale_locks(tmp_path)
    assert not stale.exists() and lock_path(tmp_path / "held").exists()
    held.release()
    long = lock_path(tmp_path / ("x" * 250))  # a long name is cut and told apart by a hash
    assert long.name.endswith(".cnnforge-lock") and len(long.name) < 80


# ---- durable writes and the resource errors ------------------------------------------------


def test_a_large_write_checks_the_free_space_first(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(durable.shutil, "disk_usage", lambda _: type("U", (), {"free": 1024}))
    with pytest.raises(OSError) as info:
        durable.replace_bytes(tmp_path / "big.pth", b"x" * (3 << 20))
    assert info.value.errno == errno.ENOSPC
    line = resource_error(info.value).one_line()
    assert line.startswith(f"no space left on device writing {tmp_path / 'big.pth'}: ")
    assert "about 3 MB needed, 1 KB free" in line
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_names_the_output_file_and_what_it_took(tmp_path: Path) -> None:
    with pytest.raises(ResourceError) as info, atomic_outputs() as outputs:
        work = outputs.directory(tmp_path / "out")
        (work / "c").mkdir()
        (work / "c" / "weights.h").write_bytes(b"w" * 5000)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # a write() names no file
    line = info.value.one_line()
    assert f"no space left on device writing {tmp_path / 'out' / 'c' / 'weights.h'}" in line
    assert "more than 4.88 KB needed" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("code", "what"),
    [(errno.EROFS, "read-only file system"), (errno.EACCES, "permission denied"),
     (errno.EDQUOT, "disk quota exceeded"), (errno.EFBIG, "file size limit exceeded"),
     (errno.ENOENT, "a file or folder vanished")],
)  # fmt: skip
def test_each_refused_write_is_named(code: int, what: str, tmp_path: Path) -> None:
    with pytest.raises(ResourceError) as info, atomic_output_dir(tmp_path / "out") as work:
        raise OSError(code, os.strerror(code), str(work / "x.txt"))
    assert info.value.one_line().startswith(f"{what} writing {tmp_path / 'out' / 'x.txt'}")
    assert list(tmp_path.iterdir()) == []


def test_a_compiler_that_ran_out_is_named() -> None:
    with pytest.raises(ResourceError, match="too many open files building c: the limit is"):
        tool_ran_out("/usr/bin/ld: cannot open crtn.o: Too many open files", "c")
    with pytest.raises(ResourceError, match="file size limit exceeded building c"):
        tool_ran_out("", "c", -signal.SIGXFSZ)
    tool_ran_out("main.c:3: error: expected ';'", "c")  # a real compile error: not ours


# ---- the run directory of train and adapt --------------------------------------------------


def test_a_run_appears_with_its_first_checkpoint_or_not_at_all(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with pytest.raises(Interrupted) as info, run_directory(
        out, ("last.pth",), overwrite=False, resume=False
    ) as run:
        assert run.path != out and not out.exists()  # staged
        raise Interrupted(signal.SIGINT)
    assert not info.value.resumable and list(tmp_path.iterdir()) == []
    with pytest.raises(Interrupted) as info, run_directory(
        out, ("last.pth",), overwrite=False, resume=False
    ) as run:
        (run.path / "last.pth").write_text("epoch 0")
        run.commit()
        raise Interrupted(signal.SIGTERM)
    assert info.value.resumable
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "last.pth"]
    with pytest.raises(EmitError, match="--resume continues its run"):
        run_directory(out, ("last.pth",), overwrite=False, resume=False).__enter__()


def test_resume_removes_what_a_killed_save_left(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    write_manifest(out, ["last.pth", "last.tmp"])
    (out / "last.pth").write_text("epoch 3")
    (out / "last.tmp").write_text("torn")
    with run_directory(out, ("last.pth", "last.tmp"), overwrite=False, resume=True) as run:
        assert run.path == out and not (out / "last.tmp").exists()


# ---- signals -------------------------------------------------------------------------------


def test_sigterm_raises_interrupted_while_a_command_runs() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as info, interrupts_raise():
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 0) if hasattr(signal, "sigtimedwait") else None
    assert info.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before


def test_the_hint_continues_the_run() -> None:
    args = ["train", "m.py:Net", "-o", "my run", "--overwrite"]
    assert continue_command(args, resume=False).endswith("train m.py:Net -o 'my run' --overwrite")
    resumed = continue_command(args, resume=True)
    assert resumed.endswith("-o 'my run' --resume") and "--overwrite" not in resumed
    assert continue_command([*args, "--resume"], resume=True).count("--resume") == 1
    exc = Interrupted(signal.SIGINT)
    assert "nothing was written (hint: run it again: " in interrupted_line(exc, args)
    exc.resumable = True
    assert "(hint: continue with: " in interrupted_line(exc, args)


def test_ctrl_c_between_two_renames_puts_neither_output_in_place(tmp_path, monkeypatch) -> None:
    from cnnforge import outputs

    real, calls = outputs.put_in_place, []

    def second_interrupted(stage: Path, path: Path) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise Interrupted(signal.SIGINT)
        real(stage, path)

    monkeypatch.setattr(outputs, "put_in_place", second_interrupted)
    with pytest.raises(Interrupted), atomic_outputs() as staged:
        staged.file(tmp_path / "y.npy").write_bytes(b"y")
        (staged.directory(tmp_path / "layers") / "a.npy").write_bytes(b"a")
    assert list(tmp_path.iterdir()) == []


def test_torchs_own_write_failure_is_one_line_not_a_bug(tmp_path, monkeypatch, capsys) -> None:
    """torch's zip writer on a full disk says "unexpected pos"; cnnforge writes through
    durable.py, and where torch's error still comes it is one line, exit 2, not 'internal'."""
    def full(_: object) -> bytes:
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(durable, "torch_bytes", full)
    code, _, err = run_cli(["quantize", "qat-unet", "-o", str(tmp_path / "q.pth")], capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "writing a torch file failed" in err and "internal error" not in err
    assert list(tmp_path.iterdir()) == []
