"""Small torch models shared by tests: random block stacks and a concatenation."""

from __future__ import annotations

import torch
from hypothesis import strategies as st
from torch import nn


class Abs(nn.Module):
    def forward(self, x):
        return torch.abs(x)


SIZE = 8  # input height and width


ACTS = {"none": nn.Identity, "relu": nn.ReLU, "abs": Abs}


class Block(nn.Module):
    """One random block: conv (+BN, +activation), pooling, residual add, concat or upsampling."""

    def __init__(self, kind: str, c: int, arg: int) -> None:
        super().__init__()
        self.kind = kind
        if kind == "conv":
            k, stride = (1, 1) if arg % 3 == 0 else (3, 1 + arg % 2)
            self.conv = nn.Conv2d(c, c + arg % 3, k, stride=stride, padding=k // 2)
            self.bn = nn.BatchNorm2d(c + arg % 3)
            self.act = list(ACTS.values())[arg % 3]()
        elif kind == "pool":
            self.pool = nn.MaxPool2d(2) if arg % 2 else nn.AvgPool2d(2)
            relu = arg % 4 == 1  # conv -> max pool -> ReLU (ReLU moves before the pool)
            self.conv = nn.Conv2d(c, c, 1) if relu else nn.Identity()
            self.act = nn.ReLU() if relu else nn.Identity()
        elif kind in ("res", "cat"):
            self.conv = nn.Conv2d(c, c, 3, padding=1)
            self.conv2 = nn.Conv2d(c, c, 1)
            self.act = nn.ReLU() if arg % 2 else nn.Identity()
            self.both = arg % 3 == 0
        else:  # "up"
            self.up = nn.ConvTranspose2d(c, c, 2, 2) if arg % 2 else nn.Upsample(scale_factor=2)

    def forward(self, x):
        if self.kind == "conv":
            return self.act(self.bn(self.conv(x)))
        if self.kind == "pool":
            return self.act(self.pool(self.conv(x)))
        if self.kind == "res":
            return self.act(x + self.conv(x))
        if self.kind == "cat" and self.both:
            return self.act(torch.cat((self.conv(x), self.conv2(x)), 1))
        if self.kind == "cat":
            return torch.cat((self.act(self.conv(x)), x), 1)
        return self.up(x)


class RandomNet(nn.Module):
    def __init__(self, blocks: list[tuple[str, int]], c: int) -> None:
        super().__init__()
        layers = [nn.Conv2d(c, c, 3, padding=1)]  # a stem: the input itself cannot be activated
        size = SIZE
        for kind, arg in blocks:
            if size < 2 and (kind == "pool" or (kind == "conv" and arg % 6 in (1, 5))):
                kind = "res"  # no room left to halve the size
            size = size // 2 if kind == "pool" or (kind == "conv" and arg % 6 in (1, 5)) else size
            size = size * 2 if kind == "up" else size
            block = Block(kind, c, arg)
            layers.append(block)
            if kind == "conv":
                c = c + arg % 3
            elif kind == "cat":
                c = 2 * c
        self.blocks = nn.Sequential(*layers)
        self.head = nn.Conv2d(c, 3, 1)

    def forward(self, x):
        return self.head(self.blocks(x))


BLOCKS = st.lists(
    st.tuples(st.sampled_from(["conv", "pool", "res", "cat", "up"]), st.integers(0, 5)),
    min_size=1,
    max_size=5,
)


class Cat(nn.Module):
    """cat(a(x), b(x)), then a 1x1 head (``head``) or as the output (no conv to take zeros)."""

    def __init__(self, a: int, b: int, head: bool = True) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, a, 3, padding=1)
        self.b = nn.Conv2d(3, b, 3, padding=1)
        self.head = nn.Conv2d(a + b, 4, 1) if head else nn.Identity()

    def forward(self, x):
        return self.head(torch.cat((self.a(x), self.b(x)), 1))
