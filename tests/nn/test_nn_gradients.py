"""QAT gradients: saturated outputs get no gradient (like hardtanh), others pass straight."""

import torch

from cnnforge.nn.functional import quantize_output_ste


def test_saturated_outputs_get_no_gradient():
    y = torch.tensor([-3.0, -1.0, -0.3, 0.5, 127 / 128, 2.0], requires_grad=True)
    out = quantize_output_ste(y, wide=False)
    assert out.detach().tolist() == [-1.0, -1.0, -38 / 128, 0.5, 127 / 128, 127 / 128]
    out.sum().backward()
    assert y.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]


def test_wide_outputs_pass_straight_through():
    y = torch.tensor([-5.0, 70000.0], requires_grad=True)
    quantize_output_ste(y, wide=True).sum().backward()
    assert y.grad.tolist() == [1.0, 1.0]
