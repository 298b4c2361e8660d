"""ONNX round trip of every shipped model and the zoo (tests/support/zoo_models.py, MONAI included):
exported with torch.onnx.export, the ONNX path gives the PyTorch path's analysis row by row
(OPAQUE rows by position), a float evaluation equal to onnxruntime's within float round-off,
the same MAX78000 check verdict and the same quantized network with a bit-exact simulation:
on a MAX78000 where the model fits, with the integer semantics alone where it is over the
device's limits but every layer is a hardware layer."""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from cnnforge.analysis import analyze_network
from cnnforge.frontend.capture import capture
from cnnforge.frontend.onnx import read_onnx
from cnnforge.frontend.onnx_check import onnxruntime_values
from cnnforge.ir import Network, Op
from cnnforge.models import build_model
from cnnforge.passes.check import check_network
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.quant.ptq import quantize_with_scales
from cnnforge.sim import simulate
from cnnforge.sim.float_eval import run_float
from cnnforge.targets.max7800x.device import get_device
from support import zoo_models
from support.onnx_export import export
from support.targets import rules_of

#: Shipped models at small inputs (cats-dogs' classifier needs its own 128 x 128).
SHIPPED = {
    "unet-voc": (3, 32, 32),
    "unet-large": (48, 32, 32),
    "qat-unet": (3, 32, 32),
    "cats-dogs": (3, 128, 128),
}
MODELS = [*SHIPPED, *zoo_models.ZOO]
MAX78000 = get_device("MAX78000")


@dataclasses.dataclass(frozen=True)
class RoundTrip:
    """One model through both front doors, on the same weights."""

    module: nn.Module
    shape: tuple[int, ...]
    path: Path
    ours: Network  # the ONNX path
    tensors: dict[str, str]  # ONNX path layer -> the ONNX tensor it computes
    theirs: Network  # the PyTorch path


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    """name -> RoundTrip, each model built and exported once per test module."""
    folder = tmp_path_factory.mktemp("onnx")

    @cache
    def get(name: str) -> RoundTrip:
        torch.manual_seed(0)
        if name in SHIPPED:
            module, shape = build_model(name), SHIPPED[name]
        else:
            module, shape = getattr(zoo_models, name)(), zoo_models.ZOO[name]
        for m in module.modules():  # non-trivial BatchNorm statistics
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
        module.eval()
        path = export(module, shape, folder / f"{name}.onnx")
        ours, tensors = read_onnx(path, None)
        return RoundTrip(module, shape, path, ours, tensors, capture(module, shape, name=name))

    return get


def _rows(network: Network) -> list[tuple]:
    """Per layer: op (OPAQUE rows compare by position: their kinds are named per front door),
    output shape, MACs, parameters."""
    stats = analyze_network(network, device=MAX78000).layers
    return [
        (layer.op, s.out_shape, s.macs, s.params)
        for layer, s in zip(network.layers, stats, strict=True)
    ]


@pytest.mark.parametrize("name", MODELS)
def test_same_analysis(name, round_trip):
    rt = round_trip(name)
    if name != "qat-unet":
        assert _rows(rt.ours) == _rows(rt.theirs)
        a, b = (
            analyze_network(rt.ours, device=MAX78000).totals,
            analyze_network(rt.theirs, device=MAX78000).totals,
        )
        assert (a.params, a.macs) == (b.params, b.macs)
    # qat-unet's cnnforge.nn modules are one hardware layer each on the PyTorch path; ONNX has
    # their parts (conv, bn / 4, relu, clamp, pool): equal once both are lowered.
    lowered = [lower_to_hardware(n, None).network for n in (rt.ours, rt.theirs)]
    assert _rows(lowered[0]) == _rows(lowered[1])


@pytest.mark.parametrize("name", MODELS)
def test_float_equals_onnxruntime(name, round_trip):
    """The IR's float evaluation equals onnxruntime's; OPAQUE layers (no float semantics in the
    IR) get onnxruntime's value, as the PyTorch path's gate gives them eager PyTorch's."""
    rt = round_trip(name)
    x = np.random.default_rng(0).uniform(-1, 1, (1, *rt.shape)).astype(np.float32)
    values = onnxruntime_values(rt.path, x, list(rt.tensors.values()))
    given = {
        layer.name: torch.from_numpy(values[rt.tensors[layer.name]])
        for layer in rt.ours.layers
        if layer.op is Op.OPAQUE
    }
    got = run_float(rt.ours, x, all_layers=True, given=given)
    computed = [layer.name for layer in rt.ours.layers if layer.name not in given]
    for name_ in computed:  # every layer, not only the outputs (an OPAQUE output is given)
        want = values[rt.tensors[name_]]
        np.testing.assert_allclose(got[name_].numpy(), want, rtol=1e-4, atol=1e-5, err_msg=name_)


def _pool(layer) -> tuple | None:
    """The pooling with no dilation spelled one way (cnnforge.nn writes ``()``, ONNX ``1``s)."""
    pool = layer.pool
    if pool is None:
        return None
    return (pool.kind, pool.size, pool.stride, pool.dilation or (1,) * len(pool.size))


@pytest.mark.parametrize("name", MODELS)
def test_same_quantized_network_and_simulation(name, round_trip):
    rt = round_trip(name)
    lowered = [lower_to_hardware(n, MAX78000).network for n in (rt.ours, rt.theirs)]
    verdicts = [
        [v.rule for v in check_network(n, MAX78000, rules=rules_of(MAX78000))] for n in lowered
    ]
    assert verdicts[0] == verdicts[1]
    device = None if verdicts[1] else MAX78000  # over a MAX78000's limits: integer semantics
    if device is None:
        lowered = [lower_to_hardware(n, None).network for n in (rt.ours, rt.theirs)]
    if any(not layer.is_hardware for layer in lowered[1].layers):
        return  # ops no MAX7800x layer has (check names them): nothing to quantize
    ours, theirs = lowered
    # A cnnforge.nn module's wide (32-bit) output is an attribute ONNX does not carry: the ONNX
    # path's output layer takes the PyTorch path's width (qat-unet's head).
    ours = ours.with_layers(
        [
            dataclasses.replace(a, wide=b.wide)
            for a, b in zip(ours.layers, theirs.layers, strict=True)
        ]
    )
    x = np.random.default_rng(0).uniform(-1, 1, (1, *rt.shape))
    calibration = np.round(x * 127).astype(np.int64)
    qa, _ = quantize_with_scales(ours, calibration=calibration, device=device)
    qb, _ = quantize_with_scales(theirs, calibration=calibration, device=device)
    for la, lb in zip(qa.layers, qb.layers, strict=True):
        assert (la.op, la.out_shape, _pool(la), la.activation, la.wide) == (
            lb.op,
            lb.out_shape,
            _pool(lb),
            lb.activation,
            lb.wide,
        )
        assert (la.quant is None) == (lb.quant is None)
        if la.quant is not None:
            assert np.array_equal(la.quant.weights, lb.quant.weights)
            assert la.quant.output_shift == lb.quant.output_shift
            assert (la.quant.bias is None) == (lb.quant.bias is None)
            if la.quant.bias is not None:
                assert np.array_equal(la.quant.bias, lb.quant.bias)
    xi = np.random.default_rng(1).integers(-128, 128, (1, *rt.shape))
    sa = simulate(qa, xi, device=device).outputs
    sb = simulate(qb, xi, device=device).outputs
    assert len(sa) == len(sb)
    for va, vb in zip(sa.values(), sb.values(), strict=True):
        assert torch.equal(va, vb)
