"""Module surgery: every module the table (adaptation/table.py) has a row for is swapped in place.

``replace_ops`` changes the user's module (a deep copy of it) and returns what it changed, one
``Replacement`` per module path; ``refusals`` names the modules no row replaces, all at once.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from cnnforge.adaptation.table import REFUSALS, row_for


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
    """The table's name for ``module``: its class, or for layers the table matches by their
    settings (kernel, dilation, pool padding, upsample mode) the class with that setting."""
    name = type(module).__name__
    if isinstance(module, nn.Upsample) and module.mode != "nearest":
        return f"Upsample({module.mode})"
    if type(module) is nn.Conv2d and _stackable(module):
        return "Conv2d(dilation>1)" if max(module.dilation) > 1 else "Conv2d(kernel>3)"
    if type(module) in (nn.MaxPool2d, nn.AvgPool2d) and _pair(module.padding) != (0, 0):
        return f"{name}(padding>0)"
    return name


def _pair(value) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


def _stackable(conv: nn.Conv2d) -> bool:
    """A square conv, larger than 3x3 or dilated, with 'same' padding and one group: stacked
    3x3s reach the same extent and output size."""
    k, d, p = conv.kernel_size, conv.dilation, conv.padding
    if isinstance(p, str) or k[0] != k[1] or d[0] != d[1] or k[0] % 2 == 0 or conv.groups != 1:
        return False
    extent = d[0] * (k[0] - 1) + 1
    return extent > 3 and p == ((extent - 1) // 2,) * 2 and conv.padding_mode == "zeros"


#: Constructor arguments a short description keeps (the rest are defaults or statistics).
_KEY_ARGS = frozenset(
    {"kernel_size", "stride", "padding", "dilation", "groups", "scale_factor", "size", "mode",
     "negative_slope", "num_parameters", "alpha", "min_val", "max_val", "num_groups", "p"}
)  # fmt: skip


def _short(module: nn.Module) -> str:
    """``module`` in a few words, whole (never cut): its class and the arguments that say what
    it computes (channels, kernel, stride, mode, slope), e.g. ``InstanceNorm2d(16)``."""
    name = type(module).__name__
    if isinstance(module, nn.Sequential):
        inner = sorted({_short(m) for m in module})
        return f"{name}({len(module)}: {', '.join(inner)})"
    parts = _top_level_split(module.extra_repr())
    kept = [p for p in parts if "=" not in p or p.split("=")[0] in _KEY_ARGS]
    return f"{name}({', '.join(kept)})"


def _top_level_split(text: str) -> list[str]:
    """``text`` split at the commas outside brackets (``3, 8, kernel_size=(3, 3)``)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


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
    if row.key in ("kernel", "dilation"):
        return stacked_3x3(module), False
    if row.key == "pool-padding":
        s = _pair(module.stride)
        return type(module)(s, s), False
    return None, False


def stacked_3x3(conv: nn.Conv2d) -> nn.Sequential:
    """3x3 convs (padding 1, no activation between) reaching ``conv``'s extent: the first takes
    the stride and starts as the centre 3x3 of the kernel (of a dilated 3x3: its taps side
    by side), the others as identities, so distillation starts near the original."""
    extent = conv.dilation[0] * (conv.kernel_size[0] - 1) + 1
    cin, cout = conv.in_channels, conv.out_channels
    layers = [nn.Conv2d(cin, cout, 3, conv.stride, 1, bias=conv.bias is not None)]
    layers += [nn.Conv2d(cout, cout, 3, 1, 1, bias=False) for _ in range((extent - 1) // 2 - 1)]
    with torch.no_grad():
        c = conv.kernel_size[0] // 2
        layers[0].weight.copy_(conv.weight[:, :, c - 1 : c + 2, c - 1 : c + 2])
        if conv.bias is not None:
            layers[0].bias.copy_(conv.bias)
        for layer in layers[1:]:
            nn.init.dirac_(layer.weight)
    return nn.Sequential(*layers)


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
