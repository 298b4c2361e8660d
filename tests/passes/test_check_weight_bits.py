"""``--weight-bits auto`` (targets/max7800x/weight_bits.py): the documented rule on hand-built
networks."""

from __future__ import annotations

from dataclasses import replace

from cnnforge.ir import Network
from cnnforge.passes.check import check_network
from cnnforge.targets.max7800x.device import MAX78000, MAX78002
from cnnforge.targets.max7800x.kernel_words import KernelNeed, kernel_capacity, skyline_fits
from cnnforge.targets.max7800x.weight_bits import choose_weight_bits
from support.fuse_reference import conv2d
from support.targets import rules_of


def _chain(channels: list[int], size: int = 4) -> Network:
    layers, prev, shape = [], "input", (channels[0], size, size)
    for i, c in enumerate(channels[1:]):
        layer = conv2d(f"c{i}", prev, shape, c, seed=i)
        layers.append(layer)
        prev, shape = layer.name, layer.out_shape
    return Network("chain", (channels[0], size, size), tuple(layers))


def test_fitting_network_keeps_8_bits() -> None:
    choice = choose_weight_bits(_chain([3, 64, 64, 10]), MAX78000)
    assert choice.fits and set(choice.bits.values()) == {8}


def test_largest_middle_layers_narrow_first_and_ends_stay_8_bit() -> None:
    # 64 -> 128 -> 256 -> 128 -> 64: 128 + 512 + 512 + 128 words on each processor > 768
    net = _chain([64, 128, 256, 128, 64])
    assert check_network(
        net, MAX78000, 8, rules=rules_of(MAX78000)
    )  # kernel memory is short at 8 bits
    choice = choose_weight_bits(net, MAX78000)
    assert choice.fits
    assert choice.bits["c0"] == 8 and choice.bits["c3"] == 8  # first and last kept
    assert choice.bits["c1"] < 8 and choice.bits["c2"] < 8
    assert not check_network(net, MAX78000, choice.bits, rules=rules_of(MAX78000))


def test_impossible_returns_narrowest_and_not_fits() -> None:
    net = _chain([1024, 1024, 1024])
    choice = choose_weight_bits(net, MAX78000)
    assert not choice.fits and set(choice.bits.values()) == {1}


def test_max78002_has_room_and_allowed_widths_are_respected() -> None:
    net = _chain([64, 128, 256, 128, 64])
    assert set(choose_weight_bits(net, MAX78002).bits.values()) == {8}
    choice = choose_weight_bits(net, MAX78000, allowed=(8, 2))
    assert set(choice.bits.values()) <= {8, 2}


def test_skyline_needs_one_column_start_per_layer() -> None:
    cap = kernel_capacity(MAX78000)
    full = KernelNeed("a", "a", 8, 64, 768, 9, 768)
    assert skyline_fits((full,), cap)
    half = KernelNeed("b", "b", 8, 33, 400, 9, 400)  # 2 x 33 processors > 64: must stack
    assert not skyline_fits((half, half), cap)
    assert skyline_fits((half, replace(half, processors=31)), cap)
