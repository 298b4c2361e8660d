"""The vendor tool's own test suite, on both parts: what the vendor accepts and what cnnforge does.

Every ``arch: test`` configuration of the vendor repository (``tests/test-*.yaml``, sample
weights, biases and inputs in ``tests/``) becomes a vendor pair (YAML + checkpoint holding the
same numbers, tests/support/vendor_suite.py), run through the vendor tool on the MAX78000 and the
MAX78002 (``--fifo`` for its FIFO cases). For each pair the vendor accepts, one row:

- ``reads``: cnnforge imports the pair (targets/max7800x/ai8x.py) and its plan validates;
- ``sim``: cnnforge's simulator on the sample = the vendor's known answer;
- ``state``: cnnforge's firmware for the pair leaves the vendor firmware's state, word for word
  (registers, kernel, bias and data memory, input, FIFO writes, known-answer table);
- ``decode``: the vendor's folder read back (``cnnforge inspect``: decoded, recovered) and
  simulated on its own sample = its own known answer (``simulate --firmware``);
- ``own``: cnnforge's own folder read back the same way = its own known answer;

or the first column's one-line reason. Then a table per family and the totals.

    python benchmarks/vendor_tests.py [--device MAX78000] [--only NAME|FAMILY ...]
        [--work /tmp/vendor_tests] [--jobs 1] [--table] [--capture NAME ...]
    python benchmarks/vendor_tests.py --demos   (the demo networks without a checkpoint)
    python benchmarks/vendor_tests.py --handmade   (configurations neither has: depthwise_multipass)
    python benchmarks/vendor_tests.py --smoke   (the stored subset, no vendor tool needed)

The vendor tool's outputs are kept in ``--work`` (default /tmp/vendor_tests), so a rerun only
runs cnnforge; ``--table`` prints the table of the rows already measured. ``--capture`` stores
the named (device-name) cases for CI in tests/data/vendor_tests (numbers only: the pair's
weights, the sample, the known answer and the vendor firmware's state image).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.vendor_store import (
    ARCH,
    STORE,
    StoredCase,
    load_image,
    load_stored,
    save_image,
    save_stored,
)
from tests.support.vendor_suite import Pair, SuiteCase, demo_pair, make_pair, sample_path, suite
from vendor_oracle import DEVICES, RUNNER

COLUMNS = ("reads", "sim", "state", "decode", "own")


@dataclass
class Row:
    """One (configuration, part): the vendor's answer, then each column's yes / NO / -."""

    device: str
    name: str
    family: str
    vendor: str = "-"
    reads: str = "-"
    sim: str = "-"
    state: str = "-"
    decode: str = "-"
    own: str = "-"
    note: str = ""

    def line(self) -> str:
        cols = " ".join(f"{getattr(self, c):6}" for c in ("vendor", *COLUMNS))
        return f"{self.device:9} {self.name:42} {self.family:12} {cols} {self.note}"


def header() -> str:
    cols = " ".join(f"{c:6}" for c in ("vendor", *COLUMNS))
    return f"{'device':9} {'configuration':42} {'family':12} {cols} note"


# --- the vendor tool (cached) -----------------------------------------------------------------


def vendor_run(yaml: Path, ckpt: Path, sample: Path, device: str, flags: tuple[str, ...],
               out: Path) -> str:  # fmt: skip
    """Run the vendor tool once into ``out`` (kept: a rerun with the same flags reuses it);
    "" when it wrote a known answer, else its last ERROR line."""
    stamp = out.with_name(out.name + ".flags")
    log = out.with_name(out.name + ".log")
    if stamp.is_file() and stamp.read_text() == " ".join(flags) and log.is_file():
        return _vendor_note(out, log)
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["nice", "bash", str(RUNNER), device, str(yaml), str(ckpt), str(sample), str(out), *flags]
    subprocess.run(cmd, capture_output=True, text=True, check=False)
    stamp.write_text(" ".join(flags))
    return _vendor_note(out, log)


def _vendor_note(out: Path, log: Path) -> str:
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    errors = [ln for ln in text.splitlines() if ln.startswith("ERROR")]
    if (out / "net" / "expected.npy").is_file() and not errors:
        return ""
    tail = errors or [ln for ln in text.splitlines() if ln.strip()] or ["vendor tool failed"]
    return tail[-1].strip()[:160]


# --- cnnforge on one pair ---------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    text = re.sub(r"/\S*/(pair\.yaml|pair-q\.pth\.tar)", r"\1", " ".join(str(exc).split()))
    return f"{type(exc).__name__}: {text}"[:240]


def measure(case: SuiteCase, device: str, work: Path, izer: Path) -> Row:
    """One row: the vendor tool on the configuration's pair (cached), then cnnforge's columns."""
    row = Row(device, case.name, case.family)
    try:
        pair = make_pair(case, izer)
    except Exception as exc:
        row.vendor, row.note = "NO", f"no pair: {_reason(exc)}"
        return row
    return measure_pair(pair, case.name, sample_path(case, izer), case.flags(device), work, row)


def measure_pair(
    pair: Pair, name: str, sample: Path, flags: tuple[str, ...], work: Path, row: Row
) -> Row:
    """``row`` for ``pair``: the vendor tool on it (cached under ``work``), then cnnforge's
    columns."""
    device = row.device
    yaml, ckpt = pair.save(work / "pairs" / name, name)
    out = work / device / name
    note = vendor_run(yaml, ckpt, sample, device, flags, out)
    meta = {"sample": str(sample), "flags": list(flags), "family": row.family}
    out.with_name(name + ".case.json").write_text(json.dumps(meta))
    if note:
        row.vendor, row.note = "NO", note
        return row
    row.vendor = "yes"
    stored = StoredCase(device, name, pair.yaml_text, dict(pair.state), np.load(sample),
                        np.load(out / "net" / "expected.npy"), flags, arch=pair.arch)  # fmt: skip
    return check_case(stored, out / "net", row)


class _Columns:
    """A row's columns filled one check at a time: a check returns "" (yes) or why not (NO);
    what it raises is its reason."""

    def __init__(self, row: Row) -> None:
        self.row = row
        self.notes: dict[str, str] = {}

    def check(self, col: str, fn: Callable[[], str]) -> bool:
        try:
            why = fn()
        except Exception as exc:
            why = _reason(exc)
        setattr(self.row, col, "NO" if why else "yes")
        if why:
            self.notes[col] = why
        return not why

    def done(self) -> Row:
        self.row.note = "; ".join(f"{c}: {self.notes[c]}" for c in COLUMNS if c in self.notes)
        return self.row


def check_case(case: StoredCase, vendor_folder: Path | None, row: Row) -> Row:
    """cnnforge's columns for one pair: ``vendor_folder`` the vendor's firmware (None: the
    case's stored state image stands for it)."""
    from cnnforge.targets.max7800x.firmware.interpret import read_setup
    from cnnforge.targets.max7800x.firmware.writer import write_folder
    from cnnforge.targets.max7800x.firmware_read import decode_firmware_image

    cols = _Columns(row)
    got: dict = {}

    def vendor() -> tuple:
        if "vendor" not in got:
            got["vendor"] = (vendor_image(vendor_folder, case.device) if vendor_folder
                             else (case.image, case.records))  # fmt: skip
        return got["vendor"]

    def read() -> str:
        got["model"] = case.read(Path(tmp) / "pair")
        got["outputs"] = case.outputs(got["model"])
        return ""

    def state() -> str:
        folder = Path(tmp) / "ours"
        write_folder(case.firmware(got["model"], got["outputs"]), folder)
        got["ours"] = read_setup(folder, case.device)
        diffs = got["ours"][0].differences(vendor()[0], limit=1)
        return diffs[0] if diffs else ""

    with tempfile.TemporaryDirectory(prefix="vendor_tests_") as tmp:
        cols.check("decode", lambda: _self_test(decode_firmware_image(*vendor())))
        if cols.check("reads", read):
            cols.check("sim", lambda: case.difference(got["model"], got["outputs"]))
            cols.check("state", state)
            if "ours" in got:
                cols.check("own", lambda: _self_test(decode_firmware_image(*got["ours"])))
    return cols.done()


def _self_test(decoded) -> str:
    """"" when the decoded firmware, simulated on its own sample, holds its known answer."""
    from cnnforge.targets.max7800x.firmware.selftest import run_self_test

    _, test = run_self_test(decoded)
    if test is None or not test.checked:
        return "no known answer"
    return "" if test.passed else f"FAIL {test.failed}/{test.checked} words, first {test.first}"


def vendor_image(folder: Path, device: str):
    """The vendor folder's set-up state and kernel records (read once, kept next to it)."""
    from cnnforge.targets.max7800x.firmware.interpret import read_setup

    cache = folder.parent / "image.npz"
    if cache.is_file() and cache.stat().st_mtime >= (folder / "cnn.c").stat().st_mtime:
        image, records = load_image(cache)
        if image.start.size or "cnn_start" not in (folder / "cnn.c").read_text():
            return image, records  # (an image kept before cnn_start's stores were read: again)
    image, records = read_setup(folder, device)
    save_image(cache, image, records)
    return image, records


def _measure_safe(args: tuple[SuiteCase, str, Path, Path]) -> Row:
    case, device, work, izer = args
    try:
        row = measure(case, device, work, izer)
    except Exception as exc:
        row = Row(device, case.name, case.family, note=f"benchmark: {_reason(exc)}")
        traceback.print_exc()
    (work / device).mkdir(parents=True, exist_ok=True)
    (work / device / f"{case.name}.row.json").write_text(json.dumps(asdict(row)))
    return row


# --- tables -----------------------------------------------------------------------------------


def family_table(rows: Iterable[Row]) -> str:
    """Per family and part: configurations, vendor-accepted, then each column's yes count."""
    rows = list(rows)
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.family, r.device), []).append(r)
        groups.setdefault(("all", r.device), []).append(r)
    lines = [f"| family | part | configurations | vendor accepts | {' | '.join(COLUMNS)} |",
             "|---|---|---:|---:|" + "---:|" * len(COLUMNS)]  # fmt: skip
    for (fam, dev), rs in sorted(groups.items(), key=lambda kv: (kv[0][0] == "all", kv[0])):
        ok = [r for r in rs if r.vendor == "yes"]
        cells = [f"{sum(getattr(r, c) == 'yes' for r in ok)}" for c in COLUMNS]
        lines.append(f"| {fam} | {dev} | {len(rs)} | {len(ok)} | {' | '.join(cells)} |")
    ok = [r for r in rows if r.vendor == "yes"]
    if ok:
        shares = ", ".join(
            f"{c} {100 * sum(getattr(r, c) == 'yes' for r in ok) / len(ok):.1f} %" for c in COLUMNS
        )
        lines.append(f"\nof {len(ok)} pairs the vendor accepts: {shares}")
    return "\n".join(lines)


def chosen(cases: list[SuiteCase], only: list[str] | None) -> list[SuiteCase]:
    if not only:
        return cases
    return [c for c in cases if c.name in only or c.family in only]


def saved_rows(work: Path, devices: Iterable[str], cases: list[SuiteCase]) -> list[Row]:
    rows = []
    for device in devices:
        for case in cases:
            path = work / device / f"{case.name}.row.json"
            if path.is_file():
                rows.append(Row(**json.loads(path.read_text())))
    return rows


SHAPES = Path(__file__).with_name("vendor_demo_shapes.json")


def run_demos(izer: Path, work: Path, devices: list[str], only: list[str] | None) -> int:
    """The demos of the vendor's lists without a checkpoint in its repository: random integer
    weights of the shapes of the vendor's model (vendor_demo_shapes.json: the weight keys of
    each model as its training repository builds it), with each demo's own flags."""
    from vendor_oracle import demos

    shapes = json.loads(SHAPES.read_text(encoding="utf-8"))
    rows = []
    print(header(), flush=True)
    for device in devices:
        for demo in demos(izer, device):
            if demo.checkpoint.is_file() or (only and demo.prefix not in only):
                continue
            row = Row(device, demo.prefix, "demo")
            try:
                pair = demo_pair(demo.yaml, shapes)
            except Exception as exc:
                row.vendor, row.note = "NO", f"no pair: {_reason(exc)}"
            else:
                row = measure_pair(pair, demo.prefix, demo.sample, demo.flags, work, row)
            print(row.line(), flush=True)
            rows.append(row)
    print(family_table(rows))
    return 0


def depthwise_multipass(channels: int = 70) -> tuple[str, Pair, np.ndarray]:
    """A depthwise layer over more channels than its processors hold, in passes that round them
    up (the vendor: 70 channels, 2 passes, 36 processors), between layers whose biases share a
    quadrant (so the producer's channel count is exact): neither the suite nor a stored demo
    has one (the MAX78002 MobileNetV2 does, too large to store)."""
    procs = f"0x{(1 << 4 * -(-channels // 8)) - 1:016x}"  # 2 passes: half, in fours
    text = (
        f"arch: {ARCH}\ndataset: test\nlayers:\n"
        f"  - {{processors: 0x7, output_processors: {procs}, out_offset: 0x2000, operation: conv2d,"
        " kernel_size: 3x3, pad: 1, activate: ReLU, data_format: HWC, bias_group: 0}\n"
        f"  - {{processors: {procs}, output_processors: {procs}, out_offset: 0, operation: conv2d,"
        f" kernel_size: 3x3, pad: 1, groups: {channels}, activate: ReLU}}\n"
        f"  - {{processors: {procs}, output_processors: 0x3ff, out_offset: 0x2000, operation: "
        "conv2d, kernel_size: 1x1, pad: 0, activate: None, bias_group: 0}\n"
    )
    rng = np.random.default_rng(1)
    state: dict = {}
    shapes = (
        ((channels, 3, 3, 3), True),
        ((channels, 1, 3, 3), False),
        ((10, channels, 1, 1), True),
    )
    for k, (shape, bias) in enumerate(shapes):
        state[f"l{k}.op.weight"] = rng.integers(-128, 128, shape).astype(np.float32)
        if bias:
            state[f"l{k}.op.bias"] = (rng.integers(-128, 128, shape[0]) * 128).astype(np.float32)
        state[f"l{k}.output_shift"] = np.array([-3.0 if k else -1.0], np.float32)
        state[f"l{k}.weight_bits"] = np.full(1, 8, np.float32)
    sample = np.random.default_rng(2).integers(-128, 128, (3, 8, 8)).astype(np.int64)
    return f"depthwise-multipass-{channels}ch", Pair(text, state), sample


def run_handmade(work: Path) -> int:
    """The hand-made configurations (depthwise_multipass) on the MAX78002, as the suite's."""
    print(header(), flush=True)
    name, pair, x = depthwise_multipass()
    sample = work / "pairs" / name / "sample.npy"
    sample.parent.mkdir(parents=True, exist_ok=True)
    np.save(sample, x)
    row = measure_pair(pair, name, sample, (), work, Row("MAX78002", name, "depthwise"))
    print(row.line(), flush=True)
    return 0


def capture(names: list[str], work: Path) -> None:
    """Store the named cases (DEVICE-NAME, measured before: their pair, sample and vendor
    folder are in ``work``; a demo: demos/DEVICE-NAME) for CI, each with the columns it passes
    (tests/support/vendor_store.py; tests/targets/max7800x/test_vendor_suite.py)."""
    import torch

    for full in names:
        sub, _, full = full.rpartition("/")
        device, name = full.split("-", 1)
        base = work / sub if sub else work
        meta = json.loads((base / device / f"{name}.case.json").read_text())
        doc = torch.load(base / "pairs" / name / f"{name}-q.pth.tar", weights_only=True)
        state = {k: v.numpy() for k, v in doc["state_dict"].items()}
        yaml_text = (base / "pairs" / name / f"{name}.yaml").read_text(encoding="utf-8")
        out = base / device / name / "net"
        image, records = vendor_image(out, device)
        stored = StoredCase(device, name, yaml_text, state, np.load(meta["sample"]),
                            np.load(out / "expected.npy"), tuple(meta["flags"]), image, records,
                            doc["arch"], meta["family"])  # fmt: skip
        row = check_case(stored, None, Row(device, name, meta["family"], vendor="yes"))
        stored.expect = tuple(c for c in COLUMNS if getattr(row, c) == "yes")
        path = save_stored(stored)
        print(f"{row.line()}\n  stored {path.name}: {path.stat().st_size // 1024} KiB, "
              f"expects {', '.join(stored.expect)}")


def smoke() -> int:
    """The stored subset through cnnforge's columns (the stored state stands for the vendor's
    folder): the table's code path without the vendor tool."""
    print(header())
    rows = []
    for path in sorted(STORE.glob("*.npz"))[:2]:
        case = load_stored(path)
        row = check_case(case, None, Row(case.device, case.name, case.family, vendor="yes"))
        print(row.line(), flush=True)
        rows.append(row)
    print(family_table(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=DEVICES, action="append")
    parser.add_argument("--only", action="append", help="configuration or family (repeatable)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/vendor_tests"))
    parser.add_argument("--jobs", type=int, default=1, help="processes (1-2: CPU is scarce)")
    parser.add_argument("--table", action="store_true", help="the rows already measured")
    parser.add_argument("--capture", nargs="+", metavar="DEVICE-NAME", help="store for CI")
    parser.add_argument("--demos", action="store_true", help="the demos without a checkpoint")
    parser.add_argument("--smoke", action="store_true", help="the stored subset only")
    parser.add_argument("--handmade", action="store_true", help="the hand-made configurations")
    args = parser.parse_args(argv)
    if args.smoke:
        return smoke()
    izer = Path(os.environ.get("IZER", "/tmp/izer"))
    if not (izer / "ai8xize.py").is_file() or not RUNNER.is_file():
        print(f"the vendor tool is not set up at {izer} (IZER); nothing to do")
        return 0
    if args.demos:
        return run_demos(izer, args.work / "demos", list(args.device or DEVICES), args.only)
    if args.handmade:
        return run_handmade(args.work / "handmade")
    if args.capture:
        capture(args.capture, args.work)
        return 0
    devices = list(args.device or DEVICES)
    cases = chosen(suite(izer), args.only)
    if args.table:
        rows = saved_rows(args.work, devices, cases)
        print(header())
        for r in rows:
            print(r.line())
        print(family_table(rows))
        return 0
    todo = [(c, d, args.work, izer) for d in devices for c in cases]
    print(header(), flush=True)
    rows = []
    jobs = max(1, min(args.jobs, 2))
    with ProcessPoolExecutor(jobs) as pool:
        for row in pool.map(_measure_safe, todo):
            print(row.line(), flush=True)
            rows.append(row)
    print(family_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
