"""The float meaning of a wide (32-bit) output: Q17.14 for 8-bit weights, whatever the shift.

The vendor ignores ``output_shift`` for wide outputs (docs/hardware/arithmetic.md R1.7, R2.4, R6.3
step 6; manual: "no hardware shift is performed and output_shift is ignored"), so the float weights
of a wide layer are ``w_int * 2^(1 - bits)`` and its output unit ``2^(1 - bits) / 128``. Pinned on
§7 example A (checked against the vendor simulator) and the vendor's mnist known answer.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cnnforge.arithmetic import dequantize_params, output_unit, weight_scale
from cnnforge.ir import INPUT, Layer, Network, Op, Quantized
from cnnforge.sim import simulate
from cnnforge.targets.max7800x.ai8x import read_ai8x

X_A = np.array([[[12, -7, 100], [-128, 55, 3], [27, 90, -64]]])
W_A = np.array([[[[5, -3, 17], [2, 127, -128], [-9, 0, 44]]]])


def _example_a(shift: int) -> Layer:
    q = Quantized(8, W_A, np.array([-20]), shift)
    w, b = dequantize_params(q.weights, q.bias, 8, shift, wide=True)
    return Layer(
        "c", Op.CONV2D, (INPUT,), (1, 1, 1), weight=w, bias=b, quant=q, wide=True,
        in_channels=1, out_channels=1, kernel_size=(3, 3), padding=(0, 0),
    )  # fmt: skip


@pytest.mark.parametrize("shift", [-3, 0, 1, 3])
def test_example_a_wide_output_is_q17_14_whatever_the_shift(shift: int) -> None:
    layer = _example_a(shift)
    net = Network("a", (1, 3, 3), (layer,))
    acc = simulate(net, torch.from_numpy(X_A), device=None).outputs["c"]
    assert acc.flatten().tolist() == [2507]  # §7 example A: `output_width: 32` -> 2507
    x = torch.from_numpy(X_A).double().reshape(1, 1, 3, 3) / 128
    y = F.conv2d(x, torch.from_numpy(layer.weight).double(), torch.from_numpy(layer.bias).double())
    assert float(y) == 2507 / 2**14  # "(Q17.14, 0.1530)"
    assert 2507 * output_unit(8, shift, wide=True) == 2507 / 2**14


def test_weight_scale_ignores_the_shift_only_when_wide() -> None:
    assert weight_scale(8, 2, wide=False) == 2.0**-5
    assert weight_scale(8, 2, wide=True) == 2.0**-7
    assert weight_scale(4, -1, wide=True) == 2.0**-3
    assert output_unit(8, 0, wide=False, exponent=1) == 2 / 128


def test_mnist_known_answer_wide_head_means_acc_over_2_14(ai8x_data) -> None:
    """The vendor simulator's 32-bit output of mnist's fc equals the float fc of the imported
    weights on the same inputs, in units of output_unit."""
    folder = ai8x_data / "golden" / "mnist"
    x, expected = np.load(folder / "input.npy"), np.load(folder / "expected.npy")
    model = read_ai8x(
        ai8x_data / "networks" / "mnist-chw-ai85.yaml",
        ai8x_data / "trained" / "ai85-mnist-qat8-q.pth.tar", device="MAX78000"
    )
    net = model.network
    fc = net.layer(net.outputs[-1])
    assert fc.wide
    outs = simulate(net, torch.from_numpy(x), all_layers=True, device=None).layers
    feed = outs[fc.inputs[0]].double().reshape(-1) / 128
    y = F.linear(feed, torch.from_numpy(fc.weight).double(), torch.from_numpy(fc.bias).double())
    unit = output_unit(fc.quant.weight_bits, fc.quant.output_shift, fc.wide)
    assert torch.equal(y, torch.from_numpy(expected.reshape(-1) * unit))


def test_ptq_wide_output_keeps_the_float_meaning_through_its_scale() -> None:
    """PTQ of a wide layer with large weights (shift 2): the float weights mean w_int * 2^-7,
    the output scale carries the 2^2, and sim * unit matches the float layer."""
    from cnnforge.quant.ptq import quantize_with_scales
    from cnnforge.sim.float_eval import run_float

    rng = np.random.default_rng(0)
    w = (rng.uniform(-3, 3, (2, 2, 1, 1))).astype(np.float32)
    layer = Layer(
        "c", Op.CONV2D, (INPUT,), (2, 4, 4), weight=w, bias=np.array([0.5, -1.0], np.float32),
        wide=True, in_channels=2, out_channels=2, kernel_size=(1, 1), padding=(0, 0),
    )  # fmt: skip
    net = Network("w", (2, 4, 4), (layer,))
    q, exps = quantize_with_scales(net, device=None)
    ql = q.layer("c")
    assert ql.quant.output_shift == 2 and exps == {"c": 2}
    assert np.array_equal(ql.weight, (ql.quant.weights * 2.0**-7).astype(np.float32))
    x = rng.integers(-128, 128, (2, 4, 4))
    acc = simulate(q, torch.from_numpy(x), device=None).outputs["c"].double()
    unit = output_unit(8, ql.quant.output_shift, True, exps["c"])
    want = run_float(net, torch.from_numpy(x).double() / 128)["c"]
    assert torch.allclose(acc * unit, want.double(), atol=0.05)
