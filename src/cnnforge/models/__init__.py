"""Models shipped with cnnforge by short name, in a registry built per call and imported lazily
(a family's dependencies load only when it is asked for)."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from cnnforge.errors import InputError

ModelFactory = Callable[..., nn.Module]


def registry() -> dict[str, tuple[ModelFactory, tuple[int, ...]]]:
    """Short name -> (class or factory, default input shape C,H,W)."""
    from cnnforge.models import cats_dogs, qat_unet, unet

    return {
        "cats-dogs": (cats_dogs.CatsDogsNet, (3, 128, 128)),
        "unet-voc": (unet.UNetVOC, (3, 64, 64)),
        "unet-large": (unet.UNetLarge, (48, 88, 88)),
        "qat-unet": (qat_unet.QatUNet, (3, 32, 32)),
    }


def model_names() -> tuple[str, ...]:
    """The registered short names, sorted."""
    return tuple(sorted(registry()))


def default_input_shape(name: str) -> tuple[int, ...]:
    """The input shape a registered model was designed for (C,H,W)."""
    return _entry(name)[1]


def build_model(name: str, **kwargs: object) -> nn.Module:
    """Instantiate a registered model by short name; InputError for an unknown name."""
    return _entry(name)[0](**kwargs)


def _entry(name: str) -> tuple[ModelFactory, tuple[int, ...]]:
    entries = registry()
    if name not in entries:
        raise InputError(
            f"unknown model name {name!r}",
            hint=f"use one of {', '.join(sorted(entries))}, or path/to/file.py:ClassName",
        )
    return entries[name]


__all__ = ["build_model", "default_input_shape", "model_names", "registry"]
