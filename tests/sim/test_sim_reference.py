"""An independent, straightforward int64 reference of a hardware layer, and its self-checks.

Written from docs/hardware/arithmetic.md without the simulator's code or cnnforge.arithmetic:
numpy int64 and Python rationals, one output position at a time, ConvTranspose2d by its
scatter definition (not the zero-stuffing of R2.7). The simulator's property tests compare
against ``run_reference``.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from cnnforge.ir import Layer, Op
from support.sim_reference import ref_conv, ref_convtranspose

# ---- self-checks against PyTorch on small exact cases ----------------------------------------


def _layer(op: Op, **kw) -> Layer:
    return Layer("l", op, **kw)


def test_ref_conv_matches_torch_float64() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (2, 4, 6, 7))
    w = rng.integers(-128, 128, (6, 2, 3, 3))
    layer = _layer(
        Op.CONV2D, kernel_size=(3, 3), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2
    )
    got = ref_conv(x, w, layer)
    want = F.conv2d(
        torch.tensor(x).double(), torch.tensor(w).double(), None, (2, 1), (1, 2), (1, 2), 2
    )
    assert np.array_equal(got, want.long().numpy())


def test_ref_convtranspose_matches_torch_float64() -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (1, 4, 3, 4))
    w = rng.integers(-128, 128, (4, 3, 3, 3))
    layer = _layer(
        Op.CONVTRANSPOSE2D,
        kernel_size=(3, 3),
        stride=(2, 2),
        padding=(1, 1),
        output_padding=(1, 1),
        groups=2,
    )
    got = ref_convtranspose(x, w, layer)
    want = F.conv_transpose2d(torch.tensor(x).double(), torch.tensor(w).double(), None, 2, 1, 1, 2)
    assert np.array_equal(got, want.long().numpy())


def test_ref_conv1d_matches_torch_float64() -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, (2, 3, 17))
    w = rng.integers(-8, 8, (5, 3, 4))
    layer = _layer(Op.CONV1D, kernel_size=(4,), stride=(2,), padding=(3,), dilation=(3,))
    got = ref_conv(x, w, layer)
    want = F.conv1d(torch.tensor(x).double(), torch.tensor(w).double(), None, 2, 3, 3)
    assert np.array_equal(got, want.long().numpy())
