"""Numbers a model must hold before tracing: finite parameters and batch norms with ``var + eps >
0``; anything else is a ``ModelError`` naming the parameter, since it cannot be quantized."""

from __future__ import annotations

import itertools

import torch
from torch import nn

from cnnforge.errors import ModelError


def check_model_values(model: nn.Module) -> None:
    """Raise ``ModelError`` for the first non-finite parameter/buffer or invalid batch norm."""
    for name, param in model.named_parameters():
        if param.numel() == 0:
            raise ModelError(
                f"`{name}` has shape {list(param.shape)}: a layer without channels",
                where=name,
                hint="give every layer at least one input and output channel",
            )
    named = itertools.chain(model.named_parameters(), model.named_buffers())
    for name, tensor in named:
        if tensor is None or not tensor.is_floating_point() or tensor.numel() == 0:
            continue
        if tensor.device.type == "meta":
            raise ModelError(f"`{name}` has no values (meta tensor)", where=name)
        if not bool(torch.isfinite(tensor.detach()).all()):
            raise ModelError(
                f"`{name}` holds NaN or infinite values",
                where=name,
                hint="retrain, or load a checkpoint with finite weights",
            )
    for path, module in model.named_modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and module.running_var is not None:
            var = module.running_var.detach().to(torch.float64)
            if bool((var < 0).any()) or bool((var + module.eps <= 0).any()):
                raise ModelError(
                    f"batch norm running variance {float(var.min()):g} is negative",
                    where=path or "model",
                    hint="a variance is >= 0; retrain or fix the checkpoint",
                )
