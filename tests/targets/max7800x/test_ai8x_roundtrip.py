"""Vendor YAML + checkpoint out and back in: import -> write -> re-import gives the same IR.

The same network (every field, integer arrays compared exactly) and the same plan mean the same
simulation; test_golden.py additionally simulates both sides.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import yaml

from cnnforge.errors import EmitError
from cnnforge.ir import Network
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.ai8x_checkpoint import read_checkpoint
from cnnforge.targets.max7800x.ai8x_checkpoint_writer import checkpoint_dict, write_checkpoint
from cnnforge.targets.max7800x.ai8x_yaml_writer import write_yaml, yaml_text
from support.ai8x import roundtrip

PAIRS = {
    "mnist": ("mnist-chw-ai85.yaml", "ai85-mnist-qat8-q.pth.tar"),
    "unet": ("camvid-unet-large.yaml", "ai85-camvid-unet-large-q.pth.tar"),
    "fakept": ("camvid-unet-large-fakept.yaml", "ai85-camvid-unet-large-fakept-q.pth.tar"),
}


def _same_value(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            a is not None
            and b is not None
            and a.shape == b.shape
            and np.array_equal(np.asarray(a), np.asarray(b))
        )
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return type(a) is type(b) and all(
            _same_value(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
        )
    return a == b


def layer_differences(a: Network, b: Network, ignore=("module_path",)) -> list[str]:
    """Field-by-field differences of two networks (arrays compared exactly)."""
    diffs = []
    for name in ("name", "input_shape", "outputs", "avg_pool_rounding"):
        if getattr(a, name) != getattr(b, name):
            diffs.append(f"network.{name}: {getattr(a, name)} != {getattr(b, name)}")
    if len(a.layers) != len(b.layers):
        return [*diffs, f"{len(a.layers)} layers != {len(b.layers)}"]
    for la, lb in zip(a.layers, b.layers, strict=True):
        for f in dataclasses.fields(la):
            if f.name in ignore:
                continue
            if not _same_value(getattr(la, f.name), getattr(lb, f.name)):
                diffs.append(f"{la.name}.{f.name}")
    return diffs


@pytest.mark.parametrize("key", sorted(PAIRS))
def test_vendor_pairs_roundtrip(ai8x_data, tmp_path, key):
    yaml_name, ckpt_name = PAIRS[key]
    source = read_ai8x(
        ai8x_data / "networks" / yaml_name, ai8x_data / "trained" / ckpt_name, device="MAX78000"
    )
    again = roundtrip(source, tmp_path, source.network.input_shape)
    assert layer_differences(source.network, again.network) == []
    assert again.plan == source.plan
    assert again.modules == source.modules and again.arch == source.arch
    # The checkpoint loads with weights_only=True and nothing allow-listed (§1).
    doc = torch.load(tmp_path / "net.pth.tar", weights_only=True)
    assert sorted(doc) == ["arch", "epoch", "extras", "state_dict"]
    # Writing the re-imported pair again gives byte-identical YAML.
    assert (
        yaml_text(again.network, again.plan, arch=again.arch, dataset=again.dataset)
        == (tmp_path / "net.yaml").read_text()
    )


def test_checkpoint_matches_vendor_values(ai8x_data):
    """Same weights, shifts and bits per module as the vendor file; bias as floor-divided."""
    yaml_name, ckpt_name = PAIRS["fakept"]
    model = read_ai8x(
        ai8x_data / "networks" / yaml_name, ai8x_data / "trained" / ckpt_name, device="MAX78000"
    )
    ours = checkpoint_dict(model.network, arch=model.arch, modules=dict(model.modules))[
        "state_dict"
    ]
    theirs = read_checkpoint(ai8x_data / "trained" / ckpt_name)
    for layer in theirs.layers:
        m = layer.module
        assert torch.equal(ours[f"{m}.op.weight"].to(torch.int64), torch.from_numpy(layer.weight))
        assert ours[f"{m}.output_shift"].item() == layer.output_shift
        assert ours[f"{m}.weight_bits"].item() == 8
        if layer.bias is None:
            assert f"{m}.op.bias" not in ours
        else:  # the U-Net files store exact multiples of 128
            assert np.array_equal(ours[f"{m}.op.bias"].numpy().astype(np.float64), layer.bias)
    assert list(ours)[:8] == [
        "prep0.op.weight", "prep0.op.bias", "prep0.output_shift", "prep0.weight_bits",
        "prep0.bias_bits", "prep0.quantize_activation", "prep0.adjust_output_shift",
        "prep0.shift_quantile",
    ]  # fmt: skip
    assert all(t.dtype == torch.float32 for t in ours.values())


def test_yaml_reparses_with_hex_masks(ai8x_data):
    yaml_name, ckpt_name = PAIRS["unet"]
    model = read_ai8x(
        ai8x_data / "networks" / yaml_name, ai8x_data / "trained" / ckpt_name, device="MAX78000"
    )
    text = yaml_text(model.network, model.plan, dataset=model.dataset)
    assert "processors: 0x00ffffffffffffff" in text and "# Layer 9: layer9" in text
    assert "in_sequences: [8, 7]" in text and "out_offset: 0x4004" in text
    doc = yaml.safe_load(text)
    assert set(doc) == {"arch", "dataset", "layers"} and len(doc["layers"]) == 19
    assert doc["layers"][7] == {
        "name": "layer7",
        "processors": 0x00FFFFFFFFFFFFFF,
        "output_processors": 0x00FFFFFFFFFFFFFF,
        "in_offset": 0x5000,
        "out_offset": 0x4004,
        "write_gap": 1,
        "in_sequences": [5],
        "operation": "none",
    }


def test_emit_refuses_unquantized_or_mismatched(ai8x_data, tmp_path):
    yaml_name, ckpt_name = PAIRS["mnist"]
    model = read_ai8x(
        ai8x_data / "networks" / yaml_name, ai8x_data / "trained" / ckpt_name, device="MAX78000"
    )
    layers = list(model.network.layers)
    layers[1] = dataclasses.replace(layers[1], quant=None)
    with pytest.raises(EmitError, match="layer layer1: only quantized hardware layers"):
        write_yaml(model.network.with_layers(layers), model.plan, tmp_path / "x.yaml")
    short = dataclasses.replace(model.plan, placements=model.plan.placements[:-1])
    with pytest.raises(EmitError, match="4 placements for 5 layers"):
        write_yaml(model.network, short, tmp_path / "x.yaml")
    assert not (tmp_path / "x.yaml").exists()


@pytest.mark.parametrize(
    ("model", "device", "bits"),
    [
        ("unet-voc", "MAX78000", 4),
        ("unet-voc", "MAX78000", "auto"),
        ("unet-voc", "MAX78002", 8),
        ("unet-large", "MAX78000", 8),
        ("unet-large", "MAX78002", 8),
        ("qat-unet", "MAX78000", 8),
    ],
)
def test_shipped_unets_planned_roundtrip(tmp_path, model, device, bits):
    """Quantize -> plan (cnnforge's planner) -> vendor YAML + checkpoint -> re-import: the same
    network, a plan that still validates, and the same simulated outputs."""
    from cnnforge.frontend import load_network
    from cnnforge.models import default_input_shape
    from cnnforge.passes.lower import lower_to_hardware
    from cnnforge.quant.ptq import quantize_network
    from cnnforge.sim import simulate
    from cnnforge.targets.max7800x.device import get_device
    from cnnforge.targets.max7800x.planner import plan_network
    from cnnforge.targets.max7800x.validate import validate_plan
    from support.ai8x import semantic_differences

    dev = get_device(device)
    shape = default_input_shape(model)
    lowered = lower_to_hardware(load_network(model, shape), dev).network
    if bits == "auto":  # per-layer widths chosen by the device check (cnnforge check)
        from cnnforge.passes.check import check_report
        from support.targets import rules_of

        report = check_report(load_network(model, shape), dev, "auto", rules=rules_of(dev))
        lowered, bits = report.network, report.weight_bits
    network, plan = plan_network(quantize_network(lowered, bits, device=dev), dev)
    write_yaml(network, plan, tmp_path / "n.yaml")
    write_checkpoint(network, tmp_path / "n.pth.tar")
    again = read_ai8x(tmp_path / "n.yaml", tmp_path / "n.pth.tar", shape, device=device)
    assert semantic_differences(network, again.network) == []
    assert validate_plan(again.network, again.plan, dev) == ()
    x = torch.from_numpy(np.random.default_rng(1).integers(-128, 128, size=shape))
    before, after = (
        simulate(network, x, device=None).outputs,
        simulate(again.network, x, device=None).outputs,
    )
    assert all(torch.equal(before[k], after[k]) for k in before)
