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


class ResNetStem(nn.Module):
    """A ResNet stem (7x7/2 conv with pad 3, padded 3x3/2 max pool), a 5x5 conv and a dilated
    3x3: the kernel, stride, dilation and pool-padding rows."""

    def __init__(self, in_channels: int = 3, classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Conv2d(in_channels, 16, 7, stride=2, padding=3, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.wide = nn.Conv2d(16, 16, 5, padding=2)
        self.dilated = nn.Conv2d(16, 16, 3, padding=2, dilation=2)
        self.up = nn.Sequential(
            nn.ConvTranspose2d(16, 16, 3, 2, 1, output_padding=1),
            nn.ReLU(),
            nn.ConvTranspose2d(16, 16, 3, 2, 1, output_padding=1),
        )
        self.head = nn.Conv2d(16, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.bn(self.stem(x))))
        x = torch.relu(self.dilated(torch.relu(self.wide(x))))
        return self.head(torch.relu(self.up(x)))


class Block(nn.Module):
    """A residual block (conv, BN, ReLU, conv, BN, add, ReLU) that keeps its input's shape."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))))


class Deep(nn.Module):
    """Two stages of repeated residual blocks: more than 32 hardware layers (the depth cut)."""

    def __init__(self, in_channels: int = 3, classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, 16, 3, padding=1), nn.ReLU())
        self.stage1 = nn.Sequential(*[Block(16) for _ in range(8)])
        self.down = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())
        self.stage2 = nn.Sequential(*[Block(32) for _ in range(12)])
        self.up = nn.ConvTranspose2d(32, 16, 3, 2, 1, output_padding=1)
        self.head = nn.Conv2d(16, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.down(self.stage1(self.stem(x)))
        return self.head(torch.relu(self.up(self.stage2(x))))


class AttentionGate(nn.Module):
    """MONAI's AttentionBlock in small: x * sigmoid(psi(relu(W_g g + W_x x)))."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.w_g = nn.Sequential(nn.Conv2d(channels, 8, 1), nn.BatchNorm2d(8))
        self.w_x = nn.Sequential(nn.Conv2d(channels, 8, 1), nn.BatchNorm2d(8))
        self.psi = nn.Sequential(nn.Conv2d(8, 1, 1), nn.BatchNorm2d(1), nn.Sigmoid())

    def forward(self, g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return x * self.psi(torch.relu(self.w_g(g) + self.w_x(x)))


class TinyAttentionUNet(nn.Module):
    """One level of an attention U-Net: the skip is gated by the upsampled deeper features."""

    def __init__(self, in_channels: int = 3, classes: int = 5) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(in_channels, 16, 3, padding=1), nn.ReLU())
        self.down = nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1), nn.ReLU())
        self.up = nn.Sequential(nn.ConvTranspose2d(16, 16, 3, 2, 1, output_padding=1), nn.ReLU())
        self.attention = AttentionGate(16)
        self.merge = nn.Sequential(nn.Conv2d(32, 16, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(16, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.enc(x)
        u = self.up(self.down(e))
        return self.head(self.merge(torch.cat([self.attention(u, e), u], dim=1)))
