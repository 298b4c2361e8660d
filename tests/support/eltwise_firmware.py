"""The element-wise firmware cases (tests/targets/max7800x/test_firmware_eltwise.py and
benchmarks/firmware_states.py --only eltwise): small residual networks of eltwise_models.py
compiled with ``--ptq --firmware``, and the vendor pair cnnforge writes for one with its
``operation: sub`` layers changed to xor / or (PTQ has no float xor / or). The vendor tool run
on the same YAML + checkpoint + sample is the oracle: its state is tests/data/firmware_state/
eltwise-<case>.npz."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import numpy as np

from cnnforge.pipeline import CompileOptions, compile_model
from cnnforge.targets.max7800x.firmware.firmware import Firmware, build_firmware

from .firmware import own_sample, pair_firmware

MODELS = Path(__file__).with_name("eltwise_models.py")
SHAPE = (3, 16, 16)
# case -> (model class, device, the operations that replace the YAML's `operation: sub` in turn)
ELTWISE: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "MAX78000-add": ("Res", "MAX78000", ()),
    "MAX78002-add": ("Res", "MAX78002", ()),
    "MAX78000-mixed": ("Mixed", "MAX78000", ()),
    "MAX78002-mixed": ("MixedNoBias", "MAX78002", ()),
    "MAX78000-xor-or": ("MixedNoBias", "MAX78000", ("xor", "or")),
    "MAX78002-xor-or": ("MixedNoBias", "MAX78002", ("xor", "or")),
}


@functools.cache
def compiled(model: str, device: str) -> tuple[Firmware, Path]:
    """``compile MODELS:model --ptq --firmware`` on the smooth sample: (firmware, OUT)."""
    folder = Path(tempfile.mkdtemp(prefix=f"cnnforge_eltwise_{model}_{device}_"))
    np.save(folder / "x.npy", own_sample(SHAPE))
    options = CompileOptions(output=folder / "out", model=f"{MODELS}:{model}", device=device,
                             ptq=True, sample=folder / "x.npy", input_shape=SHAPE, report=False,
                             firmware=True)  # fmt: skip
    state = compile_model(options)
    return build_firmware(state.network, state.plan, state.sample, state.answer), folder / "out"


def vendor_pair(case: str, out: Path) -> tuple[Path, Path, Path]:
    """The case's YAML + checkpoint + sample (compiled, the operations changed), in ``out``."""
    model, device, ops = ELTWISE[case]
    src = compiled(model, device)[1]
    text = (src / "ai8x" / f"{model}.yaml").read_text(encoding="utf-8")
    head, *parts = text.split("operation: sub")
    assert len(parts) >= len(ops), case
    text = head + "".join(f"operation: {op}{p}" for op, p in zip(ops, parts, strict=False))
    text += "".join(f"operation: sub{p}" for p in parts[len(ops) :])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{model}.yaml").write_text(text, encoding="utf-8")
    ckpt = out / f"{model}-q.pth.tar"
    ckpt.write_bytes((src / "ai8x" / f"{model}-q.pth.tar").read_bytes())
    np.save(out / "x.npy", own_sample(SHAPE))
    return out / f"{model}.yaml", ckpt, out / "x.npy"


@functools.cache
def eltwise_firmware(case: str) -> Firmware:
    """cnnforge's firmware for the case: the compiled model's, or the changed pair's."""
    model, device, ops = ELTWISE[case]
    if not ops:
        return compiled(model, device)[0]
    yaml, ckpt, sample = vendor_pair(case, Path(tempfile.mkdtemp(prefix="cnnforge_eltwise_")))
    return pair_firmware(yaml, ckpt, np.load(sample), device, ())
