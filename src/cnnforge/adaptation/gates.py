"""Sigmoid gates (``x * sigmoid(...)``, the attention gates of MONAI's AttentionUnet) become the
ungated ``x``: the device has no sigmoid and no product of two tensors, so the one form it runs
is the gate held open (1 everywhere). The branch that computed the gate is dropped; distillation
then teaches the rest of the network to do without it.

The module that multiplies is found from each Sigmoid up through its parents: the nearest one
that torch.fx traces and whose graph multiplies a tensor by that Sigmoid's output. It is
replaced by the fx graph of itself without the product (dead branch removed), so the modules
it keeps keep their paths. A Sigmoid that gates nothing stays a refusal.
"""

from __future__ import annotations

import copy
import operator

import torch
from torch import fx, nn

from cnnforge.adaptation.surgery import Replacement, set_module

_MUL = (operator.mul, torch.mul)


def open_gates(model: nn.Module) -> tuple[nn.Module, list[Replacement]]:
    """A copy of ``model`` with every sigmoid gate removed; one Replacement (row ``gate``)
    per module rewritten."""
    model = copy.deepcopy(model)
    done: list[Replacement] = []
    sigmoids = [p for p, m in model.named_modules() if isinstance(m, nn.Sigmoid)]
    for path in sigmoids:
        if any(path.startswith(r.path + ".") for r in done):
            continue
        parts = path.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            owner = ".".join(parts[:cut])
            rewritten = _without_gate(model.get_submodule(owner), ".".join(parts[cut:]))
            if rewritten is not None:
                before = type(model.get_submodule(owner)).__name__
                set_module(model, owner, rewritten)
                done.append(Replacement(owner, f"{before}: x * sigmoid(...)", "x", "gate", False))
                break
    return model, done


def _without_gate(module: nn.Module, sigmoid: str) -> fx.GraphModule | None:
    """``module`` traced, each product with the output of its Sigmoid at ``sigmoid`` replaced
    by the other factor, the dead branch removed; None where it has no such product."""
    try:
        traced = fx.symbolic_trace(module)
    except Exception:
        return None
    graph = traced.graph
    gate = next((n for n in graph.nodes if n.op == "call_module" and n.target == sigmoid), None)
    products = [
        n for n in graph.nodes if n.op == "call_function" and n.target in _MUL and gate in n.args
    ]
    if gate is None or not products:
        return None
    for mul in products:
        other = next(a for a in mul.args if a is not gate)
        if not isinstance(other, fx.Node):
            return None
        mul.replace_all_uses_with(other)
        graph.erase_node(mul)
    graph.eliminate_dead_code()
    return fx.GraphModule(traced, graph, class_name=f"{type(module).__name__}Ungated")
