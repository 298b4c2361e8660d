"""Two runs writing one -o (docs/faults.md): exactly one succeeds, its output complete; the
other exits 2 with one line naming the folder and the holder's pid, and harms nothing."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from support.faults import finish, jobs, lock_file, one_error_line, place, state, wait_for


@pytest.mark.slow
@pytest.mark.parametrize("name", ["compile", "train", "adapt"])
def test_a_second_writer_is_refused_naming_the_holder(name: str, tmp_path: Path) -> None:
    job, where = jobs(tmp_path)[name], place(tmp_path)
    first = where.start(job.command(where.out, "--overwrite"))
    wait_for(lambda: lock_file(where.out).exists(), first, "the first run's lock")
    os.kill(first.pid, signal.SIGSTOP)  # it holds the lock however fast it is: a sure race
    try:
        second = where.run(job.command(where.out, "--overwrite"))
    finally:
        os.kill(first.pid, signal.SIGCONT)
    done = finish(first)
    assert done.returncode == 0, done.stderr
    line = one_error_line(second)
    assert f"{where.out}: another cnnforge run (pid {first.pid})" in line, line
    assert state(job, where.out, where.out) in ("complete", "resumable")
    assert where.leftovers("out") == []


@pytest.mark.slow
def test_two_compiles_started_together_one_wins_whole(tmp_path: Path) -> None:
    job, where = jobs(tmp_path)["compile"], place(tmp_path)
    procs = [where.start(job.command(where.out)) for _ in range(2)]
    results = [finish(p) for p in procs]
    assert sorted(r.returncode for r in results) == [0, 2], [r.stderr for r in results]
    line = one_error_line(next(r for r in results if r.returncode == 2))
    holder = re.search(r"another cnnforge run \(pid (\d+)\)", line)
    assert holder is None or int(holder[1]) in {p.pid for p in procs}
    assert holder is not None or "already exists" in line  # the winner had finished already
    assert state(job, where.out, where.out) == "complete"
    assert where.leftovers("out") == []
