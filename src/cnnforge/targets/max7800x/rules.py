"""The MAX7800x rules the shared checker calls (passes/target_rules.py): its memories, its
``--weight-bits auto``, its planner and its FIFO streaming, handed down by its ``Target``."""

from __future__ import annotations

from cnnforge.devices import Capabilities
from cnnforge.ir import Network
from cnnforge.passes.check_limits import dims, output
from cnnforge.passes.target_rules import TargetRules
from cnnforge.targets.max7800x.check_memory import bias, data_memory, network_memory, weight_memory
from cnnforge.targets.max7800x.device import DEVICES, as_max7800x
from cnnforge.targets.max7800x.weight_bits import choose_weight_bits


def plan_max7800x(network: Network, device: Capabilities) -> object:
    """The MAX7800x placement: the planner ``plan`` and ``compile`` run."""
    from cnnforge.targets.max7800x.planner import plan_network

    return plan_network(network, as_max7800x(device))


def streaming_layers(network: Network, device: Capabilities) -> int:
    """Layers that stream through the FIFOs (streaming.py)."""
    from cnnforge.targets.max7800x.streaming import streaming_layers as streamed

    return streamed(network, as_max7800x(device))


#: What the checker asks of a MAX78000/MAX78002 (the other part is named in hints).
RULES = TargetRules(
    layer_rules=((dims, data_memory), (output, bias)),
    network_rules=network_memory,
    choose_weight_bits=choose_weight_bits,
    place=plan_max7800x,
    streaming_layers=streaming_layers,
    weight_memory=weight_memory,
    siblings=DEVICES,
)
