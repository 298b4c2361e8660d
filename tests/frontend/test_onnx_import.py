"""ONNX in: the ops beyond the U-Nets, OPAQUE rows, shapes from -i, bad files one line with exit 2
(the round trip of every shipped and zoo model: tests/frontend/test_onnx_round_trip.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from torch import nn

from cnnforge.frontend.onnx import load_onnx
from cnnforge.ir import Op
from cnnforge.models import build_model
from support.cli import run_cli
from support.onnx_export import export


class Mixed(nn.Module):
    """Ops beyond the U-Nets: pads, clip, leaky relu, resize, avg/global pool, gemm, softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.clamp(self.conv(x), 0, 6)
        y = nn.functional.leaky_relu(nn.functional.pad(y, (1, 1, 1, 1)), 0.1)
        y = nn.functional.avg_pool2d(y, 2)
        y = self.up(self.conv2(y))
        y = nn.functional.hardswish(y)  # not mapped: an OPAQUE row
        y = nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)
        return torch.softmax(self.fc(y), dim=1)


def test_mixed_ops_and_an_opaque_row(tmp_path):
    path = export(Mixed(), (3, 16, 16), tmp_path / "mixed.onnx")
    net = load_onnx(path, None)
    ops = [layer.op for layer in net.layers]
    assert Op.PAD in ops and Op.UPSAMPLE in ops and Op.LINEAR in ops and Op.SOFTMAX in ops
    opaque = [layer for layer in net.layers if layer.op is Op.OPAQUE]
    assert [layer.opaque_kind for layer in opaque] == ["onnx.HardSwish"]


def test_analyze_an_onnx_file_and_its_shape_rules(tmp_path, capsys):
    path = export(build_model("unet-voc"), (3, 64, 64), tmp_path / "u.onnx")
    code, out, _ = run_cli(["analyze", str(path)], capsys)
    assert code == 0 and "486,613" in out
    dyn = export(build_model("unet-voc"), (3, 64, 64), tmp_path / "dyn.onnx", dynamic=True)
    code, out, _ = run_cli(["analyze", str(dyn), "-i", "3,32,32"], capsys)
    assert code == 0 and "486,613" in out
    code, _, err = run_cli(["analyze", str(dyn)], capsys)
    assert code == 2 and err.count("\n") == 1 and "dynamic sizes" in err
    code, _, err = run_cli(["analyze", str(path), "-i", "3,32,32"], capsys)
    assert code == 2 and err.count("\n") == 1 and "does not match" in err


def test_bad_onnx_files_are_one_line(tmp_path, capsys):
    good = export(build_model("unet-voc"), (3, 64, 64), tmp_path / "u.onnx").read_bytes()
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(good[: len(good) // 3])
    model = onnx.load_from_string(good)
    model.graph.node[5].op_type = "NoSuchOp"
    unknown = tmp_path / "unknown.onnx"
    unknown.write_bytes(model.SerializeToString())
    for path, words in (
        (truncated, "not a readable ONNX"),
        (unknown, "unknown ONNX op"),
        (tmp_path / "missing.onnx", "no such ONNX file"),
    ):
        code, _, err = run_cli(["analyze", str(path)], capsys)
        assert code == 2 and err.count("\n") == 1 and words in err, err


class Scaled(nn.Module):
    """bn(y) / 4 (cnnforge.nn's form) folds into the BatchNorm; conv(x) * 0.5 stays OPAQUE."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        return self.conv2(torch.relu(self.bn(self.conv(x)) / 4)) * 0.5


def test_a_batchnorm_divided_by_a_constant_is_one_batchnorm(tmp_path):
    torch.manual_seed(0)
    module = Scaled()
    module.bn.running_var.uniform_(0.5, 1.5)
    path = export(module, (3, 8, 8), tmp_path / "scaled.onnx")
    net = load_onnx(path, None)
    assert [layer.op for layer in net.layers] == [
        Op.CONV2D, Op.BATCHNORM, Op.ACTIVATION, Op.CONV2D, Op.OPAQUE
    ]  # fmt: skip
    assert net.layers[-1].opaque_kind == "onnx.Mul"
    bn = net.layers[1].batchnorm
    np.testing.assert_array_equal(bn.weight, module.bn.weight.detach().numpy() / 4)
    x = torch.randn(1, 3, 8, 8)
    from cnnforge.sim.float_eval import run_float

    opaque = {net.layers[-1].name: torch.zeros(1, 4, 8, 8)}  # no float semantics of its own
    got = run_float(net, x.numpy(), all_layers=True, given=opaque)[net.layers[3].name]
    want = module.conv2(torch.relu(module.bn(module.conv(x)) / 4))
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_mis_mapped_import_is_refused_naming_the_layer(tmp_path):
    """The gate of load_onnx: a network that computes something else than onnxruntime (here
    one conv's weights negated, as a wrong operator mapping would) is a ModelError."""
    import dataclasses

    from cnnforge.errors import ModelError
    from cnnforge.frontend.onnx import read_onnx
    from cnnforge.frontend.onnx_check import check_against_onnxruntime

    path = export(Mixed(), (3, 16, 16), tmp_path / "mixed.onnx")
    net, tensors = read_onnx(path, None)
    check_against_onnxruntime(path, net, tensors)  # the faithful import passes
    conv = next(layer for layer in net.layers if layer.op is Op.CONV2D)
    wrong = net.with_layers(
        dataclasses.replace(x, weight=-x.weight) if x is conv else x for x in net.layers
    )
    with pytest.raises(ModelError, match=f"differs from onnxruntime at layer {conv.name}"):
        check_against_onnxruntime(path, wrong, tensors)
