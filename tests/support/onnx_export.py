"""Exporting a torch module to an ONNX file for the ONNX import tests."""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn


def export(module: nn.Module, shape, path: Path, dynamic: bool = False) -> Path:
    """torch.onnx.export (TorchScript exporter: fast), BatchNorm kept as its own node."""
    module.eval()
    axes = {"x": {0: "n", 2: "h", 3: "w"}} if dynamic else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            (torch.zeros(1, *shape),),
            str(path),
            dynamo=False,
            input_names=["x"],
            training=torch.onnx.TrainingMode.PRESERVE,
            do_constant_folding=False,
            dynamic_axes=axes,
        )
    return path
