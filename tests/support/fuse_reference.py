"""The float reference of the hardware layers (torch) and hand-built float layers."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from cnnforge.ir import INPUT, Activation, EltwiseOp, Layer, Network, Op, Pooling, PoolKind


def _t(a: np.ndarray | None) -> torch.Tensor | None:
    return None if a is None else torch.from_numpy(np.asarray(a, dtype=np.float64))


def _pool(x: torch.Tensor, pool: Pooling, padding: tuple[int, ...] = ()) -> torch.Tensor:
    nd = x.dim() - 2
    pad = padding or (0,) * nd
    if pool.kind is PoolKind.MAX:
        fn = F.max_pool1d if nd == 1 else F.max_pool2d
        return fn(x, pool.size, pool.stride, pad, pool.dilation_or_ones())
    fn = F.avg_pool1d if nd == 1 else F.avg_pool2d
    return fn(x, pool.size, pool.stride, pad)


def _activate(x: torch.Tensor, layer: Layer) -> torch.Tensor:
    act, params = layer.activation, layer.activation_params
    table = {
        Activation.NONE: lambda v: v,
        Activation.RELU: torch.relu,
        Activation.ABS: torch.abs,
        Activation.RELU6: lambda v: torch.clamp(v, 0, 6),
        Activation.HARDTANH: lambda v: torch.clamp(v, params[0], params[1]),
        Activation.LEAKYRELU: lambda v: F.leaky_relu(v, params[0] if params else 0.01),
        Activation.SIGMOID: torch.sigmoid,
        Activation.TANH: torch.tanh,
    }
    return table[act](x)


def _fold(op: EltwiseOp, xs: list[torch.Tensor]) -> torch.Tensor:
    out = xs[0]
    for x in xs[1:]:
        out = {EltwiseOp.ADD: out + x, EltwiseOp.SUB: out - x, EltwiseOp.MUL: out * x}[op]
    return out


def _main_op(layer: Layer, x: torch.Tensor) -> torch.Tensor:
    w, b = _t(layer.weight), _t(layer.bias)
    geo = dict(stride=layer.stride, padding=layer.padding, groups=layer.groups)
    if layer.op is Op.CONV2D:
        return F.conv2d(x, w, b, dilation=layer.dilation or 1, **geo)
    if layer.op is Op.CONV1D:
        return F.conv1d(x, w, b, dilation=layer.dilation or 1, **geo)
    if layer.op is Op.CONVTRANSPOSE2D:
        return F.conv_transpose2d(
            x, w, b, output_padding=layer.output_padding or 0, dilation=layer.dilation or 1, **geo
        )
    if layer.op is Op.LINEAR:
        return F.linear(x.reshape(x.shape[0], -1), w, b)
    return x  # passthrough


def _hardware(layer: Layer, xs: list[torch.Tensor]) -> torch.Tensor:
    if layer.pool is not None and layer.pool_first:
        xs = [_pool(x, layer.pool) for x in xs]
    x = _fold(layer.eltwise, xs) if layer.eltwise is not None else torch.cat(xs, 1)
    if layer.pool is not None and not layer.pool_first:
        x = _pool(x, layer.pool)
    if layer.flatten:
        x = x.reshape(x.shape[0], -1)
    return _activate(_main_op(layer, x), layer)


def _model_level(layer: Layer, xs: list[torch.Tensor]) -> torch.Tensor:
    x = xs[0]
    if layer.op is Op.BATCHNORM:
        bn = layer.batchnorm
        shape = (1, -1) + (1,) * (x.dim() - 2)
        y = (x - _t(bn.running_mean).reshape(shape)) / torch.sqrt(
            _t(bn.running_var).reshape(shape) + bn.eps
        )
        if bn.weight is not None:
            y = y * _t(bn.weight).reshape(shape) + _t(bn.bias).reshape(shape)
        return y
    if layer.op is Op.ACTIVATION:
        return _activate(x, layer)
    if layer.op is Op.POOL:
        return _pool(x, layer.pool, layer.padding)
    if layer.op is Op.ELTWISE:
        return _fold(layer.eltwise, xs)
    if layer.op is Op.CONCAT:
        return torch.cat(xs, 1)
    if layer.op is Op.FLATTEN:
        return x.reshape(x.shape[0], -1)
    if layer.op is Op.UPSAMPLE:
        return F.interpolate(x, scale_factor=layer.scale_factor, mode=layer.upsample_mode)
    raise AssertionError(layer.op)


def run(network: Network, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Float64 outputs of ``network`` on ``x`` (N, C, ...) by output name."""
    values = {INPUT: x.double()}
    for layer in network.layers:
        xs = [values[n] for n in layer.inputs]
        fn = _hardware if layer.is_hardware else _model_level
        values[layer.name] = fn(layer, xs)
    return {n: values[n] for n in network.outputs}


def conv2d(
    name: str,
    inp: str,
    in_shape: tuple[int, ...],
    cout: int,
    k: int | tuple[int, int] = 3,
    pad: int | tuple[int, int] = 1,
    stride: int = 1,
    bias: bool = True,
    seed: int = 0,
) -> Layer:
    """A model-level Conv2d with random weights (PyTorch geometry)."""
    kh, kw = (k, k) if isinstance(k, int) else k
    ph, pw = (pad, pad) if isinstance(pad, int) else pad
    rng = np.random.default_rng(seed)
    cin, h, w = in_shape
    out = (cout, (h + 2 * ph - kh) // stride + 1, (w + 2 * pw - kw) // stride + 1)
    return Layer(
        name,
        Op.CONV2D,
        inputs=(inp,),
        out_shape=out,
        module_path=name,
        in_channels=cin,
        out_channels=cout,
        kernel_size=(kh, kw),
        stride=(stride, stride),
        padding=(ph, pw),
        dilation=(1, 1),
        weight=rng.standard_normal((cout, cin, kh, kw)).astype(np.float32),
        bias=rng.standard_normal(cout).astype(np.float32) if bias else None,
    )


def act(name: str, inp: str, shape: tuple[int, ...], kind=Activation.RELU, params=()) -> Layer:
    return Layer(
        name,
        Op.ACTIVATION,
        inputs=(inp,),
        out_shape=shape,
        module_path=name,
        activation=kind,
        activation_params=params,
    )


def maxpool(name: str, inp: str, shape: tuple[int, ...], k: int = 2) -> Layer:
    c, h, w = shape
    return Layer(
        name,
        Op.POOL,
        inputs=(inp,),
        out_shape=(c, h // k, w // k),
        module_path=name,
        pool=Pooling(PoolKind.MAX, (k, k), (k, k)),
        padding=(0, 0),
    )


def combine(name: str, op: Op, inputs: tuple[str, ...], shape, eltwise=None) -> Layer:
    return Layer(name, op, inputs=inputs, out_shape=shape, module_path=name, eltwise=eltwise)


def convtranspose(name, inp, in_shape, cout, k=2, s=2, p=0, op=0, seed=0) -> Layer:
    cin, h, w = in_shape
    rng = np.random.default_rng(seed)
    size = [(n - 1) * s - 2 * p + k + op for n in (h, w)]
    return Layer(
        name,
        Op.CONVTRANSPOSE2D,
        inputs=(inp,),
        out_shape=(cout, *size),
        module_path=name,
        in_channels=cin,
        out_channels=cout,
        kernel_size=(k, k),
        stride=(s, s),
        padding=(p, p),
        dilation=(1, 1),
        output_padding=(op, op),
        weight=rng.standard_normal((cin, cout, k, k)).astype(np.float32),
        bias=None,
    )
