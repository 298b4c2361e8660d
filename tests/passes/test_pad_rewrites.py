"""F.pad rewrites (passes/pad_rewrites.py): zero size -> nothing, symmetric zero -> the conv's
padding, anything else -> one violation with the real reason. Proven on random weights."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.frontend.torch_fx import trace
from cnnforge.ir import Op
from cnnforge.passes.check import check_report
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.sim.float_eval import run_float
from cnnforge.targets.max7800x.device import MAX78000
from support.targets import rules_of


class PadConv(nn.Module):
    def __init__(self, pad, value: float = 0.0, conv_pad: int = 0, cat: bool = False, out=False):
        super().__init__()
        self.pad, self.value, self.cat, self.out = pad, value, cat, out
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.conv = nn.Conv2d(8 if cat else 4, 5, 3, padding=conv_pad)

    def forward(self, x):
        y = F.pad(self.a(x), self.pad, value=self.value)
        if self.cat:
            y = torch.cat((y, self.a(x)), 1)
        return y if self.out else self.conv(y)


@settings(max_examples=20, deadline=None)
@given(
    amount=st.integers(0, 1),
    conv_pad=st.integers(0, 1),
    seed=st.integers(0, 1000),
)
def test_symmetric_zero_pad_is_exact(amount, conv_pad, seed):
    torch.manual_seed(seed)
    model = PadConv([amount] * 4, conv_pad=conv_pad).eval()
    net = trace(model, (3, 8, 8))
    lowered = lower_to_hardware(net, MAX78000)
    assert not any(x.op is Op.PAD for x in lowered.network.layers)
    rule = "pad-into-conv" if amount else "drop-zero-pad"
    assert rule in [r.rule for r in lowered.rewrites]
    assert lowered.network.layer("conv").padding == (amount + conv_pad,) * 2
    x = torch.randn(2, 3, 8, 8)
    got = run_float(lowered.network, x)[lowered.network.outputs[0]]
    torch.testing.assert_close(got, model(x), rtol=1e-4, atol=1e-5)


def test_unet_up_pad_of_size_zero_vanishes_before_a_concatenation():
    model = PadConv([0, 0, 0, 0], cat=True).eval()
    report = check_report(trace(model, (3, 8, 8)), MAX78000, rules=rules_of(MAX78000))
    assert report.fits, report.violations
    assert "drop-zero-pad" in [r.rule for r in report.rewrites]


def _pad_violation(model: nn.Module) -> str:
    report = check_report(trace(model.eval(), (3, 8, 8)), MAX78000, rules=rules_of(MAX78000))
    (v,) = [v for v in report.violations if v.rule == "pad"]
    return v.hint


def test_pads_that_stay_are_violations_with_the_reason():
    assert "unequally" in _pad_violation(PadConv([0, 1, 0, 1]))
    assert "zeros only" in _pad_violation(PadConv([1, 1, 1, 1], value=0.5))
    assert "crop" in _pad_violation(PadConv([-1, -1, -1, -1]))
    assert "not one conv" in _pad_violation(PadConv([1, 1, 1, 1], out=True))
