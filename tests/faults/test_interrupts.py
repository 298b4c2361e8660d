"""Ctrl-C and SIGTERM (docs/faults.md): one line naming the command that continues the run, and
that command works — at three moments of a training run (before anything was written: the same
command, and nothing is left; after the first epoch: --resume; in the QAT phase: --resume), and
during a compile. The continued run ends equal to one never interrupted."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from support.faults import (
    assert_same,
    finish,
    hint_command,
    jobs,
    one_error_line,
    place,
    read_lines_until,
    staged,
    wait_for,
)

#: When the signal comes: the run has staged its output and written nothing; the first epoch's
#: row is printed (its checkpoint written); the first QAT epoch's row is printed.
MOMENTS = {
    "before the first checkpoint": (signal.SIGINT, None),
    "after the first epoch": (signal.SIGTERM, "float"),
    "in the QAT phase": (signal.SIGINT, "qat"),
}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory):
    """The training run never interrupted (its inputs are every test's)."""
    where = place(tmp_path_factory.mktemp("reference"))
    job = jobs(where.work)["train"]
    done = where.run(job.command(where.out))
    assert done.returncode == 0, done.stderr
    return job, where.out


@pytest.mark.slow
@pytest.mark.parametrize("moment", MOMENTS)
def test_an_interrupted_training_says_how_to_continue_and_that_works(
    moment: str, reference, tmp_path: Path
) -> None:
    job, ref = reference
    sig, row = MOMENTS[moment]
    where = place(tmp_path)
    proc = where.start(job.command(where.out))
    if row is None:
        wait_for(lambda: staged(where.out), proc, "the staged run directory")
    else:
        read_lines_until(proc, row)
    proc.send_signal(sig)
    line = one_error_line(finish(proc), 128 + sig)
    assert signal.Signals(sig).name in line
    command = hint_command(line)
    if row is None:  # nothing written: the same command, and nothing left meanwhile
        assert "nothing was written" in line and command == job.command(where.out)
        assert where.leftovers() == []
    else:
        assert command == job.command(where.out, "--resume")
    again = where.run(command)
    assert again.returncode == 0, again.stderr
    assert_same(job, where.out, ref)
    assert where.leftovers("out") == []


@pytest.mark.slow
def test_an_interrupted_compile_leaves_nothing_and_its_hint_runs_it(tmp_path: Path) -> None:
    where = place(tmp_path)
    proc = where.start(jobs(tmp_path)["compile"].command(where.out))
    wait_for(lambda: staged(where.out), proc, "the staged output")
    proc.send_signal(signal.SIGTERM)
    line = one_error_line(finish(proc), 128 + signal.SIGTERM)
    assert "nothing was written" in line and where.leftovers() == []
    again = where.run(hint_command(line))
    assert again.returncode == 0, again.stderr
    assert where.leftovers("out") == []
