"""Plain-PyTorch U-Nets (docs/hardware/unet.md): ``UNetVOC`` and ``UNetLarge``, a ``torch.nn`` twin
of the vendor's CamVid U-Net that the frontend, passes and planner must handle."""

from __future__ import annotations

import torch
from torch import nn


def conv_block(in_channels: int, out_channels: int) -> nn.Sequential:
    """The U-Net's block: (conv3x3 without bias -> BatchNorm -> ReLU) twice."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
        nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    )


class UNetVOC(nn.Module):
    """A plain U-Net for Pascal VOC: channels 8/16/32/64/128, 21 classes, input 3x64x64."""

    def __init__(self, in_channels: int = 3, out_channels: int = 21) -> None:
        super().__init__()
        c1, c2, c3, c4, c5 = 8, 16, 32, 64, 128
        self.enc1 = conv_block(in_channels, c1)
        self.pool1 = nn.MaxPool2d(2)
        self.enc2 = conv_block(c1, c2)
        self.pool2 = nn.MaxPool2d(2)
        self.enc3 = conv_block(c2, c3)
        self.pool3 = nn.MaxPool2d(2)
        self.enc4 = conv_block(c3, c4)
        self.pool4 = nn.MaxPool2d(2)
        self.bottleneck = conv_block(c4, c5)
        self.upconv4 = nn.ConvTranspose2d(c5, c4, kernel_size=2, stride=2, bias=False)
        self.dec4 = conv_block(c5, c4)
        self.upconv3 = nn.ConvTranspose2d(c4, c3, kernel_size=2, stride=2, bias=False)
        self.dec3 = conv_block(c4, c3)
        self.upconv2 = nn.ConvTranspose2d(c3, c2, kernel_size=2, stride=2, bias=False)
        self.dec2 = conv_block(c3, c2)
        self.upconv1 = nn.ConvTranspose2d(c2, c1, kernel_size=2, stride=2, bias=False)
        self.dec1 = conv_block(c2, c1)
        self.outconv = nn.Conv2d(c1, out_channels, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        enc1 = self.enc1(x)
        enc2 = self.enc2(self.pool1(enc1))
        enc3 = self.enc3(self.pool2(enc2))
        enc4 = self.enc4(self.pool3(enc3))
        bottleneck = self.bottleneck(self.pool4(enc4))
        dec4 = self.dec4(torch.cat((self.upconv4(bottleneck), enc4), dim=1))
        dec3 = self.dec3(torch.cat((self.upconv3(dec4), enc3), dim=1))
        dec2 = self.dec2(torch.cat((self.upconv2(dec3), enc2), dim=1))
        dec1 = self.dec1(torch.cat((self.upconv1(dec2), enc1), dim=1))
        return self.outconv(dec1)


def conv_bn(
    in_channels: int, out_channels: int, kernel_size: int, relu: bool = True, pool: bool = False
) -> nn.Sequential:
    """The vendor's FusedConv2dBN(ReLU) in plain torch: [maxpool 2] -> conv -> non-affine BN ->
    ReLU."""
    layers: list[nn.Module] = [nn.MaxPool2d(2)] if pool else []
    layers += [
        nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2),
        nn.BatchNorm2d(out_channels, affine=False),
    ]
    if relu:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


def up_conv(in_channels: int, out_channels: int) -> nn.ConvTranspose2d:
    """The hardware's transposed convolution: 3x3, stride 2, pad 1, output padding 1 (2x size)."""
    return nn.ConvTranspose2d(
        in_channels, out_channels, 3, stride=2, padding=1, output_padding=1, bias=True
    )


class UNetLarge(nn.Module):
    """The vendor's large CamVid U-Net (``ai85unetlarge``) in plain torch: 48x88x88 in (3x352x352
    folded 4x4), 64 channels out (docs/hardware/unet.md §2)."""

    def __init__(self, in_channels: int = 48, num_classes: int = 4, fold_ratio: int = 4) -> None:
        super().__init__()
        self.prep0 = conv_bn(in_channels, 64, 1)
        self.prep1 = conv_bn(64, 64, 1)
        self.prep2 = conv_bn(64, 32, 1)
        self.enc1 = conv_bn(32, 8, 3)
        self.enc2 = conv_bn(8, 28, 3, pool=True)
        self.enc3 = conv_bn(28, 56, 3, pool=True)
        self.bneck = conv_bn(56, 112, 3, pool=True)
        self.upconv3 = up_conv(112, 56)
        self.dec3 = conv_bn(112, 56, 3)
        self.upconv2 = up_conv(56, 28)
        self.dec2 = conv_bn(56, 28, 3)
        self.upconv1 = up_conv(28, 8)
        self.dec1 = conv_bn(16, 48, 3)
        self.dec0 = conv_bn(48, 64, 3)
        self.conv_p1 = conv_bn(64, 64, 1)
        self.conv_p2 = conv_bn(64, 64, 1)
        self.conv_p3 = conv_bn(64, 64, 1, relu=False)
        self.conv = conv_bn(64, num_classes * fold_ratio * fold_ratio, 1, relu=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.prep2(self.prep1(self.prep0(x)))
        enc1 = self.enc1(x)
        enc2 = self.enc2(enc1)
        enc3 = self.enc3(enc2)
        x = self.bneck(enc3)
        x = self.dec3(torch.cat((self.upconv3(x), enc3), dim=1))
        x = self.dec2(torch.cat((self.upconv2(x), enc2), dim=1))
        x = self.dec1(torch.cat((self.upconv1(x), enc1), dim=1))
        x = self.conv_p3(self.conv_p2(self.conv_p1(self.dec0(x))))
        return self.conv(x)
