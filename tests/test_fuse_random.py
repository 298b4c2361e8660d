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
from test_fuse_reference import run


class Abs(nn.Module):
    def forward(self, x):
        return torch.abs(x)


SIZE = 8  # input height and width

ACTS = {"none": nn.Identity, "relu": nn.ReLU, "abs": Abs}


class Block(nn.Module):
    """One random block: conv (+BN, +activation), pooling, residual add, concat or upsampling."""

    def __init__(self, kind: str, c: int, arg: int) -> None:
        super().__init__()
        self.kind = kind
        if kind == "conv":
            k, stride = (1, 1) if arg % 3 == 0 else (3, 1 + arg % 2)
            self.conv = nn.Conv2d(c, c + arg % 3, k, stride=stride, padding=k // 2)
            self.bn = nn.BatchNorm2d(c + arg % 3)
            self.act = list(ACTS.values())[arg % 3]()
        elif kind == "pool":
            self.pool = nn.MaxPool2d(2) if arg % 2 else nn.AvgPool2d(2)
            relu = arg % 4 == 1  # conv -> max pool -> ReLU (ReLU moves before the pool)
            self.conv = nn.Conv2d(c, c, 1) if relu else nn.Identity()
            self.act = nn.ReLU() if relu else nn.Identity()
        elif kind in ("res", "cat"):
            self.conv = nn.Conv2d(c, c, 3, padding=1)
            self.conv2 = nn.Conv2d(c, c, 1)
            self.act = nn.ReLU() if arg % 2 else nn.Identity()
            self.both = arg % 3 == 0
        else:  # "up"
            self.up = nn.ConvTranspose2d(c, c, 2, 2) if arg % 2 else nn.Upsample(scale_factor=2)

    def forward(self, x):
        if self.kind == "conv":
            return self.act(self.bn(self.conv(x)))
        if self.kind == "pool":
            return self.act(self.pool(self.conv(x)))
        if self.kind == "res":
            return self.act(x + self.conv(x))
        if self.kind == "cat" and self.both:
            return self.act(torch.cat((self.conv(x), self.conv2(x)), 1))
        if self.kind == "cat":
            return torch.cat((self.act(self.conv(x)), x), 1)
        return self.up(x)


class RandomNet(nn.Module):
    def __init__(self, blocks: list[tuple[str, int]], c: int) -> None:
        super().__init__()
        layers = [nn.Conv2d(c, c, 3, padding=1)]  # a stem: the input itself cannot be activated
        size = SIZE
        for kind, arg in blocks:
            if size < 2 and (kind == "pool" or (kind == "conv" and arg % 6 in (1, 5))):
                kind = "res"  # no room left to halve the size
            size = size // 2 if kind == "pool" or (kind == "conv" and arg % 6 in (1, 5)) else size
            size = size * 2 if kind == "up" else size
            block = Block(kind, c, arg)
            layers.append(block)
            if kind == "conv":
                c = c + arg % 3
            elif kind == "cat":
                c = 2 * c
        self.blocks = nn.Sequential(*layers)
        self.head = nn.Conv2d(c, 3, 1)

    def forward(self, x):
        return self.head(self.blocks(x))


def _randomize(model: nn.Module, seed: int) -> nn.Module:
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.2)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
    return model.eval()


BLOCKS = st.lists(
    st.tuples(st.sampled_from(["conv", "pool", "res", "cat", "up"]), st.integers(0, 5)),
    min_size=1,
    max_size=5,
)


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
