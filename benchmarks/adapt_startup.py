"""Benchmark: where ``cnnforge adapt`` spends the time before its first epoch, stage by stage,
and its width search checked one try at a time against several at once (one forked process
per usable core, docs/adapt.md "Fit"), side by side in one run.

    python benchmarks/adapt_startup.py [--smoke] [--model FILE.py:NAME] [--size S]
                                       [--device MAX78000] [--cuda]

Each column is a fresh process (imports included), on every core of this machine and, where it
has more, on 2 cores (CPU affinity): torch's import, cnnforge's, CUDA's start (``--cuda``, where
present), the model, the data splits, the replacements with their check (preflight), then the
width search (the first, as a run has it; again with 1 worker; with every usable core); the
search's result (width, tries) must be the same, and is printed. ``--smoke``: a small model of
the tests at 16x16.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
MONAI = f"{HERE.parent / 'adapt.py'}:MonaiBasicUNetFull"
SMALL = f"{HERE.parent.parent / 'tests' / 'support' / 'adapt_models.py'}:TinyNormUNet"
SEARCHES = (("width search, first, 1 worker", 1), ("width search, 1 worker", 1),
            ("width search, all workers", None))  # fmt: skip
STAGES = ("import torch", "import cnnforge", "CUDA start", "model", "data splits",
          "replacements + check", *(name for name, _ in SEARCHES))  # fmt: skip


def measure(model: str, size: int, device: str, cuda: bool) -> dict:
    """One fresh process's stage times (seconds) and the search's answers (in-process part)."""
    clock, times = time.perf_counter(), {}

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        times[stage], clock = now - clock, now

    import torch

    lap("import torch")
    from cnnforge.adaptation import fit
    from cnnforge.adaptation.forked import usable_workers
    from cnnforge.api.targets import get_target
    from cnnforge.frontend.loading import load_model
    from cnnforge.training.run import DataSpec, _in_channels, model_classes

    lap("import cnnforge")
    if cuda and torch.cuda.is_available():
        torch.zeros(1, device="cuda").sum().item()
        lap("CUDA start")
    torch.manual_seed(0)
    teacher = load_model(model).eval()
    shape = (_in_channels(teacher), size, size)
    classes = model_classes(teacher, size)
    lap("model")
    DataSpec("shapes", None, size, 4096, 128).splits(classes)
    lap("data splits")
    target, checked = get_target(device), fit.Checked()
    adapted, _ = fit.preflight(teacher, shape, target, checked)
    lap("replacements + check")
    answers = {}
    for stage, workers in SEARCHES:  # the first warms torch.export up, as in a real run
        state = torch.get_rng_state()
        _, w, cap, tries, _ = fit.choose_width(adapted, shape, target, "auto", checked, workers)
        torch.set_rng_state(state)
        lap(stage)
        answers[stage] = [w, cap, [t["why"] for t in tries]]
    return {"times": times, "workers": usable_workers(), "answers": answers}


def column(args: argparse.Namespace, cores: list[int] | None) -> dict:
    """``measure`` in a fresh process, on ``cores`` (None: all)."""
    run = subprocess.run(
        [sys.executable, str(HERE), "--child", "--model", args.model, "--size", str(args.size),
         "--device", args.device, *(["--cuda"] if args.cuda else [])],
        capture_output=True, text=True, check=False,
        preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None,
    )  # fmt: skip
    if run.returncode != 0:
        raise SystemExit(f"the measuring process failed: {run.stderr.strip()[-2000:]}")
    return json.loads(run.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a small model at 16x16")
    parser.add_argument("--model", default=None, help=f"default: {MONAI.rpartition('/')[2]}")
    parser.add_argument("--size", type=int, default=None, help="default: 32 (smoke: 16)")
    parser.add_argument("--device", default="MAX78000")
    parser.add_argument("--cuda", action="store_true", help="also time CUDA's start")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.model = args.model or (SMALL if args.smoke else MONAI)
    args.size = args.size or (16 if args.smoke else 32)
    if args.child:
        print(json.dumps(measure(args.model, args.size, args.device, args.cuda)))
        return
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    columns = {f"{len(cores) or os.cpu_count()} cores": None}
    if len(cores) > 2:
        columns["2 cores"] = cores[:2]
    results = {label: column(args, where) for label, where in columns.items()}
    model = args.model.rpartition("/")[2]
    print(f"cnnforge adapt {model} --size {args.size} -d {args.device}: before the first epoch")
    print(f"{'stage, s':32}" + "".join(f"{label:>14}" for label in results))
    for stage in STAGES:
        cells = [r["times"].get(stage) for r in results.values()]
        if any(c is not None for c in cells):
            print(f"{stage:32}" + "".join("-".rjust(14) if c is None else f"{c:14.2f}"
                                          for c in cells))  # fmt: skip
    for label, r in results.items():
        one, many = (r["times"][s] for s in STAGES[-2:])
        same = r["answers"][STAGES[-2]] == r["answers"][STAGES[-1]]
        w, cap, whys = r["answers"][STAGES[-1]]
        print(f"{label}: width search {one:.2f} s with 1 worker, {many:.2f} s with "
              f"{r['workers']}: {one / many:.2f}x; the same result: {same} (width {w}, cap "
              f"{cap}, {len(whys)} tries)")  # fmt: skip


if __name__ == "__main__":
    main()
