"""Vendor checkpoint import and export are inverses (docs/hardware/arithmetic.md R1.6; hypothesis).

The bias scaling on its own, then whole checkpoints: the vendor's mnist pair with its integers
replaced by random ones (weights in each layer's width, bias-memory values, shifts in range,
widths 8/4/2/1) imports and exports back to the same state_dict entries.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cnnforge.arithmetic import (
    BIAS_MAX,
    BIAS_MIN,
    SHIFT_MAX,
    SHIFT_MIN,
    bias_from_checkpoint,
    bias_to_checkpoint,
    implicit_shift,
    weight_range,
)
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.ai8x_checkpoint_writer import checkpoint_dict

BITS = (8, 4, 2, 1)


@given(
    bits=st.sampled_from((0, *BITS)),
    bias=st.lists(st.integers(BIAS_MIN, BIAS_MAX), min_size=1, max_size=16),
)
def test_bias_scaling_is_inverse(bits: int, bias: list[int]) -> None:
    stored = bias_to_checkpoint(bias, bits)
    assert stored.dtype == np.float32
    assert bias_from_checkpoint(stored, bits).tolist() == bias
    assert np.array_equal(bias_to_checkpoint(bias_from_checkpoint(stored, bits), bits), stored)


def _randomized(state: dict, seed: int, bits_of: dict[str, int]) -> dict:
    """The vendor state_dict with random integers in every weight layer's range."""
    rng = np.random.default_rng(seed)
    out = dict(state)
    for module, bits in bits_of.items():
        lo, hi = weight_range(bits)
        shape = tuple(state[f"{module}.op.weight"].shape)
        out[f"{module}.op.weight"] = torch.from_numpy(
            rng.integers(lo, hi + 1, shape).astype(np.float32)
        )
        bias = rng.integers(BIAS_MIN, BIAS_MAX + 1, shape[0])
        out[f"{module}.op.bias"] = torch.from_numpy(bias_to_checkpoint(bias, bits))
        shift = int(rng.integers(SHIFT_MIN, SHIFT_MAX + 1)) - implicit_shift(bits)
        shift = max(SHIFT_MIN - implicit_shift(bits), min(SHIFT_MAX - implicit_shift(bits), shift))
        out[f"{module}.output_shift"] = torch.tensor([float(shift)])
        for key in ("weight_bits", "bias_bits"):
            out[f"{module}.{key}"] = torch.tensor([float(bits)])
    return out


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 2**31), widths=st.lists(st.sampled_from(BITS), min_size=5, max_size=5))
def test_checkpoint_export_of_import_is_identity(
    ai8x_data: Path, seed: int, widths: list[int]
) -> None:
    ckpt = ai8x_data / "trained" / "ai85-mnist-qat8-q.pth.tar"
    doc = torch.load(ckpt, map_location="cpu", weights_only=False)
    modules = sorted({k.split(".")[0] for k in doc["state_dict"]})
    state = _randomized(doc["state_dict"], seed, dict(zip(modules, widths, strict=True)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.pth.tar"
        torch.save({"arch": doc["arch"], "epoch": doc["epoch"], "state_dict": state}, path)
        model = read_ai8x(ai8x_data / "networks" / "mnist-chw-ai85.yaml", path, device="MAX78000")
    again = checkpoint_dict(model.network, modules=dict(model.modules))["state_dict"]
    for module in modules:
        for key in ("op.weight", "op.bias", "output_shift", "weight_bits", "bias_bits"):
            name = f"{module}.{key}"
            assert torch.equal(again[name], state[name].to(torch.float32)), name
