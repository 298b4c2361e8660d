"""A zoo of segmentation networks nobody here wrote, small enough for fast tests.

MONAI's networks (built by the factories below, 2-D, small features) and hand-written U-Nets
in the styles found in the wild: the classic ``Up`` block that pads after size arithmetic
(milesial/Pytorch-UNet), decoders whose widths differ from the encoder's (unequal
concatenations), and a softmax at the output. Named by the CLI as
``tests/support/zoo_models.py:Name``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def monai_basic_unet() -> nn.Module:
    from monai.networks.nets import BasicUNet

    return BasicUNet(spatial_dims=2, in_channels=1, out_channels=2, features=(8, 8, 16, 32, 64, 8))


def monai_unet_bn_relu() -> nn.Module:
    from monai.networks.layers import Act, Norm
    from monai.networks.nets import UNet

    return UNet(
        spatial_dims=2,
        in_channels=1,
        out_channels=2,
        channels=(8, 16, 32, 32),
        strides=(2, 2, 2),
        norm=Norm.BATCH,
        act=Act.RELU,
    )


def monai_unet_default() -> nn.Module:
    from monai.networks.nets import UNet

    return UNet(
        spatial_dims=2, in_channels=1, out_channels=2, channels=(8, 16, 32, 32), strides=(2, 2, 2)
    )


def monai_attention_unet() -> nn.Module:
    from monai.networks.nets import AttentionUnet

    return AttentionUnet(
        spatial_dims=2, in_channels=1, out_channels=2, channels=(8, 16, 32), strides=(2, 2)
    )


def monai_segresnet() -> nn.Module:
    from monai.networks.nets import SegResNet

    return SegResNet(spatial_dims=2, in_channels=1, out_channels=2, init_filters=8)


def monai_dynunet() -> nn.Module:
    from monai.networks.nets import DynUNet

    return DynUNet(
        spatial_dims=2,
        in_channels=1,
        out_channels=2,
        kernel_size=[3, 3, 3],
        strides=[1, 2, 2],
        upsample_kernel_size=[2, 2],
    )


class DoubleConv(nn.Sequential):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__(
            nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
            nn.BatchNorm2d(c_out),
            nn.ReLU(inplace=True),
            nn.Conv2d(c_out, c_out, 3, padding=1, bias=False),
            nn.BatchNorm2d(c_out),
            nn.ReLU(inplace=True),
        )


class Up(nn.Module):
    """The classic block: upsample, pad to the skip's size (size arithmetic), concatenate."""

    def __init__(self, c_in: int, c_skip: int, c_out: int) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(c_in, c_in // 2, 2, stride=2)
        self.conv = DoubleConv(c_in // 2 + c_skip, c_out)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        x1 = self.up(x1)
        dy = x2.size()[2] - x1.size()[2]
        dx = x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([x2, x1], dim=1))


class ClassicUNet(nn.Module):
    """milesial-style U-Net (widths 8-16-32) with the padding ``Up`` block."""

    def __init__(self, c_in: int = 3, classes: int = 2) -> None:
        super().__init__()
        self.inc = DoubleConv(c_in, 8)
        self.down1 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(8, 16))
        self.down2 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(16, 32))
        self.up1 = Up(32, 16, 16)
        self.up2 = Up(16, 8, 8)
        self.outc = nn.Conv2d(8, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        return self.outc(self.up2(self.up1(x3, x2), x1))


class UnequalUNet(nn.Module):
    """Decoder widths unlike the encoder's: concatenations of [8, 16] and [4, 8] channels."""

    def __init__(self) -> None:
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.bottom = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(16, 24, 3, padding=1), nn.ReLU())
        self.up2 = nn.ConvTranspose2d(24, 8, 2, stride=2)
        self.dec2 = nn.Sequential(nn.Conv2d(8 + 16, 8, 3, padding=1), nn.ReLU())
        self.up1 = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.dec1 = nn.Sequential(nn.Conv2d(4 + 8, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        d2 = self.dec2(torch.cat([self.up2(self.bottom(e2)), e2], 1))
        return self.head(self.dec1(torch.cat([self.up1(d2), e1], 1)))


class SoftmaxUNet(UnequalUNet):
    """The same with class probabilities at the output."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(super().forward(x), dim=1)


#: name -> input shape (C,H,W) the zoo tests use.
ZOO = {
    "monai_basic_unet": (1, 32, 32),
    "monai_unet_bn_relu": (1, 32, 32),
    "monai_unet_default": (1, 32, 32),
    "monai_attention_unet": (1, 32, 32),
    "monai_segresnet": (1, 32, 32),
    "monai_dynunet": (1, 32, 32),
    "ClassicUNet": (3, 32, 32),
    "UnequalUNet": (3, 32, 32),
    "SoftmaxUNet": (3, 32, 32),
}
