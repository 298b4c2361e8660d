"""Small models with ops the device lacks, for the adapt tests (one per table row and more)."""

from __future__ import annotations

import torch
from torch import nn


class TinyNormUNet(nn.Module):
    """InstanceNorm + PReLU, GroupNorm + LeakyReLU, a bilinear upsample, a concatenation."""

    def __init__(self, in_channels: int = 3, classes: int = 5) -> None:
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(in_channels, 16, 3, padding=1), nn.InstanceNorm2d(16), nn.PReLU()
        )
        self.down = nn.Sequential(
            nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.GroupNorm(4, 32), nn.LeakyReLU(0.1)
        )
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.dec = nn.Sequential(
            nn.Conv2d(48, 16, 3, padding=1), nn.BatchNorm2d(16), nn.SiLU(), nn.Dropout(0.1)
        )
        self.head = nn.Conv2d(16, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.enc(x)
        d = self.down(e)
        return self.head(self.dec(torch.cat([self.up(d), e], dim=1)))


class Gated(nn.Module):
    """A sigmoid gate and a Tanh: no replacement for either."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, padding=1)
        self.gate = nn.Sigmoid()
        self.t = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return self.t(y * self.gate(y))


class Residual(nn.Module):
    """A residual block (x + f(x)) and a forward fx cannot trace (``len`` of a shape): the
    width follows torch.export's graph, and the add keeps matching channels."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.body = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.head = nn.Conv2d(16, 5, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        if len(x.shape) == 4:  # data-dependent for fx: torch.export specializes it
            y = y + self.body(y)
        return self.head(y)


class PreActivation(nn.Module):
    """norm -> relu -> conv (SegResNet's blocks): the BatchNorm has no conv before it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv0 = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.GroupNorm(2, 8)
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 5, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv0(x)
        return self.head(y + self.conv1(torch.relu(self.norm(y))))
