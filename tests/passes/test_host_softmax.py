"""softmax / log_softmax / argmax on an output run on the host (passes/host_ops.py): the lowered
network computes the logits, its float evaluation with the host step equals the eager model,
the known answer is taken before it, and the C's host step agrees with float64."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.api.targets import compile_model
from cnnforge.frontend.torch_fx import trace
from cnnforge.passes.check import check_report
from cnnforge.pipeline import CompileOptions
from cnnforge.sim.float_eval import run_float
from cnnforge.targets.max7800x.device import MAX78000
from support.targets import rules_of

KINDS = ("softmax", "log_softmax", "argmax", "argmax:keepdim")


class Head(nn.Module):
    def __init__(self, classes: int, kind: str, dim: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, classes, 3, padding=1)
        self.kind, self.dim = kind, dim

    def forward(self, x):
        y = self.conv(x)
        if self.kind.startswith("argmax"):
            return torch.argmax(y, self.dim, keepdim=self.kind.endswith("keepdim"))
        fn = torch.log_softmax if self.kind == "log_softmax" else torch.softmax
        return fn(y, self.dim)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(KINDS), st.integers(2, 12), st.integers(0, 100))
def test_host_step_is_exact(kind, classes, seed):
    torch.manual_seed(seed)
    model = Head(classes, kind).eval()
    report = check_report(trace(model, (3, 6, 6)), MAX78000, rules=rules_of(MAX78000))
    assert report.fits and report.rewrites[0].rule == "host-softmax"
    net = report.network
    assert net.is_hardware and net.host_reduce == (kind,)
    x = torch.randn(2, 3, 6, 6)
    got = run_float(net, x)[net.outputs[0]]
    want = model(x).to(got.dtype)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_softmax_not_over_channels_is_a_violation():
    report = check_report(
        trace(Head(4, "softmax", dim=2).eval(), (3, 6, 6)), MAX78000, rules=rules_of(MAX78000)
    )
    (v,) = report.violations
    assert v.rule == "softmax" and "not the channels" in v.hint


def test_compile_run_checks_the_host_step_in_c(tmp_path):
    sample = np.random.default_rng(0).integers(-128, 128, (3, 6, 6))
    options = CompileOptions(
        output=tmp_path / "out",
        model=f"{__file__}:Head",
        model_args={"classes": 5, "kind": "log_softmax"},
        ptq=True,
        sample=sample,
        run=True,
        report=False,
        device="MAX78000",
    )
    state = compile_model(options)
    assert state.selftest.passed
    assert "host log_softmax of conv" in state.selftest.output
    known = np.load(tmp_path / "out" / "sample_output.npz")
    assert known["conv"].shape == (5, 6, 6)  # the logits: taken before the host step
    assert any("runs on the host" in n for n in state.notes)


def test_host_reduce_survives_json():
    net = check_report(
        trace(Head(3, "argmax:keepdim").eval(), (3, 4, 4)), MAX78000, rules=rules_of(MAX78000)
    ).network
    from cnnforge.ir import Network

    assert Network.from_json(net.to_json()).host_reduce == ("argmax:keepdim",)
