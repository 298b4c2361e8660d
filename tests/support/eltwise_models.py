"""Small residual networks for the element-wise firmware cases (support/eltwise_firmware.py):
compiled as ``tests/support/eltwise_models.py:CLASS`` with ``--ptq`` (untrained weights, seed 0).
"""

from __future__ import annotations

import torch
from torch import nn

import cnnforge.nn as qnn


class Res(nn.Module):
    """One residual add of two convolutions' outputs (a layer of its own)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.a(x))
        return y + self.b(y)


class Mixed(nn.Module):
    """sub with max pooling first; add folded into a 3x3 convolution with bias; sub with
    average pooling last; a 3-operand add folded into a 1x1 convolution."""

    def __init__(self, bias: bool = True) -> None:
        super().__init__()
        self.a = qnn.Conv2d(3, 16, activation="relu")
        self.b = qnn.Conv2d(16, 16, activation="relu")
        self.sub = qnn.Sub(pool="max", pool_size=2)
        self.c = qnn.Conv2d(16, 16, activation="relu")
        self.add2 = qnn.Add()
        self.d = qnn.Conv2d(16, 16, activation="relu", bias=bias)
        self.g = qnn.Conv2d(16, 16, activation="relu")
        self.subl = qnn.Sub(pool="avg", pool_size=2, pool_first=False)
        self.e = qnn.Conv2d(16, 16, 1, padding=0, activation="relu")
        self.f = qnn.Conv2d(16, 16, 1, padding=0, activation="relu")
        self.add = qnn.Add()
        self.head = qnn.Conv2d(16, 10, 1, padding=0, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.a(x)
        s = self.sub(a, self.b(a))
        o = self.d(self.add2(s, self.c(s)))
        p = self.subl(o, self.g(o))
        return self.head(self.add(p, self.e(p), self.f(p)))


class MixedNoBias(Mixed):
    """Mixed whose convolutions after an element-wise operation have no bias (the vendor tool
    refuses element-wise + convolution + bias on the MAX78002)."""

    def __init__(self) -> None:
        super().__init__(bias=False)
