"""The vendor tool's firmware, run on the host: state images of every vendor demo (and compare).

For every demo of ``gen-demos-<device>.sh`` whose checkpoint is present (the runs of
vendor_oracle.py, with each demo's own flags), runs the vendor tool once (or reuses its output in
``--keep``), builds the firmware it wrote for the host and runs its accelerator set-up
(cnnforge.targets.max7800x.firmware.hostrun), and with ``--capture`` stores the state image as
numbers in tests/data/firmware_state/<device>-<prefix>.npz. Without ``--capture`` it compares
with the stored images. One row per demo: state words, input words, known-answer words, equal.

    python benchmarks/firmware_states.py [--device MAX78000] [--only mnist|fifo|own|own:MODEL]
                                         [--only cases|cases:NAME] [--keep DIR] [--reuse]
                                         [--capture]
    python benchmarks/firmware_states.py --ours   (--smoke: the mnist demo only)
    python benchmarks/firmware_states.py --roundtrip [--device D] [--only mnist] [--keep DIR]

``--roundtrip`` (issue 26, needs the vendor tool): per demo, the vendor tool's own firmware folder
is read back (cnnforge inspect: layers decoded), simulated on its own sample against its own
known answer (simulate --firmware), written as a vendor pair (inspect --yaml + checkpoint), and
that pair run through the vendor tool again: its firmware must leave the same state.

``--ours`` needs no vendor tool: for every stored image of a demo with a golden
(tests/golden/ai8x_demos), cnnforge writes its firmware, builds and runs it on the host and
compares with the stored image; then the demos run with --fifo added (fifo-*.npz),
cnnforge's own plans (own-*.npz, cats-dogs streaming through the FIFO) and the small-network
cases (eltwise-*.npz, stream1x1-*.npz: tests/support/firmware_cases.py). One row per case: the
vendor's state words, input words, FIFO writes, known-answer words, and whether cnnforge's
firmware leaves the same.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.firmware import FIFO_VARIANTS, OPTION_CASES, OWN, own_sample, streamed_yaml
from vendor_oracle import DEVICES, RUNNER, Demo, chosen_demos, demos, run_vendor

from cnnforge.targets.max7800x.firmware.hostrun import HostRunError, StateImage, run_setup

if TYPE_CHECKING:
    from cnnforge.targets.max7800x.firmware.firmware import Firmware
    from cnnforge.targets.max7800x.firmware.selftest import Decoded

STORE = Path(__file__).resolve().parents[1] / "tests" / "data" / "firmware_state"


def own_pair(
    model: str, device: str, shape: tuple[int, ...], flags: tuple[str, ...], folder: Path
) -> tuple[str, str]:
    """compile ``model`` with --ptq --firmware into folder/ours, then the vendor tool on the
    YAML + checkpoint it wrote (with ``flags``) into folder/vendor/net: (error, vendor note)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    sample = folder / "sample.npy"
    np.save(sample, own_sample(shape))
    argv = [sys.executable, "-m", "cnnforge", "compile", model, "--ptq", "--device", device]
    argv += ["--sample", str(sample), "-o", str(folder / "ours"), "--no-report", "--firmware"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return f"compile failed: {proc.stderr.strip()[-120:]}", ""
    demo = Demo(device, model, folder / "ours" / "ai8x" / f"{model}.yaml",
                folder / "ours" / "ai8x" / f"{model}-q.pth.tar", sample, flags)  # fmt: skip
    return "", run_vendor(demo, folder / "vendor", False)[2]


def own_plans(keep: Path, capture: bool, models: list[str] | None = None) -> int:
    """compile each model (of ``models``, default all) with --ptq --firmware, run the vendor tool
    on the YAML + checkpoint it wrote (with the flags its header names), compare the two
    firmwares' host state."""
    bad = 0
    for model, device, shape, flags in OWN:
        if models and model not in models:
            continue
        folder = keep / "own" / model
        error, note = own_pair(model, device, shape, flags, folder)
        head = f"{device:9} {'own ' + model:30}"
        if error:
            print(f"{head} {error}")
            bad += 1
            continue
        vendor = run_setup(folder / "vendor" / "net", device)
        ours = run_setup(folder / "ours" / "firmware", device)
        diffs = ours.differences(vendor, limit=1)
        if capture:
            vendor.save(STORE / f"own-{device}-{model}.npz")
        print(
            f"{head} {len(vendor.state):7} {len(vendor.input):7} {len(vendor.fifo):6} "
            f"{vendor.kat.size:6} {'yes' if not diffs else 'NO':5}  {note or (diffs or [''])[0]}",
            flush=True,
        )
        bad += bool(diffs)
    return bad


def case_runs(keep: Path, capture: bool, names: list[str] | None = None) -> int:
    """The small-network cases (tests/support/firmware_cases.py: element-wise layers, streaming
    1x1 convolutions, depthwise convolutions, ...; ``names``: those only): the vendor tool on
    the pair cnnforge wrote, both firmwares run on the host, compared (``capture``: store the
    vendor's as <case>.npz)."""
    from tests.support.firmware_cases import CASES, case_firmware, vendor_pair

    from cnnforge.targets.max7800x.firmware.writer import write_folder

    bad = 0
    for name, case in CASES.items():
        if names and name not in names:
            continue
        folder = keep / "cases" / name
        shutil.rmtree(folder, ignore_errors=True)
        yaml, ckpt, sample = vendor_pair(name, folder / "pair")
        demo = Demo(case.device, name, yaml, ckpt, sample, case.flags)
        _, _, note = run_vendor(demo, folder / "vendor", False)
        write_folder(case_firmware(name), folder / "ours")
        vendor = run_setup(folder / "vendor" / "net", case.device)
        diffs = run_setup(folder / "ours", case.device).differences(vendor, limit=1)
        if capture:
            vendor.save(STORE / f"{name}.npz")
        print(
            f"{case.device:9} {name.replace(case.device + '-', ''):30} {len(vendor.state):7} "
            f"{len(vendor.input):7} {len(vendor.fifo):6} {vendor.kat.size:6} "
            f"{'yes' if not diffs else 'NO':5}  {note or (diffs or [''])[0]}",
            flush=True,
        )
        bad += bool(diffs)
    return bad


def fifo_variants(izer: Path, keep: Path) -> Iterator[tuple[str, Demo, Path, Path]]:
    """The demos of FIFO_VARIANTS run with --fifo added (some layers made to stream), as
    ``variant_runs`` cases: their state against the stored fifo-<variant>.npz."""
    for name, (demo_name, streamed) in FIFO_VARIANTS.items():
        device, prefix = demo_name.split("-", 1)
        demo = next(d for d in demos(izer, device) if d.prefix == prefix)
        yaml = streamed_yaml(demo.yaml, streamed) if streamed else demo.yaml
        demo = Demo(device, prefix, yaml, demo.checkpoint, demo.sample, (*demo.flags, "--fifo"))
        yield name[9:] + " --fifo", demo, keep / "fifo" / name, STORE / f"fifo-{name}.npz"


def option_runs(izer: Path, keep: Path) -> Iterator[tuple[str, Demo, Path, Path]]:
    """The vendor demos run with other code-generation options (OPTION_CASES) that the demo
    lists do not hold, as ``variant_runs`` cases."""
    for case, (base, extra) in OPTION_CASES.items():
        device, prefix = base.split("-", 1)
        if any(d.prefix == case.split("-", 1)[1] for d in demos(izer, device)):
            continue  # a demo of the lists (mnist-riscv): done above
        demo = next(d for d in demos(izer, device) if d.prefix == prefix)
        demo = Demo(device, case, demo.yaml, demo.checkpoint, demo.sample, (*demo.flags, *extra))
        yield case, demo, keep / device / case, STORE / f"{case}.npz"


def variant_runs(cases: Iterable[tuple[str, Demo, Path, Path]], capture: bool) -> int:
    """Each case (row label, demo with its variant flags, output folder, stored image): run the
    vendor tool and its firmware on the host, then store the image (``capture``) or compare it
    with the stored one. One row each; returns how many differ."""
    bad = 0
    for label, demo, out, stored in cases:
        _, _, note = run_vendor(demo, out, False)
        image = run_setup(out / "net", demo.device)
        if capture:
            image.save(stored)
        diffs = [] if capture else image.differences(StateImage.load(stored), limit=1)
        print(f"{demo.device:9} {label:30} {len(image.state):7} {len(image.input):7} "
              f"{len(image.fifo):6} {image.kat.size:6} {'yes' if not diffs else 'NO':5}  "
              f"{note or (diffs or [''])[0]}", flush=True)  # fmt: skip
        bad += bool(diffs)
    return bad


def ours_table(smoke: bool = False) -> int:
    """cnnforge's firmware, run on the host, against every stored vendor image (``smoke``: the
    MAX78000 mnist demo only)."""
    from tests.support.firmware import demo_firmware, stored, variant_firmware

    from cnnforge.targets.max7800x.firmware.writer import write_folder

    known = sorted(p.stem for p in (STORE.parents[1] / "golden" / "ai8x_demos" / "known").glob("*"))
    known += [c for c in OPTION_CASES if (STORE / f"{c}.npz").is_file()]
    if smoke:
        known = ["MAX78000-mnist"]
    print(f"{'case':34} {'state':>7} {'input':>7} {'fifo':>6} {'kat':>6} {'equal':5}  note")
    bad = 0
    for name in known:
        vendor = stored(name)
        try:
            fw = demo_firmware(name)
        except NotImplementedError as exc:
            print(f"{_head(name, vendor)} {'NO':5}  not written yet: {exc}")
            bad += 1
            continue
        with tempfile.TemporaryDirectory() as tmp:
            write_folder(fw, Path(tmp))
            bad += _ours_row(name, vendor, Path(tmp), fw.device)
    for name in [] if smoke else FIFO_VARIANTS:
        bad += _firmware_row(f"fifo-{name}", variant_firmware(name))
    return (1 if bad else 0) | (0 if smoke else own_table() | case_table())


def _firmware_row(name: str, fw: Firmware) -> bool:
    """cnnforge's firmware ``fw`` written and run on the host against the stored
    ``name``.npz: its --ours row; True when they differ."""
    from cnnforge.targets.max7800x.firmware.writer import write_folder

    vendor = StateImage.load(STORE / f"{name}.npz")
    with tempfile.TemporaryDirectory() as tmp:
        write_folder(fw, Path(tmp))
        return _ours_row(name, vendor, Path(tmp), fw.device)


def case_table() -> int:
    """The small-network cases: cnnforge's firmware run on the host against <case>.npz."""
    from tests.support.firmware_cases import CASES, case_firmware

    return 1 if sum(_firmware_row(name, case_firmware(name)) for name in CASES) else 0


def own_table() -> int:
    """cnnforge's own plans: compile --firmware, run on the host, against the stored image."""
    from cnnforge.api.targets import compile_model
    from cnnforge.pipeline import CompileOptions

    bad = 0
    for model, device, shape, _ in OWN:
        vendor = StateImage.load(STORE / f"own-{device}-{model}.npz")
        with tempfile.TemporaryDirectory() as tmp:
            np.save(Path(tmp) / "x.npy", own_sample(shape))
            options = CompileOptions(output=Path(tmp) / "out", model=model, device=device,
                                     ptq=True, sample=Path(tmp) / "x.npy", report=False,
                                     firmware=True)  # fmt: skip
            compile_model(options)
            folder = Path(tmp) / "out" / "firmware"
            bad += _ours_row(f"own-{device}-{model}", vendor, folder, device)
    return 1 if bad else 0


def _head(name: str, vendor: StateImage) -> str:
    """An --ours row's case and the vendor image's sizes: state, input, FIFO and known-answer
    words."""
    return (
        f"{name:34} {len(vendor.state):7} {len(vendor.input):7} {len(vendor.fifo):6} "
        f"{vendor.kat.size:6}"
    )


def _ours_row(name: str, vendor: StateImage, folder: Path, device: str) -> bool:
    """Run cnnforge's firmware in ``folder`` on the host, print its --ours row against the
    vendor's image; True when they differ."""
    diffs = run_setup(folder, device).differences(vendor, limit=1)
    print(f"{_head(name, vendor)} {'yes' if not diffs else 'NO':5}  {(diffs or [''])[0]}",
          flush=True)  # fmt: skip
    return bool(diffs)


def roundtrip(izer: Path, devices: list[str], only: list[str] | None, keep: Path) -> int:
    """The issue-26 table: firmware | layers decoded | simulate == known answer | YAML round trip
    equal (see the module docstring)."""
    from cnnforge.targets.max7800x.firmware.selftest import run_self_test
    from cnnforge.targets.max7800x.firmware_read import read_firmware

    print(f"{'firmware':40} {'layers':>6} {'known answer':22} {'YAML round trip':16} note")
    bad = 0
    absent = f"{'-':>6} {'-':22} {'-':16} checkpoint absent"
    for demo in chosen_demos(izer, devices, only, lambda d: f"{_name(d):40} {absent}"):
        device = demo.device
        head = f"{_name(demo):40}"
        out = keep / device / demo.prefix
        _, _, note = run_vendor(demo, out, True)
        if not (out / "net" / "cnn.c").is_file():
            print(f"{head} {'-':>6} {'-':22} {'-':16} vendor tool: {note}"[:200])
            continue
        try:
            decoded = read_firmware(out / "net", device)
        except Exception as exc:  # a row per demo, whatever fails
            print(f"{head} {'-':>6} {'NO':22} {'-':16} {type(exc).__name__}: {exc}"[:220])
            bad += 1
            continue
        layers = len(decoded.layers)
        try:
            _, test = run_self_test(decoded)
            kat = f"{'PASS' if test.passed else 'FAIL'} {test.checked - test.failed}/"
            kat += f"{test.checked}"
        except NotImplementedError as exc:
            kat, test = f"- ({exc})"[:22], None
        again = out.parent / f"{demo.prefix}-roundtrip"
        equal, note2 = vendor_again(decoded, out / "net", again, demo)
        bad += equal == "NO" or (test is not None and not test.passed)
        print(f"{head} {layers:6} {kat:22} {equal:16} {note2}"[:240], flush=True)
    if not only or "own" in only:
        bad += own_roundtrip(devices, keep)
    print(f"vendor outputs in {keep}")
    return 1 if bad else 0


def vendor_again(decoded: Decoded, first: Path, again: Path, demo: Demo) -> tuple[str, str]:
    """The read-back firmware ``decoded`` (of the folder ``first``) written as a vendor pair
    (inspect --yaml) and sample into ``again``, run through the vendor tool with the device,
    name and flags of ``demo`` (its own files are not read): ("yes"/"NO", note), "yes" when its
    firmware leaves ``first``'s state (the known-answer table's length set aside:
    --max-checklines is no YAML key)."""
    from cnnforge.cli.inspect import write_pair
    from cnnforge.targets.max7800x.firmware.interpret import read_state

    again.mkdir(parents=True, exist_ok=True)
    yaml_path = again / "decoded.yaml"
    ckpt = write_pair(decoded.network, decoded.plan, yaml_path, demo.prefix.replace("-", "_"))
    sample = again / "sample.npy"
    np.save(sample, decoded.sample())  # read back (FIFO input: load_input's stream)
    pair = Demo(demo.device, demo.prefix, yaml_path, ckpt, sample, demo.flags)
    _, _, note = run_vendor(pair, again / "vendor", False)
    if not (again / "vendor" / "net" / "cnn.c").is_file():
        return "NO", note
    want = read_state(first, demo.device)
    got = read_state(again / "vendor" / "net", demo.device)
    diffs = dataclasses.replace(got, kat=want.kat).differences(want, limit=1)
    if got.kat.tolist() != want.kat.tolist():
        note += f" known-answer table {got.kat.size} vs {want.kat.size} words"
    return ("yes" if not diffs else "NO"), note or (diffs or [""])[0]


def _name(demo: Demo) -> str:
    """The round-trip table's name of a demo: device and prefix."""
    return f"{demo.device} {demo.prefix}"


def own_roundtrip(devices: list[str], keep: Path) -> int:
    """The round trip of cnnforge's own firmware (OWN): compile, read the folder back, simulate
    it on its own sample, write the pair (inspect --yaml), run the vendor tool on the pair (with
    the flags the plan needs): its firmware must leave cnnforge's state."""
    from cnnforge.api.targets import compile_model
    from cnnforge.pipeline import CompileOptions
    from cnnforge.targets.max7800x.firmware.options import FirmwareOptions
    from cnnforge.targets.max7800x.firmware.selftest import run_self_test
    from cnnforge.targets.max7800x.firmware_read import read_firmware

    bad = 0
    for model, device, shape, flags in OWN:
        if device not in devices:
            continue
        folder = keep / "own-roundtrip" / model
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        np.save(folder / "x.npy", own_sample(shape))
        options = CompileOptions(
            output=folder / "ours", model=model, device=device, ptq=True, sample=folder / "x.npy",
            report=False, firmware=True, fifo="--fifo" in flags,
            firmware_options=FirmwareOptions.from_vendor_flags(flags),
        )  # fmt: skip
        compile_model(options)
        decoded = read_firmware(folder / "ours" / "firmware", device)
        _, test = run_self_test(decoded)
        kat = f"{'PASS' if test.passed else 'FAIL'} {test.checked - test.failed}/{test.checked}"
        own = Demo(device, model, folder / "ours", folder / "ours", folder / "x.npy", flags)
        equal, note = vendor_again(decoded, folder / "ours" / "firmware", folder, own)
        bad += equal == "NO" or not test.passed
        head = f"{device + ' own ' + model:40}"
        print(f"{head} {len(decoded.layers):6} {kat:22} {equal:16} {note}"[:240], flush=True)
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=DEVICES, action="append")
    parser.add_argument(
        "--only",
        action="append",
        help="demo prefix, fifo, options, own, own:MODEL, cases or cases:NAME (repeatable)",
    )
    parser.add_argument("--keep", type=Path, help="keep the vendor outputs in this folder")
    parser.add_argument("--reuse", action="store_true", help="reuse the outputs in --keep")
    parser.add_argument("--capture", action="store_true", help="store the images in the repo")
    parser.add_argument("--ours", action="store_true", help="cnnforge's firmware vs the images")
    parser.add_argument("--smoke", action="store_true", help="--ours on the mnist demo only")
    parser.add_argument("--roundtrip", action="store_true", help="decode, simulate, YAML again")
    args = parser.parse_args(argv)
    if args.ours or args.smoke:
        return ours_table(smoke=args.smoke)
    izer = Path(os.environ.get("IZER", "/tmp/izer"))
    if not (izer / "ai8xize.py").is_file() or not RUNNER.is_file():
        print(f"the vendor tool is not set up at {izer} (IZER); nothing to do")
        return 0
    keep = args.keep or Path(tempfile.mkdtemp(prefix="firmware_states_"))
    if args.roundtrip:
        return roundtrip(izer, list(args.device or DEVICES), args.only, keep)
    print(
        f"{'device':9} {'demo':30} {'state':>7} {'input':>7} {'fifo':>6} {'kat':>6} {'equal':5}"
        "  note"
    )
    bad = 0
    absent = f"{'-':>7} {'-':>7} {'-':>6} {'-':>6} {'-':5}  checkpoint absent"
    rows = chosen_demos(
        izer, args.device or DEVICES, args.only, lambda d: f"{d.device:9} {d.prefix:30} {absent}"
    )
    for demo in rows:
        device = demo.device
        head = f"{device:9} {demo.prefix:30}"
        out = keep / device / demo.prefix
        _, _, note = run_vendor(demo, out, args.reuse)
        try:
            image = run_setup(out / "net", device)
        except (HostRunError, FileNotFoundError) as exc:
            print(f"{head} {'-':>7} {'-':>7} {'-':>6} {'-':>6} {'NO':5}  {note or exc}"[:160])
            bad += 1
            continue
        stored = STORE / f"{device}-{demo.prefix}.npz"
        if args.capture:
            STORE.mkdir(parents=True, exist_ok=True)
            image.save(stored)
            equal, note = "-", f"stored {stored.stat().st_size // 1024} KiB"
        elif stored.is_file():
            diffs = image.differences(StateImage.load(stored), limit=1)
            equal, note = ("yes", "") if not diffs else ("NO", diffs[0])
        else:
            equal, note = "-", "no stored image"
        bad += equal == "NO"
        print(
            f"{head} {len(image.state):7} {len(image.input):7} {len(image.fifo):6} "
            f"{image.kat.size:6} "
            f"{equal:5}  {note}",
            flush=True,
        )
    if not args.only or "fifo" in args.only:
        bad += variant_runs(fifo_variants(izer, keep), args.capture)
    own_only = [o.removeprefix("own:") for o in args.only or [] if o.startswith("own:")]
    if not args.only or "options" in args.only:
        bad += variant_runs(option_runs(izer, keep), args.capture)
    if not args.only or "own" in args.only or own_only:
        bad += own_plans(keep, args.capture, own_only)
    case_only = [o.removeprefix("cases:") for o in args.only or [] if o.startswith("cases:")]
    if not args.only or "cases" in args.only or case_only:
        bad += case_runs(keep, args.capture, case_only)
    print(f"vendor outputs in {keep}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
