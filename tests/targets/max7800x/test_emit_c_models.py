"""The generated C on real networks: every vendor pair in ../shared/data/ai8x, the plain VOC
U-Net and the plain-torch large U-Net. Each is built with the strict -O2 flags and its full
output must equal the simulator's (and, where the vendor published one, the vendor simulator's
known answer).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from cnnforge.c_text import fnv1a32
from cnnforge.ir import Network
from cnnforge.sim import simulate
from cnnforge.targets.max7800x.c import emit_c
from cnnforge.targets.max7800x.c.build import build_and_run

VENDOR = [
    ("mnist-chw-ai85.yaml", "ai85-mnist-qat8-q.pth.tar", "mnist"),
    ("camvid-unet-large.yaml", "ai85-camvid-unet-large-q.pth.tar", None),
    (
        "camvid-unet-large-fakept.yaml",
        "ai85-camvid-unet-large-fakept-q.pth.tar",
        "camvid_unet_fakept",
    ),
]


def _known_answer(network: Network, x: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v.numpy()[0] for k, v in simulate(network, x[None], device=None).outputs.items()}


def _emit_and_run(network: Network, x: np.ndarray, out: Path, *, sanitize: bool = False):
    answer = _known_answer(network, x)
    emitted = emit_c(network, x, answer, out)
    result = build_and_run(out, sanitize=sanitize)
    assert result.passed, result.output
    assert f"{emitted.output_size} of {emitted.output_size} outputs compared" in result.output
    return emitted


@pytest.mark.parametrize(("yaml_name", "ckpt_name", "golden"), VENDOR)
def test_vendor_networks(ai8x_data: Path, tmp_path: Path, yaml_name, ckpt_name, golden) -> None:
    """Every vendor pair: C == simulator; the checksum equals the vendor's known answer's."""
    from cnnforge.targets.max7800x.ai8x import read_ai8x, sample_path

    model = read_ai8x(
        ai8x_data / "networks" / yaml_name,
        ai8x_data / "trained" / ckpt_name,
        overlap_data=True,
        device="MAX78000",
    )
    x = np.load(sample_path(ai8x_data / "networks" / yaml_name, model.dataset))
    x = x.astype(np.int64).reshape(model.network.input_shape)
    emitted = _emit_and_run(model.network, x, tmp_path, sanitize=golden == "mnist")
    if golden is not None:
        gdir = ai8x_data / "golden" / golden
        meta = json.loads((gdir / "meta.json").read_text())
        assert meta["device"] == "MAX78000"
        assert np.array_equal(np.load(gdir / "input.npy").reshape(-1), x.reshape(-1))
        assert emitted.checksum == fnv1a32(np.load(gdir / "expected.npy"))


def _quantized_model(name: str) -> tuple[Network, np.ndarray]:
    from cnnforge.frontend import load_network
    from cnnforge.models import default_input_shape
    from cnnforge.passes.lower import lower_to_hardware
    from cnnforge.quant.ptq import quantize_network

    shape = default_input_shape(name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = load_network(name, shape)
    q = quantize_network(lower_to_hardware(net, device=None).network, device=None)
    x = np.random.default_rng(0).integers(-128, 128, size=shape)
    return q, x


@pytest.mark.parametrize("name", ["unet-voc", "unet-large"])
def test_unets(tmp_path: Path, name: str) -> None:
    """The plain VOC U-Net and the plain-torch large U-Net, lowered and PTQ-quantized."""
    network, x = _quantized_model(name)
    emitted = _emit_and_run(network, x, tmp_path)
    assert emitted.macs > 50_000_000
