"""sim.agreement: the one float-vs-quantized rule every report uses (LSBs, channel argmax)."""

from __future__ import annotations

import numpy as np

from cnnforge.arithmetic import ACT_SCALE
from cnnforge.ir import INPUT, Layer, Network, Op
from cnnforge.sim.agreement import agreement, output_scale


def _network() -> Network:
    layer = Layer("c1", Op.CONV2D, (INPUT,), in_channels=2, out_channels=3, kernel_size=(1, 1))
    return Network("n", (2, 4, 4), [layer], outputs=("c1",))


def test_errors_are_in_lsbs_and_argmax_is_per_position() -> None:
    net = _network()
    quant = np.zeros((3, 2, 2), dtype=np.int64)
    quant[1] = 10  # channel 1 wins everywhere in the quantized output
    fl = quant / ACT_SCALE
    fl[1, 0, 0] += 3 / ACT_SCALE  # 3 LSBs off at one position, argmax unchanged
    fl[2, 1, 1] = 1.0  # argmax differs at one of 4 positions
    (row,) = agreement(net, {"c1": quant}, {"c1": fl}, {})
    assert row.name == "c1"
    assert row.argmax == 0.75
    assert row.max_lsb == ACT_SCALE * 1.0
    assert np.isclose(row.mean_lsb, (3 + ACT_SCALE) / quant.size)


def test_calibrated_exponent_scales_the_unit_and_missing_floats_are_skipped() -> None:
    net = _network()
    assert output_scale(net, "c1", 2) == 4 / ACT_SCALE
    quant = np.full((1, 2, 2), 8, dtype=np.int64)
    (row,) = agreement(net, {"c1": quant}, {"c1": quant * 4 / ACT_SCALE}, {"c1": 2})
    assert (row.max_lsb, row.argmax) == (0.0, None)  # one channel: no argmax
    assert agreement(net, {"c1": quant}, {}, {}) == []
