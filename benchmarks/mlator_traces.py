"""``--mlator``: the vendor's cnn_unload, run on the host, against cnnforge's (trace for trace).

For every case of tests/support/mlator_models.py (a small network, a device): ``cnnforge
compile MODEL --ptq --mlator`` writes the firmware and the vendor pair (ai8x/ YAML +
checkpoint); the vendor tool runs on that pair with ``--mlator`` (vendor_oracle.run_vendor);
both folders' ``cnn_unload`` run on the host (hostrun.run_unload: the known answer in memory,
every access to CTL, the mlator register, layer 0's write pointer base and LCTL2 traced, the
mlator's reads answered by the harness's model). With ``--capture`` the vendor's trace is stored
as numbers in tests/data/firmware_state/mlator-<device>-<model>.npz; without, the stored trace
is the vendor's side. One row per case: the vendor's channels, writes and reads; the writes and
reads compared (the channels of the layers cnnforge reads through the mlator); equal.

    python benchmarks/mlator_traces.py [--capture] [--keep DIR] [--smoke]

``--smoke``: the first case only, against the stored trace (no vendor tool needed).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.firmware import own_sample
from tests.support.mlator_models import (
    CASES,
    STORE,
    channel_segments,
    compile_args,
    load_trace,
    save_trace,
)
from vendor_oracle import Demo, run_vendor

from cnnforge.targets.max7800x.firmware.hostrun import run_unload


def compared(ours: np.ndarray, vendor: np.ndarray, mlator_channels: int) -> tuple[int, int, bool]:
    """(writes, reads) of the vendor's first ``mlator_channels`` channel segments, and whether
    cnnforge's trace equals them."""
    theirs = np.concatenate(channel_segments(vendor)[:mlator_channels] or [vendor[:0]])
    writes = int(np.count_nonzero(theirs[:, 0] == 0))
    return writes, len(theirs) - writes, np.array_equal(ours.astype(np.int64), theirs)


def run_case(case: tuple, keep: Path, capture: bool) -> bool:
    """Compile, run the vendor (``capture``) and both unloads; print the row; equal?"""
    model, device, shape, layers = case
    folder = keep / f"{device}-{model}"
    folder.mkdir(parents=True, exist_ok=True)
    sample = folder / "sample.npy"
    np.save(sample, own_sample(shape))
    args = compile_args(model, device, shape, sample, folder / "ours")
    argv = [sys.executable, "-m", "cnnforge", *args, "--overwrite"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"{device:9} {model:6} compile failed: {proc.stderr.strip()[-160:]}")
        return False
    ours = run_unload(folder / "ours" / "firmware", device).trace
    store = STORE / f"mlator-{device}-{model}.npz"
    if capture:
        ai8x = folder / "ours" / "ai8x"
        demo = Demo(device, model, ai8x / f"{model}.yaml", ai8x / f"{model}-q.pth.tar", sample,
                    ("--mlator",))  # fmt: skip
        _, _, note = run_vendor(demo, folder / "vendor", False)
        if note:
            print(f"{device:9} {model:6} vendor tool failed: {note}")
            return False
        save_trace(store, run_unload(folder / "vendor" / "net", device).trace)
    vendor = load_trace(store)
    # cnnforge reads the first output layer of each case through the mlator (the others: plainly)
    writes, reads, equal = compared(ours, vendor, layers[0][1])
    channels = len(channel_segments(vendor))
    vendor_writes = int(np.count_nonzero(vendor[:, 0] == 0))
    print(f"{device:9} {model:6} {channels:8} {vendor_writes:7} {len(vendor) - vendor_writes:6} "
          f"{writes:8} {reads:7} {'yes' if equal else 'NO':5}")  # fmt: skip
    return equal


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capture", action="store_true", help="run the vendor tool, store")
    parser.add_argument("--keep", type=Path, help="keep the folders here")
    parser.add_argument("--smoke", action="store_true", help="the first case, stored trace")
    args = parser.parse_args(argv)
    cases = CASES[:1] if args.smoke else CASES
    print(f"{'device':9} {'model':6} {'channels':>8} {'writes':>7} {'reads':>6} "
          f"{'cmp w':>8} {'cmp r':>7} equal")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="cnnforge-mlator-") as tmp:
        keep = args.keep or Path(tmp)
        ok = [run_case(case, keep, args.capture and not args.smoke) for case in cases]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    raise SystemExit(main())
