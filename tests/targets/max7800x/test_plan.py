"""The automatic planner: layouts of concatenations, interleaving, copies, liveness, latency."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cnnforge.errors import PlanError
from cnnforge.geometry import live_intervals
from cnnforge.ir import INPUT, EltwiseOp, Network, Op, Quantized
from cnnforge.targets.max7800x.device import MAX78000, get_device
from cnnforge.targets.max7800x.groups import identity_conv, is_copy
from cnnforge.targets.max7800x.inplace import IN_PLACE_MARGIN_WORDS, in_place_words
from cnnforge.targets.max7800x.latency import (
    START_CYCLES,
    STREAMING_PERCENT,
    LatencyInputs,
    layer_cycles,
    layer_inputs,
)
from cnnforge.targets.max7800x.planner import plan_cycles, plan_network
from cnnforge.targets.max7800x.validate import validate_plan
from support.plan import POOL2, conv, passthrough, small_unet, upconv, with_weights

# ---- latency model: the three check values of docs/hardware/devices.md §5
# ---------------------------------


def test_latency_check_values_of_the_spec():
    """64x20x20 max 2x2/2 pad 2 -> 16: 3049; 3x32x32 pad 1 -> 64: 67981; 128x8x8 (M=2): 773."""
    a = conv("a", INPUT, 64, 16, 12, pool=POOL2)
    a = dataclasses.replace(a, padding=(2, 2))
    b = conv("b", INPUT, 3, 64, 32)
    c = conv("c", INPUT, 128, 16, 4, pool=POOL2)
    got = [
        START_CYCLES + layer_cycles(layer_inputs(a, (64, 20, 20), 1, 16)),
        START_CYCLES + layer_cycles(layer_inputs(b, (3, 32, 32), 1, 64)),
        START_CYCLES + layer_cycles(layer_inputs(c, (128, 8, 8), 2, 32)),
    ]
    assert got == [3049, 67981, 773]


def test_latency_passthrough_and_streaming():
    v = LatencyInputs(passes=1, pooled=(22, 22), passthrough=True, words_per_pixel=4)
    assert layer_cycles(v) == 22 * 22 * (2 + 4)
    base = LatencyInputs(passes=1, pooled=(8, 8), pad=(1, 1), kernel=(3, 3), out_cols=8)
    assert (
        layer_cycles(dataclasses.replace(base, streaming=True))
        == (STREAMING_PERCENT * layer_cycles(base) + 50) // 100
    )


# ---- liveness ------------------------------------------------------------------------------


def test_live_intervals_skip_and_output():
    net = small_unet()
    live = live_intervals(net)
    assert live[INPUT] == (-1, 0)
    assert live["enc1"] == (0, net.index("dec1"))
    assert live["enc3"] == (2, net.index("dec3"))
    assert live["head"] == (net.index("head"), len(net))  # outputs live forever


# ---- layouts -------------------------------------------------------------------------------


def _placed(net: Network, device: str = "MAX78000"):
    out, plan = plan_network(net, device)
    assert validate_plan(out, plan, device) == ()
    return out, plan, {p.layer: p for p in plan.placements}


def test_adjacent_concatenation_in_argument_order():
    out, _, at = _placed(small_unet())
    up1, enc1, dec1 = at["up1"], at["enc1"], at["dec1"]
    assert up1.out_offset == enc1.out_offset == dec1.in_offset
    assert dec1.in_processors == up1.out_processors | enc1.out_processors
    assert up1.out_processors < enc1.out_processors  # first argument on lower processors
    assert (enc1.out_processors & -enc1.out_processors) == (up1.out_processors << 16) & -(
        up1.out_processors << 16
    )
    assert not any(is_copy(x) for x in out.layers if x.name.startswith("dec1"))


def test_wide_concatenation_is_interleaved_with_one_copy():
    out, _, at = _placed(small_unet())
    copies = [x for x in out.layers if is_copy(x)]
    assert [x.inputs for x in copies] == [("enc3",)]  # enc3 also feeds the bottleneck
    dec3 = out.layer("dec3")
    assert dec3.inputs == ("up3", copies[0].name)
    up3, cp = at["up3"], at[copies[0].name]
    assert up3.write_gap == cp.write_gap == 1
    assert cp.out_offset == up3.out_offset + 4 == at["dec3"].in_offset + 4
    assert up3.out_processors == cp.out_processors == at["dec3"].in_processors
    assert cp.in_processors == cp.out_processors  # a passthrough keeps its processors


def test_eltwise_operands_interleaved():
    layers = (
        conv("a", INPUT, 3, 16, 8),
        conv("b", "a", 16, 16, 8),
        conv("c", "b", 16, 16, 8),
        conv("s", ("b", "c"), 16, 16, 8, eltwise=EltwiseOp.ADD),
    )
    out, _, at = _placed(Network("res", (3, 8, 8), layers))
    s = out.layer("s")
    assert len(s.inputs) == 2 and is_copy(out.layer(s.inputs[0]))  # b also feeds c
    first, second = at[s.inputs[0]], at[s.inputs[1]]
    assert first.write_gap == second.write_gap == 1
    assert second.out_offset == first.out_offset + 4 == at["s"].in_offset + 4


def test_multipass_layer_processors_follow_the_rounding_rule():
    layers = (conv("a", INPUT, 3, 100, 8, k=1), conv("b", "a", 100, 8, 8, k=1))
    _, _, at = _placed(Network("mp", (3, 8, 8), layers))
    assert at["a"].out_processors.bit_count() == 52  # ceil(100/2) rounded up to 4
    assert at["b"].in_processors == at["a"].out_processors


def test_plan_has_kernels_bias_and_cycles():
    out, plan, at = _placed(small_unet())
    weights = [x.name for x in out.layers if x.has_weights]
    assert all(at[n].kernel_start is not None and at[n].kernel_start % 4 == 0 for n in weights)
    assert all((at[n].cycles or 0) > 0 for n in at)
    assert plan_cycles(plan) == START_CYCLES + sum(p.cycles for p in plan.placements)


def test_in_place_distance_of_a_3x3_layer():
    """dec0 of the vendor U-Net: a 3x3 pad-1 layer at width 88 must trail by 89 words."""
    layers = (conv("a", INPUT, 48, 64, 88), conv("b", "a", 64, 64, 88))
    net = Network("ip", (48, 88, 88), layers)
    assert in_place_words(net, net.layer("b"), dev=MAX78000) == 89 + IN_PLACE_MARGIN_WORDS
    one = Network("ip1", (48, 88, 88), (conv("a", INPUT, 48, 64, 88, k=1),))
    assert in_place_words(one, one.layers[0], dev=MAX78000) == IN_PLACE_MARGIN_WORDS


def test_in_place_chain_fits_where_no_overlap_cannot():
    """Two full-width 88x88 tensors do not fit one MAX78000 instance side by side."""
    layers = (
        conv("a", INPUT, 48, 64, 88, k=1),
        conv("b", "a", 64, 64, 88, k=1),
        conv("c", "b", 64, 64, 88),
    )
    out, _, at = _placed(Network("chain", (48, 88, 88), layers))
    assert at["b"].out_offset < at["b"].in_offset  # trails its input
    assert at["c"].in_offset - at["c"].out_offset >= 4 * in_place_words(
        out, out.layer("c"), dev=MAX78000
    )


def test_chw_input_for_large_images():
    layers = (conv("a", INPUT, 3, 16, 50, pool=POOL2), conv("b", "a", 16, 8, 25, pool=POOL2))
    _, plan, at = _placed(Network("big", (3, 100, 100), layers))
    assert plan.data_format == "CHW"
    assert at["a"].in_processors == 0x111
    small = Network("small", (3, 16, 16), (conv("a", INPUT, 3, 8, 16),))
    assert plan_network(small, "MAX78000")[1].data_format == "HWC"


def test_passthrough_layer_keeps_its_processors():
    layers = (
        conv("a", INPUT, 3, 32, 16),
        passthrough("p", "a", (32, 8, 8), pool=POOL2),
        conv("b", "p", 32, 16, 8),
    )
    _, _, at = _placed(Network("pt", (3, 16, 16), layers))
    assert at["p"].in_processors == at["p"].out_processors


# ---- U-Nets --------------------------------------------------------------------------------


def test_small_unet_on_both_devices():
    for device in ("MAX78000", "MAX78002"):
        out, plan, _ = _placed(small_unet(), device)
        assert plan.device.name == device and len(out.layers) == len(small_unet().layers) + 1


# ---- errors --------------------------------------------------------------------------------


def test_data_memory_exhausted_names_layer_and_shortfall():
    net = Network("huge", (64, 128, 128), (conv("a", INPUT, 64, 64, 128, k=1),))
    with pytest.raises(PlanError) as err:
        plan_network(net, "MAX78000")
    text = err.value.one_line()
    assert "data memory" in text and "layer a" in text and "short by" in text
    assert "MAX78002" in text


def test_kernel_memory_exhausted_names_layer_and_words():
    layers = [conv("l0", INPUT, 3, 64, 4)]
    layers += [conv(f"l{i}", f"l{i - 1}", 64, 64, 4) for i in range(1, 14)]
    with pytest.raises(PlanError) as err:
        plan_network(Network("deep", (3, 4, 4), tuple(layers)), "MAX78000")
    text = err.value.one_line()
    assert "kernel memory exhausted" in text and "short by" in text and "weight" in text
    assert plan_network(Network("deep", (3, 4, 4), tuple(layers)), "MAX78002")


def test_unequal_wide_concatenation_is_refused():
    layers = (
        conv("a", INPUT, 3, 64, 8),
        conv("b", "a", 64, 32, 8),
        conv("c", ("a", "b"), 96, 16, 8),
    )
    with pytest.raises(PlanError, match="interleaved"):
        plan_network(Network("bad", (3, 8, 8), layers), "MAX78000")


def test_model_level_layers_are_refused():
    bad = dataclasses.replace(conv("a", INPUT, 3, 8, 8), op=Op.POOL)
    with pytest.raises(PlanError, match="lower"):
        plan_network(Network("m", (3, 8, 8), (bad,)), "MAX78000")


def test_too_many_layers():
    layers = [conv("l0", INPUT, 3, 4, 4, k=1)]
    layers += [conv(f"l{i}", f"l{i - 1}", 4, 4, 4, k=1) for i in range(1, 40)]
    with pytest.raises(PlanError, match="32"):
        plan_network(Network("long", (3, 4, 4), tuple(layers)), "MAX78000")


def test_resources_come_from_the_device():
    dev = get_device("MAX78002")  # the planner reads the typed record (plan/resources.py is gone)
    assert dev.instance_bytes == 81920 and dev.kernel_words(16) == 5120
    assert dev.kernel_words(17) == 4096 and dev.bias_entries_per_quadrant == 2048
    assert upconv  # helper used by small_unet


def test_identical_weights_share_kernel_columns():
    q = Quantized(8, np.ones((64, 64, 3, 3), np.int64), None, 0)
    layers = (
        conv("a", INPUT, 3, 64, 8),
        dataclasses.replace(conv("b", "a", 64, 64, 8), quant=q),
        dataclasses.replace(conv("c", "b", 64, 64, 8), quant=q),
    )
    _, plan, at = _placed(Network("dedupe", (3, 8, 8), layers))
    assert at["b"].kernel_start == at["c"].kernel_start and at["b"].kernel_words == 64
    assert any("shares the kernel columns of b" in n for n in plan.notes)


def test_conv1d_chain_in_place():
    def c1(name, source, cin, cout, k=3):
        return dataclasses.replace(
            conv(name, source, cin, cout, 1, k=1),
            op=Op.CONV1D, out_shape=(cout, 128), kernel_size=(k,), stride=(1,),
            padding=(k // 2,), dilation=(1,),
        )  # fmt: skip

    layers = (c1("a", INPUT, 4, 32), c1("b", "a", 32, 32), c1("c", "b", 32, 8, k=1))
    _, _, at = _placed(Network("c1d", (4, 128), layers))
    assert all(p.cycles > 0 for p in at.values())


def test_adjacent_parts_start_on_instance_boundaries():
    layers = (conv("a", INPUT, 3, 6, 8), conv("b", "a", 6, 10, 8), conv("c", ("a", "b"), 16, 8, 8))
    _, _, at = _placed(Network("holes", (3, 8, 8), layers))
    a, b = at["a"].out_processors, at["b"].out_processors
    assert (b & -b).bit_length() - 1 == (a & -a).bit_length() - 1 + 8  # 6 channels, 2 holes
    assert at["c"].in_processors == a | b and (a | b).bit_count() == 16
    too_wide = (conv("a", INPUT, 3, 30, 8), conv("b", "a", 30, 34, 8))
    too_wide += (conv("c", ("a", "b"), 64, 8, 8),)
    with pytest.raises(PlanError, match="multiples of 4"):
        plan_network(Network("wide", (3, 8, 8), too_wide), "MAX78000")


def test_in_place_is_optional_and_noted():
    layers = (conv("a", INPUT, 48, 64, 88, k=1), conv("b", "a", 64, 64, 88, k=1))
    net = Network("chain", (48, 88, 88), layers)
    _, plan = plan_network(net, "MAX78000")
    assert any("--overlap-data" in n for n in plan.notes)
    with pytest.raises(PlanError, match="data memory"):
        plan_network(net, "MAX78000", in_place=False)
    _, strict = plan_network(small_unet(), "MAX78000", in_place=False)
    assert not any("overlap" in n for n in strict.notes)


def test_copies_do_not_change_what_the_network_computes():
    """Passthrough and identity-conv copies are exact: simulate before and after planning."""
    import torch

    from cnnforge.quant.ptq import quantize_network
    from cnnforge.sim import simulate

    layers = (conv("a", INPUT, 3, 8, 8), conv("c", ("a", INPUT), 11, 8, 8))
    cases = (small_unet(), Network("incat", (3, 8, 8), layers))
    for net in cases:
        q = quantize_network(with_weights(net), 8, device=None)
        out, _ = plan_network(q, "MAX78000")
        copies = [x for x in out.layers if is_copy(x)]
        assert copies
        fake = out.with_layers(identity_conv(x, True) if is_copy(x) else x for x in out.layers)
        x = torch.randint(-128, 128, (2, *net.input_shape))
        want = simulate(q, x, device=None).outputs
        for planned in (out, fake):  # passthrough copies, then the vendor's "fakept" form
            got = simulate(planned, x, device=None).outputs
            assert all(torch.equal(want[k], got[k]) for k in want)


def test_depthwise_bias_in_slices_without_a_group():
    bias = np.zeros(32, np.float32)
    dw = dataclasses.replace(conv("d", "a", 32, 32, 8), groups=32, bias=bias)
    layers = (dataclasses.replace(conv("a", INPUT, 3, 32, 8), bias=bias), dw)
    _, _, at = _placed(Network("dw", (3, 8, 8), layers), "MAX78002")
    assert at["d"].bias_quadrant is None and at["a"].bias_quadrant is not None
