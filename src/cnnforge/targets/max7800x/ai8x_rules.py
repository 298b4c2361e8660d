"""Vendor rules the ai8x importer applies across layers: which layers may stream (the YAML line
named) and which copy of a twice-stored state_dict is paired (the first, as the vendor does)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from cnnforge.errors import ConfigError
from cnnforge.ir import Network
from cnnforge.targets.max7800x.ai8x_checkpoint import CheckpointData
from cnnforge.targets.max7800x.ai8x_yaml import YamlConfig
from cnnforge.targets.max7800x.device import Max7800xDevice
from cnnforge.targets.max7800x.placement import Plan
from cnnforge.targets.max7800x.streaming import streaming_structure

_HINTS = {
    "streaming-fifo": "run with the FIFO (cnnforge: fifo=True; the vendor: --fifo)",
    "streaming-order": "streaming layers must be the first layers, one after the other",
    "fifo-channels": "drop --fifo: the input is then loaded into data memory before the start",
    "fifo-processors": "put the input on processors 0-3, 16-19, 32-35, 48-51 (CHW: 0, 16, 32, "
    "48), or drop --fifo",
}


def check_streaming(
    cfg: YamlConfig, network: Network, plan: Plan, dev: Max7800xDevice, fifo: bool | None
) -> Plan:
    """``plan`` with its FIFO flag; a streaming rule broken is a ``ConfigError`` at file:line."""
    if fifo is None:
        fifo = cfg.layers[0].streaming
    plan = replace(plan, fifo=fifo)
    issues = (
        streaming_structure(network, plan, dev)
        if fifo or any(y.streaming for y in cfg.layers)
        else []
    )
    if issues:
        first = issues[0]
        y = cfg.layers[first.index]
        raise ConfigError(
            f"{y.label()}: {first.message}",
            where=f"{cfg.path}:{y.line_of(first.key)}",
            hint=_HINTS.get(first.rule),
        )
    return plan


def _base(module: str) -> str:
    return module[len("module.") :] if module.startswith("module.") else module


def duplicate_copy(ckpt: CheckpointData, owners: int) -> bool:
    """True when the weights after the first ``owners`` repeat them exactly, once, under the
    same module names with or without the ``module.`` prefix (then they are left unused)."""
    first, rest = ckpt.layers[:owners], ckpt.layers[owners:]
    if not first or len(rest) != len(first):
        return False
    return all(
        _base(a.module) == _base(b.module)
        and a.module != b.module
        and a.weight.shape == b.weight.shape
        and np.array_equal(a.weight, b.weight)
        for a, b in zip(first, rest, strict=True)
    )
