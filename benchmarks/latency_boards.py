"""The latency model against inference times measured on boards, side by side.

One row per published figure (tests/data/latency_boards.json, tests/support/latency_boards.py):
the time the vendor's example printed on a MAX78000 (50 MHz CNN clock), cnnforge's predicted
time for the same network and plan (targets/max7800x/latency.py: the summary's "latency"), and
predicted / measured. Streaming networks are marked; docs/firmware.md ("Latency") records the
table.

    python benchmarks/latency_boards.py [--smoke]
    python benchmarks/latency_boards.py --capture SDK   (the 2021 MAX78000 SDK's examples)

``--capture`` reads the example folders of the 2021 MAX78000 SDK (MaximIntegratedAI/
MAX78000_SDK) whose checkpoints the vendor does not ship back with ``cnnforge inspect --yaml``
and stores their geometry with the figures below. ``--smoke``: the first two rows.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.latency_boards import STORE, board_model, boards, stored_entry

from cnnforge.targets.max7800x.metrics import latency

_README = "the example's README in the MSDK (Examples/MAX78000/CNN/{}/README.md)"
_SDK2021 = "the example's README in the 2021 MAX78000 SDK (Examples/MAX78000/CNN/{}/README.md)"
_ISSUE = (
    "a board run reported in Analog-Devices-MSDK/MAX78000_SDK issue 74 (data loading through "
    "the FIFO and inference)"
)
# name -> (published us, source, demo golden or 2021 SDK example folder, fifo)
FIGURES = {
    "mnist": (1410, _README.format("mnist"), "MAX78000-mnist", False),
    "kws20_v3": (1442, _README.format("kws20_v3"), "MAX78000-kws20_v3", False),
    "cifar-10 (2021)": (1712, _SDK2021.format("cifar-10"), "cifar-10", False),
    "cifar-100": (2593, _SDK2021.format("cifar-100"), "cifar-100", False),
    "cats-vs-dogs (CHW)": (2549, _SDK2021.format("cats-vs-dogs"), "cats-vs-dogs", False),
    "rps (FIFO)": (
        2664,
        _SDK2021.format("rps-demo") + ", timed after the FIFOs are loaded",
        "rps",
        True,
    ),
    "cats-dogs --fifo": (12481, _ISSUE, "MAX78000-cats-dogs", True),
    "faceid --fifo": (14001, _ISSUE, "faceid", True),
}


def capture(sdk: Path) -> int:
    """Decode the 2021 SDK's example folders and store every figure's entry."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="latency_boards_") as tmp:
        for name, (us, source, where, fifo) in FIGURES.items():
            entry: dict = {"published_us": us, "source": source}
            if where.startswith("MAX78000-"):
                entry["demo"] = where
            else:
                yaml = Path(tmp) / where / "net.yaml"
                argv = [sys.executable, "-m", "cnnforge", "inspect"]
                argv += [str(sdk / "Examples" / "MAX78000" / "CNN" / where), "--yaml", str(yaml)]
                subprocess.run(argv, check=True, capture_output=True)
                text = yaml.read_text(encoding="utf-8")
                m = re.search(r"# Layer 0: \S+ \(\S+, (\d+) x (\d+)(?: x (\d+))?", text)
                assert m is not None, f"{where}: no input shape in the decoded YAML"
                shape = tuple(int(g) for g in m.groups() if g)
                entry |= stored_entry(yaml, yaml.with_suffix(".pth.tar"), shape, fifo)
            out[name] = entry
    STORE.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"stored {STORE}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capture", type=Path, help="the 2021 MAX78000 SDK (decode, store)")
    parser.add_argument("--smoke", action="store_true", help="the first two rows only")
    args = parser.parse_args(argv)
    if args.capture:
        return capture(args.capture)
    rows = boards()[:2] if args.smoke else boards()
    print(f"{'network':22} {'streams':7} {'measured us':>11} {'predicted us':>12} {'ratio':>6}")
    for board in rows:
        model = board_model(board)
        time = latency(model.network, model.plan)
        streams = "yes" if time.streaming else "no"
        print(
            f"{board.name:22} {streams:7} {board.published_us:11,.0f} {time.time_us:12,.1f} "
            f"{time.time_us / board.published_us:6.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
