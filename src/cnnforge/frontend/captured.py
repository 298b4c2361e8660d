"""What a capture (torch.fx or torch.export) hands to the equivalence check (capture.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import torch
import torch.fx as fx

from cnnforge.ir import INPUT, Layer, Network


@dataclass
class Captured:
    """A captured network plus what the eager check needs: the returned ``output_layers`` and the
    graph run to give ``given_nodes`` (OPAQUE and QAT layers) the values PyTorch computes."""

    network: Network
    output_layers: tuple[str, ...]
    graph: fx.GraphModule
    graph_args: Callable[[torch.Tensor], tuple[Any, ...]]
    given_nodes: dict[str, fx.Node] = field(default_factory=dict)
    how: str = "torch.fx"
    #: Names (module paths) of the parameters the captured graph reads; None: unknown.
    used_params: frozenset[str] | None = None

    def with_unused(self, module: torch.nn.Module) -> Network:
        """The network, recording the parameters of ``module`` its forward does not use."""
        if self.used_params is None:
            return self.network
        unused = tuple(
            (name, int(p.numel()))
            for name, p in module.named_parameters()
            if name not in self.used_params
        )
        return replace(self.network, unused_params=unused) if unused else self.network

    def given_values(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Batched values of the ``given_nodes`` layers when the captured graph runs on ``x``."""
        if not self.given_nodes:
            return {}
        wanted = {node: name for name, node in self.given_nodes.items()}
        found: dict[str, torch.Tensor] = {}

        class _Recorder(fx.Interpreter):
            def run_node(self, n: fx.Node) -> Any:
                value = super().run_node(n)
                if n in wanted:  # a copy: later in-place ops (ReLU(inplace=True)) change it
                    found[wanted[n]] = (
                        value[0] if isinstance(value, tuple | list) else value
                    ).clone()
                return value

        with torch.no_grad():
            _Recorder(self.graph).run(*self.graph_args(x))
        return found


class LayerLog:
    """The bookkeeping both graph walkers share: layers in order, the names they use, which
    layer (or INPUT) each tensor node stands for, and the nodes whose values the check takes."""

    def __init__(self) -> None:
        self.alias: dict[fx.Node, str] = {}
        self.used: set[str] = {INPUT}
        self.layers: list[Layer] = []
        self.given: dict[str, fx.Node] = {}

    def add(self, node: fx.Node, layer: Layer | None, source: str, given: bool = False) -> None:
        """Record ``node`` as ``layer`` (None: an alias of ``source``)."""
        if layer is None:
            self.alias[node] = source
            return
        self.used.add(layer.name)
        self.layers.append(layer)
        self.alias[node] = layer.name
        if given:
            self.given[layer.name] = node


def owned_arrays(network: Network) -> Network:
    """``network`` with private copies of arrays that view other storage, so a caller that keeps
    (and may train) the module never sees its arrays alias torch storage."""
    return replace(network, layers=tuple(_owned(layer) for layer in network.layers))


def _owned(value: Any) -> Any:
    """``value`` (a Layer or its BatchNormParams/Quantized) with its viewing arrays copied."""
    changes = {}
    for f in fields(value):
        item = getattr(value, f.name)
        if isinstance(item, np.ndarray) and not item.flags.owndata:
            changes[f.name] = item.copy()
        elif f.name in ("batchnorm", "quant") and item is not None:
            changes[f.name] = _owned(item)
    return replace(value, **changes) if changes else value


def leaves(value: Any) -> list[Any]:
    """The leaves of nested tuples, lists and dicts, in order (a model's outputs, a node's
    arguments), as torch's pytree flattens them; its flattening is private API of torch."""
    if isinstance(value, tuple | list):
        return [leaf for item in value for leaf in leaves(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in leaves(item)]
    return [value]
