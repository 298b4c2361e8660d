"""A small float evaluator of any Network (model-level or hardware), independent of sim/.

Used by the fusion and legalization tests to prove rewrites exact on random weights without
depending on the simulator's float mode; the tests at the end check it against torch modules.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cnnforge.ir import Activation, Layer, Network, Op, Pooling, PoolKind
from support.fuse_reference import run


def test_reference_matches_torch_conv_relu_pool() -> None:
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1).double()
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    layer = Layer(
        "c",
        Op.CONV2D,
        out_shape=(4, 4, 4),
        in_channels=3,
        out_channels=4,
        kernel_size=(3, 3),
        stride=(1, 1),
        padding=(1, 1),
        dilation=(1, 1),
        pool=Pooling(PoolKind.MAX, (2, 2), (2, 2)),
        activation=Activation.RELU,
        weight=conv.weight.detach().numpy(),
        bias=conv.bias.detach().numpy(),
    )
    net = Network("n", (3, 8, 8), (layer,))
    expected = torch.relu(conv(F.max_pool2d(x, 2)))
    assert torch.equal(run(net, x)["c"], expected)
