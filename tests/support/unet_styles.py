"""Hand-written U-Nets in the styles users write, for the end-to-end compile tests.

``PadUNet`` has everything at once: the classic ``Up`` block that pads after size arithmetic
(zoo_models.Up, milesial/Pytorch-UNet style), decoder widths unlike the encoder's (the
upsampled halves meet wider skips: concatenations of [16, 12] and [8, 6] channels),
BatchNorm + ReLU, and a softmax at the output.
"""

from __future__ import annotations

import torch
from torch import nn

from support.zoo_models import DoubleConv, Up


class PadUNet(nn.Module):
    def __init__(self, c_in: int = 3, classes: int = 4) -> None:
        super().__init__()
        self.inc = DoubleConv(c_in, 8)
        self.down1 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(8, 16))
        self.down2 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(16, 24))
        self.up1 = Up(24, 16, 12)  # cat(skip 16, up 12)
        self.up2 = Up(12, 8, 8)  # cat(skip 8, up 6)
        self.outc = nn.Conv2d(8, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        return torch.softmax(self.outc(self.up2(self.up1(x3, x2), x1)), dim=1)


def monai_basic_unet_bn_relu() -> nn.Module:
    """MONAI BasicUNet, small, with BatchNorm + ReLU (its defaults, InstanceNorm + LeakyReLU,
    have no hardware form: check names them)."""
    from monai.networks.nets import BasicUNet

    return BasicUNet(
        spatial_dims=2,
        in_channels=1,
        out_channels=2,
        features=(8, 8, 16, 32, 64, 8),
        act="relu",
        norm="batch",
    )
