"""``OUT/adapted.py``: the adapted network as a plain PyTorch module file (class ``Adapted``).

Written from the torch.fx graph of the adapted module: leaf modules by their constructor
``repr`` (torch.nn and cnnforge.nn only), ``forward`` as fx prints it. The file is importable on
its own; ``write_module`` loads it back and refuses to keep it unless it computes exactly what
the adapted module does (an fx trace can miss data-dependent branches).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from cnnforge.errors import ModelError

_HEADER = '''"""Adapted by cnnforge adapt from {source}; weights: adapted_float.pth."""

import math  # noqa: F401
import operator  # noqa: F401

import torch
from torch import nn
from torch.nn import *  # noqa: F401,F403


def _put(root: nn.Module, path: str, module: nn.Module) -> None:
    *parents, name = path.split(".")
    for p in parents:
        if not hasattr(root, p):
            root.add_module(p, nn.Module())
        root = getattr(root, p)
    root.add_module(name, module)


class Adapted(nn.Module):
    def __init__(self) -> None:
        super().__init__()
'''


def module_source(model: nn.Module, source: str) -> str:
    """The text of adapted.py for ``model``."""
    from cnnforge.frontend.torch_fx import trace_graph

    gm = trace_graph(model)
    lines = [_HEADER.format(source=source)]
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            raise ModelError("adapted.py: a tensor attribute read in forward()", where=node.target)
    seen: set[str] = set()
    for node in gm.graph.nodes:
        if node.op != "call_module" or node.target in seen:
            continue
        seen.add(node.target)
        m = gm.get_submodule(node.target)
        lines.append(f"        _put(self, {node.target!r}, {_constructor(m, node.target)})")
    code = gm.graph.python_code(root_module="self")
    imports = [_import_line(name, obj) for name, obj in code.globals.items()]
    imports = [line for line in imports if line]
    body = "\n".join("    " + ln if ln else ln for ln in code.src.strip("\n").splitlines())
    header, cls = lines[0].split("\n\n\nclass ")
    text = [header, *imports, "\n\nclass " + cls, *lines[1:]]
    return "\n".join(text) + "\n\n" + body + "\n"


def _import_line(name: str, obj: object) -> str:
    """The import that binds a global of fx's code (``_torch_Tensor_`` is a string there)."""
    if name in ("torch", "inf", "nan", "NoneType", "device", "fx_pytree", "pytree"):
        return ""
    if isinstance(obj, str):
        return f"{name} = {obj}"
    if isinstance(obj, type(torch)):
        return f"import {obj.__name__} as {name}"
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if module and qualname and "." not in qualname:
        return f"from {module} import {qualname} as {name}"
    raise ModelError(f"adapted.py cannot name {obj!r} used by forward()", where=name)


def _constructor(m: nn.Module, path: str) -> str:
    cls = type(m)
    if cls.__module__.startswith("torch.nn.modules"):
        text = " ".join(repr(m).split())
        if "(\n" in repr(m) or "): " in text:
            raise ModelError(f"adapted.py: {cls.__name__} is not a leaf", where=path)
        return "nn." + text.replace(", bias=True, track_running_stats", ", track_running_stats")
    raise ModelError(f"adapted.py cannot write a {cls.__module__}.{cls.__name__} leaf", where=path)


def write_module(
    model: nn.Module, path: Path, source: str, input_shape: Sequence[int]
) -> nn.Module:
    """Write adapted.py, load ``Adapted`` back with ``model``'s weights, check it is equal."""
    text = module_source(model, source)
    path.write_text(text, encoding="utf-8")
    loaded = load_adapted(path)
    state = {k: v for k, v in model.state_dict().items() if k in loaded.state_dict()}
    missing = set(loaded.state_dict()) - set(state)
    if missing:
        raise ModelError(f"adapted.py: no weights for {sorted(missing)[:3]}", where=str(path))
    loaded.load_state_dict(state)
    x = torch.randn(2, *input_shape)
    with torch.no_grad():
        if not torch.equal(loaded.eval()(x), model.eval()(x)):
            raise ModelError(
                "adapted.py computes other values than the adapted module (the fx trace misses "
                "a branch of forward())",
                where=str(path),
            )
    return loaded


def load_adapted(path: Path) -> nn.Module:
    """A fresh ``Adapted`` from ``path`` (imported under a private module name)."""
    spec = importlib.util.spec_from_file_location(f"_cnnforge_adapted_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Adapted()
