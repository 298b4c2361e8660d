"""kill -9 at seeded random moments of compile, train and adapt (docs/faults.md): the output is
complete or absent (train/adapt: a run with whole checkpoints), the next run leaves nothing
else (staging folders, lock files, temporary folders in $TMPDIR), and a resumed run ends equal
to the run that was never killed.

A few kills run in every CI run; ``CNNFORGE_FAULT_KILLS=50`` runs more, ``CNNFORGE_FAULT_SEED``
draws another schedule. Each moment is a fraction of the command's writing phase, from the
moment its output is staged (the start-up before it, imports and model loading, writes nothing
and takes a time that varies with the machine's load) to a quarter past its end. For train and
adapt every other kill counts from the first epoch's row instead (their set-up, rendering the
data and building the model, takes most of a tiny run: counted from the staging alone, the
kills land before the first checkpoint and no resumed run is checked).
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from support.faults import (
    Job,
    assert_same,
    finish,
    jobs,
    kill_group,
    next_run,
    place,
    read_lines_until,
    staged,
    state,
)

KILLS = int(os.environ.get("CNNFORGE_FAULT_KILLS", "3"))
SEED = int(os.environ.get("CNNFORGE_FAULT_SEED", "39"))
ORDER = ("compile", "train", "adapt")


#: Where a kill's moment counts from: the staged output, or the first epoch's row printed.
STAGED, FIRST_EPOCH = "staged", "float"


def schedule(n: int, seed: int) -> list[tuple[str, str, float]]:
    """(command, anchor, fraction of the time from the anchor to the end) for each kill: the
    commands in turn, the moments drawn uniformly from that time and a quarter past it (the
    final renames and the exit included); train and adapt anchored in turn at the staged output
    and at the first epoch's row (first: the few kills of every CI run resume a run)."""
    rng = random.Random(seed)
    planned = []
    for i in range(n):
        name = ORDER[i % len(ORDER)]
        anchor = STAGED if name == "compile" or (i // len(ORDER)) % 2 else FIRST_EPOCH
        planned.append((name, anchor, rng.uniform(0.0, 1.25)))
    return planned


def writing_phase(proc, out: Path) -> float:
    """Wait until ``proc`` has staged ``out`` (or ended): the time that took."""
    began = time.monotonic()
    while not staged(out) and proc.poll() is None:
        time.sleep(0.01)
    return time.monotonic() - began


@pytest.fixture(scope="module")
def references(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Job, Path, dict[str, float]]]:
    """Each command run once, never hurt: the job (its inputs are shared by every kill, since
    their paths reach the outputs), its output and how long it ran after each anchor."""
    root = tmp_path_factory.mktemp("references")
    found = {}
    for name, job in jobs(root).items():
        where = place(root, name)
        proc = where.start(job.command(where.out))
        writing_phase(proc, where.out)
        seen = {STAGED: time.monotonic()}
        if name != "compile":
            read_lines_until(proc, FIRST_EPOCH)
            seen[FIRST_EPOCH] = time.monotonic()
        done = finish(proc)
        assert done.returncode == 0, done.stderr
        end = time.monotonic()
        found[name] = (job, where.out, {anchor: end - t for anchor, t in seen.items()})
    return found


@pytest.mark.slow
@pytest.mark.parametrize(("index", "planned"), list(enumerate(schedule(KILLS, SEED))))
def test_a_killed_run_leaves_its_output_whole_or_absent_and_nothing_else(
    index: int, planned: tuple[str, str, float], references, tmp_path: Path, record_property
) -> None:
    name, anchor, fraction = planned
    job, reference, durations = references[name]
    where = place(tmp_path)
    proc = where.start(job.command(where.out))
    writing_phase(proc, where.out)
    if anchor == FIRST_EPOCH:
        read_lines_until(proc, FIRST_EPOCH)
    time.sleep(fraction * durations[anchor])
    kill_group(proc)
    found = state(job, where.out, reference)  # complete, absent or resumable: nothing partial
    left = where.leftovers("out")  # what the next run must remove
    record_property("kill", {"command": name, "from": anchor, "at": round(fraction, 3),
                             "state": found, "left": left})  # fmt: skip

    again = where.run(next_run(job, where.out, found))
    assert again.returncode == 0, (found, again.stderr)
    assert_same(job, where.out, reference)  # resumed = uninterrupted
    assert where.leftovers("out") == [], (found, fraction, left)


def test_the_schedule_is_seeded_and_covers_every_command() -> None:
    assert schedule(6, 39) == schedule(6, 39) != schedule(6, 40)
    assert {name for name, _, _ in schedule(3, 39)} == set(ORDER)
    assert {(name, anchor) for name, anchor, _ in schedule(12, 39)} == {
        ("compile", STAGED),
        *((name, a) for name in ORDER[1:] for a in (STAGED, FIRST_EPOCH)),
    }
