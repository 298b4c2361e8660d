"""Ctrl-C and SIGTERM (docs/faults.md): one line naming the command that continues the run, and
that command works — at three moments of a training run (before anything was written: the same
command, and nothing is left; after the first epoch: --resume; in the QAT phase: --resume), Ctrl-C
to a training with data-loading workers at three moments, and during a compile. The continued
run ends equal to one never interrupted."""

from __future__ import annotations

import os
import signal
import sys
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
from support.paths import TESTS

PAUSED_CLI = TESTS / "support" / "paused_cli.py"

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


#: Ctrl-C to a training with data-loading workers (the terminal signals them all): the run has
#: staged its output and written nothing; it is in epoch 1, after a batch; it is writing epoch
#: 1's checkpoint (its temporary file half written). ``None``: no pause, the staged output seen.
CTRL_C_MOMENTS = {"early": None, "mid-epoch": "batch", "writing a checkpoint": "checkpoint"}


@pytest.mark.slow
@pytest.mark.parametrize("moment", CTRL_C_MOMENTS)
def test_ctrl_c_to_a_training_with_workers_is_one_line_whose_command_finishes_it(
    moment: str, reference, tmp_path: Path
) -> None:
    job, ref = reference
    pause = CTRL_C_MOMENTS[moment]
    where = place(tmp_path)
    command = job.command(where.out, "--workers", "2")
    if pause is None:
        proc = where.start(command)
        wait_for(lambda: staged(where.out), proc, "the staged run directory")
    else:
        proc = where.start([sys.executable, str(PAUSED_CLI), pause, *command[3:]])
        read_lines_until(proc, "PAUSED")
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the workers get it too
    line = one_error_line(finish(proc), 128 + signal.SIGINT)
    again = hint_command(line)
    assert again == (command if pause is None else job.command(where.out, "--workers", "2",
                                                                "--resume"))  # fmt: skip
    if pause is None:
        assert where.leftovers() == []
    done = where.run(again)
    assert done.returncode == 0, done.stderr
    assert_same(job, where.out, ref)  # the workers change nothing; no temporary file left
    assert where.leftovers("out") == []
