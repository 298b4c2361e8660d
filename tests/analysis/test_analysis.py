"""Analysis: params and MACs against torchinfo and thop, receptive fields, memory, totals."""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
import thop
import torch
import torch.nn.functional as F
import torchinfo
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.analysis import analyze_network
from cnnforge.analysis.counting import int8_layout_bytes
from cnnforge.frontend.torch_fx import trace
from cnnforge.ir import INPUT, Layer, Network, Op, Pooling, PoolKind, Quantized
from cnnforge.models.unet import UNetLarge, UNetVOC
from cnnforge.targets.max7800x.device import MAX78000

# ---- the plain VOC U-Net's
# figures------------------------------------------------------------------


def test_seed_001_unet_figures() -> None:
    net = trace(UNetVOC(), (3, 64, 64))
    assert analyze_network(net, device=MAX78000).totals.params == 486_613
    assert analyze_network(net, device=MAX78000).totals.macs == 48_496_640
    assert analyze_network(net, count="thop", device=MAX78000).totals.macs == 55_787_520


# ---- agreement with torchinfo and thop on varied models ----------------------------------------


class VGGish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Dropout(), nn.Linear(64, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class Block(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU()
        self.down = (
            nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
            if stride != 1 or c_in != c_out
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + self.down(x))


class ResNetish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 5, 2, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 32, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


def conv1d_net() -> nn.Module:
    return nn.Sequential(
        nn.Conv1d(4, 16, 7, padding=3),
        nn.BatchNorm1d(16),
        nn.ReLU(),
        nn.MaxPool1d(2),
        nn.Conv1d(16, 16, 5, stride=2, dilation=2, bias=False),
        nn.AvgPool1d(2),
        nn.Conv1d(16, 8, 1),
        nn.AdaptiveAvgPool1d(1),
        nn.Flatten(),
        nn.Linear(8, 3),
    )


def grouped_dilated_net() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(8, 16, 3, padding=2, dilation=2, groups=4),
        nn.ReLU6(),
        nn.Conv2d(16, 16, 3, padding=1, groups=16),  # depthwise
        nn.LeakyReLU(0.1),
        nn.Conv2d(16, 32, 1, bias=False),  # pointwise
        nn.Hardtanh(),
        nn.Conv2d(32, 32, 5, stride=2, padding="valid", dilation=3, groups=8),
        nn.Sigmoid(),
    )


class EncoderDecoder(nn.Module):
    """Upsampling, average pooling, concatenation, subtraction, a grouped transposed conv."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.down = nn.AvgPool2d(2)
        self.mid = nn.Conv2d(8, 8, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear")
        self.convt = nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1, groups=2)
        self.head = nn.Conv2d(20, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.enc(x)
        m = self.mid(self.down(e))
        d = torch.cat((self.up(m) - e, self.convt(m), e), dim=1)
        return self.head(d)


def mlp() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(48, 32), nn.Tanh(), nn.Linear(32, 4, bias=False))


def transposed_net() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(2, 6, 3, stride=2, padding=1),
        nn.BatchNorm2d(6, affine=False),
        nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1),
        nn.ConvTranspose2d(4, 4, 2, stride=2, bias=False),
        nn.ConvTranspose2d(4, 2, 3, stride=1, padding=2, dilation=2),
    )


MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "unet-voc": (UNetVOC, (3, 64, 64)),
    "unet-large": (UNetLarge, (48, 32, 32)),
    "vgg": (VGGish, (3, 32, 32)),
    "resnet": (ResNetish, (3, 32, 32)),
    "conv1d": (conv1d_net, (4, 64)),
    "grouped-dilated": (grouped_dilated_net, (8, 24, 24)),
    "encoder-decoder": (EncoderDecoder, (3, 16, 16)),
    "mlp": (mlp, (3, 4, 4)),
    "transposed": (transposed_net, (2, 12, 12)),
}


def _fresh(factory: Callable[[], nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return factory().eval()


def thop_profile(model: nn.Module, shape: tuple[int, ...]) -> tuple[int, int]:
    """(MACs, params) as thop 0.1.x reports them."""
    with contextlib.redirect_stdout(io.StringIO()):
        macs, params = thop.profile(model, inputs=(torch.zeros(1, *shape),), verbose=False)
    return int(macs), int(params)


def torchinfo_true_macs(stats: torchinfo.ModelStatistics) -> int:
    """torchinfo's per-layer mult-adds without what torchinfo adds beyond true MACs.

    torchinfo counts conv/linear weights x output positions (for transposed convs that is per
    *output* position: scaled here by in/out positions), plus biases and BatchNorm parameters.
    """
    total = 0
    for info in stats.summary_list:
        if not info.is_leaf_layer or not isinstance(info.module, nn.Conv1d | nn.Conv2d | nn.Linear
                                                    | nn.ConvTranspose2d):  # fmt: skip
            continue
        module = info.module
        positions = math.prod(info.output_size[2:]) if not isinstance(module, nn.Linear) else 1
        macs = module.weight.numel() * positions
        if isinstance(module, nn.ConvTranspose2d):
            macs = macs * math.prod(info.input_size[2:]) // positions
        bias = 0 if module.bias is None else module.bias.numel() * positions
        assert info.macs == module.weight.numel() * positions + bias  # torchinfo's own rule
        total += macs
    return total


@pytest.mark.parametrize("name", sorted(MODELS))
def test_params_and_macs_agree_with_torchinfo_and_thop(name: str) -> None:
    factory, shape = MODELS[name]
    net = trace(_fresh(factory), shape)
    stats = torchinfo.summary(_fresh(factory), input_size=(1, *shape), verbose=0)
    thop_macs, thop_params = thop_profile(_fresh(factory), shape)
    true, thop_count = (
        analyze_network(net, device=MAX78000),
        analyze_network(net, count="thop", device=MAX78000),
    )
    assert true.totals.params == stats.total_params == thop_params
    assert thop_count.totals.macs == thop_macs
    assert true.totals.macs == torchinfo_true_macs(stats)


@settings(max_examples=25)
@given(st.data())
def test_random_conv_stacks_agree_with_thop_and_torchinfo(data: st.DataObject) -> None:
    """Random stacks of convs, transposed convs, pools and BN: the same three agreements."""
    channels, size = data.draw(st.integers(1, 6)), data.draw(st.integers(6, 12))
    shape = (channels, size, size)
    layers: list[nn.Module] = []
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["conv", "convt", "maxpool", "avgpool", "bn"]))
        c_out = data.draw(st.integers(1, 6))
        if kind == "conv":
            groups = data.draw(st.sampled_from([g for g in (1, 2, 3) if channels % g == 0]))
            c_out *= groups
            k, d = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2))
            layer = nn.Conv2d(channels, c_out, k, data.draw(st.integers(1, 2)), k // 2, d, groups)
        elif kind == "convt":
            s = data.draw(st.integers(1, 2))
            layer = nn.ConvTranspose2d(channels, c_out, data.draw(st.integers(1, 3)), s,
                                       bias=data.draw(st.booleans()))  # fmt: skip
        elif kind == "bn":
            layer, c_out = nn.BatchNorm2d(channels, affine=data.draw(st.booleans())), channels
        else:
            pool = nn.MaxPool2d if kind == "maxpool" else nn.AvgPool2d
            layer, c_out = pool(2, data.draw(st.integers(1, 2))), channels
        layers.append(layer)
        channels = c_out
    torch.manual_seed(0)
    model = nn.Sequential(*layers).eval()
    x = torch.zeros(1, *shape)
    for layer in layers:
        if isinstance(layer, nn.AvgPool2d) and tuple(x.shape[2:]) == (2, 2):
            return  # looks like global pooling: thop-mode counts it as adaptive (documented)
        try:
            x = layer(x)
        except RuntimeError:  # the stack shrank the map to nothing: not a model
            return
    net = trace(model, shape)
    stats = torchinfo.summary(model, input_size=(1, *shape), verbose=0)
    thop_macs, thop_params = thop_profile(model, shape)
    assert analyze_network(net, device=MAX78000).totals.params == stats.total_params == thop_params
    assert analyze_network(net, count="thop", device=MAX78000).totals.macs == thop_macs
    assert analyze_network(net, device=MAX78000).totals.macs == torchinfo_true_macs(stats)


# ---- receptive fields, derived by hand ----------------------------------------------------------


def rf_of(model: nn.Module, shape: tuple[int, ...]) -> list[tuple[float, float, float]]:
    """(size, stride, offset) of the first axis, per layer."""
    rows = analyze_network(trace(model, shape), device=MAX78000).layers
    return [(float(r.rf_size[0]), float(r.rf_stride[0]), float(r.rf_offset[0])) for r in rows]


def test_rf_conv_then_pool_is_the_issue_example() -> None:
    # 3x3 pad 1: sees 3, stride 1, centre of the first window at 1 (the padded column is at 0).
    # 2x2/2 pool: 3 + (2 - 1) * 1 = 4, stride 2, offset 1 + 0.5 * 1 = 1.5.
    model = nn.Sequential(nn.Conv2d(1, 1, 3, padding=1), nn.MaxPool2d(2))
    assert rf_of(model, (1, 8, 8)) == [(3, 1, 1), (4, 2, 1.5)]


def test_rf_strided_and_dilated_convs() -> None:
    # conv 3x3 stride 2 no pad: (3, 2, 2). Then conv 3x3 dilation 2 (effective 5) no pad:
    # size 3 + (5 - 1) * 2 = 11, stride 2, offset 2 + 2 * 2 = 6.
    # Then conv 1x1: unchanged. Then conv 2x2 stride 2 pad 1: size 11 + 1 * 2 = 13,
    # stride 4, offset 6 + (0.5 - 1) * 2 = 5.
    model = nn.Sequential(
        nn.Conv2d(1, 1, 3, stride=2),
        nn.Conv2d(1, 1, 3, dilation=2),
        nn.Conv2d(1, 1, 1),
        nn.Conv2d(1, 1, 2, stride=2, padding=1),
    )
    assert rf_of(model, (1, 32, 32)) == [(3, 2, 2), (11, 2, 6), (11, 2, 6), (13, 4, 5)]


def test_rf_transposed_conv() -> None:
    # After a 2x2/2 pool: (2, 2, 1.5). Transposed conv k=2, s=2, p=0 has its own field
    # f = (2 - 1)/2 + 1 = 1.5, t = 1/2, c = (0 - 2 + 1)/(2 * 2) + 1 = 0.75:
    # size 2 + 0.5 * 2 = 3, stride 1, offset 1.5 - 0.25 * 2 = 1 (output pixel 0 sits over
    # input pixel 0, whose pool window is pixels 1-2 of the input; centre 1.5 - ...).
    # k=3, s=2, p=1 (output_padding 1): f = 2, t = 1/2, c = (2 - 3 + 1)/4 + 1 = 1:
    # size 3 + 1 * 1 = 4, stride 0.5, offset 1.
    model = nn.Sequential(
        nn.MaxPool2d(2),
        nn.ConvTranspose2d(1, 1, 2, stride=2),
        nn.ConvTranspose2d(1, 1, 3, stride=2, padding=1, output_padding=1),
    )
    assert rf_of(model, (1, 8, 8)) == [(2, 2, 1.5), (3, 1, 1), (4, 0.5, 1)]


def test_rf_upsample_and_linear() -> None:
    # pool 2/2 -> (2, 2, 1.5); nearest x2 sees one pixel: size 2, stride 1,
    # offset 1.5 + ((2 + 1)/4 - 1) * 2 = 1. Flatten keeps it; Linear sees the whole 8-wide
    # grid of the flattened tensor: a global operation, the whole 8-pixel input: 8, offset 4.5.
    model = nn.Sequential(
        nn.MaxPool2d(2), nn.Upsample(scale_factor=2), nn.Flatten(), nn.Linear(64, 2)
    )
    assert rf_of(model, (1, 8, 8)) == [(2, 2, 1.5), (2, 1, 1), (2, 1, 1), (8, 1, 4.5)]


def test_rf_branches_take_the_largest_field() -> None:
    class TwoPaths(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.small = nn.Conv2d(1, 1, 1)
            self.big = nn.Conv2d(1, 1, 5, padding=2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat((self.small(x), self.big(x)), 1) + torch.cat((x, x), 1)

    # small: (1, 1, 1); big: (5, 1, 1); cat: the larger, 5; add with the input (1): 5.
    assert rf_of(TwoPaths(), (1, 8, 8)) == [(1, 1, 1), (5, 1, 1), (5, 1, 1), (1, 1, 1), (5, 1, 1)]


def test_rf_of_a_fused_hardware_layer_includes_its_pooling() -> None:
    # Hardware layer: max pool 2/2 then conv 3x3 pad 1 -> pool (2, 2, 1.5), conv 2 + 2 * 2 = 6,
    # stride 2, offset 1.5 + 0 = 1.5. Params = weights + bias.
    layer = Layer(
        "l0",
        Op.CONV2D,
        out_shape=(4, 4, 4),
        in_channels=2,
        out_channels=4,
        kernel_size=(3, 3),
        stride=(1, 1),
        padding=(1, 1),
        pool=Pooling(PoolKind.MAX, (2, 2), (2, 2)),
        weight=np.zeros((4, 2, 3, 3), np.float32),
        bias=np.zeros(4, np.float32),
    )
    row = analyze_network(Network("hw", (2, 8, 8), (layer,)), device=MAX78000).layers[0]
    assert (row.rf_size, row.rf_stride, row.rf_offset) == ((6, 6), (2, 2), (Fraction(3, 2),) * 2)
    assert row.params == 76 and row.macs == 4 * 16 * 2 * 9


def test_rf_of_a_vgg_stack_grows_past_the_input() -> None:
    # MatConvNet's arithmetic on a 32x32 input: pairs of 3x3 pad-1 convs, 2x2/2 pools between:
    # 3, 5 | pool 6 (stride 2) | 10, 14 | pool 16 (stride 4) | 24, 32 | pool 36 (stride 8) |
    # 52, 68: windows past the 32 input pixels (over the padding) are reported as they are.
    # Global average pooling, flatten and Linear see the whole input: 32, centred at 16.5.
    layers: list[nn.Module] = []
    channels = 3
    for out in (8, 16, 16, 16):
        for _ in range(2):
            layers += [nn.Conv2d(channels, out, 3, padding=1), nn.ReLU()]
            channels = out
        layers.append(nn.MaxPool2d(2))
    model = nn.Sequential(*layers[:-1], nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    rows = analyze_network(trace(model, (3, 32, 32)), device=MAX78000).layers
    convs = [
        (float(r.rf_size[0]), float(r.rf_stride[0])) for r in rows if r.op in ("conv2d", "maxpool")
    ]
    assert convs == [
        (3, 1), (5, 1), (6, 2), (10, 2), (14, 2), (16, 4), (24, 4), (32, 4), (36, 8),
        (52, 8), (68, 8),
    ]  # fmt: skip
    assert [(r.rf_size, r.rf_offset) for r in rows[-3:]] == [((32, 32), (16.5, 16.5))] * 3


class DeepLabStyle(nn.Module):
    """DeepLabV3+'s shape: a stride-4 encoder, ASPP (1x1, a rate-6 dilated 3x3 and image
    pooling upsampled back), a decoder joining the stride-2 low-level features."""

    def __init__(self) -> None:
        super().__init__()
        self.low = nn.Conv2d(3, 8, 3, 2, 1)
        self.enc = nn.Conv2d(8, 16, 3, 2, 1)
        self.b1 = nn.Conv2d(16, 8, 1)
        self.b2 = nn.Conv2d(16, 8, 3, padding=6, dilation=6)
        self.pool_conv = nn.Conv2d(16, 8, 1)
        self.project = nn.Conv2d(24, 8, 1)
        self.reduce = nn.Conv2d(8, 4, 1)
        self.head = nn.Conv2d(12, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        low = F.relu(self.low(x))
        f = F.relu(self.enc(low))
        p = F.relu(self.pool_conv(F.adaptive_avg_pool2d(f, 1)))
        p = F.interpolate(p, size=f.shape[-2:], mode="bilinear", align_corners=False)
        y = F.relu(self.project(torch.cat([F.relu(self.b1(f)), F.relu(self.b2(f)), p], 1)))
        y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
        return self.head(torch.cat([y, F.relu(self.reduce(low))], 1))


def test_rf_of_a_deeplab_style_head() -> None:
    # low 3x3/2: 3 (stride 2); enc 3x3/2: 3 + 2 * 2 = 7 (stride 4). Image pooling is global:
    # the whole input, 32, and stays so upsampled back to the 8x8 grid. The rate-6 3x3 spans
    # 13: 7 + 12 * 4 = 55, past the input; the concatenation keeps the largest, 55. Bilinear
    # x2: 55 + (2 - 1) * 4 = 59 at stride 2; the 3x3 head: 59 + 2 * 2 = 63.
    rows = {r.name: r for r in analyze_network(
        trace(DeepLabStyle().eval(), (3, 32, 32)), device=MAX78000).layers}  # fmt: skip
    size = {name: float(r.rf_size[0]) for name, r in rows.items()}
    assert (size["low"], size["enc"], size["b1"], size["b2"]) == (3, 7, 7, 55)
    assert size["adaptive_avg_pool2d"] == size["interpolate"] == 32
    assert (size["cat"], size["interpolate_1"], size["head"]) == (55, 59, 63)
    assert float(rows["head"].rf_stride[0]) == 2


@settings(max_examples=40)
@given(st.data())
def test_rf_equals_the_gradient_support(data: st.DataObject) -> None:
    """With positive weights, the input pixels that reach output pixel i (its gradient support)
    lie in [c - (size - 1) / 2, c + (size - 1) / 2], c = offset + i * stride, and span it exactly
    when it lies inside the input (padding can hide a dilated kernel's edge taps)."""
    size = data.draw(st.integers(8, 24))
    layers: list[nn.Module] = []
    for _ in range(data.draw(st.integers(1, 4))):
        k, s = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3))
        if data.draw(st.booleans()):
            d = data.draw(st.integers(1, 2))
            layers.append(nn.Conv2d(1, 1, k, s, data.draw(st.integers(0, (d * (k - 1)) // 2)), d))
        else:
            layers.append(nn.AvgPool2d(k, s))
    model = nn.Sequential(*layers).double()
    for conv in model:
        if isinstance(conv, nn.Conv2d):
            nn.init.ones_(conv.weight)
            nn.init.zeros_(conv.bias)
    x = torch.ones(1, 1, size, size, dtype=torch.float64, requires_grad=True)
    try:
        y = model(x)
    except RuntimeError:  # shrank to nothing
        return
    row = analyze_network(trace(model, (1, size, size)), device=MAX78000).layers[-1]
    for i in (0, y.shape[2] - 1):
        x.grad = None
        y[0, 0, i, i].backward(retain_graph=True)
        support = torch.nonzero(x.grad[0, 0].sum(1))[:, 0]  # rows reaching pixel (i, i)
        centre = row.rf_offset[0] + i * row.rf_stride[0]
        low, high = centre - (row.rf_size[0] - 1) / 2, centre + (row.rf_size[0] - 1) / 2
        first, last = int(support.min()) + 1, int(support.max()) + 1
        assert low <= first and last <= high  # a window past the input: over the padding
        # inside the input: the extreme taps are both reached (a global pooling's single output
        # is given the input itself, which a dilated tap may skip)
        if low >= 1 and high <= size and y.shape[2] > 1:
            assert (first, last) == (low, high)


# ---- memory -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "wide", "expected"),
    [
        ((21, 64, 64), False, 64 * 64 * 24),  # 6 words of 4 lanes per pixel, 3 lanes unused
        ((112, 8, 8), False, 64 * 112),  # 2 passes x 56 processors
        ((100, 1, 1), False, 104),  # 2 passes x 52 processors (rounded to 4)
        ((8, 10), True, 10 * 8 * 4),  # 32-bit output: 4 bytes a channel
        ((10,), False, 12),
    ],
)
def test_int8_layout_bytes(shape: tuple[int, ...], wide: bool, expected: int) -> None:
    assert int8_layout_bytes(shape, MAX78000, wide) == expected


def test_peak_memory_keeps_skip_connections_live() -> None:
    def layer(name: str, inputs: tuple[str, ...], channels: int) -> Layer:
        return Layer(name, Op.ACTIVATION, inputs, (channels, 4, 4))

    # input 1ch (64 B float32), a 2ch (128), b 4ch (256), c = cat(b, a) 6ch (384).
    # step a: in+a = 192; step b: in? no (input last read at a) -> a+b = 384;
    # step c: a + b + c = 768 (a is a skip, still live). Peak 768 at c.
    net = Network(
        "skip",
        (1, 4, 4),
        (layer("a", (INPUT,), 2), layer("b", ("a",), 4), layer("c", ("b", "a"), 6)),
    )
    totals = analyze_network(net, device=MAX78000).totals
    assert (totals.peak_act_bytes_float32, totals.peak_layer) == (768, "c")
    assert totals.peak_act_bytes_int8 == 16 * (4 + 4 + 8)


def test_parameter_memory_at_weight_bits() -> None:
    model = nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4, 3))
    rows = analyze_network(trace(model, (2, 3, 3)), weight_bits=4, device=MAX78000).layers
    assert [r.param_bytes_float32 for r in rows] == [4 * 76, 4 * 8, 0, 4 * 15]
    # conv: 72 weights at 4 bits = 36 B + 4 bias bytes; BN folds away; linear 12 / 2 + 3.
    assert [r.param_bytes_quantized for r in rows] == [40, 0, 0, 9]
    assert [r.weight_bits for r in rows] == [4, None, None, 4]


def test_quantized_layers_use_their_own_bits() -> None:
    quant = Quantized(2, np.zeros((4, 2, 3, 3), np.int64), np.zeros(4, np.int64))
    layer = Layer("q", Op.CONV2D, out_shape=(4, 6, 6), in_channels=2, out_channels=4,
                  kernel_size=(3, 3), quant=quant)  # fmt: skip
    row = analyze_network(Network("q", (2, 8, 8), (layer,)), device=MAX78000).layers[0]
    assert (row.params, row.param_bytes_quantized, row.weight_bits) == (76, 18 + 4, 2)
