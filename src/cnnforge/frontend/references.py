"""What a model reference (``file.py:Name``) may name, checked before it is called: an ``nn.Module``
subclass, or a function of the user's own module (so ``subprocess:getoutput`` is refused)."""

from __future__ import annotations

import inspect
import sys
from types import ModuleType
from typing import Any

from torch import nn

from cnnforge.errors import InputError

#: Top-level packages whose functions are never model factories (their classes may be modules).
NOT_USER_PACKAGES = frozenset(
    {"torch", "numpy", "cnnforge", "typer", "click", "rich", "yaml", "jinja2", "PIL", "pip"}
)


def _not_user(module_name: str) -> bool:
    top = module_name.split(".")[0]
    return top in sys.stdlib_module_names or top in NOT_USER_PACKAGES or top == "__main__"


def check_module_name(name: str) -> None:
    """Refuse, before importing it, a module that is not the user's (standard library etc.)."""
    if name.split(".")[0] in sys.stdlib_module_names:
        raise InputError(
            f"{name!r} is a standard-library module, not a model",
            where=name,
            hint="write path/to/file.py:Name or your_package.module:Name",
        )


def check_factory(factory: Any, module: ModuleType, where: str) -> None:
    """``factory`` is an nn.Module subclass or a plain function defined in the user's ``module``."""
    if isinstance(factory, type) and issubclass(factory, nn.Module):
        return
    own = (
        inspect.isfunction(factory)
        and getattr(factory, "__module__", None) == module.__name__
        and not _not_user(module.__name__)
    )
    if not own:
        found = "class" if isinstance(factory, type) else type(factory).__name__
        raise InputError(
            f"{where} is a {found}, not an nn.Module class or a function of your own module "
            "(it was not called)",
            where=where,
            hint="name your nn.Module subclass, or a function of your module that returns one",
        )
