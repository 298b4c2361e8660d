"""A small MAX78000-friendly U-Net from ``cnnforge.nn`` QAT modules, every layer one hardware layer
by construction (docs/hardware/unet.md §1.1); fits at 8-bit weights."""

from __future__ import annotations

import torch
from torch import nn

from cnnforge import nn as qnn


class QatUNet(nn.Module):
    """Three-level U-Net: ``channels`` = (c1, c2, c3, bottleneck), ``classes`` logits per pixel."""

    def __init__(
        self,
        in_channels: int = 3,
        classes: int = 5,
        channels: tuple[int, int, int, int] = (16, 32, 32, 64),
        batchnorm: bool = True,
        weight_bits: int | None = None,
    ) -> None:
        super().__init__()
        c1, c2, c3, c4 = channels
        kw = dict(batchnorm=batchnorm, weight_bits=weight_bits)
        relu = dict(activation="relu", **kw)
        pooled = dict(pool="max", pool_size=2, pool_stride=2, **relu)
        self.enc1 = qnn.Conv2d(in_channels, c1, 3, padding=1, **relu)
        self.enc2 = qnn.Conv2d(c1, c2, 3, padding=1, **pooled)
        self.enc3 = qnn.Conv2d(c2, c3, 3, padding=1, **pooled)
        self.bottleneck = qnn.Conv2d(c3, c4, 3, padding=1, **pooled)
        self.up3 = qnn.ConvTranspose2d(c4, c3, 3, stride=2, padding=1, output_padding=1, **relu)
        self.dec3 = qnn.Conv2d(2 * c3, c3, 3, padding=1, **relu)
        self.up2 = qnn.ConvTranspose2d(c3, c2, 3, stride=2, padding=1, output_padding=1, **relu)
        self.dec2 = qnn.Conv2d(2 * c2, c2, 3, padding=1, **relu)
        self.up1 = qnn.ConvTranspose2d(c2, c1, 3, stride=2, padding=1, output_padding=1, **relu)
        self.dec1 = qnn.Conv2d(2 * c1, c1, 3, padding=1, **relu)
        self.head = qnn.Conv2d(c1, classes, 1, padding=0, wide=True, weight_bits=weight_bits)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        e3 = self.enc3(e2)
        b = self.bottleneck(e3)
        d3 = self.dec3(torch.cat((self.up3(b), e3), dim=1))
        d2 = self.dec2(torch.cat((self.up2(d3), e2), dim=1))
        d1 = self.dec1(torch.cat((self.up1(d2), e1), dim=1))
        return self.head(d1)
