"""The simulator's CUDA form (``engine="gemm"``: unfold + matrix products) equals the int64
engine on random layers, run here on the CPU; on a GPU tests/gpu/test_cuda.py runs ``fast``
(which is this form there) against the same int64 engine."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings

from cnnforge.sim import ENGINES, simulate
from cnnforge.sim.exact import Geometry, _gemm_conv2d
from support.sim_layers import weight_layers


@settings(max_examples=150)
@given(weight_layers())
def test_every_engine_equals_int64_on_random_layers(case) -> None:
    net, x = case
    want = simulate(net, x, engine="int64", device=None).outputs["w"]
    for engine in ENGINES:
        got = simulate(net, torch.from_numpy(x), engine=engine, device=None).outputs["w"]
        assert torch.equal(got, want), engine


def test_gemm_conv_slices_a_large_batch(monkeypatch) -> None:
    """Batches whose unfolded columns exceed the budget go in slices: the same result."""
    from cnnforge.sim import exact

    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.integers(-128, 128, (5, 3, 6, 6))).float()
    w = torch.from_numpy(rng.integers(-128, 128, (4, 3, 3, 3))).float()
    geo = Geometry(stride=(1, 1), padding=(1, 1), dilation=(1, 1))
    whole = _gemm_conv2d(x, w, geo, None)
    monkeypatch.setattr(exact, "UNFOLD_BYTES", 1)  # one image at a time
    assert torch.equal(_gemm_conv2d(x, w, geo, None), whole)
    assert torch.equal(whole, torch.nn.functional.conv2d(x.double(), w.double(), padding=1).float())


def test_shipped_network_gemm_equals_fast_and_int64() -> None:
    """The demo network (qat-unet's shipped checkpoint) on real images, every engine."""
    from cnnforge.frontend.torch_fx import load_model
    from cnnforge.nn import set_quantized_eval
    from cnnforge.training.datasets import ShapesDataset
    from cnnforge.training.demo import shipped_checkpoint
    from cnnforge.training.evaluate import hardware_network

    model = set_quantized_eval(load_model("qat-unet", {}, shipped_checkpoint()))
    net = hardware_network(model, (3, 32, 32))
    data = ShapesDataset("test", 4, 32)
    x = torch.stack([data[i][0] for i in range(4)]).to(torch.int64)
    out = net.outputs[0]
    want = simulate(net, x, engine="int64", device=None).outputs[out]
    for engine in ("fast", "gemm", "float64"):
        assert torch.equal(simulate(net, x, engine=engine, device=None).outputs[out], want)
