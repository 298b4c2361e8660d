"""Firmware cases of small networks (tests/targets/max7800x/test_firmware_cases.py and
benchmarks/firmware_states.py --only cases): firmware_models.py's networks compiled with
``--ptq --firmware`` (element-wise layers; streaming layers with ``--fifo``; depthwise
convolutions; narrow weights; ``--calcx4``), and the vendor pair cnnforge writes for one,
changed where PTQ or the planner make no such layer: ``operation: sub`` made xor / or, 1-bit
layers made binary, an add folded into the layer after it, every layer reading ahead. The
vendor tool run on the same YAML + checkpoint + sample (+ flags) is the oracle: its state is
tests/data/firmware_state/<case>.npz.
"""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import yaml

from cnnforge.api.targets import compile_model
from cnnforge.pipeline import CompileOptions
from cnnforge.targets.max7800x.firmware.firmware import Firmware, build_firmware
from cnnforge.targets.max7800x.firmware.options import FirmwareOptions

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
    bits: tuple[tuple[str, int], ...] = ()  # --weight-bits per layer
    binary: tuple[str, ...] = ()  # 1-bit layers the pair makes binary (-1/+1; PTQ has none)
    fold: str = ""  # an element-wise layer the pair folds into the layer after it
    options: tuple[str, ...] = ()  # compile's own options (the YAML says what they do)
    read_ahead: bool = False  # the pair reads ahead in every layer, offsets 0 / 0x8000 apart


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
    "depthwise-MAX78002-bias": Case("DepthwiseBias", "MAX78002"),
    "depthwise-MAX78002-mobilenet": Case("MobileNet", "MAX78002"),
    "depthwise-MAX78002-eltwise": Case("AddDepthwise", "MAX78002"),
    "bits-MAX78000-narrow": Case("Narrow", "MAX78000", bits=(("a", 4), ("b", 2), ("c", 1))),
    "bits-MAX78002-narrow": Case("Narrow", "MAX78002", bits=(("a", 4), ("b", 2), ("c", 1))),
    "eltwise-MAX78002-bias-apart": Case("Mixed", "MAX78002"),
    "eltwise-MAX78002-avgpool-reset": Case("ResAvg", "MAX78002"),
    "eltwise-MAX78000-stream": Case("ResStream", "MAX78000", (3, 32, 32), ("--fifo",)),
    "eltwise-MAX78002-stream": Case("ResStream", "MAX78002", (3, 64, 64), ("--fifo",)),
    "eltwise-MAX78000-convtranspose": Case("AddTransposed", "MAX78000", (3, 8, 8), fold="add"),
    "eltwise-MAX78002-convtranspose": Case("AddTransposed", "MAX78002", (3, 8, 8), fold="add"),
    "speedups-MAX78002-calcx4": Case("Speedups", "MAX78002", options=("--calcx4",)),
    "speedups-MAX78002-read-ahead": Case(
        "Speedups", "MAX78002", options=("--calcx4",), read_ahead=True
    ),
    "bits-MAX78002-binary": Case(
        "Narrow", "MAX78002", bits=(("b", 1), ("c", 1)), binary=("b", "c")
    ),
}


@functools.cache
def compiled(case: Case) -> tuple[Firmware, Path]:
    """``compile MODELS:model --ptq --firmware [--fifo] [options]`` on the smooth sample:
    (firmware, OUT)."""
    folder = Path(tempfile.mkdtemp(prefix=f"cnnforge_case_{case.model}_{case.device}_"))
    np.save(folder / "x.npy", own_sample(case.shape))
    options = CompileOptions(
        output=folder / "out",
        model=f"{MODELS}:{case.model}",
        device=case.device,
        ptq=True,
        sample=folder / "x.npy",
        input_shape=case.shape,
        report=False,
        firmware=True,
        fifo="--fifo" in case.flags,
        weight_bits=dict(case.bits) or None,
        firmware_options=FirmwareOptions.from_vendor_flags(case.options),
    )
    state = compile_model(options)
    fw = build_firmware(state.network, state.target_state.plan, state.sample, state.answer)
    return fw, folder / "out"


def vendor_pair(name: str, out: Path) -> tuple[Path, Path, Path]:
    """The case's YAML + checkpoint + sample (compiled; the operations changed, the binary
    layers' weights made -1/+1), in ``out``."""
    case = CASES[name]
    plain = Case(
        case.model, case.device, case.shape, case.flags, (), case.bits, options=case.options
    )
    src = compiled(plain)[1] / "ai8x"
    text = (src / f"{case.model}.yaml").read_text(encoding="utf-8")
    head, *parts = text.split("operation: sub")
    assert len(parts) >= len(case.ops), name
    ops = [*case.ops, *["sub"] * (len(parts) - len(case.ops))]
    text = head + "".join(f"operation: {op}{p}" for op, p in zip(ops, parts, strict=True))
    state = torch.load(src / f"{case.model}-q.pth.tar", weights_only=True)
    for layer in case.binary:  # 1-bit values -1 / 0 become -1 / +1
        w = state["state_dict"][f"{layer}.op.weight"]
        state["state_dict"][f"{layer}.op.weight"] = torch.where(w < 0, -1.0, 1.0)
        name = f"  - name: {layer}\n"
        text = text.replace(name, f"{name}    quantization: binary\n")
    text = fold_eltwise(text, case.fold) if case.fold else text
    text = read_ahead_everywhere(text) if case.read_ahead else text
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{case.model}.yaml").write_text(text, encoding="utf-8")
    ckpt = out / f"{case.model}-q.pth.tar"
    torch.save(state, ckpt)
    np.save(out / "x.npy", own_sample(case.shape))
    return out / f"{case.model}.yaml", ckpt, out / "x.npy"


def fold_eltwise(text: str, name: str) -> str:
    """A vendor YAML with the element-wise layer ``name`` (a layer of its own) folded into the
    layer after it: that layer reads the operands (processors, offset, ``in_sequences``) and
    combines them in flight; later layers' ``in_sequences`` renumbered."""
    cfg = yaml.safe_load(text)
    layers = cfg["layers"]
    k = next(i for i, layer in enumerate(layers) if layer.get("name") == name)
    eltwise, after = layers.pop(k), layers[k]
    after["processors"], after["in_offset"] = eltwise["processors"], eltwise["in_offset"]
    after["eltwise"], after["operands"] = eltwise["operation"], eltwise["operands"]
    after["in_sequences"] = eltwise["in_sequences"]
    for layer in layers[k + 1 :]:
        seq = layer.get("in_sequences")
        if isinstance(seq, list):
            layer["in_sequences"] = [i - (i > k) for i in seq]
    return yaml.safe_dump(cfg, sort_keys=False)


def read_ahead_everywhere(text: str) -> str:
    """A vendor YAML whose layers all read ahead, their input and output 0x8000 bytes apart
    (different memories of the data-memory instance: the vendor tool's rule)."""
    cfg = yaml.safe_load(text)
    for i, layer in enumerate(cfg["layers"]):
        layer["in_offset"], layer["out_offset"] = 0x8000 * (i % 2), 0x8000 * ((i + 1) % 2)
        layer["readahead"] = True
    return yaml.safe_dump(cfg, sort_keys=False)


@functools.cache
def case_firmware(name: str) -> Firmware:
    """cnnforge's firmware for the case: the compiled model's, or the changed pair's."""
    case = CASES[name]
    if not (case.ops or case.binary or case.fold or case.read_ahead):
        return compiled(case)[0]
    yaml, ckpt, sample = vendor_pair(name, Path(tempfile.mkdtemp(prefix="cnnforge_case_")))
    return pair_firmware(yaml, ckpt, np.load(sample), case.device, case.flags)
