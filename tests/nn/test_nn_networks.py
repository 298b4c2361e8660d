"""Random small networks of cnnforge.nn modules (skips, concatenations, element-wise ops, pooling,
transposed convolutions) traced by the frontend, lowered, and simulated: the quantized model and
the simulator agree bit for bit on every output (hypothesis)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import cnnforge.nn as qnn
from cnnforge.frontend.torch_fx import trace
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.sim import simulate


class RandomNet(nn.Module):
    """Node i reads node i-1 (so everything reaches the output) plus optional skips."""

    def __init__(self, plan: list[tuple[str, tuple[int, ...], nn.Module]]) -> None:
        super().__init__()
        self.plan = [(kind, inputs) for kind, inputs, _ in plan]
        self.blocks = nn.ModuleList(module for _, _, module in plan)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        values = [x]
        for (kind, inputs), block in zip(self.plan, self.blocks, strict=True):
            args = [values[i] for i in inputs]
            if kind == "eltwise":
                values.append(block(*args))
            else:
                values.append(block(args[0] if len(args) == 1 else torch.cat(args, dim=1)))
        return values[-1]


@st.composite
def random_net(draw):
    """(model, input channels, spatial size): 2-6 layers over shapes (C, H, W)."""
    c0 = draw(st.integers(1, 4))
    size = draw(st.sampled_from([4, 6, 8]))
    shapes = [(c0, size)]
    plan = []
    count = draw(st.integers(2, 6))
    for i in range(count):
        prev = len(shapes) - 1
        c, hw = shapes[prev]
        same_dims = [j for j in range(prev) if shapes[j][1] == hw]
        same_shape = [j for j in same_dims if shapes[j][0] == c]
        kind = draw(st.sampled_from(["conv", "conv", "eltwise", "convt", "pool"]))
        if kind == "eltwise" and not same_shape:
            kind = "conv"
        if kind == "eltwise":
            extra = draw(st.lists(st.sampled_from(same_shape), min_size=1, max_size=2, unique=True))
            op = draw(st.sampled_from([qnn.Add, qnn.Sub, qnn.Xor, qnn.Or]))
            pool = draw(st.sampled_from([None, "max", "avg"])) if hw >= 4 else None
            module = op(pool=pool, pool_size=2, pool_stride=2, pool_first=draw(st.booleans()))
            plan.append(("eltwise", (prev, *extra), module))
            shapes.append((c, hw // 2 if pool else hw))
        elif kind == "convt" and hw <= 4:
            cout = draw(st.integers(1, 4))
            module = qnn.ConvTranspose2d(
                c,
                cout,
                activation=draw(st.sampled_from(["relu", "none"])),
                weight_bits=draw(st.sampled_from([8, 4, 2])),
            )
            plan.append(("conv", (prev,), module))
            shapes.append((cout, hw * 2))
        elif kind == "pool" and hw >= 4:
            module = qnn.Pool(draw(st.sampled_from(["max", "avg"])), 2)
            plan.append(("pool", (prev,), module))
            shapes.append((c, hw // 2))
        else:
            skips = (
                draw(st.lists(st.sampled_from(same_dims), max_size=2, unique=True))
                if same_dims
                else []
            )
            cin = c + sum(shapes[j][0] for j in skips)
            cout = draw(st.integers(1, 4))
            k = draw(st.sampled_from([1, 3]))
            act = draw(st.sampled_from(["none", "relu", "abs"]))
            wide = i == count - 1 and act == "none" and draw(st.booleans())
            pool = draw(st.sampled_from([None, None, "max", "avg"])) if hw >= 2 else None
            module = qnn.Conv2d(
                cin,
                cout,
                k,
                padding=k // 2,
                pool=pool,
                pool_size=2,
                pool_stride=2,
                activation=act,
                wide=wide,
                weight_bits=draw(st.sampled_from([8, 8, 4, 2, 1])),
            )
            plan.append(("conv", (prev, *skips), module))
            shapes.append((cout, hw // 2 if pool else hw))
    return plan, c0, size


@settings(max_examples=220)
@given(spec=random_net(), seed=st.integers(0, 2**20), log_scale=st.integers(-3, 2))
def test_random_networks_match_simulator(spec, seed, log_scale) -> None:
    plan, c0, size = spec
    model = RandomNet(plan)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 2.0**log_scale)
    qnn.set_quantized_eval(model)
    x = torch.randint(-128, 128, (2, c0, size, size), generator=gen)
    network = lower_to_hardware(trace(model, (c0, size, size)), device=None).network
    assert network.is_hardware and network.is_quantized
    last = network.layer(network.outputs[0])
    factor = 128.0  # wide: module * 128 == sim * 2^(1 - bits), Q17.14 for 8 bits (R1.7)
    if last.wide:
        factor *= 2.0 ** (abs(last.quant.weight_bits) - 1)
    expected = model(x.float() / 128).double() * factor
    out = simulate(network, x, device=None).outputs[network.outputs[0]]
    assert torch.equal(expected, expected.round())
    assert torch.equal(expected.to(torch.int64), out)


def test_qat_unet_matches_simulator() -> None:
    """The flagship QAT U-Net (cnnforge.models.qat_unet): trained BN, QAT, quantized eval."""
    from cnnforge.models.qat_unet import QatUNet

    torch.manual_seed(0)
    model = QatUNet(channels=(8, 8, 16, 16))
    model.train()
    model(torch.randn(4, 3, 16, 16) * 0.5)  # BatchNorm statistics
    qnn.enable_qat(model, qnn.QATPolicy(weight_bits=8, overrides={"dec1": 4, "enc2": 2}))
    qnn.set_quantized_eval(model)
    x = torch.randint(-128, 128, (2, 3, 16, 16), generator=torch.Generator().manual_seed(1))
    network = lower_to_hardware(trace(model, (3, 16, 16)), device=None).network
    head = network.layer(network.outputs[0]).quant
    factor = 128.0 * 2.0 ** (head.weight_bits - 1)  # wide head: Q17.14 for 8 bits (R1.7)
    expected = model(x.float() / 128).double() * factor
    assert torch.equal(
        expected.to(torch.int64), simulate(network, x, device=None).outputs[network.outputs[0]]
    )
