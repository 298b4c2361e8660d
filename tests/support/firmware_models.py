"""Small networks for the firmware cases of support/firmware_cases.py (element-wise layers,
streaming layers, depthwise convolutions, narrow weights, speed-ups): compiled as
``tests/support/firmware_models.py:CLASS`` with ``--ptq`` (untrained weights, seed 0).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
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


class MultiPass(nn.Module):
    """Element-wise over 72 channels (two passes): 3 operands in a layer of their own (the
    MAX78000 runs it as one long pass), then 2 operands folded into a convolution without bias;
    ``pool``: the 3-operand add max-pools its operands first (MAX78002 only). 1x1 kernels keep
    the stored state images small."""

    def __init__(self, pool: bool = False) -> None:
        super().__init__()
        self.a = qnn.Conv2d(3, 72, activation="relu")
        self.b = qnn.Conv2d(72, 72, 1, padding=0, activation="relu")
        self.c = qnn.Conv2d(72, 72, 1, padding=0, activation="relu")
        self.add3 = qnn.Add(pool="max" if pool else None, pool_size=2)
        self.e = qnn.Conv2d(72, 72, 1, padding=0, activation="relu")
        self.add = qnn.Add()
        self.head = qnn.Conv2d(72, 10, 1, padding=0, activation="relu", bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.a(x)
        s = self.add3(a, self.b(a), self.c(a))
        return self.head(self.add(s, self.e(s)))


class MultiPassPool(MultiPass):
    """MultiPass with the 3-operand add pooling first."""

    def __init__(self) -> None:
        super().__init__(pool=True)


class Stream1x1(nn.Module):
    """A 1x1 first layer with bias (streams with --fifo: run as a padded 3x3, its bias an entry
    late on the MAX78000), a 3x3, a 1x1, a 3x3."""

    def __init__(self) -> None:
        super().__init__()
        self.a = qnn.Conv2d(3, 16, 1, padding=0, activation="relu")
        self.b = qnn.Conv2d(16, 16, 3, padding=1, activation="relu", pool="max")
        self.c = qnn.Conv2d(16, 16, 1, padding=0, activation="relu")
        self.d = qnn.Conv2d(16, 10, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.d(self.c(self.b(self.a(x))))


class Stream1x1Middle(nn.Module):
    """A 128x128 input: the first layers stream (MAX78000: three, the 1x1 among them; MAX78002:
    one, the 1x1 right after it also runs as a padded 3x3)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = qnn.Conv2d(3, 32, 3, padding=1, activation="relu")
        self.b = qnn.Conv2d(32, 32, 1, padding=0, activation="relu")
        self.c = qnn.Conv2d(32, 16, 3, padding=1, activation="relu", pool="max", pool_size=4)
        self.d = qnn.Conv2d(16, 10, 3, padding=1, pool="max", pool_size=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.d(self.c(self.b(self.a(x))))


class Depthwise(nn.Module):
    """A depthwise 3x3 convolution without bias whose output goes to other processors (not
    broadcast); ``channels`` 32: its input and output span two quadrants each."""

    def __init__(self, channels: int = 16) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, channels, 3, padding=1)
        self.dw = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
        self.head = nn.Conv2d(channels, 10, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.dw(torch.relu(self.a(x)))))


class Depthwise32(Depthwise):
    """Depthwise over 32 channels."""

    def __init__(self) -> None:
        super().__init__(32)


class DepthwiseBias(nn.Module):
    """A depthwise 3x3 convolution with bias whose output goes to other processors."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 16, 3, padding=1)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.head = nn.Conv2d(16, 10, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.dw(torch.relu(self.a(x)))))


class MobileNet(nn.Module):
    """MobileNet-style blocks (depthwise 3x3 with bias, then pointwise 1x1); the planner runs
    the depthwise layers over 64 and 96 channels in broadcast mode (output processors = input
    processors; the wider one in two passes)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 3, padding=1)
        self.dw1 = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.pw1 = nn.Conv2d(32, 64, 1)
        self.dw2 = nn.Conv2d(64, 64, 3, padding=1, groups=64)
        self.pw2 = nn.Conv2d(64, 96, 1)
        self.dw3 = nn.Conv2d(96, 96, 3, padding=1, groups=96)
        self.head = nn.Conv2d(96, 10, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        x = torch.relu(self.pw1(torch.relu(self.dw1(x))))
        x = torch.relu(self.pw2(torch.relu(self.dw2(x))))
        return self.head(torch.relu(self.dw3(x)))


class Narrow(nn.Module):
    """Three 3x3 convolutions and a 1x1 head: the cases give them 4-, 2-, 1-bit or binary
    (-1/+1) weights (their output shift then includes 8 - bits)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 16, 3, padding=1)
        self.b = nn.Conv2d(16, 16, 3, padding=1)
        self.c = nn.Conv2d(16, 16, 3, padding=1)
        self.head = nn.Conv2d(16, 10, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.b(torch.relu(self.a(x))))
        return self.head(torch.relu(self.c(x)))


class ResAvg(nn.Module):
    """A residual add, then a convolution with bias that average-pools its input: the add keeps
    a layer of its own on the MAX78002 (no element-wise + convolution + bias there), and the
    pooling layer right after it needs the MAX78002's average-pool reset layer."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 16, 3, padding=1)
        self.b = nn.Conv2d(16, 16, 3, padding=1)
        self.c = nn.Conv2d(16, 16, 3, padding=1)
        self.head = nn.Conv2d(16, 10, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.a(x))
        y = y + torch.relu(self.b(y))
        return self.head(torch.relu(self.c(F.avg_pool2d(y, 2))))


class ResStream(nn.Module):
    """A residual block after a first layer that streams from the FIFOs (``--fifo``)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 16, 3, padding=1)
        self.b = nn.Conv2d(16, 16, 3, padding=1)
        self.c = nn.Conv2d(16, 16, 3, padding=1)
        self.d = nn.Conv2d(16, 16, 3, padding=1)
        self.head = nn.Conv2d(16, 10, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.a(x))
        y = torch.relu(self.c(y + torch.relu(self.b(y))))
        return self.head(torch.relu(self.d(F.max_pool2d(y, 2))))


class _AddInto(nn.Module):
    """A residual add whose sum ``tail`` (a 16-channel layer) reads, then a 1x1 head."""

    def __init__(self, tail: nn.Module) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 16, 3, padding=1)
        self.b = nn.Conv2d(16, 16, 3, padding=1)
        self.tail = tail
        self.head = nn.Conv2d(16, 10, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.a(x))
        y = y + torch.relu(self.b(y))
        return self.head(torch.relu(self.tail(y)))


class AddTransposed(_AddInto):
    """A residual add before a transposed convolution (the cases fold the add into it)."""

    def __init__(self) -> None:
        super().__init__(
            nn.ConvTranspose2d(16, 16, 3, stride=2, padding=1, output_padding=1, bias=False)
        )


class Speedups(nn.Module):
    """3x3 convolutions over one and two passes (68 channels), a 1x1 head: compiled with
    --calcx4 and --read-ahead on the MAX78002."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 16, 3, padding=1)
        self.b = nn.Conv2d(16, 68, 3, padding=1)
        self.c = nn.Conv2d(68, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.b(torch.relu(self.a(x))))
        return self.head(torch.relu(self.c(F.max_pool2d(x, 2))))


class AddDepthwise(_AddInto):
    """A residual add folded into a depthwise convolution without bias (MAX78002)."""

    def __init__(self) -> None:
        super().__init__(nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False))
