"""Firmware cases of small networks (tests/targets/max7800x/test_firmware_cases.py and
benchmarks/firmware_states.py --only cases): firmware_models.py's networks compiled with
``--ptq --firmware`` (element-wise layers; streaming 1x1 convolutions with ``--fifo``; depthwise
convolutions), and the vendor pair cnnforge writes for one with its ``operation: sub`` layers
changed to xor / or (PTQ has no float xor / or). The vendor tool run on the same YAML +
checkpoint + sample (+ flags) is the oracle: its state is tests/data/firmware_state/<case>.npz.
"""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cnnforge.api.targets import compile_model
from cnnforge.pipeline import CompileOptions
from cnnforge.targets.max7800x.firmware.firmware import Firmware, build_firmware

from .firmware import own_sample, pair_firmware

MODELS = Path(__file__).with_name("firmware_models.py")


@dataclass(frozen=True)
class Case:
    """A network of MODELS on a device, its input shape, vendor flags, and the operations that
    replace the YAML's ``operation: sub`` in turn (a changed vendor pair)."""

    model: str
    device: str
    shape: tuple[int, ...] = (3, 16, 16)
    flags: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()


CASES = {
    "eltwise-MAX78000-add": Case("Res", "MAX78000"),
    "eltwise-MAX78002-add": Case("Res", "MAX78002"),
    "eltwise-MAX78000-mixed": Case("Mixed", "MAX78000"),
    "eltwise-MAX78002-mixed": Case("MixedNoBias", "MAX78002"),
    "eltwise-MAX78000-xor-or": Case("MixedNoBias", "MAX78000", ops=("xor", "or")),
    "eltwise-MAX78002-xor-or": Case("MixedNoBias", "MAX78002", ops=("xor", "or")),
    "eltwise-MAX78000-multipass": Case("MultiPass", "MAX78000"),
    "eltwise-MAX78002-multipass": Case("MultiPass", "MAX78002"),
    "eltwise-MAX78002-multipass-pool": Case("MultiPassPool", "MAX78002"),
    "stream1x1-MAX78000-first": Case("Stream1x1", "MAX78000", (3, 64, 64), ("--fifo",)),
    "stream1x1-MAX78002-first": Case("Stream1x1", "MAX78002", (3, 64, 64), ("--fifo",)),
    "stream1x1-MAX78000-middle": Case("Stream1x1Middle", "MAX78000", (3, 128, 128), ("--fifo",)),
    "stream1x1-MAX78002-after": Case("Stream1x1Middle", "MAX78002", (3, 128, 128), ("--fifo",)),
    "depthwise-MAX78002": Case("Depthwise", "MAX78002"),
    "depthwise-MAX78002-two-quadrants": Case("Depthwise32", "MAX78002"),
}


@functools.cache
def compiled(case: Case) -> tuple[Firmware, Path]:
    """``compile MODELS:model --ptq --firmware [--fifo]`` on the smooth sample: (firmware, OUT)."""
    folder = Path(tempfile.mkdtemp(prefix=f"cnnforge_case_{case.model}_{case.device}_"))
    np.save(folder / "x.npy", own_sample(case.shape))
    options = CompileOptions(output=folder / "out", model=f"{MODELS}:{case.model}",
                             device=case.device, ptq=True, sample=folder / "x.npy",
                             input_shape=case.shape, report=False, firmware=True,
                             fifo="--fifo" in case.flags)  # fmt: skip
    state = compile_model(options)
    fw = build_firmware(state.network, state.target_state.plan, state.sample, state.answer)
    return fw, folder / "out"


def vendor_pair(name: str, out: Path) -> tuple[Path, Path, Path]:
    """The case's YAML + checkpoint + sample (compiled, the operations changed), in ``out``."""
    case = CASES[name]
    src = compiled(Case(case.model, case.device, case.shape, case.flags))[1] / "ai8x"
    text = (src / f"{case.model}.yaml").read_text(encoding="utf-8")
    head, *parts = text.split("operation: sub")
    assert len(parts) >= len(case.ops), name
    ops = [*case.ops, *["sub"] * (len(parts) - len(case.ops))]
    text = head + "".join(f"operation: {op}{p}" for op, p in zip(ops, parts, strict=True))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{case.model}.yaml").write_text(text, encoding="utf-8")
    ckpt = out / f"{case.model}-q.pth.tar"
    ckpt.write_bytes((src / f"{case.model}-q.pth.tar").read_bytes())
    np.save(out / "x.npy", own_sample(case.shape))
    return out / f"{case.model}.yaml", ckpt, out / "x.npy"


@functools.cache
def case_firmware(name: str) -> Firmware:
    """cnnforge's firmware for the case: the compiled model's, or the changed pair's."""
    case = CASES[name]
    if not case.ops:
        return compiled(case)[0]
    yaml, ckpt, sample = vendor_pair(name, Path(tempfile.mkdtemp(prefix="cnnforge_case_")))
    return pair_firmware(yaml, ckpt, np.load(sample), case.device, case.flags)
