"""Kernel-memory words per processor (plan/kernel_words.py) against the packing rules and the
figures the vendor tool and the walkthrough give."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from cnnforge.ir import BINARY_BITS, Layer, Op
from cnnforge.targets.max7800x.device import MAX78000
from cnnforge.targets.max7800x.kernel_words import (
    layer_kernel_need,
    layer_kernel_words,
    output_slots,
    packed_words,
    passes,
    processors_per_pass,
)


def _conv(cin: int, cout: int, k: int = 3, groups: int = 1) -> Layer:
    return Layer(
        "c",
        Op.CONV2D,
        out_shape=(cout, 8, 8),
        in_channels=cin,
        out_channels=cout,
        kernel_size=(k, k),
        groups=groups,
    )


def test_processors_per_pass_examples() -> None:
    # docs/hardware/network-yaml.md §4: 48 -> 1 pass of 48; 112 -> 2 of 56; 100 -> 2 of 52
    assert (passes(48, device=MAX78000), processors_per_pass(48, device=MAX78000)) == (1, 48)
    assert (passes(112, device=MAX78000), processors_per_pass(112, device=MAX78000)) == (2, 56)
    assert (passes(100, device=MAX78000), processors_per_pass(100, device=MAX78000)) == (2, 52)
    assert (passes(1024, device=MAX78000), processors_per_pass(1024, device=MAX78000)) == (16, 64)


def test_vendor_figures() -> None:
    # the fake passthrough of the large U-Net: 56 -> 56 1x1, 7 words on each of 56 processors
    # (docs/hardware/network-yaml.md §8)
    need = layer_kernel_need(_conv(56, 56, k=1), device=MAX78000)
    assert (need.words, need.processors) == (7, 56)
    # MNIST fc: flatten 12x4x4 -> 10: 160 1x1 weights per processor = 18 words on 12 processors
    fc = Layer("fc", Op.LINEAR, out_shape=(10,), in_channels=192, out_channels=10, flatten=True)
    need = layer_kernel_need(fc, in_shape=(12, 4, 4), device=MAX78000)
    assert (need.words, need.processors, need.kernels) == (18, 12, 160)
    # the large U-Net bottleneck 56 -> 112: 2 output passes of 56 slots
    assert layer_kernel_words(_conv(56, 112), device=MAX78000) == 112


def test_sub_byte_packing() -> None:
    # docs/hardware/devices.md §3: 3x3 4-bit = 2 channels per word; 1-bit = 8 per word; 1x1 8-bit =
    # 9 per word
    assert packed_words(2, 9, 4, device=MAX78000) == 1
    assert packed_words(3, 9, 4, device=MAX78000) == 2
    assert packed_words(8, 9, 1, device=MAX78000) == 1
    assert packed_words(9, 1, 8, device=MAX78000) == 1
    assert packed_words(10, 1, 8, device=MAX78000) == 2
    assert packed_words(8, 9, BINARY_BITS, device=MAX78000) == 1


@given(kc=st.integers(1, 4096), bits=st.sampled_from([8, 4, 2, 1]), k=st.sampled_from([1, 9]))
def test_packing_holds_every_weight_and_formula(kc: int, bits: int, k: int) -> None:
    words = packed_words(kc, k, bits, device=MAX78000)
    q = 8 // bits
    exact = math.ceil((kc * k * bits + (kc % q) * k * (q - 1)) / 72)
    assert words == exact
    assert words * 72 >= kc * k * bits  # room for every weight
    assert words <= math.ceil(kc * k * 8 / 72)  # never more than at 8 bits


def test_depthwise_needs_one_kernel_per_pass() -> None:
    need = layer_kernel_need(_conv(128, 128, groups=128), device=MAX78000)
    assert (need.kernels, need.processors, need.words) == (2, 64, 2)


def test_weightless_layers_need_nothing() -> None:
    pt = Layer("p", Op.PASSTHROUGH, out_shape=(8, 4, 4), in_channels=8, out_channels=8)
    assert (
        layer_kernel_need(pt, device=MAX78000) is None
        and layer_kernel_words(pt, device=MAX78000) == 0
    )


def test_output_slots_from_masks() -> None:
    assert output_slots(0xFF, 8, device=MAX78000) == 8
    assert (
        output_slots(0xFF00000000000000, 8, device=MAX78000) == 8
    )  # enc1 of the large U-Net: procs 56-63
    assert output_slots(0b1011, 3, device=MAX78000) == 4  # holes cost kernels like real channels
    assert (
        output_slots(0x00FFFFFFFFFFFFFF, 112, device=MAX78000) == 56
    )  # 2 passes on processors 0-55
    assert output_slots(0x00FFFFFFFFFFFFE0, 104, device=MAX78000) == 52  # first 5 rounded down to 4


def test_vendor_networks_with_their_plans(ai8x_data) -> None:
    from cnnforge.targets.max7800x.ai8x import load_ai8x

    net, plan = load_ai8x(
        ai8x_data / "networks/camvid-unet-large-fakept.yaml",
        ai8x_data / "trained/ai85-camvid-unet-large-fakept-q.pth.tar",
        (48, 88, 88),
        device="MAX78000",
    )
    words = {}
    for layer in net:
        p = plan.placement(layer.name)
        slots = output_slots(p.out_processors, layer.out_channels, device=MAX78000)
        words[layer.name] = layer_kernel_words(layer, out_slots=slots, device=MAX78000)
    # docs/hardware/network-yaml.md §8: the fake passthrough costs 7 words on each of its 56
    # processors
    assert words["layer7"] == 7
    assert words["layer6"] == 112 and words["layer8"] == 112  # 56 -> 112 and 112 -> 56
