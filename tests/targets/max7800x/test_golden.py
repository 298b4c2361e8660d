"""Golden files and known answers for the vendor format.

1. The YAML and checkpoint written for a small hand-built network (every layer kind, concat by
   adjacency, interleaved element-wise operands, an extra output, all-zero weights) must equal
   tests/golden/small.yaml and small.ckpt.txt. Regenerate after an intended change with
   ``CNNFORGE_REGEN_GOLDEN=1 python -m pytest -q tests/targets/max7800x/test_golden.py`` (the
   golden tests then skip) and review the diff.
2. Every vendor network imports and simulates; mnist and the fakept U-Net reproduce the vendor
   simulator's outputs in ../shared/data/ai8x/golden bit for bit, also after a round trip
   through cnnforge's own YAML + checkpoint. A simulator that does not import, or a listed case
   without its known answer, fails; only the absent ../shared data skips (and fails in CI, see
   conftest.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from cnnforge.ir import Activation, EltwiseOp, Network, Pooling, PoolKind
from cnnforge.sim import simulate
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.ai8x_checkpoint_writer import checkpoint_dict
from cnnforge.targets.max7800x.ai8x_yaml_writer import yaml_text
from cnnforge.targets.max7800x.placement import Plan
from support.golden import check_text
from support.paths import TESTS

GOLDEN = TESTS / "golden"


def small_network() -> tuple[Network, Plan]:
    """Nine layers over a 3x16x16 input with a consistent MAX78000 placement."""
    from support.ai8x import Builder, conv, linear, passthrough

    b = Builder((3, 16, 16), np.random.default_rng(0))
    pool2 = Pooling(PoolKind.MAX, (2, 2), (2, 2))
    conv0 = conv(b, "conv0", ("input",), 16)
    b.add(conv0, out_first=16, offsets=(0, 0))
    enc1 = conv(b, "enc1", ("conv0",), 16, pool=pool2, bits=4, shift=1)
    b.add(enc1, in_first=16, gap=1, offsets=(0, 0x1000))
    b.add(
        conv(
            b,
            "res",
            ("conv0",),
            16,
            k=1,
            pad=0,
            pool=pool2,
            bits=2,
            bias=False,
            act=Activation.NONE,
        ),
        in_first=16,
        gap=1,
        offsets=(0, 0x1004),
    )
    b.add(passthrough(b, "sum", ("enc1", "res"), eltwise=EltwiseOp.ADD), offsets=(0x1000, 0x2000))
    b.add(
        conv(b, "up", ("sum",), 16, transpose=True, act=Activation.NONE, shift=-1),
        offsets=(0x2000, 0),
    )
    b.add(conv(b, "cat", ("up", "conv0"), 8, shift=-2), offsets=(0, 0x4000))
    zero = conv(b, "zero", ("cat",), 8, k=1, pad=0)
    zero = dataclasses.replace(
        zero, quant=dataclasses.replace(zero.quant, weights=np.zeros_like(zero.quant.weights))
    )
    b.add(zero, offsets=(0x4000, 0x5000))
    b.add(
        passthrough(b, "pool", ("zero",), pool=Pooling(PoolKind.AVG, (4, 4), (4, 4))),
        offsets=(0x5000, 0x6000),
    )
    b.add(linear(b, "fc", "pool", 10, wide=True), offsets=(0x6000, 0x7000))
    return b.network("small", outputs=("sum", "fc"))


def checkpoint_listing(network: Network) -> str:
    """A diffable text form of the checkpoint: key, dtype, shape, digest, range per tensor."""
    doc = checkpoint_dict(network, arch="small")
    lines = [f"arch: {doc['arch']}", f"epoch: {doc['epoch']}", f"extras: {doc['extras']}"]
    for key, t in doc["state_dict"].items():
        digest = hashlib.sha256(t.numpy().tobytes()).hexdigest()[:16]
        values = t.flatten().tolist()
        shown = values if len(values) <= 4 else f"{min(values):g}..{max(values):g}"
        lines.append(f"{key} {str(t.dtype)[6:]} {list(t.shape)} {digest} {shown}")
    return "\n".join(lines) + "\n"


def test_small_network_yaml_golden():
    network, plan = small_network()
    check_text(GOLDEN / "small.yaml", yaml_text(network, plan, dataset="golden"))


def test_small_network_checkpoint_golden():
    network, _ = small_network()
    check_text(GOLDEN / "small.ckpt.txt", checkpoint_listing(network))


def test_small_network_reimports(tmp_path):
    from cnnforge.targets.max7800x.ai8x_checkpoint_writer import write_checkpoint
    from cnnforge.targets.max7800x.ai8x_yaml_writer import write_yaml
    from support.ai8x import semantic_differences

    network, plan = small_network()
    write_yaml(network, plan, tmp_path / "s.yaml")
    write_checkpoint(network, tmp_path / "s.pth.tar")
    again = read_ai8x(
        tmp_path / "s.yaml", tmp_path / "s.pth.tar", network.input_shape, device="MAX78000"
    )
    assert semantic_differences(network, again.network) == []
    assert again.plan.placements == plan.placements
    assert again.network.layer("zero").quant.weight_bits == 8  # `quantization: 8` kept it


# ---- vendor known answers ----------------------------------------------------------------------

VENDOR = {
    "mnist": ("mnist-chw-ai85.yaml", "ai85-mnist-qat8-q.pth.tar"),
    "unet": ("camvid-unet-large.yaml", "ai85-camvid-unet-large-q.pth.tar"),
    "camvid_unet_fakept": (
        "camvid-unet-large-fakept.yaml",
        "ai85-camvid-unet-large-fakept-q.pth.tar",
    ),
}


def _simulate(network: Network, x: np.ndarray) -> np.ndarray:
    result = simulate(network, torch.from_numpy(x), device=None)
    return result.outputs[network.outputs[-1]].numpy()


def _known_answer(ai8x: Path, case: str) -> tuple[np.ndarray, np.ndarray, dict]:
    folder = ai8x / "golden" / case
    assert folder.is_dir(), f"the known answer for {case} is missing: {folder}"
    meta = json.loads((folder / "meta.json").read_text())
    return np.load(folder / "input.npy"), np.load(folder / "expected.npy"), meta


@pytest.mark.parametrize("case", ["mnist", "camvid_unet_fakept"])
def test_vendor_known_answers(ai8x_data, tmp_path, case):
    x, expected, meta = _known_answer(ai8x_data, case)
    yaml_name, ckpt_name = VENDOR[case]
    assert Path(meta["yaml"]).name == yaml_name
    model = read_ai8x(
        ai8x_data / "networks" / yaml_name, ai8x_data / "trained" / ckpt_name, device="MAX78000"
    )
    got = _simulate(model.network, x)
    assert got.dtype == np.int64
    assert np.array_equal(got.reshape(expected.shape), expected)
    from support.ai8x import roundtrip

    again = roundtrip(model, tmp_path, x.shape)
    assert np.array_equal(_simulate(again.network, x), got)


def test_plain_unet_imports_and_simulates_like_fakept(ai8x_data):
    """The plain U-Net (real passthrough) equals the fakept one (identity 1x1 conv), §8."""
    x, expected, _ = _known_answer(ai8x_data, "camvid_unet_fakept")
    yaml_name, ckpt_name = VENDOR["unet"]
    model = read_ai8x(
        ai8x_data / "networks" / yaml_name, ai8x_data / "trained" / ckpt_name, device="MAX78000"
    )
    got = _simulate(model.network, x)
    assert np.array_equal(got.reshape(expected.shape), expected)
