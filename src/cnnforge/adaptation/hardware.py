"""The adapted network as ``cnnforge.nn`` QAT modules, one per hardware layer: ``adapted.py``.

Built from the lowered float network (each layer: input pooling -> conv -> activation, BN
folded, concatenations as several inputs), after the activation scales calibrated on training
images are divided out (quant/ptq.py's rescaling), so the QAT modules' float stage, clamped to
[-1, 127/128], computes what the adapted module does. An output layer without activation becomes
wide (32-bit logits). The file imports only torch and cnnforge.nn; ``build`` writes it, loads
``Adapted`` back and copies the layers' float weights in.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import torch
from torch import nn

from cnnforge.durable import replace_bytes
from cnnforge.errors import ModelError
from cnnforge.ir import INPUT, Layer, Network, Op

_HEADER = '''"""Adapted by cnnforge adapt from {source}: one cnnforge.nn module per hardware layer.

Weights: adapted.pth (``compile --checkpoint``, ``evaluate --checkpoint``).
"""

import torch
from torch import nn

from cnnforge import nn as qnn


class Adapted(nn.Module):
    def __init__(self) -> None:
        super().__init__()
'''


def _pool_args(layer: Layer) -> str:
    if layer.pool is None:
        return ""
    p = layer.pool
    return f", pool={p.kind.value!r}, pool_size={p.size}, pool_stride={p.stride}"


_ELTWISE = {"add": "Add", "sub": "Sub", "or": "Or", "xor": "Xor"}


def _module(layer: Layer, wide: bool) -> str:
    act = layer.activation.value
    pool = "" if layer.eltwise is not None else _pool_args(layer)  # then _eltwise pools
    common = f"{pool}, activation={act!r}, wide={wide}"
    geom = (
        f"{layer.in_channels}, {layer.out_channels}, {layer.kernel_size}, stride={layer.stride}, "
        f"padding={layer.padding}"
    )
    bias = layer.bias is not None
    if layer.op is Op.CONV2D:
        return (
            f"qnn.Conv2d({geom}, dilation={layer.dilation}, groups={layer.groups}, "
            f"bias={bias}{common})"
        )
    if layer.op is Op.CONVTRANSPOSE2D:
        return (
            f"qnn.ConvTranspose2d({geom}, output_padding={layer.output_padding}, "
            f"groups={layer.groups}, bias={bias}{common})"
        )
    if layer.op is Op.PASSTHROUGH and layer.eltwise is None and layer.pool is not None:
        p = layer.pool
        return f"qnn.Pool({p.kind.value!r}, {p.size}, {p.stride})"
    if layer.op is Op.PASSTHROUGH and layer.eltwise is not None and layer.pool is None:
        return f"qnn.{_ELTWISE[layer.eltwise.value]}()"
    raise ModelError(f"no cnnforge.nn module for a {layer.label()} layer", where=layer.name)


def _eltwise(layer: Layer) -> str:
    """The element-wise op (and the pooling of its operands) a weight layer runs first: its
    own ``cnnforge.nn`` module, which compile fuses back into the one hardware layer."""
    first = getattr(layer, "pool_first", True)
    pool = f"{_pool_args(layer)}, pool_first={first}" if layer.pool is not None else ""
    return f"qnn.{_ELTWISE[layer.eltwise.value]}({pool.lstrip(', ')})"


def source(network: Network, origin: str) -> str:
    """The text of adapted.py for the lowered float ``network``."""
    if len(network.outputs) != 1:
        raise ModelError("adapt writes networks with one output", where=network.name)
    index = {layer.name: i for i, layer in enumerate(network.layers)}
    init, body = [], ["    def forward(self, x: torch.Tensor) -> torch.Tensor:"]

    def ref(name: str) -> str:
        return "x" if name == INPUT else f"t{index[name]}"

    for i, layer in enumerate(network.layers):
        wide = layer.wide or (
            layer.name in network.outputs and layer.activation.value == "none" and layer.has_weights
        )
        init.append(f"        self.l{i} = {_module(layer, wide)}  # {layer.module_path}")
        args = [ref(n) for n in layer.inputs]
        if layer.eltwise is not None and layer.has_weights:  # the device's fused form
            init.append(f"        self.e{i} = {_eltwise(layer)}  # {layer.module_path}")
            call = f"self.e{i}({', '.join(args)})"
        elif layer.eltwise is not None:
            call = ", ".join(args)
        elif len(args) > 1:
            call = f"torch.cat([{', '.join(args)}], dim=1)"
        else:
            call = args[0]
        body.append(f"        t{i} = self.l{i}({call})")
    body.append(f"        return {ref(network.outputs[0])}")
    return _HEADER.format(source=origin) + "\n".join(init) + "\n\n" + "\n".join(body) + "\n"


def load_adapted(path: Path) -> nn.Module:
    """A fresh ``Adapted`` from ``path`` (imported under a private module name)."""
    spec = importlib.util.spec_from_file_location(f"_cnnforge_adapted_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Adapted()


def build(network: Network, path: Path, origin: str) -> nn.Module:
    """Write adapted.py for ``network``; the ``Adapted`` it defines, with the float weights."""
    replace_bytes(path, source(network, origin).encode("utf-8"))  # whole, or as it was
    model = load_adapted(path)
    with torch.no_grad():
        for i, layer in enumerate(network.layers):
            m = getattr(model, f"l{i}")
            if layer.weight is not None:
                m.weight.copy_(torch.from_numpy(np.asarray(layer.weight, np.float32)))
            if layer.bias is not None:
                m.bias.copy_(torch.from_numpy(np.asarray(layer.bias, np.float32)))
    return model


def rescaled(network: Network, calibration: torch.Tensor) -> Network:
    """``network`` with the calibrated activation scales divided out (outputs within [-1, 1))."""
    from cnnforge.quant.ptq import _rescaled
    from cnnforge.quant.scales import activation_scales

    exps = activation_scales(network, calibration)
    return network.with_layers(
        [_rescaled(network, x, exps) if x.has_weights else x for x in network.layers]
    )
