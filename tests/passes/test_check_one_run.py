"""check lists every violation of a model in ONE run: norms with per-sample statistics,
Hardswish, bilinear upsampling, a pad it cannot absorb, a 5x5 conv -- each with its hint --
while the exact rewrites (host softmax) still apply."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from cnnforge.frontend import load_network
from cnnforge.passes.check import check_report
from cnnforge.targets.max7800x.device import MAX78000
from support.targets import rules_of


class Mixed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.b = nn.Conv2d(8, 8, 5, padding=2)
        self.inorm = nn.InstanceNorm2d(8)
        self.hs = nn.Hardswish()
        self.c = nn.Conv2d(8, 6, 3, padding=1)
        self.d = nn.Conv2d(6, 4, 1)

    def forward(self, x):
        y = self.hs(self.inorm(self.b(self.gn(self.a(x)))))
        y = F.pad(F.interpolate(self.c(y), scale_factor=2, mode="bilinear"), [0, 1, 0, 1])
        return torch.softmax(self.d(y), dim=1)


def test_every_violation_in_one_run():
    torch.manual_seed(0)
    report = check_report(
        load_network(f"{__file__}:Mixed", (3, 8, 8)), MAX78000, rules=rules_of(MAX78000)
    )
    found = {(v.module_path, v.rule): v.hint for v in report.violations}
    assert "BatchNorm2d" in found["gn", "unsupported-op"]
    assert "BatchNorm2d" in found["inorm", "unsupported-op"]
    assert "ReLU" in found["hs", "unsupported-op"]
    assert "bilinear" in found["interpolate", "unsupported-op"]
    assert "unequally" in found["pad", "pad"]
    assert "3x3" in found["b", "kernel-size"]
    assert [r.rule for r in report.rewrites] == ["host-softmax"]
