"""The depth cut: where more than the device's layers is the wall and the model repeats blocks
(a ResNet stage's second BasicBlock, SegResNet's ResBlocks), repeats are removed until check's
layer count passes.

A repeat is a child of an ``nn.Sequential`` after the first, of the same class as the child
before it, a block of layers (not one conv: adapt's own stacked 3x3s stay), whose output has
its input's shape (so the Sequential still runs when it is removed). The one cut each step is
the last repeat of the Sequential holding the most repeats (ties: the deeper one, where the
kernel memory is).
"""

from __future__ import annotations

import copy
import itertools

import torch
from torch import nn

from cnnforge.adaptation.surgery import Replacement, set_module


def repeats(model: nn.Module, input_shape: tuple[int, ...]) -> dict[str, list[str]]:
    """Sequential path -> the paths of its removable repeats, in order."""
    shapes: dict[str, bool] = {}

    def same_shape(path: str, inputs: tuple, out) -> None:
        x = inputs[0] if inputs else None
        tensors = isinstance(x, torch.Tensor) and isinstance(out, torch.Tensor)
        shapes[path] = tensors and x.shape == out.shape

    hooks = [
        m.register_forward_hook(lambda _m, i, o, p=p: same_shape(p, i, o))
        for p, m in model.named_modules()
        if p
    ]
    try:
        with torch.no_grad():
            model.eval()(torch.zeros(1, *input_shape))
    finally:
        for h in hooks:
            h.remove()
    found: dict[str, list[str]] = {}
    for path, seq in model.named_modules():
        if not isinstance(seq, nn.Sequential):
            continue
        children = list(seq.named_children())
        for (_, before), (name, block) in itertools.pairwise(children):
            child = f"{path}.{name}" if path else name
            composite = any(True for _ in block.children())  # a block, not a lone conv
            same = type(block) is type(before) and composite
            if same and shapes.get(child, False):
                found.setdefault(path, []).append(child)
    return found


def too_deep(model: nn.Module, input_shape: tuple[int, ...], target) -> bool:
    """Whether check finds more layers than the device has (the count itself, or placement
    running out of layer slots for the pass-through layers it adds)."""
    from cnnforge.frontend.capture import capture
    from cnnforge.passes.check import check_report

    report = check_report(
        capture(model, input_shape, name=type(model).__name__), target.device, rules=target.rules
    )
    return any(depth_rule(v) for v in report.violations)


def depth_rule(v) -> bool:
    """A violation that says the network has more layers than the device."""
    return v.rule == "layer-count" or (v.rule == "placement" and "more layers" in v.hint)


def cut_depth(
    model: nn.Module, input_shape: tuple[int, ...], target
) -> tuple[nn.Module, list[Replacement]]:
    """``model`` (in place) with the fewest repeated blocks cut that fit the layer count (all
    where none does; bisection over a fixed order), one ``depth`` Replacement per block cut."""
    order = cut_order(repeats(model, input_shape))
    low, high = 0, len(order)  # too deep with `low` cuts; `high` cuts: fits, or all there are
    while low + 1 < high:
        mid = (low + high) // 2
        if too_deep(_cut(copy.deepcopy(model), order[:mid]), input_shape, target):
            low = mid
        else:
            high = mid
    cuts = [
        Replacement(p, type(model.get_submodule(p)).__name__, "Identity()", "depth", False)
        for p in order[:high]
    ]
    return _cut(model, order[:high]), cuts


def cut_order(found: dict[str, list[str]]) -> list[str]:
    """The repeats in the order they are cut: each step the last of the Sequential holding the
    most left (ties: the deeper one)."""
    left = {seq: list(paths) for seq, paths in found.items()}
    order: list[str] = []
    while any(left.values()):
        seq = max(reversed(list(left)), key=lambda p: len(left[p]))
        order.append(left[seq].pop())
    return order


def _cut(model: nn.Module, paths: list[str]) -> nn.Module:
    for path in paths:
        set_module(model, path, nn.Identity())
    return model
