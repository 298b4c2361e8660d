"""Peak activation memory of a network run layer by layer (batch 1): a tensor is live from its
producer through its last reader; the peak is the largest sum over steps."""

from __future__ import annotations

from collections.abc import Callable

from cnnforge.geometry import last_use
from cnnforge.ir import INPUT, Network

__all__ = ["last_use", "peak_memory"]


def peak_memory(network: Network, size: Callable[[str], int]) -> tuple[int, str]:
    """(peak bytes, name of the layer at the peak) with ``size(tensor name)`` in bytes."""
    last = last_use(network)
    live = size(INPUT)
    peak, where = live, INPUT
    for i, layer in enumerate(network.layers):
        live += size(layer.name)
        if live > peak:
            peak, where = live, layer.name
        for name in {layer.name, *layer.inputs}:  # free what this step read for the last time
            if last[name] == i:
                live -= size(name)
    return peak, where
