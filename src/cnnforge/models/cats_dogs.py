"""Plain-PyTorch twin of the vendor's cats-vs-dogs classifier (ai85cdnet), whose input exceeds
one pass of data memory, so the planner must find FIFO streaming itself."""

from __future__ import annotations

import itertools

import torch
from torch import nn


class CatsDogsNet(nn.Module):
    """conv 3->16, [pool] 16->32, [pool] 32->64, [pool] 64->32, [pool] 32->32, 32->16, fc->2."""

    def __init__(self, num_classes: int = 2, in_channels: int = 3) -> None:
        super().__init__()
        widths = (in_channels, 16, 32, 64, 32, 32, 16)
        self.convs = nn.ModuleList(
            nn.Conv2d(a, b, 3, padding=1, bias=False) for a, b in itertools.pairwise(widths)
        )
        self.pool = nn.MaxPool2d(2, 2)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(16 * 8 * 8, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            if 1 <= i <= 4:
                x = self.pool(x)
            x = self.relu(conv(x))
        return self.fc(torch.flatten(x, 1))
