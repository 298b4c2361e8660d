"""Benchmark: ``cnnforge compile`` against the vendor tool (ai8x-synthesis) on the same pairs.

For each vendor pair (network YAML + quantized checkpoint + sample) of ../shared/data/ai8x, both
tools run as whole processes, as a user runs them, alternately, ``--repeat`` times (default 5):

- ours: ``python -m cnnforge compile --ai8x-yaml Y --ai8x-checkpoint C --sample S -o DIR
  --firmware FLAGS`` (vendor YAML + checkpoint, portable C with the known-answer self-test, the
  MSDK firmware -- like the vendor tool's output -- and report.html);
- theirs: ``../shared/tools/ai8x-synthesis/run.sh ... FLAGS`` (ai8xize.py: its firmware and,
  from its simulator, the known answer for the sample).

Like with like: both write the firmware, with the same code-generation FLAGS (the vendor's
names, which ``compile`` takes).

Prints the median wall time of each, the ratio ours / vendor per network (and the same for CPU
time, user + system, which a busy shared machine disturbs less than wall time), and the median time
and CPU time of each of our compile steps (measured in separate processes, imports apart). Skips a
network whose files are absent and stops when the vendor tool is not set up. Asserts nothing.

    python benchmarks/vs_vendor.py [--repeat 5] [--only camvid-fakept]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
AI8X = SHARED / "data" / "ai8x"
VENDOR = SHARED / "tools" / "ai8x-synthesis" / "run.sh"

#: name -> (device, YAML, checkpoint, sample, extra vendor flags); paths relative to AI8X.
PAIRS = {
    "mnist": (
        "MAX78000",
        "networks/mnist-chw-ai85.yaml",
        "trained/ai85-mnist-qat8-q.pth.tar",
        "samples/sample_mnist.npy",
        ("--softmax",),
    ),
    "camvid-unet-large-fakept": (
        "MAX78000",
        "networks/camvid-unet-large-fakept.yaml",
        "trained/ai85-camvid-unet-large-fakept-q.pth.tar",
        "samples/sample_camvid_s352_c3_reduced.npy",
        ("--overlap-data", "--mlator", "--no-unload"),  # the camvid_unet demo's (gen-demos)
    ),
    "camvid-unet-large": (
        "MAX78000",
        "networks/camvid-unet-large.yaml",
        "trained/ai85-camvid-unet-large-q.pth.tar",
        "samples/sample_camvid_s352_c3_reduced.npy",
        ("--overlap-data",),
    ),
}

#: Run in a child process: our compile step by step (imports first), JSON on stdout.
STEP_TIMER = """
import json, sys, time
def now():
    return time.perf_counter(), time.process_time()
def since(start):
    wall, cpu = now()
    return wall - start[0], cpu - start[1]
t0 = now()
import torch  # noqa: F401
times = {"import torch": since(t0)}
t1 = now()
import cnnforge.api.targets as P
from pathlib import Path
times["import cnnforge"] = since(t1)
current = []  # (step name, start) of the step that runs now
def on_step(name, i, n):
    if current:
        times[current[0][0]] = since(current[0][1])
    current[:] = [(name, now())]
yaml, ckpt, sample, out = sys.argv[1:5]
from cnnforge.targets.max7800x.firmware.options import FirmwareOptions
flags = FirmwareOptions.from_vendor_flags(sys.argv[5:])
options = P.CompileOptions(output=Path(out), device="MAX78000", ai8x_yaml=Path(yaml),
                           ai8x_checkpoint=Path(ckpt), sample=Path(sample), overwrite=True,
                           firmware=True, firmware_options=flags)
P.compile_model(options, on_step=on_step)
times[current[0][0]] = since(current[0][1])
times["total"] = since(t0)
print(json.dumps(times))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    return env


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds of ``cmd``: CPU is user + system of it and every process it waited
    for (the vendor's run.sh and its Python), steadier than wall time on a shared machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n" + "\n".join(tail))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def ours_cmd(files: tuple[Path, Path, Path], out: Path, flags: tuple = ()) -> list[str]:
    yaml, ckpt, sample = files
    return [
        sys.executable, "-m", "cnnforge", "compile", "--ai8x-yaml", str(yaml),
        "--ai8x-checkpoint", str(ckpt), "--sample", str(sample), "-o", str(out), "--overwrite",
        "--firmware", *flags,
    ]  # fmt: skip


def vendor_cmd(device: str, files: tuple[Path, Path, Path], out: Path, flags: tuple) -> list[str]:
    return [str(VENDOR), device, *map(str, files), str(out), *flags]


def step_times(
    files: tuple[Path, Path, Path], out: Path, repeat: int, flags: tuple = ()
) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of each of our steps (and the imports), ``repeat`` processes."""
    runs = []
    for _ in range(repeat):
        cmd = [sys.executable, "-c", STEP_TIMER, *map(str, files), str(out), *flags]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), check=True)
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return {
        k: (statistics.median(r[k][0] for r in runs), statistics.median(r[k][1] for r in runs))
        for k in runs[0]
    }


def precompile() -> str:
    """Both tools' own sources compiled to bytecode once, as an installed package is (pip
    compiles on install; a source checkout run with PYTHONDONTWRITEBYTECODE, as here, would
    otherwise compile every module on every run, for both tools alike). Returns what was."""
    izer = Path(os.environ.get("IZER", "/tmp/izer"))
    python = Path(os.environ.get("IZER_VENV", "/tmp/izer-venv")) / "bin" / "python"
    trees = [(Path(sys.executable), REPO / "src" / "cnnforge", "cnnforge")]
    trees.append((python, izer, "the vendor tool"))
    done = []
    for interpreter, tree, name in trees:
        if interpreter.is_file() and tree.is_dir():
            cmd = [str(interpreter), "-m", "compileall", "-q", "-x", r"/(\.|tests?/)", str(tree)]
            subprocess.run(cmd, capture_output=True, check=False)
            done.append(name)
    return " and ".join(done) or "neither"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each tool (median)")
    parser.add_argument("--only", action="append", help="network name (repeatable)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.repeat, args.only = 1, ["mnist"]
    if not VENDOR.is_file() or shutil.which("bash") is None:
        raise SystemExit(f"the vendor tool is not set up ({VENDOR})")
    compiled = precompile()
    print(
        f"cnnforge compile vs the vendor tool, whole processes, median of {args.repeat}; "
        f"both write the firmware; bytecode compiled beforehand for {compiled}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'network':28s} {'cnnforge s':>10s} {'vendor s':>10s} {'ratio':>7s}"
        f" {'cnnforge CPU s':>14s} {'vendor CPU s':>12s} {'CPU ratio':>9s}"
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="cnnforge-vs-vendor-") as tmp:
        for name, (device, yaml, ckpt, sample, flags) in PAIRS.items():
            if args.only and name not in args.only:
                continue
            files = (AI8X / yaml, AI8X / ckpt, AI8X / sample)
            if not all(f.is_file() for f in files):
                print(f"{name:28s} skipped (files absent)")
                continue
            ours, theirs = [], []
            for _ in range(args.repeat):  # alternate, so that load changes hit both alike
                ours.append(_timed(ours_cmd(files, Path(tmp) / "ours", flags), _env()))
                theirs.append(_timed(vendor_cmd(device, files, Path(tmp) / "vendor", flags)))
            a, b = (statistics.median(w for w, _ in runs) for runs in (ours, theirs))
            c, d = (statistics.median(c for _, c in runs) for runs in (ours, theirs))
            print(
                f"{name:28s} {a:10.2f} {b:10.2f} {a / b:7.2f} {c:14.2f} {d:12.2f} {c / d:9.2f}",
                flush=True,
            )
            rows.append((name, files, flags))
        for name, files, flags in rows:
            steps = step_times(files, Path(tmp) / "steps", args.repeat, flags)
            text = ", ".join(f"{k} {w:.2f}/{c:.2f}" for k, (w, c) in steps.items() if w >= 0.005)
            print(f"cnnforge steps, {name} (wall/CPU s, median): {text}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
