"""cnnforge.nn QAT modules: worked examples of docs/hardware/arithmetic.md, stages, BN folding, the
policy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import cnnforge.nn as qnn
from cnnforge.errors import InputError
from cnnforge.ir import Activation, EltwiseOp, Op, PoolKind
from cnnforge.nn import Stage

X_A = [[12, -7, 100], [-128, 55, 3], [27, 90, -64]]
W_A = [[5, -3, 17], [2, 127, -128], [-9, 0, 44]]


def _example_a(activation: str = "relu", wide: bool = False) -> qnn.Conv2d:
    """docs/hardware/arithmetic.md §7 example A: w_int, bias -20 and output_shift 1 from float
    parameters."""
    conv = qnn.Conv2d(1, 1, 3, padding=0, activation=activation, wide=wide)
    with torch.no_grad():  # float w = w_int / 128 * 2^1 so that max |P| = 2 -> shift 1
        conv.weight.copy_(torch.tensor(W_A, dtype=torch.float32).reshape(1, 1, 3, 3) / 64)
        conv.bias.copy_(torch.tensor([-20 / 64]))
    return qnn.set_quantized_eval(conv)


def test_worked_example_a() -> None:
    conv = _example_a()
    q = conv.quantized_params()
    assert q.output_shift == 1 and int(q.bias[0]) == -20
    assert q.weight.reshape(3, 3).tolist() == W_A
    x = torch.tensor(X_A, dtype=torch.float32).reshape(1, 1, 3, 3) / 128
    assert float(conv(x)) * 128 == 39
    wide = _example_a("none", wide=True)
    # wide: acc 2507 in Q17.14 whatever output_shift is, float 0.1530
    # (docs/hardware/arithmetic.md §7 A, R1.7)
    assert float(wide(x)) == 2507 / 2**14


def test_worked_example_b_abs_rounds_before_abs() -> None:
    conv = qnn.Conv1d(4, 1, 1, padding=0, bias=False, activation="abs", weight_bits=4)
    with torch.no_grad():  # 4-bit w_int [-3, 1, -1, 5] with output_shift 0: w = w_int / 8
        conv.weight.copy_(torch.tensor([-3.0, 1.0, -1.0, 5.0]).reshape(1, 4, 1) / 8)
    qnn.set_quantized_eval(conv)
    assert conv.quantized_params().output_shift == 0
    x = torch.tensor([3.0, -1.0, 2.0, 0.0]).reshape(1, 4, 1) / 128
    assert float(conv(x)) * 128 == 1  # hardware order: round (-1.5 -> -1), then |.|


@pytest.mark.parametrize(
    ("window", "trunc", "rounding"),
    [([-3, -2, 0, 0], -1, -1), ([1, 1, 0, 0], 0, 1), ([-2, 0, 0, 0], 0, -1), ([5, 0, 0, 0], 1, 1)],
)
def test_worked_example_c_avg_pool(window: list[int], trunc: int, rounding: int) -> None:
    x = torch.tensor(window, dtype=torch.float32).reshape(1, 1, 2, 2) / 128
    pool = qnn.set_quantized_eval(qnn.Pool("avg", 2))
    assert float(pool(x)) * 128 == trunc
    qnn.set_quantized_eval(pool, avg_pool_rounding=True)
    assert float(pool(x)) * 128 == rounding


def test_eltwise_saturates_once() -> None:
    add = qnn.set_quantized_eval(qnn.Add())
    xs = [torch.full((1, 1, 1, 1), v / 128) for v in (127, 127, -128)]
    assert float(add(*xs)) * 128 == 126
    assert float(qnn.Add()(*xs)) == pytest.approx(126 / 128)


def test_stages_and_bn_folding_keep_state_dict_keys() -> None:
    torch.manual_seed(0)
    conv = qnn.Conv2d(3, 4, activation="relu", batchnorm=True)
    conv.train()
    conv(torch.randn(8, 3, 6, 6) * 0.3)  # BN statistics
    conv.eval()
    keys = set(conv.state_dict())
    x = torch.randint(-128, 128, (2, 3, 6, 6)) / 128
    float_out = conv(x)
    qnn.enable_qat(conv, qnn.QATPolicy(weight_bits=4))
    assert conv.current_stage is Stage.QAT and bool(conv.bn_folded)
    assert conv.weight_bits == 4
    qat_out = conv(x)
    assert (qat_out - float_out).abs().max() < 0.3  # BN folded: same function, now quantized
    assert set(conv.state_dict()) == keys
    fresh = qnn.Conv2d(3, 4, activation="relu", batchnorm=True, weight_bits=4)
    fresh.load_state_dict(conv.state_dict())
    assert fresh.current_stage is Stage.QAT and torch.equal(fresh(x), qat_out)


def test_qat_gradients_flow() -> None:
    torch.manual_seed(1)
    conv = qnn.enable_qat(qnn.Conv2d(2, 3, pool="avg", activation="relu"))
    x = (torch.randint(-128, 128, (2, 2, 6, 6)) / 128).requires_grad_()
    conv(x).sum().backward()
    assert conv.weight.grad is not None and conv.weight.grad.abs().sum() > 0
    assert x.grad is not None


def test_cnnforge_layer_fields() -> None:
    conv = qnn.Conv2d(3, 8, pool="max", pool_size=2, pool_stride=2, activation="abs")
    layer = conv.cnnforge_layer("c", ("input",), ((3, 8, 8),), (8, 4, 4))
    assert layer.op is Op.CONV2D and layer.quant is None and layer.weight.shape == (8, 3, 3, 3)
    assert layer.pool.kind is PoolKind.MAX and layer.activation is Activation.ABS
    qnn.set_quantized_eval(conv)
    layer = conv.cnnforge_layer("c", ("input",), ((3, 8, 8),), (8, 4, 4))
    q = layer.quant
    assert q is not None and q.weights.dtype == np.int64
    np.testing.assert_array_equal(layer.weight, q.weights * 2.0 ** (q.output_shift - 7))
    add = qnn.Sub(pool="avg", pool_first=False).cnnforge_layer("s", ("a", "b"), (), (4, 2, 2))
    assert add.op is Op.PASSTHROUGH and add.eltwise is EltwiseOp.SUB and not add.pool_first
    lin = qnn.Linear(12, 5, flatten=True, wide=True).cnnforge_layer("f", ("c",), (), (5,))
    assert lin.flatten and lin.wide and lin.in_channels == 12


def test_bad_module_arguments() -> None:
    with pytest.raises(ValueError, match="activation"):
        qnn.Conv2d(1, 1, activation="relu6")
    with pytest.raises(ValueError, match="wide"):
        qnn.Conv2d(1, 1, activation="relu", wide=True)
    with pytest.raises(ValueError, match="dilation"):
        qnn.Pool("avg", 2, dilation=2)


def test_policy_file(tmp_path: Path) -> None:
    path = tmp_path / "qat_policy.yaml"
    path.write_text(
        "---\nstart_epoch: 10\nweight_bits: 8\nshift_quantile: 0.99\n"
        "overrides:\n  a: {weight_bits: 4}\n  b: 2\n"
    )
    policy = qnn.load_policy(path)
    assert policy.start_epoch == 10 and policy.overrides == {"a": 4, "b": 2}
    assert policy.bits_for("a") == 4 and policy.bits_for("zz") == 8

    class Two(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = qnn.Conv2d(1, 2)
            self.b = qnn.Conv2d(2, 2, weight_bits=1)
            self.c = qnn.Conv2d(2, 2, weight_bits=1)

    model = qnn.enable_qat(Two(), policy)
    assert (model.a.weight_bits, model.b.weight_bits, model.c.weight_bits) == (4, 2, 1)
    assert model.a.shift_quantile == 0.99
    with pytest.raises(InputError, match="nope"):
        qnn.enable_qat(Two(), qnn.QATPolicy(overrides={"nope": 4}))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("weight_bits: 3\n", "weight_bits 3"),
        ("start_epoch: -1\n", "start_epoch"),
        ("shift_quantile: 2\n", "shift_quantile"),
        ("bogus: 1\n", "unknown"),
        ("- 1\n", "mapping"),
        ("a: [\n", "YAML"),
        ("overrides:\n  x: {weight_bits: 5}\n", "overrides.x"),
    ],
)
def test_bad_policy_files(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=match) as info:
        qnn.load_policy(path)
    assert str(path) in info.value.one_line()


def test_missing_policy_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        qnn.load_policy(tmp_path / "none.yaml")


def test_resume_keeps_stage_bits_and_quantile() -> None:
    model = nn.Sequential(qnn.Conv2d(2, 2), qnn.Conv2d(2, 2))
    qnn.enable_qat(model, qnn.QATPolicy(weight_bits=2, overrides={"1": 4}, shift_quantile=0.9))
    fresh = nn.Sequential(qnn.Conv2d(2, 2), qnn.Conv2d(2, 2))
    fresh.load_state_dict(model.state_dict())
    assert [m.weight_bits for m in fresh] == [2, 4]
    assert fresh[0].shift_quantile == pytest.approx(0.9)
    assert fresh[1].current_stage is Stage.QAT
    old = {k: v for k, v in model.state_dict().items() if ".qat_" not in k}
    fresh.load_state_dict(old)  # checkpoints from before the width buffers still load


def test_eltwise_operand_checks() -> None:
    add = qnn.Add()
    with pytest.raises(ValueError, match=r"2\.\.16"):
        add(torch.zeros(1, 1, 2, 2))
    with pytest.raises(ValueError, match="one shape"):
        add(torch.zeros(1, 1, 2, 2), torch.zeros(1, 2, 2, 2))
    with pytest.raises(ValueError, match=r"2\.\.16"):
        add(*[torch.zeros(1, 1, 1, 1)] * 17)


def _item_calls(run) -> int:
    """``.item()``-style reads (a device round trip on a GPU) while ``run()`` runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Reads(TorchDispatchMode):
        count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ == "_local_scalar_dense":
                Reads.count += 1
            return func(*args, **(kwargs or {}))

    with Reads():
        run()
    return Reads.count


def test_forward_reads_the_stage_and_widths_once() -> None:
    """A float forward reads no buffer value back, nor does a QAT forward (its shifts stay on
    the device), not the stage, widths and quantile each time; every way the buffers change is
    seen (set_stage, a state dict, a write in place, a copy)."""
    from cnnforge.models.qat_unet import QatUNet

    torch.manual_seed(0)
    model = QatUNet(channels=(4, 8, 8, 8)).train()
    x = torch.rand(2, 3, 16, 16)
    model(x)
    assert _item_calls(lambda: model(x)) == 0
    qnn.enable_qat(model, qnn.QATPolicy(start_epoch=0))
    model(x)
    layers = [m for _, m in qnn.qat_modules(model) if hasattr(m, "weight")]
    assert _item_calls(lambda: model(x)) == 0
    layer = layers[0]
    other = QatUNet(channels=(4, 8, 8, 8))
    assert layer.current_stage is Stage.QAT
    layer.set_stage(Stage.QUANTIZED)
    assert layer.current_stage is Stage.QUANTIZED
    layer.qat_weight_bits.fill_(4)
    assert layer.weight_bits == 4 and layer.bits() == 4
    copied = __import__("copy").deepcopy(layer)
    copied.weight_bits = 2
    assert copied.weight_bits == 2 and layer.weight_bits == 4
    model.load_state_dict(other.state_dict())  # a float-stage checkpoint: stage 0, no widths
    assert layer.current_stage is Stage.FLOAT and layer.weight_bits is None
    assert not layer.bn_folded and layer._bn_active() == (layer.bn is not None)
