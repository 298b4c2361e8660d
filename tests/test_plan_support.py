"""Helpers for the planner tests: hand-built hardware layers (no frontend needed)."""

from __future__ import annotations

import dataclasses

import numpy as np

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
