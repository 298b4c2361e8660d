"""Benchmark + oracle: every vendor demo network, the vendor tool's known answer vs cnnforge's.

Reads the demo lists of ai8x-synthesis (``gen-demos-max78000.sh``, ``gen-demos-max78002.sh``),
and for every demo whose checkpoint is present runs the vendor tool once with the demo's own
flags (through ../shared/tools/ai8x-synthesis/run.sh; its simulator's output of the sample is
``expected.npy``), then imports the same YAML + checkpoint with cnnforge, validates the plan
and simulates the sample. One row per demo: import / validate / bit-exact and both wall times.
Runs only where the vendor tool is set up (``IZER``, default /tmp/izer). Asserts nothing.

    python benchmarks/vendor_oracle.py [--device MAX78000] [--only mnist] [--keep DIR] [--reuse]

``--keep DIR`` keeps the vendor outputs (DIR/<device>/<prefix>/net/expected.npy and the log);
``--reuse`` takes them from there instead of running the vendor tool again. ``--capture DIR``
writes the test goldens of tests/targets/max7800x/test_ai8x_demos.py (see
tests/golden/ai8x_demos/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RUNNER = REPO.parent / "shared" / "tools" / "ai8x-synthesis" / "run.sh"
DEVICES = ("MAX78000", "MAX78002")
# Flags of the demo lists that the runner sets itself or that only change what is printed.
_DROPPED = {
    "--test-dir": 1,
    "--prefix": 1,
    "--device": 1,
    "--checkpoint-file": 1,
    "--config-file": 1,
    "--sample-input": 1,
    "--timer": 1,
    "--display-checkpoint": 0,
    "--verbose": 0,
}


@dataclass(frozen=True)
class Demo:
    """One line of a vendor demo list."""

    device: str
    prefix: str
    yaml: Path
    checkpoint: Path
    sample: Path
    flags: tuple[str, ...]  # the demo's own flags, beyond what the runner sets


def demos(izer: Path, device: str) -> list[Demo]:
    """The demos of ``gen-demos-<device>.sh``, in file order."""
    script = izer / f"gen-demos-{device.lower()}.sh"
    out = []
    for line in script.read_text(encoding="utf-8").splitlines():
        if not line.startswith("python ai8xize.py"):
            continue
        words = shlex.split(line.replace("$COMMON_ARGS", "").replace('"$@"', ""), comments=True)
        opts: dict[str, str] = {}
        flags: list[str] = []
        i = 2
        while i < len(words):
            word = words[i]
            if word in _DROPPED:
                if _DROPPED[word]:
                    opts[word] = words[i + 1]
                i += 1 + _DROPPED[word]
                continue
            flags.append(word)
            i += 1
        yaml_path = izer / opts["--config-file"]
        if not yaml_path.is_file():  # MAX78002 cats-dogs names a YAML kept in tests/
            yaml_path = izer / "tests" / yaml_path.name
        sample = opts.get("--sample-input") or f"tests/sample_{_dataset(yaml_path).lower()}.npy"
        out.append(
            Demo(
                device,
                opts["--prefix"],
                yaml_path,
                izer / opts["--checkpoint-file"],
                izer / sample,
                tuple(flags),
            )
        )
    return out


def chosen_demos(
    izer: Path, devices: Iterable[str], only: list[str] | None, absent: Callable[[Demo], str]
) -> Iterator[Demo]:
    """The demos of each device's list in order, those whose prefix ``only`` names (None or
    empty: all): what every table of the benchmarks runs over. A demo whose checkpoint is
    absent is skipped, its table row ``absent(demo)`` printed."""
    for device in devices:
        for demo in demos(izer, device):
            if only and demo.prefix not in only:
                continue
            if not demo.checkpoint.is_file():
                print(absent(demo))
                continue
            yield demo


def _dataset(yaml_path: Path) -> str:
    for line in yaml_path.read_text(encoding="utf-8").splitlines():
        if line.startswith("dataset:"):
            return line.split(":", 1)[1].strip()
    raise ValueError(f"{yaml_path}: no dataset")


def run_vendor(demo: Demo, out: Path, reuse: bool) -> tuple[np.ndarray | None, float, str]:
    """The vendor tool's known answer for the demo's sample, its wall time and a note."""
    expected = out / "net" / "expected.npy"
    if reuse and expected.is_file():
        return np.load(expected), float("nan"), ""
    start = time.perf_counter()
    proc = subprocess.run(
        [
            "bash",
            str(RUNNER),
            demo.device,
            str(demo.yaml),
            str(demo.checkpoint),
            str(demo.sample),
            str(out),
            *demo.flags,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0 or not expected.is_file():
        log = Path(f"{out}.log")
        text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
        errors = [ln for ln in text.splitlines() if ln.startswith("ERROR")] or text.splitlines()
        return None, wall, (errors[-1] if errors else "vendor tool failed")[:100]
    return np.load(expected), wall, ""


def run_ours(demo: Demo) -> dict:
    """cnnforge on the same pair: import, validate the plan, simulate the sample."""
    from cnnforge.errors import CnnforgeError
    from cnnforge.sim import simulate
    from cnnforge.targets.max7800x.ai8x import read_ai8x
    from cnnforge.targets.max7800x.device import get_device
    from cnnforge.targets.max7800x.validate import validate_plan

    row: dict = {"import": "-", "validate": "-", "y": None}
    start = time.perf_counter()
    x = np.load(demo.sample)
    try:
        model = read_ai8x(
            demo.yaml,
            demo.checkpoint,
            x.shape,
            device=demo.device,
            overlap_data="--overlap-data" in demo.flags,
            avg_pool_rounding="--avg-pool-rounding" in demo.flags,
            fifo="--fifo" in demo.flags,
        )
        row["import"] = "ok"
        issues = validate_plan(model.network, model.plan, demo.device)
        row["validate"] = "ok" if not issues else f"{len(issues)} issues"
        if issues:
            row["error"] = issues[0].one_line()
        result = simulate(model.network, x, device=get_device(demo.device))
        row["y"] = result.outputs[model.network.layers[-1].name].numpy()
    except CnnforgeError as exc:
        row["error"] = str(exc)[:160]
    row["wall"] = time.perf_counter() - start
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=DEVICES, action="append")
    parser.add_argument("--only", action="append", help="demo prefix (repeatable)")
    parser.add_argument("--keep", type=Path, help="keep the vendor outputs in this folder")
    parser.add_argument("--reuse", action="store_true", help="reuse the outputs in --keep")
    parser.add_argument("--capture", type=Path, help="write the bit-exact demos as test goldens")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.device, args.only = ["MAX78000"], ["mnist"]
    izer = Path(os.environ.get("IZER", "/tmp/izer"))
    if not (izer / "ai8xize.py").is_file() or not RUNNER.is_file():
        print(f"the vendor tool is not set up at {izer} (IZER); nothing to do")
        return 0
    keep = args.keep or Path(tempfile.mkdtemp(prefix="vendor_oracle_"))
    print(
        f"{'device':9} {'demo':30} {'import':6} {'validate':8} {'bit-exact':9} "
        f"{'vendor s':>8} {'ours s':>7}  note"
    )
    bad = 0
    absent = f"{'-':6} {'-':8} {'-':9} {'-':>8} {'-':>7}  checkpoint absent"
    rows = chosen_demos(
        izer,
        args.device or DEVICES,
        args.only,
        lambda d: f"{d.device:9} {d.prefix:30} {absent} ({d.checkpoint.name})",
    )
    for demo in rows:
        head = f"{demo.device:9} {demo.prefix:30}"
        out = keep / demo.device / demo.prefix
        expected, vendor_s, note = run_vendor(demo, out, args.reuse)
        ours = run_ours(demo)
        exact = "-"
        if expected is not None and ours["y"] is not None:
            y = ours["y"]
            same = y.size == expected.size and np.array_equal(y.reshape(expected.shape), expected)
            exact = "yes" if same else "NO"
            if same and args.capture:
                capture(demo, expected, args.capture, izer)
                capture_outputs(demo, args.capture, out.with_name(f"{demo.prefix}-outputs"))
            if not same:
                note = note or _difference(y, expected)
        note = note or ours.get("error", "")
        if exact != "yes":
            bad += 1
        print(
            f"{head} {ours['import']:6} {ours['validate'][:8]:8} {exact:9} "
            f"{vendor_s:8.1f} {ours['wall']:7.2f}  {note}",
            flush=True,
        )
    if not args.only or "planned" in args.only:
        bad += planned_cats_dogs(keep)
    print(f"vendor outputs in {keep}")
    return 1 if bad else 0


def planned_cats_dogs(keep: Path) -> int:
    """The vendor tool as the client of cnnforge's own plan: ``cnnforge compile cats-dogs --ptq``
    (3x128x128 on MAX78000, which the planner streams), then the vendor tool on the YAML +
    checkpoint it wrote, with the flags the YAML header and the compile notes name."""
    import re

    folder = keep / "planned-cats-dogs"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    sample = folder / "sample.npy"
    np.save(sample, np.random.default_rng(1).integers(-128, 128, (3, 128, 128)))
    start = time.perf_counter()
    argv = [sys.executable, "-m", "cnnforge", "compile", "cats-dogs", "--ptq", "--sample",
            str(sample), "-o", str(folder / "ours"), "--no-report"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    ours_s = time.perf_counter() - start
    head = f"{'MAX78000':9} {'cnnforge-planned cats-dogs':30}"
    if proc.returncode != 0:
        print(f"{head} {'NO':6} {'-':8} {'-':9} {'-':>8} {ours_s:7.2f}  {proc.stderr[-100:]}")
        return 1
    yaml_path = folder / "ours" / "ai8x" / "cats-dogs.yaml"
    notes = json.loads((folder / "ours" / "summary.json").read_text())["notes"]
    text = yaml_path.read_text(encoding="utf-8").split("layers:")[0] + " ".join(notes)
    flags = sorted(set(re.findall(r"(--(?:fifo|overlap-data|avg-pool-rounding))\b", text)))
    demo = Demo("MAX78000", "planned", yaml_path, yaml_path.with_name("cats-dogs-q.pth.tar"),
                sample, tuple(flags))  # fmt: skip
    expected, vendor_s, note = run_vendor(demo, folder / "vendor", False)
    y = np.load(folder / "ours" / "sample_output.npz")["fc"]
    same = expected is not None and np.array_equal(y.reshape(expected.shape), expected)
    exact = "yes" if same else "NO"
    streamed = yaml_path.read_text(encoding="utf-8").count("streaming: true")
    print(f"{head} {'ok':6} {'ok':8} {exact:9} {vendor_s:8.1f} {ours_s:7.2f}  vendor flags "
          f"{' '.join(flags)}; {streamed} streaming layers {note}")  # fmt: skip
    return 0 if same else 1


def capture(demo: Demo, expected: np.ndarray, folder: Path, izer: Path) -> None:
    """One demo as a test golden: its YAML, a trimmed checkpoint, the sample and known answer.

    The checkpoint keeps every state_dict key and value, with the integer weights stored as
    int8 and the optimizer state dropped (a tenth of the size; the same network)."""
    import torch

    for sub in ("networks", "trained", "known"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(demo.yaml, folder / "networks" / demo.yaml.name)
    trimmed = folder / "trained" / demo.checkpoint.name.replace(".pth.tar", ".int8.pth.tar")
    if not trimmed.is_file():
        doc = torch.load(demo.checkpoint, map_location="cpu", weights_only=False)  # vendor file
        state = {}
        for key, value in doc["state_dict"].items():
            small = value.to(torch.int8) if key.endswith(".weight") else value
            assert torch.equal(small.to(value.dtype), value), key  # lossless only
            state[key] = small
        keep = {k: doc[k] for k in ("arch", "epoch") if k in doc}
        torch.save({**keep, "state_dict": state}, trimmed)
    x = np.load(demo.sample)
    narrow = expected.astype(np.int32)
    assert np.array_equal(narrow, expected)
    meta = {
        "device": demo.device,
        "prefix": demo.prefix,
        "yaml": demo.yaml.name,
        "checkpoint": demo.checkpoint.name,
        "trimmed": trimmed.name,
        "sample": demo.sample.name,
        "flags": list(demo.flags),
        "expected_shape": list(expected.shape),
        "izer_commit": _commit(izer),
    }
    np.savez_compressed(
        folder / "known" / f"{demo.device}-{demo.prefix}.npz",
        input=x.astype(np.int8),
        expected=narrow,
        meta=np.array(json.dumps(meta)),
    )


def capture_outputs(demo: Demo, folder: Path, work: Path) -> None:
    """For a demo with several ``output: true`` layers (the SSD detectors): the vendor's answer
    for each of them besides the last, one run each with ``--stop-after N``."""
    from dataclasses import replace

    from cnnforge.targets.max7800x.ai8x import read_ai8x

    x = np.load(demo.sample)
    network = read_ai8x(demo.yaml, demo.checkpoint, x.shape, device=demo.device).network
    names = [layer.name for layer in network.layers]
    arrays = {}
    for name in network.outputs:
        k = names.index(name)
        if k < len(names) - 1:
            stop = replace(demo, flags=(*demo.flags, "--stop-after", str(k)))
            y, _, note = run_vendor(stop, work / f"stop{k}", False)
            assert y is not None, note
            arrays[f"layer{k}"] = y.astype(np.int32)
    if arrays:
        (folder / "outputs").mkdir(exist_ok=True)
        np.savez_compressed(folder / "outputs" / f"{demo.device}-{demo.prefix}.npz", **arrays)


def _commit(izer: Path) -> str:
    proc = subprocess.run(
        ["git", "-C", str(izer), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip()


def _difference(y: np.ndarray, expected: np.ndarray) -> str:
    if y.size != expected.size:
        return f"shape {list(y.shape)} vs {list(expected.shape)}"
    diff = y.reshape(expected.shape) != expected
    return f"{int(diff.sum())} of {diff.size} values differ"


if __name__ == "__main__":
    sys.exit(main())
