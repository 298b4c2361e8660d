"""The IR: JSON round trip is lossless; shape helpers."""

import numpy as np

from cnnforge.ir import (
    INPUT,
    Activation,
    EltwiseOp,
    Layer,
    Network,
    Op,
    Pooling,
    PoolKind,
    Quantized,
)


def _net() -> Network:
    rng = np.random.default_rng(0)
    conv = Layer(
        name="enc.conv",
        op=Op.CONV2D,
        out_shape=(4, 8, 8),
        module_path="enc.conv",
        in_channels=3,
        out_channels=4,
        kernel_size=(3, 3),
        stride=(1, 1),
        padding=(1, 1),
        dilation=(1, 1),
        pool=Pooling(PoolKind.MAX, (2, 2), (2, 2)),
        activation=Activation.RELU,
        weight=rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
        bias=rng.standard_normal(4),
        quant=Quantized(8, rng.integers(-128, 128, (4, 3, 3, 3)), np.arange(4), output_shift=-1),
    )
    add = Layer(
        name="add",
        op=Op.PASSTHROUGH,
        inputs=("enc.conv", "enc.conv"),
        out_shape=(4, 8, 8),
        eltwise=EltwiseOp.ADD,
    )
    return Network("tiny", (3, 16, 16), (conv, add))


def test_json_round_trip_is_lossless():
    net = _net()
    back = Network.from_json(net.to_json())
    assert back.to_json() == net.to_json()
    a, b = net.layers[0], back.layers[0]
    assert b.pool == a.pool and b.activation is Activation.RELU and b.op is Op.CONV2D
    assert b.weight.dtype == np.float32 and np.array_equal(a.weight, b.weight)
    assert np.array_equal(a.quant.weights, b.quant.weights) and b.quant.output_shift == -1
    assert back.outputs == ("add",)


def test_shapes_and_consumers():
    net = _net()
    assert net.shape_of(INPUT) == (3, 16, 16)
    assert [c.name for c in net.consumers("enc.conv")] == ["add"]
    assert net.layers[0].quant.total_shift == -1
    assert Pooling(PoolKind.MAX, (1, 1), (2, 2)).output_dims((5, 4)) == (3, 2)
    assert Pooling(PoolKind.AVG, (2, 2), (2, 2)).output_dims((5, 4)) == (2, 2)
