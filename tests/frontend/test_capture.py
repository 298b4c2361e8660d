"""The front door: torch.fx capture checked against eager, torch.export fallback, refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.errors import CnnforgeError, ModelError
from cnnforge.frontend.capture import capture, check_input, compare
from cnnforge.frontend.torch_export import capture_export
from cnnforge.frontend.torch_fx import capture_fx, trace
from cnnforge.ir import Op
from cnnforge.passes import lower
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.sim.float_eval import run_float


class GuardedSkipAdd(nn.Module):
    """MONAI's pattern (UpCat): a skip joined only ``if torch.jit.isinstance(x, torch.Tensor)``;
    under torch.fx the test sees a Proxy, is False, and the add silently disappears."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = torch.relu(self.a(x))
        y = self.b(skip)
        if torch.jit.isinstance(skip, torch.Tensor):
            y = y + skip
        return torch.relu(y)


class GuardedSkipCat(nn.Module):
    """The same guard on a concatenation: under torch.fx the next conv gets too few channels."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.a(x)
        if torch.jit.isinstance(y, torch.Tensor):
            y = torch.cat([y, torch.relu(y)], dim=1)
        return self.b(y)


class Noisy(nn.Module):
    """A forward that never computes the same function twice: no capture can match it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x) + torch.rand_like(self.conv(x))


def _eager(model: nn.Module, shape: tuple[int, ...]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    x = check_input(model, shape)
    with torch.no_grad():
        out = model.eval()(x)
    return x, [out] if isinstance(out, torch.Tensor) else list(out)


def test_torch_fx_drops_the_guarded_add_and_the_check_sees_it() -> None:
    model = GuardedSkipAdd()
    assert "add" not in [layer.label() for layer in trace(model, (3, 8, 8))]
    x, eager = _eager(model, (3, 8, 8))
    mismatch = compare(capture_fx(model, (3, 8, 8)), x, eager)
    assert mismatch is not None and mismatch.index == 0
    assert "isinstance" in mismatch.describe("torch.fx")


@pytest.mark.parametrize("model", [GuardedSkipAdd(), GuardedSkipCat()])
def test_guarded_skips_are_captured_by_the_export_fallback(model: nn.Module) -> None:
    net = capture(model, (3, 8, 8))
    x, eager = _eager(model, (3, 8, 8))
    got = run_float(net, x)[net.outputs[0]]
    torch.testing.assert_close(got, eager[0], rtol=1e-5, atol=1e-5)
    assert {layer.label() for layer in net} & {"add", "concat"}
    assert net.layer("a").module_path == "a"  # module paths come from nn_module_stack


@pytest.mark.parametrize("model", [GuardedSkipAdd(), GuardedSkipCat()])  # fx, export
def test_a_kept_module_shares_no_storage_a_handed_over_one_may(model: nn.Module) -> None:
    kept = capture(model, (3, 8, 8))
    handed = capture(model, (3, 8, 8), handed_over=True)
    conv = next(layer for layer in kept if layer.op is Op.CONV2D)
    before = conv.weight.copy()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)  # the caller keeps training its model after the capture
    np.testing.assert_array_equal(conv.weight, before)
    assert all(layer.weight.flags.owndata for layer in kept if layer.weight is not None)
    changed = handed.layer(conv.name).weight
    np.testing.assert_array_equal(changed, before + 1.0)  # views: only for load_network


def test_a_model_no_capture_matches_is_refused_in_one_line() -> None:
    with pytest.raises(ModelError) as err:
        capture(Noisy(), (3, 8, 8))
    text = str(err.value)
    assert "neither torch.fx nor torch.export" in text and "\n" not in text


def test_data_dependent_control_flow_names_the_users_line() -> None:
    class Branchy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.mean() > 0:
                return x + x
            return x - x

    with pytest.raises(ModelError) as err:
        capture(Branchy(), (3, 8, 8))
    assert "test_capture.py" in str(err.value.where) and "torch.export fails too" in str(err.value)


class Everything(nn.Module):
    """Most ops the ATen lowering maps, with a few it keeps as OPAQUE rows."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.up = nn.ConvTranspose2d(8, 8, 2, 2)
        self.head = nn.Conv1d(1, 2, 3)
        self.fc = nn.Linear(8, 4)
        self.gn = nn.GroupNorm(2, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = F.leaky_relu(self.bn(self.conv(x)), 0.1)
        z = self.up(F.max_pool2d(y, 2))
        z = F.pad(z, [1, 0, 0, 1])[:, :, :-1, 1:]  # pad then slice back: PAD + OPAQUE slices
        z = torch.cat([z, torch.clamp(y, 0, 6), F.hardswish(self.gn(y))], 1)
        z = F.interpolate(F.avg_pool2d(z, 2), scale_factor=2, mode="nearest")
        g = self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))
        return torch.softmax(z, 1), g, torch.argmax(z, 1, keepdim=True).float(), torch.sigmoid(z)


def test_the_export_lowering_computes_what_eager_computes() -> None:
    model = Everything().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    captured = capture_export(model, (3, 8, 8), "Everything")
    ops = {layer.op for layer in captured.network}
    assert {Op.CONV2D, Op.BATCHNORM, Op.CONVTRANSPOSE2D, Op.PAD, Op.SOFTMAX, Op.OPAQUE} <= ops
    assert {Op.LINEAR, Op.POOL, Op.CONCAT, Op.UPSAMPLE, Op.FLATTEN} <= ops
    x, eager = _eager(model, (3, 8, 8))
    assert compare(captured, x, eager) is None
    assert captured.network.layer("gn").opaque_kind == "aten.group_norm"
    assert captured.network.layer("gn").weight.size == 16  # GroupNorm's parameters kept


@settings(max_examples=15, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(0, 2),
    st.sampled_from(["relu", "relu6", "sigmoid"]),
    st.booleans(),
)
def test_fx_and_export_give_the_same_network(c: int, pad: int, act: str, down: bool) -> None:
    torch.manual_seed(c)
    layers = [
        nn.Conv2d(2, c, 3, padding=pad),
        nn.BatchNorm2d(c),
        getattr(nn, act.upper() if act != "relu6" else "ReLU6", nn.ReLU)(),
    ]
    if down:
        layers.append(nn.MaxPool2d(2))
    model = nn.Sequential(*layers, nn.Conv2d(c, 3, 1), nn.Softmax(dim=1)).eval()
    via_fx = capture_fx(model, (2, 8, 8)).network
    via_export = capture_export(model, (2, 8, 8), "seq").network
    assert [la.op for la in via_fx] == [la.op for la in via_export]
    assert [la.out_shape for la in via_fx] == [la.out_shape for la in via_export]
    for a, b in zip(via_fx, via_export, strict=True):
        if a.weight is not None:
            np.testing.assert_array_equal(a.weight, b.weight)


def test_lowering_is_gated_by_float_equivalence(monkeypatch: pytest.MonkeyPatch) -> None:
    net = capture(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()), (3, 8, 8))
    lower_to_hardware(net, device=None)  # the real steps pass the gate

    def broken(network, device):
        layers = [
            dataclasses.replace(x, weight=x.weight * 2) if x.has_weights else x
            for x in network.layers
        ]
        return network.with_layers(layers), ()

    monkeypatch.setattr(lower, "LOWERING_STEPS", (*lower.LOWERING_STEPS, ("broken", broken)))
    with pytest.raises(CnnforgeError, match="broken changed what the network computes"):
        lower_to_hardware(net, device=None)


class TupleValued(nn.Module):
    """chunk, a pool returning indices, max_unpool, a broadcast multiply: all kept as rows."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.d = nn.Conv2d(4, 4, 1)
        self.e = nn.Conv2d(4, 4, 1)
        self.p = nn.MaxPool2d(2, return_indices=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.c(x).chunk(2, dim=1)
        pooled, indices = self.p(a)
        y = F.max_unpool2d(pooled, indices, 2)
        return self.d(y) + F.hardsigmoid(b) * self.e(b).mean((2, 3), keepdim=True)


@pytest.mark.parametrize("how", ["fx", "export"])
def test_tuple_valued_ops_are_opaque_rows_and_still_checked(how: str) -> None:
    model = TupleValued().eval()
    if how == "fx":
        captured = capture_fx(model, (3, 8, 8))
    else:
        captured = capture_export(model, (3, 8, 8), "TupleValued")
    labels = [layer.label() for layer in captured.network]
    assert labels[0] == "conv2d" and labels[-1] == "add" and labels.count("conv2d") == 3
    x, eager = _eager(model, (3, 8, 8))
    assert compare(captured, x, eager) is None


class RandomBlocks(nn.Module):
    """A chain of blocks drawn by hypothesis, each ending where the next begins (8 channels)."""

    def __init__(self, kinds: list[str]) -> None:
        super().__init__()
        self.kinds = kinds
        self.convs = nn.ModuleList(nn.Conv2d(8, 8, 3, padding=1) for _ in kinds)
        self.bns = nn.ModuleList(nn.BatchNorm2d(8) for _ in kinds)
        self.stem = nn.Conv2d(3, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        for kind, conv, bn in zip(self.kinds, self.convs, self.bns, strict=True):
            z = bn(conv(y))
            if kind == "add":
                y = torch.relu(z + y)
            elif kind == "cat":
                y = torch.cat([z[:, :4], y[:, 4:]], 1)
            elif kind == "pad":
                y = F.pad(F.max_pool2d(z, 2), [0, 1, 1, 0])[:, :, 1:, :-1]
                y = F.interpolate(y, scale_factor=2)
            elif kind == "pad-crop":
                y = F.pad(z, [-1, -1, -1, -1], value=0.0)
                y = F.pad(y, [1, 1, 1, 1], value=0.5)
            elif kind == "norm":
                y = F.group_norm(F.hardswish(z), 2)
            else:
                y = F.log_softmax(z, dim=1) + torch.softmax(y, 1)
        return y


@settings(max_examples=12, deadline=None)
@given(st.lists(st.sampled_from(["add", "cat", "pad", "pad-crop", "norm", "soft"]), max_size=4))
def test_both_captures_compute_what_eager_computes(kinds: list[str]) -> None:
    torch.manual_seed(len(kinds))
    model = RandomBlocks(kinds).eval()
    with torch.no_grad():
        for bn in model.bns:
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    x, eager = _eager(model, (3, 8, 8))
    assert compare(capture_export(model, (3, 8, 8), "blocks", x), x, eager) is None
    assert capture(model, (3, 8, 8)).layers[-1].out_shape == tuple(eager[0].shape[1:])
