"""Peak activation memory of a network executed layer by layer in its order (batch 1).

Definition: a tensor (the network input or a layer's output) is live from the step that
produces it (the input: before step 0) through the last step that reads it; network outputs
stay live to the end. The memory at step i is the sum of the sizes of all tensors live at step
i, i.e. layer i's inputs, its output, and every tensor still waiting for a later consumer (skip
connections). The peak is the maximum over steps. Nothing is computed in place, so a model-level
network (conv, BN and ReLU as separate layers) shows each intermediate tensor; a fused hardware
network shows the memory the accelerator's layers need.
"""

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
