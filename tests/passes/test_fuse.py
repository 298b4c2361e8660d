"""Fusion (passes/fuse.py): hand-built model-level networks -> the exact expected hardware layers,
and the same float outputs before and after."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cnnforge.ir import Activation, EltwiseOp, Layer, Network, Op, Pooling, PoolKind
from cnnforge.passes.check import check_network
from cnnforge.passes.fuse import fuse, fuse_with_log, hardware_activation
from cnnforge.passes.verify import verify
from cnnforge.targets.max7800x.device import MAX78000, MAX78002, Max7800xDevice
from support.fuse_reference import act, combine, conv2d, maxpool, run
from support.targets import rules_of


def _same_outputs(a: Network, b: Network, shape=(2, 3, 8, 8), clamp: bool = False) -> None:
    x = torch.from_numpy(np.random.default_rng(1).standard_normal(shape))
    ya, yb = run(a, x), run(b, x)
    assert len(ya) == len(yb)
    for u, v in zip(ya.values(), yb.values(), strict=True):
        if clamp:  # the hardware's 8-bit output range (docs/hardware/arithmetic.md R1.1)
            u, v = u.clamp(-1, 127 / 128), v.clamp(-1, 127 / 128)
        torch.testing.assert_close(u, v, rtol=1e-5, atol=1e-9)


def test_conv_relu_pool_conv_becomes_two_layers() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    layers = (
        c1,
        act("r1", "c1", c1.out_shape),
        maxpool("p1", "r1", c1.out_shape),
        conv2d("c2", "p1", (4, 4, 4), 5, seed=1),
        act("r2", "c2", (5, 4, 4), Activation.ABS),
    )
    net = Network("n", (3, 8, 8), layers)
    verify(net)
    fused, log = fuse_with_log(net, device=None)
    verify(fused)
    assert [x.name for x in fused] == ["c1", "c2"]
    assert fused.layer("c1").activation is Activation.RELU
    c2 = fused.layer("c2")
    assert c2.inputs == ("c1",) and c2.pool == Pooling(PoolKind.MAX, (2, 2), (2, 2))
    assert c2.activation is Activation.ABS and fused.outputs == ("c2",)
    assert [r.rule for r in log] == ["fuse-activation", "fuse-activation", "fuse-pool"]
    _same_outputs(net, fused)


def test_no_fusion_when_the_intermediate_has_other_readers() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    layers = (
        c1,
        act("r1", "c1", c1.out_shape),
        conv2d("c2", "c1", (4, 8, 8), 4, seed=1),  # reads the conv before the ReLU
        combine("sum", Op.ELTWISE, ("r1", "c2"), c1.out_shape, EltwiseOp.ADD),
    )
    net = Network("n", (3, 8, 8), layers)
    fused = fuse(net, device=None)
    verify(fused)
    assert fused.layer("r1").op is Op.ACTIVATION  # left for the checker to report
    assert fused.layer("sum").op is Op.PASSTHROUGH
    _same_outputs(net, fused)


def test_relu6_and_hardtanh_exact_only_under_the_clamp() -> None:
    for kind, params, expected in (
        (Activation.RELU6, (), Activation.RELU),
        (Activation.HARDTANH, (0.0, 1.0), Activation.RELU),
        (Activation.HARDTANH, (-1.0, 1.0), Activation.NONE),
        (Activation.HARDTANH, (-0.5, 0.5), None),
        (Activation.LEAKYRELU, (0.1,), None),
        (Activation.SIGMOID, (), None),
    ):
        layer = act("a", "c", (1, 1, 1), kind, params)
        assert hardware_activation(layer) is expected
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    net = Network("n", (3, 8, 8), (c1, act("r", "c1", c1.out_shape, Activation.RELU6)))
    fused = fuse(net, device=None)
    assert len(fused) == 1 and fused.layers[0].activation is Activation.RELU
    _same_outputs(net, fused, clamp=True)


def test_unsupported_activation_stays_model_level() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    net = Network("n", (3, 8, 8), (c1, act("s", "c1", c1.out_shape, Activation.SIGMOID)))
    fused = fuse(net, device=None)
    assert [x.op for x in fused] == [Op.CONV2D, Op.ACTIVATION]


def test_residual_add_fuses_in_flight_and_chains_merge() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    c2 = conv2d("c2", "c1", (4, 8, 8), 4, seed=1)
    c3 = conv2d("c3", "c1", (4, 8, 8), 4, seed=2)
    layers = (
        c1,
        c2,
        c3,
        combine("a1", Op.ELTWISE, ("c1", "c2"), c1.out_shape, EltwiseOp.ADD),
        combine("a2", Op.ELTWISE, ("a1", "c3"), c1.out_shape, EltwiseOp.ADD),
        conv2d("c4", "a2", (4, 8, 8), 6, seed=3, bias=False),
    )
    net = Network("n", (3, 8, 8), layers)
    fused, log = fuse_with_log(net, device=None)
    verify(fused)
    c4 = fused.layer("c4")
    assert c4.eltwise is EltwiseOp.ADD and c4.inputs == ("c1", "c2", "c3") and c4.pool_first
    assert [r.rule for r in log] == ["merge-eltwise", "fuse-eltwise"]
    _same_outputs(net, fused)


@pytest.mark.parametrize(("device", "folds"), [(MAX78000, True), (MAX78002, False), (None, False)])
def test_add_into_a_conv_with_bias_only_where_the_vendor_tool_accepts_it(
    device: Max7800xDevice | None, folds: bool
) -> None:
    """The vendor tool refuses element-wise + conv + bias in one layer on the MAX78002 (one pass
    too); without a device, what is legal on every device."""
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    c2 = conv2d("c2", "c1", (4, 8, 8), 4, seed=1)
    layers = (
        c1,
        c2,
        combine("a1", Op.ELTWISE, ("c1", "c2"), c1.out_shape, EltwiseOp.ADD),
        conv2d("c3", "a1", (4, 8, 8), 6, seed=3),
    )
    fused = fuse(Network("n", (3, 8, 8), layers), device=device)
    assert (fused.layer("c3").eltwise is EltwiseOp.ADD) is folds


def test_add_then_pool_then_conv_is_pool_after_eltwise() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    c2 = conv2d("c2", "input", (3, 8, 8), 4, seed=1)
    layers = (
        c1,
        c2,
        combine("sub", Op.ELTWISE, ("c1", "c2"), c1.out_shape, EltwiseOp.SUB),
        maxpool("p", "sub", c1.out_shape),
        conv2d("c3", "p", (4, 4, 4), 3, seed=2, bias=False),
    )
    net = Network("n", (3, 8, 8), layers)
    fused = fuse(net, device=None)
    verify(fused)
    c3 = fused.layer("c3")
    assert c3.eltwise is EltwiseOp.SUB and not c3.pool_first and c3.pool is not None
    _same_outputs(net, fused)


def test_concat_becomes_inputs_and_lonely_pool_a_passthrough() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    c2 = conv2d("c2", "input", (3, 8, 8), 8, seed=1)
    layers = (
        c1,
        c2,
        combine("cat", Op.CONCAT, ("c1", "c2"), (12, 8, 8)),
        conv2d("c3", "cat", (12, 8, 8), 4, k=1, pad=0, seed=2),
        maxpool("p", "c3", (4, 8, 8)),
    )
    net = Network("n", (3, 8, 8), layers)
    fused = fuse(net, device=None)
    verify(fused)
    assert fused.layer("c3").inputs == ("c1", "c2")
    p = fused.layer("p")
    assert p.op is Op.PASSTHROUGH and p.pool is not None and p.kernel_size == (1, 1)
    assert fused.is_hardware
    _same_outputs(net, fused)


def test_concat_read_twice_becomes_a_passthrough() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    layers = (
        c1,
        combine("cat", Op.CONCAT, ("input", "c1"), (7, 8, 8)),
        conv2d("c2", "cat", (7, 8, 8), 4, seed=1),
        conv2d("c3", "cat", (7, 8, 8), 4, seed=2),
    )
    net = Network("n", (3, 8, 8), layers, outputs=("c2", "c3"))
    fused = fuse(net, device=None)
    verify(fused)
    assert fused.layer("cat").op is Op.PASSTHROUGH
    _same_outputs(net, fused)


def test_flatten_linear() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    rng = np.random.default_rng(5)
    layers = (
        c1,
        maxpool("p", "c1", c1.out_shape),
        Layer("flat", Op.FLATTEN, inputs=("p",), out_shape=(64,), module_path="flat"),
        Layer(
            "fc",
            Op.LINEAR,
            inputs=("flat",),
            out_shape=(10,),
            module_path="fc",
            in_channels=64,
            out_channels=10,
            weight=rng.standard_normal((10, 64)).astype(np.float32),
            bias=rng.standard_normal(10).astype(np.float32),
        ),
        Layer("flat2", Op.FLATTEN, inputs=("fc",), out_shape=(10,), module_path="flat2"),
    )
    net = Network("n", (3, 8, 8), layers)
    fused = fuse(net, device=None)
    verify(fused)
    assert [x.name for x in fused] == ["c1", "p", "fc"]
    assert fused.layer("fc").flatten and fused.layer("fc").inputs == ("p",)
    # flatten cannot pool (docs/hardware/arithmetic.md R5.1)
    assert fused.layer("p").op is Op.PASSTHROUGH
    assert fused.outputs == ("fc",)
    _same_outputs(net, fused)


def test_output_layer_is_never_absorbed() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    r1 = act("r1", "c1", c1.out_shape)
    net = Network("n", (3, 8, 8), (c1, r1), outputs=("c1", "r1"))
    fused = fuse(net, device=None)
    assert [x.name for x in fused] == ["c1", "r1"]


def test_residual_add_relu_becomes_identity_conv() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    c2 = conv2d("c2", "c1", (4, 8, 8), 4, seed=1)
    layers = (
        c1,
        c2,
        combine("add", Op.ELTWISE, ("c2", "c1"), c1.out_shape, EltwiseOp.ADD),
        act("relu", "add", c1.out_shape),
        conv2d("c3", "relu", (4, 8, 8), 2, seed=2),
    )
    net = Network("n", (3, 8, 8), layers)
    fused, log = fuse_with_log(net, device=None)
    verify(fused)
    relu = fused.layer("relu")
    assert relu.op is Op.CONV2D and relu.kernel_size == (1, 1) and relu.eltwise is EltwiseOp.ADD
    assert relu.inputs == ("c2", "c1") and relu.activation is Activation.RELU
    assert relu.module_path == "add" and fused.is_hardware
    assert "eltwise-activation" in [r.rule for r in log]
    _same_outputs(net, fused)


def test_relu_after_maxpool_moves_before_it() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    layers = (
        c1,
        maxpool("p", "c1", c1.out_shape),
        act("r", "p", (4, 4, 4)),
        conv2d("c2", "r", (4, 4, 4), 3, seed=1),
    )
    net = Network("n", (3, 8, 8), layers, outputs=("r", "c2"))
    fused, log = fuse_with_log(net, device=None)
    verify(fused)
    assert log[0].rule == "relu-before-maxpool"
    assert fused.layer("c1").activation is Activation.RELU
    assert fused.outputs == ("p", "c2") and fused.layer("p").op is Op.PASSTHROUGH
    _same_outputs(net, fused)
    # the last layer's pool has no other reader: conv -> relu -> pool -> conv is 2 layers
    fused = fuse(Network("n", (3, 8, 8), layers), device=None)
    assert [x.name for x in fused] == ["c1", "c2"] and fused.layer("c2").pool is not None


def test_activation_after_concat_moves_into_the_parts() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    c2 = conv2d("c2", "input", (3, 8, 8), 4, seed=1)
    layers = (
        c1,
        c2,
        combine("cat", Op.CONCAT, ("c1", "c2"), (8, 8, 8)),
        act("r", "cat", (8, 8, 8), Activation.ABS),
        conv2d("c3", "r", (8, 8, 8), 3, k=1, pad=0, seed=2),
    )
    net = Network("n", (3, 8, 8), layers)
    fused, log = fuse_with_log(net, device=None)
    verify(fused)
    assert [x.name for x in fused] == ["c1", "c2", "c3"] and fused.layer("c3").inputs == (
        "c1",
        "c2",
    )
    assert fused.layer("c1").activation is Activation.ABS is fused.layer("c2").activation
    assert "activation-into-concat" in [r.rule for r in log]
    _same_outputs(net, fused)


def test_redundant_activation_is_dropped() -> None:
    c1 = conv2d("c1", "input", (3, 8, 8), 4)
    layers = (
        c1,
        act("r1", "c1", c1.out_shape),
        act("r2", "r1", c1.out_shape, Activation.ABS),
        act("h", "r2", c1.out_shape, Activation.HARDTANH, (-1.0, 1.0)),
    )
    net = Network("n", (3, 8, 8), layers)
    fused, log = fuse_with_log(net, device=None)
    verify(fused)
    assert [x.name for x in fused] == ["c1"] and fused.outputs == ("c1",)
    assert [r.rule for r in log].count("drop-activation") == 2
    _same_outputs(net, fused, clamp=True)


def _wide_residual(operands: int, bias: bool) -> Network:
    """``operands`` 128-channel tensors added, then a conv: 2 passes of 64 channels."""
    convs = tuple(conv2d(f"c{i}", "input", (3, 4, 4), 128, k=1, pad=0, seed=i) for i in range(3))
    names = tuple(c.name for c in convs[:operands])
    layers = (
        *convs[:operands],
        combine("add", Op.ELTWISE, names, (128, 4, 4), EltwiseOp.ADD),
        conv2d("head", "add", (128, 4, 4), 8, bias=bias, seed=9),
    )
    return Network("n", (3, 4, 4), layers)


def test_multipass_in_flight_eltwise_follows_the_device() -> None:
    def in_flight(net: Network, device) -> bool:
        fused = fuse(net, device)
        verify(fused)
        assert not check_network(
            fused, device, rules=rules_of(device)
        )  # whichever form, it is legal there
        return fused.layer("head").eltwise is EltwiseOp.ADD

    assert in_flight(_wide_residual(2, True), MAX78000)  # 2 operands x 2 passes: allowed
    assert not in_flight(_wide_residual(3, True), MAX78000)
    assert in_flight(_wide_residual(3, False), MAX78002)
    assert not in_flight(_wide_residual(3, True), MAX78002)  # multi-pass + conv bias
    assert (
        fuse(_wide_residual(2, True), device=None).layer("add").op is Op.PASSTHROUGH
    )  # no device: plain
    _same_outputs(_wide_residual(3, False), fuse(_wide_residual(3, False), MAX78002), (1, 3, 4, 4))
