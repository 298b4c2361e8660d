"""Benchmark: ``cnnforge compile`` wall time, and the generated C's speed on the host.

1. Wall time of ``cnnforge compile unet-large --ptq`` (no ``--run``), the plain-torch large U-Net
   (48 x 88 x 88), as a user runs it (a fresh process, imports included).
2. The seed-001 U-Net (``unet-voc``, 3 x 64 x 64, ``--weight-bits auto`` for MAX78000) compiled
   to C, built with ``cc -std=c99 ... -O2``, one inference timed over ``--runs`` runs on one
   core: time per inference and MAC/s, side by side with the bit-exact simulator (PyTorch, same
   machine) and the 1 GMAC/s target. Prints figures and ratios; asserts nothing.

    python benchmarks/compile.py [--runs 20] [--skip-wall]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from cnnforge.api.targets import compile_model
from cnnforge.c_text import run_exe
from cnnforge.pipeline import CompileOptions
from cnnforge.sim import simulate
from cnnforge.targets.max7800x.c.build import compile_c

TARGET_MACS_PER_S = 1e9


def compile_wall_time(tmp: Path) -> float:
    """Seconds for ``cnnforge compile unet-large --ptq`` in a fresh process."""
    sample = tmp / "large.npy"
    np.save(sample, np.random.default_rng(0).integers(-128, 128, (48, 88, 88)).astype(np.int8))
    cmd = [
        sys.executable,
        "-m",
        "cnnforge",
        "compile",
        "unet-large",
        "--ptq",
        "--sample",
        str(sample),
        "-o",
        str(tmp / "large"),
    ]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def c_inference(tmp: Path, runs: int) -> tuple[float, int, float]:
    """(seconds per C inference, MACs, seconds per simulator inference) for unet-voc."""
    x = np.random.default_rng(0).integers(-128, 128, (3, 64, 64))
    state = compile_model(
        CompileOptions(
            output=tmp / "voc",
            model="unet-voc",
            ptq=True,
            sample=x,
            weight_bits="auto",
            report=False, device="MAX78000"
        )
    )
    exe = tmp / "bench"
    compile_c(tmp / "voc" / "c", exe, extra=(f"-DCNN_BENCH_RUNS={runs}",))
    result = run_exe(exe)
    match = re.search(r"BENCH runs=(\d+) clock_us=(\d+) macs=(\d+)", result.output)
    if not result.passed or match is None:
        raise SystemExit(f"C benchmark failed: {result.output}")
    c_seconds = int(match[2]) / 1e6 / int(match[1])
    torch.set_num_threads(1)
    simulate(state.network, x[None], device=None)  # warm-up
    start = time.perf_counter()
    for _ in range(3):
        simulate(state.network, x[None], device=None)
    sim_seconds = (time.perf_counter() - start) / 3
    return c_seconds, int(match[3]), sim_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="C inferences to time")
    parser.add_argument("--skip-wall", action="store_true", help="skip the compile wall time")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.skip_wall = 1, True
    with tempfile.TemporaryDirectory(prefix="cnnforge-bench-") as name:
        tmp = Path(name)
        if not args.skip_wall:
            wall = compile_wall_time(tmp)
            print(f"cnnforge compile unet-large --ptq (no --run): {wall:.2f} s wall")
        c_s, macs, sim_s = c_inference(tmp, args.runs)
    rate = macs / c_s
    print(f"seed-001 U-Net (unet-voc), {macs:,} MACs per inference, one core:")
    print(f"  {'':28s} {'ms/inference':>14s} {'GMAC/s':>8s}")
    print(f"  {'generated C (-O2)':28s} {c_s * 1e3:14.2f} {rate / 1e9:8.2f}")
    print(f"  {'simulator (PyTorch, 1 thr)':28s} {sim_s * 1e3:14.2f} {macs / sim_s / 1e9:8.2f}")
    print(
        f"  ratios: simulator time / C time = {sim_s / c_s:.2f}; "
        f"C rate / 1 GMAC/s target = {rate / TARGET_MACS_PER_S:.2f}"
    )


if __name__ == "__main__":
    main()
