"""Exact legal rewrites: hardware layers the device cannot run -> ones it can that compute the
same function on every input (docs/hardware/unet.md §1.1.3; tests/passes/test_legalize.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from cnnforge.ir import Layer, Network, Op, Pooling, PoolKind
from cnnforge.passes.concat_channels import concat_pad_channels
from cnnforge.passes.geometry import pooled_dims
from cnnforge.passes.rewrites import (
    Rewrite,
    apply_rules,
    insert_after,
    passthrough_geometry,
    record,
    replace_layer,
    sole_consumer,
    unique_name,
)

SUBSAMPLE_TARGETS = frozenset({Op.CONV1D, Op.CONV2D, Op.CONVTRANSPOSE2D, Op.PASSTHROUGH})
MAX_SUBSAMPLE_STRIDE = 16  # pool stride range 1..16 (docs/hardware/devices.md §1)


def _embed(weight: np.ndarray, rows: slice, cols: slice) -> np.ndarray:
    """A (..., 3, 3) zero kernel with ``weight`` at ``[..., rows, cols]``."""
    out = np.zeros((*weight.shape[:2], 3, 3), dtype=weight.dtype)
    out[:, :, rows, cols] = weight
    return out


def _embedded(layer: Layer, rows: slice, cols: slice) -> dict[str, object]:
    """Float and (when quantized) integer weights of ``layer`` embedded in 3x3 kernels."""
    out: dict[str, object] = {}
    if layer.weight is not None:
        out["weight"] = _embed(layer.weight, rows, cols)
    if layer.quant is not None:
        out["quant"] = replace(layer.quant, weights=_embed(layer.quant.weights, rows, cols))
    return out


def convtranspose_k2(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """ConvTranspose2d k=2 s=2 p=0 -> k=3 s=2 p=1 output_padding=1, 2x2 kernel at [1:3, 1:3]."""
    if layer.op is not Op.CONVTRANSPOSE2D or layer.kernel_size != (2, 2):
        return None
    if layer.stride != (2, 2) or any(layer.padding) or any(layer.output_padding):
        return None
    if any(d != 1 for d in layer.dilation or (1, 1)) or not layer.has_weights:
        return None
    new = replace(
        layer,
        kernel_size=(3, 3),
        padding=(1, 1),
        output_padding=(1, 1),
        dilation=(1, 1),
        **_embedded(layer, slice(1, 3), slice(1, 3)),
    )
    detail = (
        "ConvTranspose2d k=2 s=2 p=0 -> k=3 s=2 p=1 output_padding=1, "
        "2x2 kernel embedded at [1:3, 1:3] (exact)"
    )
    return replace_layer(network, new), record(layer, "convtranspose-k2", detail)


def conv_k2_to_k3(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """Conv2d 2x2 with stride s > 1 -> 3x3 (kernel at [1:3, 1:3], pad + 1) when s drops the
    extra last row and column, i.e. (H + 2p - 1) % s != 0 on both axes."""
    if layer.op is not Op.CONV2D or layer.kernel_size != (2, 2) or not layer.has_weights:
        return None
    if any(d != 1 for d in layer.dilation or (1, 1)):
        return None
    dims = pooled_dims(network, layer)
    for n, p, s in zip(dims, layer.padding, layer.stride, strict=True):
        if s < 2 or (n + 2 * p - 1) % s == 0:
            return None
    new = replace(
        layer,
        kernel_size=(3, 3),
        padding=tuple(p + 1 for p in layer.padding),
        **_embedded(layer, slice(1, 3), slice(1, 3)),
    )
    detail = (
        f"Conv2d 2x2 pad {_fmt(layer.padding)} stride {_fmt(layer.stride)} -> 3x3 pad "
        f"{_fmt(new.padding)}, kernel at [1:3, 1:3]; the stride drops the extra row/column"
    )
    return replace_layer(network, new), record(layer, "conv-k2-to-k3", detail)


def kernel_embed_3x3(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """Conv2d 1x1 with padding, 1x3 or 3x1 -> centred 3x3, each pad grown by (3 - k) / 2."""
    if layer.op is not Op.CONV2D or not layer.has_weights:
        return None
    k = layer.kernel_size
    if k not in ((1, 3), (3, 1), (1, 1)) or (k == (1, 1) and not any(layer.padding)):
        return None
    if any(d != 1 for d in layer.dilation or (1, 1)):
        return None
    oh, ow = (3 - k[0]) // 2, (3 - k[1]) // 2
    padding = (layer.padding[0] + oh, layer.padding[1] + ow)
    if max(padding) > 2:
        return None
    weights = _embedded(layer, slice(oh, oh + k[0]), slice(ow, ow + k[1]))
    new = replace(layer, kernel_size=(3, 3), padding=padding, **weights)
    detail = (
        f"Conv2d {k[0]}x{k[1]} pad {_fmt(layer.padding)} -> 3x3 pad {_fmt(padding)} "
        "with the kernel in the centre (exact)"
    )
    return replace_layer(network, new), record(layer, "kernel-embed-3x3", detail)


def stride_to_pool(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """Conv stride s > 1 -> stride 1, then 1x1 pooling of stride s on the next layer (R3.3)."""
    if layer.op not in (Op.CONV1D, Op.CONV2D) or not layer.stride:
        return None
    s = layer.stride[0]
    if s == 1 or any(t != s for t in layer.stride) or s > MAX_SUBSAMPLE_STRIDE:
        return None
    dims = pooled_dims(network, layer)
    full = tuple(
        n + 2 * p - d * (k - 1)
        for n, p, d, k in zip(
            dims, layer.padding, layer.dilation or (1,) * len(dims), layer.kernel_size, strict=True
        )
    )
    conv = replace(layer, stride=(1,) * len(dims), out_shape=(layer.out_shape[0], *full))
    sub = Pooling(kind=PoolKind.MAX, size=(1,) * len(dims), stride=(s,) * len(dims))
    network = replace_layer(network, conv)
    consumer = sole_consumer(network, layer.name)
    if _can_take_subsampling(consumer, layer.name):
        network = replace_layer(network, replace(consumer, pool=sub))
        where = f"on the next layer {consumer.name}"
    else:
        network, where = _insert_subsample(network, conv, sub, layer.out_shape)
    detail = f"stride {s} -> stride 1 + 1x1 pooling with stride {s} {where} (exact subsampling)"
    return network, record(layer, "stride-to-pool", detail)


def _can_take_subsampling(consumer: Layer | None, name: str) -> bool:
    if consumer is None or consumer.op not in SUBSAMPLE_TARGETS:
        return False
    return consumer.pool is None and consumer.inputs == (name,) and consumer.eltwise is None


def _insert_subsample(
    network: Network, conv: Layer, sub: Pooling, out_shape: tuple[int, ...]
) -> tuple[Network, str]:
    ndim = len(out_shape) - 1
    name = unique_name(network, f"{conv.name}.subsample")
    passthrough = Layer(
        name=name,
        inputs=(conv.name,),
        out_shape=out_shape,
        module_path=conv.module_path,
        pool=sub,
        **passthrough_geometry(out_shape[0], ndim),
    )
    readers = [x.name for x in network.consumers(conv.name)]
    return insert_after(network, conv.name, passthrough, readers), f"on a new passthrough {name}"


def split_maxpool(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """Max pooling k x k / stride k, k > 16 -> a x a in a passthrough, then b x b on the layer
    (k = a * b): the same windows, exactly (R3.2, R3.4)."""
    pool = layer.pool
    if pool is None or pool.kind is not PoolKind.MAX or layer.eltwise is not None:
        return None
    k = pool.size[0]
    if k <= MAX_SUBSAMPLE_STRIDE or any(n != k for n in (*pool.size, *pool.stride)):
        return None
    if any(d != 1 for d in pool.dilation_or_ones()):
        return None
    a = next((a for a in range(MAX_SUBSAMPLE_STRIDE, 1, -1) if k % a == 0), None)
    if a is None or k // a > MAX_SUBSAMPLE_STRIDE:
        return None
    ndim = len(pool.size)
    first = Pooling(PoolKind.MAX, (a,) * ndim, (a,) * ndim)
    shapes = network.input_shapes(layer)
    channels = sum(s[0] for s in shapes)  # a concatenation is pooled part by part alike
    name = unique_name(network, f"{layer.name}.pool")
    pre = Layer(
        name=name,
        inputs=layer.inputs,
        out_shape=(channels, *first.output_dims(shapes[0][1:])),
        module_path=layer.module_path,
        pool=first,
        **passthrough_geometry(channels, ndim),
    )
    b = k // a
    new = replace(layer, inputs=(name,), pool=Pooling(PoolKind.MAX, (b,) * ndim, (b,) * ndim))
    layers = []
    for x in network.layers:
        layers += [pre, new] if x.name == layer.name else [x]
    detail = f"max pooling {k}x{k} -> {a}x{a} in a new passthrough {name}, then {b}x{b} (exact)"
    return network.with_layers(layers), record(layer, "split-maxpool", detail)


def linear_1x1_flatten(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """A linear layer that flattens 1x1 data: flattening is the identity, drop it."""
    if layer.op is not Op.LINEAR or not layer.flatten:
        return None
    shape = network.input_shapes(layer)[0]
    if len(shape) < 2 or any(n != 1 for n in shape[1:]):
        return None
    new = replace(layer, flatten=False)
    detail = "linear on 1x1 data runs as a 1x1 convolution without flatten"
    return replace_layer(network, new), record(layer, "linear-1x1-flatten", detail)


def upsample_nearest(network: Network, layer: Layer) -> tuple[Network, Rewrite] | None:
    """Nearest 2x upsampling -> ConvTranspose2d k=3 s=2 p=1 output_padding=1 with identity kernels
    on [1:3, 1:3]: exact (integers as in fuse.eltwise_activation)."""
    if layer.op is not Op.UPSAMPLE or layer.upsample_mode != "nearest":
        return None
    if tuple(layer.scale_factor) != (2, 2) or len(layer.out_shape) != 3:
        return None
    c = layer.out_shape[0]
    weight = np.zeros((c, c, 3, 3), dtype=np.float32)
    weight[np.arange(c), np.arange(c), 1:3, 1:3] = 1.0
    new = replace(
        layer,
        op=Op.CONVTRANSPOSE2D,
        in_channels=c,
        out_channels=c,
        kernel_size=(3, 3),
        stride=(2, 2),
        padding=(1, 1),
        output_padding=(1, 1),
        dilation=(1, 1),
        weight=weight,
        bias=None,
        scale_factor=(),
        upsample_mode="",
    )
    detail = (
        "nearest 2x upsampling -> ConvTranspose2d k=3 s=2 p=1 output_padding=1 with identity "
        f"2x2 kernels ({c}x{c} kernels of kernel memory)"
    )
    return replace_layer(network, new), record(layer, "upsample-nearest", detail)


def _fmt(values: tuple[int, ...]) -> str:
    return "x".join(str(v) for v in values) if len(set(values)) > 1 else str(values[0])


#: The legalization rules, in the order they are tried.
LEGAL_RULES = (
    upsample_nearest,
    convtranspose_k2,
    conv_k2_to_k3,
    kernel_embed_3x3,
    stride_to_pool,
    split_maxpool,
    linear_1x1_flatten,
    concat_pad_channels,
)


def legalize_with_log(network: Network) -> tuple[Network, tuple[Rewrite, ...]]:
    """``legalize`` that also returns the rewrites it made, in the order made (every rule is needed
    on both MAX7800x devices, docs/hardware/devices.md §1 geometry rows: no device is asked)."""
    return apply_rules(network, LEGAL_RULES)


def legalize(network: Network) -> Network:
    """Apply the exact rewrites below until none applies."""
    return legalize_with_log(network)[0]
