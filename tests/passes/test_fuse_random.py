"""Property test: random small PyTorch models, traced and lowered (fold BN -> fuse -> legalize),
compute what the model computes (float64, 1e-5 relative), and every step keeps the IR valid."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.frontend.torch_fx import trace
from cnnforge.passes.lower import LOWERING_STEPS
from cnnforge.passes.verify import verify
from cnnforge.sim.float_eval import run_float
from support.fuse_reference import run
from support.torch_models import BLOCKS, SIZE, RandomNet


def _randomize(model: nn.Module, seed: int) -> nn.Module:
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.2)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
    return model.eval()


@settings(max_examples=30)
@given(blocks=BLOCKS, c=st.integers(1, 4), seed=st.integers(0, 1000))
def test_random_models_lower_exactly(blocks, c, seed) -> None:
    torch.manual_seed(seed)
    model = _randomize(RandomNet(blocks, c), seed)
    net = trace(model, (c, SIZE, SIZE))
    verify(net)
    for _name, step in LOWERING_STEPS:
        net, _ = step(net, None)
        verify(net)
    assert net.is_hardware, [x.label() for x in net if not x.is_hardware]
    x = torch.randn(
        2, c, SIZE, SIZE, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )
    with torch.no_grad():
        expected = model.double()(x)
    (got,) = run(net, x).values()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    (sim_float,) = run_float(net, x).values()
    torch.testing.assert_close(sim_float, expected, rtol=1e-5, atol=1e-6)
