"""Post-training quantization (quant/ptq.py) and cnnforge's quantized checkpoint format."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from cnnforge.checkpoint import (
    FORMAT,
    is_quantized_checkpoint,
    load_quantized,
    save_quantized,
)
from cnnforge.errors import InputError, ModelError
from cnnforge.ir import Activation, EltwiseOp, Layer, Network, Op, Quantized
from cnnforge.quant.ptq import clip_level, quantize_layer, quantize_network
from cnnforge.targets.max7800x.device import get_device


def conv(name: str, inputs: tuple[str, ...], cin: int, cout: int, seed: int = 0, **kw) -> Layer:
    """A float hardware conv2d 3x3 pad 1 on 6x6 data with random weights."""
    rng = np.random.default_rng(seed)
    return Layer(
        name=name,
        op=Op.CONV2D,
        inputs=inputs,
        out_shape=(cout, 6, 6),
        in_channels=cin,
        out_channels=cout,
        kernel_size=(3, 3),
        stride=(1, 1),
        padding=(1, 1),
        dilation=(1, 1),
        weight=(rng.standard_normal((cout, cin, 3, 3)) * 0.2).astype(np.float32),
        bias=(rng.standard_normal(cout) * 0.1).astype(np.float32),
        **kw,
    )


def small_net() -> Network:
    layers = (
        conv("a", ("input",), 3, 4, 1, activation=Activation.RELU),
        conv("b", ("a",), 4, 4, 2, activation=Activation.RELU),
        conv("c", ("a", "b"), 8, 2, 3),
    )
    return Network("small", (3, 6, 6), layers)


def test_quantize_layer_follows_r66() -> None:
    layer = conv("a", ("input",), 2, 3)
    q = quantize_layer(layer, 8).quant
    peak = max(np.abs(layer.weight).max(), np.abs(layer.bias).max())
    assert q.output_shift == int(np.ceil(np.log2(peak)))
    expected = np.clip(
        np.floor(layer.weight.astype(np.float64) * 2.0 ** (7 - q.output_shift) + 0.5), -128, 127
    )
    np.testing.assert_array_equal(q.weights, expected)
    q4 = quantize_layer(layer, 4).quant
    assert q4.weights.min() >= -8 and q4.weights.max() <= 7 and q4.bias.max() <= 7
    out = quantize_layer(layer, 4)
    np.testing.assert_array_equal(out.weight, q4.weights * 2.0 ** (q4.output_shift - 3))


def test_clip_levels() -> None:
    w = np.array([[1.0, -0.5], [0.25, -2.0]])
    assert clip_level(w, None, "max") == 2.0
    assert clip_level(w, None, "scale", scale=0.5) == 1.0
    assert clip_level(w, None, "avgmax") == pytest.approx(max(abs((-0.5 - 2.0) / 2), 0.625))
    assert clip_level(w, None, "stddev", nstd=0.1) < 2.0
    assert clip_level(np.zeros((2, 2)), None, "max") == 0.0


def test_quantize_network_keeps_existing_quant_and_names() -> None:
    net = small_net()
    pre = quantize_layer(net.layer("b"), 2)
    net = net.with_layers((net.layer("a"), pre, net.layer("c")))
    out = quantize_network(net, {"a": 4, "*": 8}, "max", device=None)
    assert out.is_quantized
    assert out.layer("b").quant is pre.quant
    assert out.layer("a").quant.weight_bits == 4 and out.layer("c").quant.weight_bits == 8
    assert out.layer("c").inputs == ("a", "b")


def test_quantize_network_bad_input() -> None:
    net = small_net()
    with pytest.raises(InputError, match="clip method"):
        quantize_network(net, 8, "median", device=None)
    with pytest.raises(InputError, match="unknown layers"):
        quantize_network(net, {"zz": 4}, device=None)
    with pytest.raises(InputError, match="layer a") as info:
        quantize_network(net, 3, device=None)
    assert "allowed" in info.value.one_line()
    with pytest.raises(InputError, match="not available"):
        quantize_network(net, -1, device=get_device("MAX78000"))
    with pytest.raises(InputError, match="binary"):
        quantize_network(net, -1, device=get_device("MAX78002"))
    relu = Layer(
        name="r", op=Op.ACTIVATION, inputs=("a",), out_shape=(4, 6, 6), activation=Activation.RELU
    )
    model_level = net.with_layers((net.layer("a"), relu))
    with pytest.raises(ModelError, match="lower_to_hardware"):
        quantize_network(model_level, device=None)


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    net = quantize_network(small_net(), 8, device=None)
    path = tmp_path / "q.pth"
    save_quantized(net, path)
    doc = torch.load(path, weights_only=True)  # nothing to allow-list
    assert doc["format"] == FORMAT and set(doc["layers"]) == {"a", "b", "c"}
    assert doc["layers"]["a"]["output_shift"] == net.layer("a").quant.output_shift
    back = load_quantized(path)
    assert back.to_json() == net.to_json()
    assert is_quantized_checkpoint(path)


def test_checkpoint_refuses_float_network(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not quantized"):
        save_quantized(small_net(), tmp_path / "q.pth")
    assert not (tmp_path / "q.pth").exists()


class _Evil:
    def __reduce__(self):
        return (print, ("pwned",))


@pytest.mark.parametrize(
    "kind", ["missing", "garbage", "state_dict", "tampered", "pickle", "no_network", "bad_json"]
)
def test_checkpoint_bad_files(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "bad.pth"
    net = quantize_network(small_net(), 8, device=None)
    if kind == "garbage":
        path.write_bytes(b"not a checkpoint at all")
    elif kind == "state_dict":
        torch.save({"a.weight": torch.zeros(2)}, path)
    elif kind == "tampered":
        save_quantized(net, path)
        doc = torch.load(path, weights_only=True)
        doc["layers"]["b"]["weight"] += 1
        torch.save(doc, path)
    elif kind == "pickle":
        with open(path, "wb") as fh:
            pickle.dump({"format": FORMAT, "x": _Evil()}, fh, protocol=2)
    elif kind == "no_network":
        torch.save({"format": FORMAT, "layers": {}}, path)
    elif kind == "bad_json":
        torch.save({"format": FORMAT, "network": "{", "layers": {}}, path)
    with pytest.raises(InputError) as info:
        load_quantized(path)
    assert str(path) in info.value.one_line()
    claims_format = kind in ("tampered", "no_network", "bad_json")
    assert is_quantized_checkpoint(path) is claims_format


def test_quantized_import_of_vendor_like_layer() -> None:
    """A layer that already carries integers (QAT import) passes through unchanged."""
    w = np.ones((2, 3, 3, 3), dtype=np.int64)
    layer = conv("a", ("input",), 3, 2)
    layer = quantize_layer(layer, 8)
    fixed = Layer(**{**layer.__dict__, "quant": Quantized(8, w, None, 2)})
    out = quantize_network(Network("n", (3, 6, 6), (fixed,)), device=None)
    assert out.layer("a").quant.output_shift == 2


def _loud_net() -> Network:
    """Float activations reach ~8: without scaling the int8 outputs saturate."""
    a = conv("a", ("input",), 3, 4, 1, activation=Activation.RELU)
    a = Layer(**{**a.__dict__, "weight": a.weight * 8})
    b = conv("b", ("a",), 4, 4, 2, activation=Activation.RELU)
    add = Layer(
        name="s",
        op=Op.PASSTHROUGH,
        inputs=("a", "b"),
        out_shape=(4, 6, 6),
        in_channels=4,
        out_channels=4,
        kernel_size=(1, 1),
        stride=(1, 1),
        padding=(0, 0),
        dilation=(1, 1),
        eltwise=EltwiseOp.ADD,
    )
    c = conv("c", ("s",), 4, 2, 3)
    return Network("loud", (3, 6, 6), (a, b, add, c))


def test_calibration_scales_and_quality() -> None:
    from cnnforge.quant.ptq import quantize_with_scales
    from cnnforge.quant.scales import activation_scales
    from cnnforge.sim import simulate
    from cnnforge.sim.float_eval import run_float

    net = _loud_net()
    x = torch.from_numpy(np.random.default_rng(0).integers(-128, 128, (4, 3, 6, 6)))
    exps = activation_scales(net, x)
    assert exps["a"] >= 2 and exps["a"] == exps["b"] == exps["s"]  # tied by the add
    reference = run_float(net, x.double() / 128)["c"]
    errors = []
    for calibration in (None, x):
        qnet, out = quantize_with_scales(net, 8, calibration=calibration, device=None)
        y = simulate(qnet, x, device=None).outputs["c"].double() * 2.0 ** out["c"] / 128
        errors.append((y - reference).abs().mean().item())
    assert errors[1] < errors[0] / 4


def test_calibration_bad_input() -> None:
    net = _loud_net()
    with pytest.raises(InputError, match="does not match"):
        quantize_network(net, calibration=np.zeros((2, 3, 5, 5), np.int64), device=None)
    with pytest.raises(InputError, match="integers"):
        quantize_network(net, calibration=np.full((1, 3, 6, 6), 200), device=None)
    pre = net.with_layers((quantize_layer(net.layer("a"), 8), *net.layers[1:]))
    with pytest.raises(InputError, match="already quantized"):
        quantize_network(pre, calibration=np.zeros((1, 3, 6, 6), np.int64), device=None)
