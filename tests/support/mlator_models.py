"""Small networks for ``--mlator`` (tests/targets/max7800x/test_firmware_mlator.py,
benchmarks/mlator_traces.py): cnnforge plans their 8-bit outputs where the vendor's two mlator
sequences agree (``Tiny``: 4 channels in processors 0-3, offset 0; ``Odd``: one channel, a 5x5
frame) and, in ``Two``, one more output where they do not (6 channels in processors 12-17).
Weights and biases are fixed numbers (no random generator), so every run plans and quantizes
them alike."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn


def _fixed(module: nn.Module, seed: int) -> None:
    """Deterministic weights in [-0.25, 0.25): a smooth pattern of the element index."""
    with torch.no_grad():
        for i, p in enumerate(module.parameters()):
            n = torch.arange(p.numel(), dtype=torch.float64)
            values = ((n * (7 + 2 * i) + 3 * seed) % 32 - 16) / 64
            p.copy_(values.reshape(p.shape).to(p.dtype))


class Tiny(nn.Module):
    """3 x 16 x 16 -> 8 channels -> 4 channels (the output, 8-bit)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 4, 1)
        _fixed(self, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c2(torch.relu(self.c1(x)))


class Odd(nn.Module):
    """3 x 5 x 5 -> 8 channels -> 1 channel: 25 pixels, the last mlator read is partial."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 1, 1)
        _fixed(self, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c2(torch.relu(self.c1(x)))


class Two(nn.Module):
    """3 x 16 x 16 -> 8 channels -> two outputs: 4 channels and 6 channels."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 4, 1)
        self.c3 = nn.Conv2d(8, 6, 1)
        _fixed(self, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(self.c1(x))
        return self.c2(y), self.c3(y)


# (model, device, input shape, output layers the vendor's embedded cnn_unload reads through the
# mlator, in layer order, with their channels): the cases of the stored vendor traces
# tests/data/firmware_state/mlator-<device>-<model>.npz (benchmarks/mlator_traces.py --capture).
CASES = (
    ("Tiny", "MAX78000", (3, 16, 16), (("c2", 4),)),
    ("Tiny", "MAX78002", (3, 16, 16), (("c2", 4),)),
    ("Odd", "MAX78000", (3, 5, 5), (("c2", 1),)),
    ("Two", "MAX78000", (3, 16, 16), (("c2", 4), ("c3", 6))),
)
MODELS = Path(__file__)
STORE = Path(__file__).parents[1] / "data" / "firmware_state"


def compile_args(model: str, device: str, shape: tuple[int, ...], sample: Path, out: Path) -> list:
    """``cnnforge compile`` of a case with --mlator (the CLI's words, without the program)."""
    size = ",".join(map(str, shape))
    return ["compile", f"{MODELS}:{model}", "--ptq", "--device", device, "-i", size,
            "--sample", str(sample), "-o", str(out), "--no-report", "--mlator"]  # fmt: skip


def save_trace(path: Path, trace: np.ndarray) -> None:
    """A cnn_unload trace (rows: 0 write / 1 read, address, value) as compressed numbers."""
    addr = trace[:, 1].astype(np.int64)
    np.savez_compressed(
        path,
        kind=trace[:, 0].astype(np.uint8),
        addr_delta=np.diff(addr, prepend=0),
        value=trace[:, 2].astype(np.uint32),
    )


def load_trace(path: Path) -> np.ndarray:
    with np.load(path) as data:
        addr = np.cumsum(data["addr_delta"].astype(np.int64))
        return np.stack([data["kind"].astype(np.int64), addr, data["value"].astype(np.int64)], 1)


def channel_segments(trace: np.ndarray, ctl_off: int = 0x8) -> list[np.ndarray]:
    """The trace cut after each write of ``ctl_off`` (the mlator turned off): one segment per
    channel read through the mlator, in order."""
    rows = enumerate(trace.tolist())
    ends = [i + 1 for i, (kind, _, value) in rows if kind == 0 and value == ctl_off]
    return [trace[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]
