"""ReLU after an element-wise add rides an identity 1x1 conv for any channel count the device's
multi-pass rule allows (docs/hardware/devices.md §1); elsewhere check names that rule. Exact on
random weights."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.frontend.torch_fx import trace
from cnnforge.ir import Op
from cnnforge.passes.check import check_report
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.sim.float_eval import run_float
from cnnforge.targets.max7800x.device import MAX78000, MAX78002
from support.targets import rules_of


class AddRelu(nn.Module):
    def __init__(self, channels: int, operands: int) -> None:
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(2, channels, 1) for _ in range(operands))

    def forward(self, x):
        total = self.convs[0](x)
        for conv in self.convs[1:]:
            total = total + conv(x)
        return torch.relu(total)


@settings(max_examples=15, deadline=None)
@given(
    channels=st.sampled_from((8, 64, 65, 100, 128, 200)),
    operands=st.integers(2, 3),
    device=st.sampled_from((MAX78000, MAX78002)),
    seed=st.integers(0, 100),
)
def test_relu_after_add_any_channel_count(channels, operands, device, seed):
    torch.manual_seed(seed)
    model = AddRelu(channels, operands).eval()
    net = trace(model, (2, 4, 4))
    passes = -(-channels // 64)
    allowed = passes == 1 or device is MAX78002 or (operands, passes) == (2, 2)
    lowered = lower_to_hardware(net, device)
    fused = lowered.network.is_hardware
    assert fused == allowed
    if fused:
        assert "eltwise-activation" in [r.rule for r in lowered.rewrites]
        x = torch.randn(2, 2, 4, 4)
        got = run_float(lowered.network, x)[lowered.network.outputs[0]]
        torch.testing.assert_close(got, model(x).to(got.dtype), rtol=1e-4, atol=1e-5)
    else:
        report = check_report(net, device, rules=rules_of(device))
        hints = [v.hint for v in report.violations if v.rule == "activation"]
        assert hints and "2 operands x 2 passes" in hints[0]
        assert not any(x.op is Op.ACTIVATION for x in report.network.layers if x.is_hardware)
