"""Board-measured inference times published for the vendor's MAX78000 examples, and the
networks they were measured on (tests/data/latency_boards.json; the latency test and
benchmarks/latency_boards.py).

Each entry: the published time in us (at the 50 MHz CNN clock, the MSDK's timer from
cnn_start to the done interrupt) and where it is published; the network either a demo golden
of tests/golden/ai8x_demos (``demo``) or, for examples whose checkpoint the vendor does not
ship, the network cnnforge reads back from the example's firmware folder (``cnnforge inspect
--yaml``): its YAML and the shapes of its checkpoint's tensors (the weights are zeros here:
the latency model depends on the geometry only).
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from cnnforge.targets.max7800x.ai8x import Ai8xModel, read_ai8x

STORE = Path(__file__).resolve().parents[1] / "data" / "latency_boards.json"
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "ai8x_demos"


@dataclass(frozen=True)
class Board:
    """One published figure and its network."""

    name: str
    published_us: float
    source: str
    entry: dict


def boards() -> list[Board]:
    data = json.loads(STORE.read_text(encoding="utf-8"))
    return [Board(k, v["published_us"], v["source"], v) for k, v in data.items()]


def board_model(board: Board) -> Ai8xModel:
    """The network and plan the figure was measured on (MAX78000)."""
    e = board.entry
    if "demo" in e:
        data = np.load(GOLDEN / "known" / f"{e['demo']}.npz")
        meta = json.loads(str(data["meta"]))
        return read_ai8x(
            GOLDEN / "networks" / meta["yaml"],
            GOLDEN / "trained" / meta["trimmed"],
            data["input"].shape,
            device="MAX78000",
            overlap_data=True,
            fifo="--fifo" in meta["flags"],
        )
    with tempfile.TemporaryDirectory(prefix="cnnforge_board_") as tmp:
        yaml, ckpt = Path(tmp) / "net.yaml", Path(tmp) / "net.pth.tar"
        yaml.write_text(e["yaml"], encoding="utf-8")
        state = {k: torch.zeros(shape) for k, shape in e["shapes"].items()}
        state |= {k: torch.tensor([v]) for k, v in e["scalars"].items()}
        arch = re.search(r"^arch: (\S+)", e["yaml"], re.MULTILINE)
        torch.save({"arch": arch and arch[1], "epoch": 0, "state_dict": state}, ckpt)
        return read_ai8x(
            yaml, ckpt, tuple(e["input"]), device="MAX78000", overlap_data=True, fifo=e["fifo"]
        )


def stored_entry(yaml: Path, checkpoint: Path, input_shape: tuple[int, ...], fifo: bool) -> dict:
    """The JSON entry of a decoded example: its YAML, tensor shapes and scalars."""
    state = torch.load(checkpoint, weights_only=True)["state_dict"]
    return {
        "input": list(input_shape),
        "fifo": fifo,
        "yaml": yaml.read_text(encoding="utf-8"),
        "shapes": {k: list(v.shape) for k, v in state.items() if v.numel() > 1},
        "scalars": {k: float(v.item()) for k, v in state.items() if v.numel() == 1},
    }
