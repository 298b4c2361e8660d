"""Finding, building and loading a user's model (``file.py:Name``, ``pkg.mod:Name``, short names);
checkpoints load with ``weights_only=True``, DistributedDataParallel prefixes accepted."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from cnnforge import models
from cnnforge.errors import InputError, ModelError
from cnnforge.frontend.references import check_factory, check_module_name
from cnnforge.samples import refuse_npy

#: At most this many keys are named in a checkpoint mismatch message.
MAX_KEYS_SHOWN = 5


ModelSpec = str | nn.Module | type
"""What names a model: a reference text (file.py:Name, pkg.mod:Name, a shipped name), an
``nn.Module`` object (the Python API), or an ``nn.Module`` class."""


def load_model(
    spec: ModelSpec,
    model_args: Mapping[str, Any] | None = None,
    checkpoint: Path | None = None,
    *,
    before_build: Callable[[Any, str], None] | None = None,
) -> nn.Module:
    """Build the model named by ``spec`` (an object is deep-copied), call ``before_build(factory,
    where)`` first (footprint checks), and load ``checkpoint`` if given."""
    model_args = dict(model_args or {})
    if isinstance(spec, nn.Module):
        return _loaded(_copy(spec, model_args), checkpoint)
    if isinstance(spec, str) and spec.lower().endswith(".onnx"):
        raise ModelError(
            "an ONNX file is a graph to compile, not a PyTorch module to train or run in "
            "PyTorch (train, evaluate and adapt need one)",
            where=spec,
            hint="give the model's Python definition (file.py:Name) with its --checkpoint",
        )
    factory, where = (spec, model_name(spec)) if isinstance(spec, type) else _resolve(spec)
    if before_build is not None:
        before_build(factory, where)
    return _loaded(_construct(factory, model_args, where), checkpoint)


def _loaded(model: nn.Module, checkpoint: Path | None) -> nn.Module:
    if checkpoint is not None:
        load_checkpoint(model, Path(checkpoint))
    return model


def model_name(spec: ModelSpec) -> str:
    """The name a model goes by in reports: ``Name`` of ``file.py:Name``, a class's name."""
    if isinstance(spec, nn.Module):
        return type(spec).__name__
    if isinstance(spec, type):
        return spec.__name__
    return spec.rpartition(":")[2] or spec


def _copy(module: nn.Module, model_args: Mapping[str, Any]) -> nn.Module:
    """A private copy of a caller's module (model arguments belong to a class, not an object)."""
    import copy

    if model_args:
        raise InputError(
            f"model arguments {sorted(model_args)} do not apply to a model object",
            where=type(module).__name__,
            hint="pass the class with its arguments, or build the object yourself",
        )
    try:
        return copy.deepcopy(module)
    except Exception as exc:
        raise ModelError(
            f"copying the model failed: {type(exc).__name__}: {exc}",
            where=user_frame(exc) or type(module).__name__,
            hint="a model object must support copy.deepcopy (as torch modules do)",
        ) from None


def _resolve(spec: str) -> tuple[Any, str]:
    """The class/factory named by ``spec`` and a ``where`` text for messages."""
    head, sep, name = spec.rpartition(":")
    if not sep or len(head) <= 1:  # no colon (or a Windows drive letter only): a short name
        if spec.endswith(".py") or "/" in spec:
            raise InputError(
                f"model {spec!r} does not name a class or function", hint=f"write {spec}:ClassName"
            )
        return (lambda **kw: models.build_model(spec, **kw)), spec
    if not name.isidentifier():
        raise InputError(f"{name!r} is not a Python name", where=spec, hint="write file.py:Name")
    if not head.endswith(".py"):
        check_module_name(head)  # issue 18: nothing of the standard library is imported or called
    module = _import_file(Path(head)) if head.endswith(".py") else _import_module(head)
    factory = getattr(module, name, None)
    if factory is None or not callable(factory):
        found = sorted(
            k for k, v in vars(module).items() if isinstance(v, type) and issubclass(v, nn.Module)
        )
        raise InputError(
            f"{head} has no class or function {name!r}",
            where=head,
            hint=f"nn.Module classes there: {', '.join(found) or 'none'}",
        )
    check_factory(factory, module, f"{head}:{name}")  # before it is called
    return factory, f"{head}:{name}"


def _import_file(path: Path) -> ModuleType:
    """Execute a user's model file as a module of its own (registered under a unique name), or,
    inside a package, as part of its package (so that ``from .parts import *`` works)."""
    if not path.is_file():
        raise InputError(f"no such model file {path}", where=str(path), hint="check the path")
    package = _package_of(path)
    if package is not None:
        return _import_in_package(path, *package)
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    mod_name = f"cnnforge_user_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise InputError(f"cannot import {path}", where=str(path), hint="is it a Python file?")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module  # dataclasses and pickling look modules up here
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)  # the file may import its sibling modules
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(mod_name, None)
        raise ModelError(
            f"importing the model file failed: {type(exc).__name__}: {exc}",
            where=user_frame(exc) or str(path),
            hint="fix the error in the model file",
        ) from None
    finally:
        sys.path.remove(folder)
    return module


def _package_of(path: Path) -> tuple[Path, str] | None:
    """(the folder above the package root, the file's dotted module name) when ``path`` lies in
    a package (its folder has an ``__init__.py``; walked up to the outermost one), else None."""
    folder = path.resolve().parent
    parts = [] if path.name == "__init__.py" else [path.stem]
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    if not parts or parts == [path.stem] or not all(p.isidentifier() for p in parts):
        return None
    return folder, ".".join(parts)


def _import_in_package(path: Path, root: Path, dotted: str) -> ModuleType:
    """Import ``dotted`` with ``root`` first on sys.path; a same-named package imported from
    elsewhere before is dropped from ``sys.modules`` first (it is not the user's)."""
    top = dotted.split(".")[0]
    loaded = sys.modules.get(top)
    if loaded is not None and not str(getattr(loaded, "__file__", "") or "").startswith(
        str(root / top)
    ):
        for key in [k for k in sys.modules if k == top or k.startswith(top + ".")]:
            del sys.modules[key]
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module(dotted)
    except Exception as exc:
        raise ModelError(
            f"importing the model file as {dotted} failed: {type(exc).__name__}: {exc}",
            where=user_frame(exc) or str(path),
            hint="fix the error in the model's package",
        ) from None
    finally:
        sys.path.remove(str(root))


def _import_module(name: str) -> ModuleType:
    cwd = str(Path.cwd())
    added = cwd not in sys.path and "" not in sys.path  # console scripts lack the cwd
    if added:
        sys.path.insert(0, cwd)
    try:
        return _import_named(name)
    finally:
        if added:
            sys.path.remove(cwd)


def _import_named(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise InputError(
            f"cannot import module {name!r}: {exc}",
            where=name,
            hint="for a file write path/to/file.py:Name; a module must be importable",
        ) from None
    except Exception as exc:
        raise ModelError(
            f"importing {name} failed: {type(exc).__name__}: {exc}", where=user_frame(exc) or name
        ) from None


def _construct(factory: Any, model_args: dict[str, Any], where: str) -> nn.Module:
    try:
        model = factory(**model_args)
    except InputError:
        raise
    except Exception as exc:
        args = ", ".join(f"{k}={v!r}" for k, v in model_args.items())
        raise ModelError(
            f"building the model with ({args}) failed: {type(exc).__name__}: {exc}",
            where=user_frame(exc) or where,
            hint="check the --model-arg names and values",
        ) from None
    if not isinstance(model, nn.Module):
        raise ModelError(
            f"{where} returned {type(model).__name__}, not a torch.nn.Module",
            where=where,
            hint="name an nn.Module class or a function returning one",
        )
    return model


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """The state_dict in a checkpoint file (weights_only load; ``module.`` prefixes stripped)."""
    if not path.is_file():
        raise InputError(f"no such checkpoint {path}", where=str(path))
    refuse_npy(path)
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(
            f"cannot load checkpoint: {first}",
            where=str(path),
            hint="only weights-only checkpoints (tensors and plain containers) are accepted",
        ) from None
    if isinstance(obj, Mapping) and isinstance(obj.get("state_dict"), Mapping):
        obj = obj["state_dict"]
    if not isinstance(obj, Mapping) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ModelError(
            "checkpoint holds no state_dict of tensors",
            where=str(path),
            hint="save model.state_dict() or {'state_dict': model.state_dict()}",
        )
    if obj and all(str(k).startswith("module.") for k in obj):
        obj = {str(k)[len("module.") :]: v for k, v in obj.items()}
    return dict(obj)


def load_checkpoint(model: nn.Module, path: Path) -> None:
    """Load ``path`` into ``model``; ModelError naming missing/unexpected/mis-shaped keys."""
    state = read_state_dict(path)
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    shaped = [
        f"{k} {tuple(state[k].shape)} vs model {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    ]
    problems = [
        f"{label}: {_some(keys)}"
        for label, keys in (("missing", missing), ("unexpected", unexpected), ("shape", shaped))
        if keys
    ]
    if problems:
        raise ModelError(
            "checkpoint does not match the model; " + "; ".join(problems),
            where=str(path),
            hint="is it the checkpoint of this model with these --model-arg values?",
        )
    model.load_state_dict(state, strict=True)


def _some(keys: list[str]) -> str:
    shown = ", ".join(keys[:MAX_KEYS_SHOWN])
    more = len(keys) - MAX_KEYS_SHOWN
    return f"{shown} (+{more} more)" if more > 0 else shown


def capture_failed(tool: str, module: nn.Module, exc: BaseException) -> ModelError:
    """The one-line error of a capture (``torch.fx cannot trace``) naming the user's file:line."""
    return ModelError(
        f"{tool} {type(module).__name__}: {first_line(exc)}",
        where=user_frame(exc) or type(module).__name__,
        hint="remove data-dependent control flow (if/for on tensor values) from forward()",
    )


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when empty)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def user_frame(exc: BaseException) -> str | None:
    """``file.py:line`` of the innermost traceback frame outside torch and cnnforge, if any."""
    skip = (str(Path(torch.__file__).parent), str(Path(__file__).parents[1]))
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if not frame.filename.startswith(skip) and not frame.filename.startswith("<"):
            found = f"{frame.filename}:{frame.lineno}"
    return found
