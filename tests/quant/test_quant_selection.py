"""Layers whose weights only select or add inputs (identity convolutions) quantize exactly."""

import numpy as np
import pytest
import torch

from cnnforge.ir import Activation, Layer, Network, Op
from cnnforge.quant.ptq import quantize_network
from cnnforge.sim import simulate


@pytest.mark.parametrize("bits", [8, 4, 2])
@pytest.mark.parametrize("activation", [Activation.NONE, Activation.RELU])
def test_identity_and_sum_convolutions_are_exact(bits, activation):
    c = 4
    w = np.zeros((c, 2 * c, 1, 1), np.float32)
    for i in range(c):
        w[i, i] = w[i, c + i] = 1.0  # out_i = a_i + b_i: add fused into a 1x1 conv
    layer = Layer(
        "sum", Op.CONV2D, out_shape=(c, 3, 3), in_channels=2 * c, out_channels=c,
        kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1),
        activation=activation, weight=w,
    )  # fmt: skip
    q = quantize_network(Network("n", (2 * c, 3, 3), (layer,)), bits, device=None)
    assert q.layers[0].quant.output_shift == 1
    x = torch.from_numpy(np.random.default_rng(bits).integers(-128, 128, (5, 2 * c, 3, 3)))
    y = simulate(q, x, device=None).outputs["sum"]
    expected = torch.clamp(x[:, :c] + x[:, c:], -128, 127)
    if activation is Activation.RELU:
        expected = expected.clamp(min=0)
    assert torch.equal(y, expected)
    assert np.array_equal(q.layers[0].weight, w)  # the float meaning is unchanged
