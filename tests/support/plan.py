"""Helpers for the planner tests: hand-built hardware layers and random networks (hypothesis)."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from cnnforge.ir import INPUT, EltwiseOp, Layer, Network, Op, Pooling, PoolKind

POOL2 = Pooling(PoolKind.MAX, (2, 2), (2, 2))


def conv(
    name: str,
    inputs: tuple[str, ...] | str,
    cin: int,
    cout: int,
    hw: int,
    k: int = 3,
    pool: Pooling | None = None,
    eltwise: EltwiseOp | None = None,
    wide: bool = False,
) -> Layer:
    """A Conv2d hardware layer with 'same' padding producing ``cout`` x ``hw`` x ``hw``."""
    inputs = (inputs,) if isinstance(inputs, str) else inputs
    return Layer(
        name=name,
        op=Op.CONV2D,
        inputs=inputs,
        out_shape=(cout, hw, hw),
        in_channels=cin,
        out_channels=cout,
        kernel_size=(k, k),
        stride=(1, 1),
        padding=(k // 2, k // 2),
        dilation=(1, 1),
        pool=pool,
        eltwise=eltwise,
        wide=wide,
    )


def upconv(name: str, source: str, cin: int, cout: int, hw: int) -> Layer:
    """The hardware ConvTranspose2d (3x3, stride 2, pad 1, output padding 1) to ``hw``."""
    return Layer(
        name=name,
        op=Op.CONVTRANSPOSE2D,
        inputs=(source,),
        out_shape=(cout, hw, hw),
        in_channels=cin,
        out_channels=cout,
        kernel_size=(3, 3),
        stride=(2, 2),
        padding=(1, 1),
        output_padding=(1, 1),
        dilation=(1, 1),
    )


def passthrough(name: str, source: str, shape: tuple[int, ...], pool=None) -> Layer:
    return Layer(
        name=name,
        op=Op.PASSTHROUGH,
        inputs=(source,),
        out_shape=shape,
        in_channels=shape[0],
        out_channels=shape[0],
        kernel_size=(1, 1),
        stride=(1, 1),
        padding=(0, 0),
        dilation=(1, 1),
        pool=pool,
    )


def small_unet(c1: int = 16, c2: int = 32, c3: int = 64, hw: int = 16) -> Network:
    """A two-level U-Net: adjacency concat (c1 + c1) and an interleaved one (c3 + c3 > 64)."""
    layers = (
        conv("enc1", INPUT, 3, c1, hw),
        conv("enc2", "enc1", c1, c2, hw // 2, pool=POOL2),
        conv("enc3", "enc2", c2, c3, hw // 4, pool=POOL2),
        conv("bott", "enc3", c3, c3, hw // 8, pool=POOL2),
        upconv("up3", "bott", c3, c3, hw // 4),
        conv("dec3", ("up3", "enc3"), 2 * c3, c2, hw // 4),
        upconv("up2", "dec3", c2, c2, hw // 2),
        conv("dec2", ("up2", "enc2"), 2 * c2, c1, hw // 2),
        upconv("up1", "dec2", c1, c1, hw),
        conv("dec1", ("up1", "enc1"), 2 * c1, c1, hw),
        conv("head", "dec1", c1, 4, hw, k=1),
    )
    return Network("small_unet", (3, hw, hw), layers)


def with_weights(net: Network, seed: int = 0) -> Network:
    """Random float weights and bias for every weight layer (torch layouts)."""
    rng = np.random.default_rng(seed)
    layers = []
    for x in net.layers:
        if not x.has_weights:
            layers.append(x)
            continue
        k = x.kernel_size
        shape = (x.out_channels, x.in_channels, *k)
        if x.op is Op.CONVTRANSPOSE2D:
            shape = (x.in_channels, x.out_channels, *k)
        w = (0.1 * rng.normal(size=shape)).astype(np.float32)
        b = (0.1 * rng.normal(size=x.out_channels)).astype(np.float32)
        layers.append(dataclasses.replace(x, weight=w, bias=b))
    return net.with_layers(layers)


CHANNELS = (4, 6, 8, 12, 16, 24, 30, 32, 48, 64)


STEPS = ("conv", "conv1", "down", "up", "concat", "add", "pool")


@st.composite
def networks(draw) -> Network:
    """3..14 layers over 4x4..16x16 tensors; every multi-input layer is one the planner supports."""
    hw = draw(st.sampled_from((8, 16)))
    cin = draw(st.integers(1, 8))
    tensors: dict[str, tuple[int, int]] = {INPUT: (cin, hw)}
    layers: list[Layer] = []
    for i in range(draw(st.integers(3, 14))):
        name = f"l{i}"
        layer = _step(draw, name, draw(st.sampled_from(STEPS)), tensors, layers)
        layers.append(layer)
        tensors[name] = (layer.out_shape[0], layer.out_shape[1])
    extra = draw(st.sampled_from([x.name for x in layers]))
    outputs = tuple(dict.fromkeys((layers[-1].name, extra)))
    return Network("random", (cin, hw, hw), tuple(layers), outputs=outputs)


def pick(draw, tensors, recent_bias: bool = True) -> str:
    names = list(tensors)
    if recent_bias and draw(st.booleans()):
        return names[-1]
    return draw(st.sampled_from(names))


def _step(draw, name: str, kind: str, tensors, layers) -> Layer:
    src = pick(draw, tensors)
    c, hw = tensors[src]
    cout = draw(st.sampled_from(CHANNELS))
    if kind == "down" and hw >= 4:
        return conv(name, src, c, cout, hw // 2, pool=POOL2)
    if kind == "up" and hw <= 8:
        return upconv(name, src, c, cout, hw * 2)
    if kind == "pool" and hw >= 4 and src != INPUT:
        return passthrough(name, src, (c, hw // 2, hw // 2), pool=POOL2)
    if kind in ("concat", "add"):
        partners = [n for n, (c2, h2) in tensors.items() if h2 == hw and n != src]
        if partners:
            other = draw(st.sampled_from(partners))
            c2 = tensors[other][0]
            if kind == "add" and c2 == c:
                return conv(name, (src, other), c, cout, hw, eltwise=EltwiseOp.ADD)
            adjacent = c + c2 <= 64
            if kind == "concat" and (adjacent or (c == c2 and c % 4 == 0)):
                return conv(name, (src, other), c + c2, cout, hw)
    return conv(name, src, c, cout, hw, k=1 if kind == "conv1" else 3)
