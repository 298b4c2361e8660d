"""A model's memory and channel counts from its shapes alone (built and run on ``meta``), so an
oversized request is refused before any real work (issue 27)."""

from __future__ import annotations

import math
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cnnforge.errors import DeviceLimitError, ModelError
from cnnforge.resources import format_bytes, memory_limit, require, shape_text

#: Module attributes that carry a channel count (convolutions, linear layers).
CHANNEL_ATTRS = ("in_channels", "out_channels", "in_features", "out_features")
#: The simulator keeps an input and an output of the largest layer as int64 (8 bytes each).
SIM_BUFFERS = 2
#: A layer's output is taken to be at most this many times its input's spatial size (upsampling)
#: in the quick bound that decides whether the meta run is needed at all.
GROWTH = 16


@dataclass(frozen=True)
class Footprint:
    """What a model needs, from its shapes (bytes)."""

    weights: int
    activations: int  # every module output, float32: what capture and its check keep
    largest: int  # elements of the largest activation

    @property
    def total(self) -> int:
        """Weights twice (the model and the captured network), activations, simulator buffers."""
        return 2 * self.weights + self.activations + SIM_BUFFERS * 8 * self.largest

    def describe(self) -> str:
        return (
            f"weights {format_bytes(self.weights)}, float32 activations "
            f"{format_bytes(self.activations)}, simulator buffers "
            f"{format_bytes(SIM_BUFFERS * 8 * self.largest)}"
        )


def meta_model(factory: Callable[..., Any], model_args: Mapping[str, Any]) -> nn.Module | None:
    """``factory(**model_args)`` built on the meta device, or None when it cannot be."""
    try:
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            model = factory(**model_args)
    except Exception:
        return None
    return model if isinstance(model, nn.Module) else None


def check_channels(model: nn.Module, max_channels: int, device: str) -> None:
    """Refuse a layer with more channels than ``device`` allows, before any tracing."""
    for name, module in model.named_modules():
        for attr in CHANNEL_ATTRS:
            value = module.__dict__.get(attr)
            if isinstance(value, int) and not isinstance(value, bool) and value > max_channels:
                raise DeviceLimitError(
                    f"layer {name or type(model).__name__} has {attr}={value}; {device} allows "
                    f"at most {max_channels} channels per layer",
                    where=type(module).__name__,
                    hint="reduce the layer's channels (e.g. --model-arg values) to fit the device",
                )


def footprint(model: nn.Module, input_shape: Sequence[int]) -> Footprint | None:
    """Run ``model`` (on meta) at ``input_shape`` and add up its tensors; None if it cannot run."""
    weights = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    sizes: list[int] = []

    def hook(_module: nn.Module, _inputs: Any, output: Any) -> None:
        for tensor in _tensors(output):
            sizes.append(tensor.numel())

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        with torch.no_grad():
            model(torch.empty((1, *map(int, input_shape)), device="meta"))
    except Exception:
        return None
    finally:
        for handle in handles:
            handle.remove()
    return Footprint(weights, 4 * sum(sizes) + 4 * math.prod(input_shape), max(sizes, default=0))


def check_footprint(model: nn.Module | None, input_shape: Sequence[int] | None, name: str) -> None:
    """Refuse (InputError with the figures) a model whose estimate exceeds the memory limit."""
    if model is None:
        return
    found = None
    if input_shape is not None and quick_bound(model, input_shape) > memory_limit() // 4:
        found = footprint(model, input_shape)  # the first meta op costs torch ~1 s of imports
    if found is None or input_shape is None:
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        require(
            2 * weights, f"model {name} ({format_bytes(weights)} of weights)", "a smaller model"
        )
        return
    require(
        found.total,
        f"model {name} at input {shape_text(input_shape)} ({found.describe()})",
        "give a smaller --input-shape or a smaller model",
    )


def quick_bound(model: nn.Module, input_shape: Sequence[int]) -> int:
    """A generous bound of the activations' bytes without running anything: every module's output
    as large as the input's area (x ``GROWTH``) times the widest channel count."""
    widest = int(input_shape[0])
    count = 1
    for module in model.modules():
        count += 1
        for attr in CHANNEL_ATTRS:
            value = module.__dict__.get(attr)
            if isinstance(value, int) and not isinstance(value, bool):
                widest = max(widest, value)
    area = math.prod(int(n) for n in input_shape[1:])
    return 4 * GROWTH * area * widest * count


def check_attribute_access(model: nn.Module, where: str) -> None:
    """A module whose attribute lookup raises or recurses is the model's own error, named."""
    from cnnforge.frontend.loading import user_frame

    for module in model.modules():
        try:
            getattr(module, "_cnnforge_probe_", None)
        except Exception as exc:
            raise ModelError(
                f"looking up an attribute of {type(module).__name__} failed: "
                f"{type(exc).__name__}: {str(exc)[:120]}",
                where=user_frame(exc) or where,
                hint="fix __getattr__ of the model class: it must raise AttributeError for "
                "unknown names",
            ) from None


def model_code_error(exc: Exception) -> Exception:
    """``exc`` as the model's own ``ModelError`` when its innermost frame outside Python,
    installed packages and cnnforge is the user's file (else ``exc`` itself: a bug of ours)."""
    skip = (sys.prefix, sys.base_prefix, str(Path(__file__).parents[1]))
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        name = frame.filename
        if not name.startswith(skip) and not name.startswith("<") and "-packages" not in name:
            found = f"{name}:{frame.lineno}"
    if found is None:
        return exc
    return ModelError(
        f"the model's code raised {type(exc).__name__}: {str(exc)[:160]}",
        where=found,
        hint="fix the model code at the place named",
    )


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []
