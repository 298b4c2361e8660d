"""The plan validator: vendor plans, our U-Net plans, and plans broken on purpose."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from cnnforge.errors import PlanError
from cnnforge.targets.max7800x.ai8x import load_ai8x
from cnnforge.targets.max7800x.placement import Plan
from cnnforge.targets.max7800x.planner import plan_network
from cnnforge.targets.max7800x.validate import raise_on_issues, validate_plan
from support.plan import small_unet

PAIRS = {
    "mnist": ("mnist-chw-ai85.yaml", "ai85-mnist-qat8-q.pth.tar", None),
    "unet": ("camvid-unet-large.yaml", "ai85-camvid-unet-large-q.pth.tar", (48, 88, 88)),
    "fakept": (
        "camvid-unet-large-fakept.yaml",
        "ai85-camvid-unet-large-fakept-q.pth.tar",
        (48, 88, 88),
    ),
}


def _vendor(root: Path, key: str):
    yaml_name, ckpt, shape = PAIRS[key]
    return load_ai8x(
        root / "networks" / yaml_name, root / "trained" / ckpt, shape, device="MAX78000"
    )


def _rules(issues) -> set[str]:
    return {x.rule for x in issues}


def _edit(plan: Plan, layer: str, **changes) -> Plan:
    places = tuple(
        dataclasses.replace(p, **changes) if p.layer == layer else p for p in plan.placements
    )
    return dataclasses.replace(plan, placements=places)


# ---- the vendor's three plans --------------------------------------------------------------


@pytest.mark.parametrize("key", ["mnist", "unet", "fakept"])
def test_vendor_plans_validate(ai8x_data, key):
    net, plan = _vendor(ai8x_data, key)
    assert validate_plan(net, plan, "MAX78000", allow_overlap=True) == ()


def test_vendor_unet_strict_check_proves_its_in_place_layers(ai8x_data):
    """Strictly, camvid's overlaps are all in-place layers whose trailing distance is proven."""
    net, plan = _vendor(ai8x_data, "unet")
    assert validate_plan(net, plan, "MAX78000") == ()
    unproven = validate_plan(net, plan, "MAX78000", in_place=False)  # the vendor's own check
    assert _rules(unproven) == {"overwrite"}
    assert sorted(int(x.layer[5:]) for x in unproven) == [0, 1, 2, 14, 15, 16, 17, 18]
    # prep0 trails its input by 0x100 bytes; move it up to 4 bytes below: no longer provable.
    closer = _edit(plan, "layer0", out_offset=plan.placements[0].in_offset - 4)
    closer = _edit(closer, "layer1", in_offset=plan.placements[0].in_offset - 4)
    issues = validate_plan(net, closer, "MAX78000")
    assert "overwrite" in _rules(issues)
    assert validate_plan(net, closer, "MAX78000", allow_overlap=True) == ()


def test_vendor_unet_broken_copy_offset_is_found(ai8x_data):
    net, plan = _vendor(ai8x_data, "unet")
    # the copy layer one word off (docs/hardware/network-yaml.md §8)
    bad = _edit(plan, "layer7", out_offset=0x4008)
    issues = validate_plan(net, bad, "MAX78000", allow_overlap=True)
    assert "read" in _rules(issues)
    assert any(x.layer == "layer9" for x in issues)


def test_vendor_unet_wrong_concat_order_is_found(ai8x_data):
    net, plan = _vendor(ai8x_data, "unet")
    dec2 = net.layer("layer11")
    swapped = net.with_layers(
        dataclasses.replace(x, inputs=tuple(reversed(x.inputs))) if x is dec2 else x
        for x in net.layers
    )
    issues = validate_plan(swapped, plan, "MAX78000", allow_overlap=True)
    assert [x.layer for x in issues if x.rule == "read"] == ["layer11"]


def test_vendor_unet_skip_overwritten_is_found(ai8x_data):
    """Moving enc2's consumer-to-be output onto enc2 (live until dec2) is caught."""
    net, plan = _vendor(ai8x_data, "unet")
    bad = _edit(plan, "layer9", out_offset=0)  # dec3's output onto enc2 (28-55 at 0)
    issues = validate_plan(net, bad, "MAX78000", allow_overlap=True)
    assert "overwrite" in _rules(issues)
    assert any("layer4" in x.message for x in issues if x.rule == "overwrite")
    with pytest.raises(PlanError, match="layer"):
        raise_on_issues(issues)


# ---- static rules --------------------------------------------------------------------------


def test_static_rules_are_reported():
    base = small_unet()
    biased = base.with_layers(
        dataclasses.replace(x, bias=np.zeros(x.out_channels, np.float32)) for x in base.layers
    )
    net, plan = plan_network(biased, "MAX78000")
    assert validate_plan(net, plan, "MAX78000") == ()
    cases = {
        "processor-count": _edit(plan, "enc2", out_processors=0xFFFF),
        "offset-align": _edit(plan, "enc2", out_offset=2),
        "output-bounds": _edit(plan, "enc1", out_offset=0x7F00),
        "kernel-memory": _edit(plan, "enc1", kernel_start=760),
        "kernel-overlap": _edit(plan, "up3", kernel_start=plan.placement("dec3").kernel_start),
        "bias-memory": _edit(plan, "enc2", bias_quadrant=0, bias_offset=510),
        "write-gap": _edit(plan, "up3", write_gap=16),
    }
    for rule, broken in cases.items():
        issues = validate_plan(net, broken, "MAX78000")
        assert rule in _rules(issues), (rule, issues)
    short = dataclasses.replace(plan, placements=plan.placements[:-1])
    assert _rules(validate_plan(net, short, "MAX78000")) == {"structure"}


def test_passthrough_mask_rule():
    net, plan = plan_network(small_unet(), "MAX78000")
    copy = next(p for p in plan.placements if p.layer.endswith("_copy"))
    issues = validate_plan(net, _edit(plan, copy.layer, in_processors=0xFFFF_FFFF), "MAX78000")
    assert {"processor-count"} <= _rules(issues)


# ---- our U-Net plans -----------------------------------------------------------------------


def test_plain_torch_large_unet_plans_and_validates():
    from cnnforge.frontend import load_network
    from cnnforge.passes.lower import lower_to_hardware

    net = lower_to_hardware(load_network("unet-large", (48, 88, 88)), device=None).network
    out, plan = plan_network(net, "MAX78000")
    assert validate_plan(out, plan, "MAX78000") == ()
    assert len(out.layers) == len(net.layers) + 1  # one copy: the vendor's `pt`
    # The same processor layout the vendor's author chose by hand (docs/hardware/unet.md §2):
    masks = {p.layer: (p.in_processors, p.out_processors) for p in plan.placements}
    assert masks["enc1.0"][1] == 0xFF00_0000_0000_0000  # skip 1 on the top 8 processors
    assert masks["enc2.1"][1] == 0x00FF_FFFF_F000_0000  # skip 2 on 28-55
    assert masks["upconv2"][1] == 0x0FFF_FFFF  # beside enc2: cat by adjacency
    assert masks["upconv1"][1] == 0x00FF_0000_0000_0000  # beside enc1
    assert masks["dec1.0"][0] == 0xFFFF_0000_0000_0000
    copy = next(x for x in out.layers if x.module_path.startswith("copy of enc3"))
    gaps = {p.layer: p.write_gap for p in plan.placements}
    assert gaps["upconv3"] == gaps[copy.name] == 1  # dec3's 112 channels interleaved


@pytest.mark.parametrize("device", ["MAX78002", "MAX78000"])
def test_seed_001_unet_plans_and_validates(device):
    from cnnforge.frontend import load_network
    from cnnforge.passes.lower import lower_to_hardware
    from cnnforge.quant.ptq import quantize_network
    from cnnforge.targets.max7800x.device import get_device
    from cnnforge.targets.max7800x.weight_bits import choose_weight_bits

    dev = get_device(device)
    net = lower_to_hardware(load_network("unet-voc", (3, 64, 64)), dev).network
    bits = 8 if device == "MAX78002" else choose_weight_bits(net, dev).bits
    quantized = quantize_network(net, bits, device=None)
    if device == "MAX78000":
        with pytest.raises(PlanError, match="kernel memory"):
            plan_network(quantize_network(net, 8, device=None), dev)
    out, plan = plan_network(quantized, dev)
    assert validate_plan(out, plan, dev) == ()
