"""The fault suite's tools (tests/faults/, docs/faults.md): cnnforge run as a user runs it, in
its own process group and temporary directory, then hurt (kill -9 at a moment, a signal, a small
or read-only file system, few file descriptors), and the checks every fault must pass: the output
is complete or absent, nothing else is left, the next run works and ends equal to a run that was
never hurt."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from cnnforge.outputs import check_target
from support.paths import TESTS

CNNFORGE = (sys.executable, "-m", "cnnforge")
ADAPT_MODEL = f"{TESTS / 'support' / 'adapt_models.py'}:TinyNormUNet"
#: Temporary entries that are torch's caches, not anything cnnforge made.
FOREIGN_TEMPORARY = ("torchinductor_",)
TIMEOUT_S = 300


@dataclass(frozen=True)
class Job:
    """One command of the suite, ``args`` without ``-o OUT`` (tiny settings, seconds a run;
    train: QAT from epoch 2 of 4)."""

    name: str
    args: tuple[str, ...]

    @property
    def resumable(self) -> bool:
        """train and adapt leave a run ``--resume`` continues; compile's output is whole."""
        return self.name in ("train", "adapt")

    def command(self, out: Path, *extra: str) -> list[str]:
        return [*CNNFORGE, *self.args, "-o", str(out), *extra]


def jobs(inputs: Path) -> dict[str, Job]:
    """compile, train and adapt at the smallest settings that still write every kind of file
    (compile --run builds in the temporary directory; train reaches its QAT epoch)."""
    sample = inputs / "sample16.npy"
    if not sample.exists():
        rng = np.random.default_rng(0)
        np.save(sample, rng.uniform(-1, 1, (3, 16, 16)).astype(np.float32))
    tiny = ("--size", "16", "--train-length", "16", "--val-length", "8", "--batch-size", "8")
    return {
        "compile": Job("compile", ("compile", "qat-unet", "--model-arg", "channels=4,8,8,8",
                                   "--input-shape", "3,16,16", "--ptq", "--sample", str(sample),
                                   "--run")),
        "train": Job("train", ("train", "qat-unet", "--model-arg", "channels=4,8,8,8",
                               "--epochs", "4", *tiny)),
        "adapt": Job("adapt", ("adapt", ADAPT_MODEL, "--epochs", "1", "--qat-epochs", "1",
                               "--allow-untrained", *tiny)),
    }  # fmt: skip


@dataclass(frozen=True)
class Place:
    """Where a test runs its commands: ``work`` (the current directory, holding ``out``) and
    the runs' own temporary directory, so that what they leave in either is seen."""

    work: Path
    env: dict[str, str]

    @property
    def out(self) -> Path:
        return self.work / "out"

    @property
    def tmpdir(self) -> Path:
        return Path(self.env["TMPDIR"])

    def start(
        self, command: list[str], preexec: Callable[[], None] | None = None
    ) -> subprocess.Popen[str]:
        return start(command, self.work, self.env, preexec)

    def run(
        self, command: list[str], preexec: Callable[[], None] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return finish(self.start(command, preexec))

    def leftovers(self, *keep: str) -> list[str]:
        """What is in ``work`` besides ``keep`` and in the temporary directory: nothing, after
        any run, failed or not."""
        return leftovers(self.work, self.tmpdir, keep)


def place(tmp_path: Path, name: str = "work") -> Place:
    work = tmp_path / name
    work.mkdir()
    return Place(work, environment(tmp_path / f"{name}-tmp"))


def environment(tmpdir: Path) -> dict[str, str]:
    """The run's environment: its own temporary directory (so what it leaves there is seen),
    one thread, plain output."""
    tmpdir.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmpdir), "OMP_NUM_THREADS": "1", "COLUMNS": "80"}


def start(
    command: list[str], cwd: Path, env: dict[str, str], preexec: Callable[[], None] | None = None
) -> subprocess.Popen[str]:
    """``command`` in a new process group (its compilers with it), output piped."""
    return subprocess.Popen(
        command, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, preexec_fn=preexec,
    )  # fmt: skip


def run(
    command: list[str], cwd: Path, env: dict[str, str], preexec: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    return finish(start(command, cwd, env, preexec))


def finish(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    """Wait for ``proc``: its status and output."""
    out, err = proc.communicate(timeout=TIMEOUT_S)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def kill_group(proc: subprocess.Popen[str]) -> None:
    """``kill -9`` the run and wait until every process of its group (a compiler it started)
    is gone: the next run starts after the killed one's helpers ended."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=TIMEOUT_S)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)


def one_error_line(result: subprocess.CompletedProcess[str], status: int = 2) -> str:
    """The run failed with ``status``, one line on stderr (no traceback), nothing on stdout."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == status, (result.returncode, result.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-2000:]
    return lines[0]


def hint_command(line: str) -> list[str]:
    """The command an interrupted run's line says continues it, as argv for this Python."""
    text = line.rsplit("(hint: ", 1)[1].removesuffix(")")
    words = shlex.split(text.split(": ", 1)[1])
    program = 3 if words[:3] == ["python", "-m", "cnnforge"] else 1
    assert words[:program] in (["cnnforge"], ["python", "-m", "cnnforge"]), words
    return [*CNNFORGE, *words[program:]]


def leftovers(folder: Path, tmpdir: Path, keep: tuple[str, ...] = ()) -> list[str]:
    """What is in ``folder`` besides ``keep``, and in the run's temporary directory besides
    torch's caches: nothing, after any run, failed or not."""
    here = [p.name for p in folder.iterdir() if p.name not in keep]
    there = [p.name for p in tmpdir.iterdir() if not p.name.startswith(FOREIGN_TEMPORARY)]
    return sorted(here) + [f"$TMPDIR/{name}" for name in sorted(there)]


# ---- the state an output may be in --------------------------------------------------------


def state(job: Job, out: Path, reference: Path) -> str:
    """``absent``; ``complete`` (equal to the reference); or, for train and adapt, ``resumable``
    (a run with whole checkpoints, its files all listed by its manifest). Anything else — a
    torn file, an unlisted file, a compile output that differs — fails."""
    if not out.exists():
        return "absent"
    check_target(out, directory=True, overwrite=True)  # only what the manifest lists
    if job.name == "compile":
        assert_same(job, out, reference)
        return "complete"
    run_dir = out / "run" if job.name == "adapt" else out
    history = _checkpoint(run_dir / "last.pth")["history"]
    log = [json.loads(line) for line in (run_dir / "train.log").read_text().splitlines()]
    assert len(history) - 1 <= len(log) <= len(history), (log, history)  # last.pth, then the log
    _checkpoint(run_dir / "best.pth")
    if job.name == "adapt" and (out / "adapt.json").exists():
        assert_same(job, out, reference)
        return "complete"
    return "resumable"


def assert_same(job: Job, out: Path, reference: Path) -> None:
    """``out`` equals the uninterrupted run's ``reference``: compile byte for byte; train and
    adapt the same weights, losses, logs and results (paths and minutes aside)."""
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    ref_files = sorted(str(p.relative_to(reference)) for p in reference.rglob("*") if p.is_file())
    assert files == ref_files, (files, ref_files)
    for name in files:
        mine, theirs = out / name, reference / name
        if name.endswith((".pth", ".pth.tar")):
            _same_checkpoint(_checkpoint(mine), _checkpoint(theirs), name)
        elif name == "adapt.json":
            a, b = json.loads(mine.read_text()), json.loads(theirs.read_text())
            a.pop("minutes"), b.pop("minutes")
            assert a == b, name
        elif name.endswith("train.log"):
            assert _log(mine) == _log(theirs), name
        elif name != "adapted.py" and not name.startswith("__pycache__"):
            assert mine.read_bytes() == theirs.read_bytes(), name


#: What two equal runs may differ in: how long an epoch took, and the model's reference
#: (adapt's names OUT/adapted.py).
UNEQUAL = ("seconds", "model")


def _log(path: Path) -> list[dict]:
    """train.log's records without their timings."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in UNEQUAL} for r in records]


def _checkpoint(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def _same_checkpoint(a: object, b: object, where: str) -> None:
    """Tensors equal exactly, histories and numbers equal; timings and paths aside."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            if key not in UNEQUAL:
                _same_checkpoint(a[key], b[key], f"{where}:{key}")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same_checkpoint(x, y, f"{where}[{i}]")
    else:
        assert a == b, (where, a, b)


def next_run(job: Job, out: Path, found: str) -> list[str]:
    """The run after a fault: the same command where nothing is there, ``--resume`` where a
    run is, ``--overwrite`` over a complete compile (each also sweeps the folder)."""
    if found == "absent":
        return job.command(out)
    return job.command(out, "--resume" if job.resumable else "--overwrite")


# ---- small, read-only and locked places ----------------------------------------------------


@contextlib.contextmanager
def mounted_tmpfs(where: Path, options: str) -> Iterator[bool]:
    """A tmpfs mounted at ``where`` with ``options`` (root only): yields whether it could be."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = os.geteuid() == 0 and _mount(where, options)
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", str(where)], check=True, capture_output=True)


def _mount(where: Path, options: str) -> bool:
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
            capture_output=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def limit(resource_name: str, value: int) -> Callable[[], None]:
    """A ``preexec_fn`` setting the child's ``RLIMIT_*`` (soft and hard) to ``value``."""
    import resource

    which = getattr(resource, resource_name)

    def apply() -> None:
        resource.setrlimit(which, (value, value))

    return apply


def wait_for(predicate: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    """Poll ``predicate`` while ``proc`` runs (fails if it ends first or after TIMEOUT_S)."""
    deadline = time.monotonic() + TIMEOUT_S
    while not predicate():
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} within {TIMEOUT_S} s"
        time.sleep(0.02)


def lock_file(out: Path) -> Path:
    return out.parent / f".{out.name}.cnnforge-lock"


def staged(out: Path) -> bool:
    """A run writing ``out`` has staged it (its staging folder is there)."""
    return any(p.is_dir() for p in out.parent.glob(f".{out.name}.cnnforge-*"))


def read_lines_until(proc: subprocess.Popen[str], needle: str) -> list[str]:
    """stdout lines up to the first containing ``needle`` (the epoch rows of train)."""
    lines: list[str] = []
    assert proc.stdout is not None
    while not lines or needle not in lines[-1]:
        line = proc.stdout.readline()
        assert line, f"the run ended before printing {needle!r}: {lines} {proc.communicate()}"
        lines.append(line)
    return lines

