"""Module surgery: every module the table (adapt/table.py) has a row for is swapped in place.

``replace_ops`` changes the user's module (a deep copy of it) and returns what it changed, one
``Replacement`` per module path; ``refusals`` names the modules no row replaces, all at once.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from cnnforge.adapt.table import REFUSALS, row_for


@dataclass(frozen=True)
class Replacement:
    """One swap: module path, what it was, what it became, the table row, exact or not."""

    path: str
    before: str
    after: str
    row: str
    exact: bool

    def to_dict(self) -> dict:
        return dict(vars(self))


def refusals(model: nn.Module) -> list[tuple[str, str, str]]:
    """(module path, class name, why) of every module with no replacement."""
    return [
        (path, type(m).__name__, REFUSALS[type(m).__name__])
        for path, m in model.named_modules()
        if type(m).__name__ in REFUSALS
    ]


def replace_ops(model: nn.Module) -> tuple[nn.Module, list[Replacement]]:
    """A copy of ``model`` with each op of the table replaced; the list of replacements."""
    model = copy.deepcopy(model)
    done: list[Replacement] = []
    for path, module in list(model.named_modules()):
        if not path:
            continue
        new, exact = _replacement(module)
        if new is None:
            continue
        set_module(model, path, new)
        row = row_for(_class_key(module))
        done.append(Replacement(path, _short(module), _short(new), row.key if row else "", exact))
    return model, done


def set_module(root: nn.Module, path: str, new: nn.Module) -> None:
    """Put ``new`` at the dotted ``path`` of ``root``."""
    parent_path, _, name = path.rpartition(".")
    parent = root.get_submodule(parent_path) if parent_path else root
    setattr(parent, name, new)


def _class_key(module: nn.Module) -> str:
    name = type(module).__name__
    if isinstance(module, nn.Upsample) and module.mode != "nearest":
        return f"Upsample({module.mode})"
    return name


def _short(module: nn.Module) -> str:
    return " ".join(repr(module).split())[:80]


def _replacement(module: nn.Module) -> tuple[nn.Module | None, bool]:
    """The module that replaces ``module`` and whether it is exact; (None, _) to keep it."""
    row = row_for(_class_key(module))
    if row is None:
        return None, False
    if row.key == "norm":
        return _batchnorm(module), False
    if row.key == "activation":
        slope = getattr(module, "negative_slope", getattr(module, "alpha", None))
        if isinstance(module, nn.PReLU):
            exact = bool((module.weight == 0).all())
        else:
            exact = slope == 0 and not isinstance(module, nn.SELU)
        return nn.ReLU(), exact
    if row.key == "clamp":
        lo, hi = (0.0, 6.0) if isinstance(module, nn.ReLU6) else (module.min_val, module.max_val)
        return nn.ReLU(), lo == 0 and hi >= 1
    if row.key == "upsample":
        return _nearest(module), False
    if row.key == "dropout":
        return nn.Identity(), True
    return None, False


def _batchnorm(module: nn.Module) -> nn.Module | None:
    channels = int(getattr(module, "num_features", getattr(module, "num_channels", 0)))
    cls = nn.BatchNorm1d if type(module).__name__ == "InstanceNorm1d" else nn.BatchNorm2d
    bn = cls(channels, eps=float(module.eps))
    weight = getattr(module, "weight", None)
    with torch.no_grad():
        if weight is not None:
            bn.weight.copy_(weight.detach())
        bias = getattr(module, "bias", None)
        if bias is not None:
            bn.bias.copy_(bias.detach())
    return bn


def _nearest(module: nn.Module) -> nn.Module:
    scale = getattr(module, "scale_factor", None)
    if scale is None:
        return nn.Upsample(size=module.size, mode="nearest")
    return nn.Upsample(scale_factor=scale, mode="nearest")
