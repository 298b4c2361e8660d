"""Quantized accuracy on the generic target, as for the MAX7800x: the shipped shapes-trained
QAT U-Net (float weights, exported to ONNX: the model-level network the generic target runs)
scored as float and as the target's bit-exact integers on the same images."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cnnforge.frontend.loading import load_model
from cnnforge.frontend.onnx import load_onnx
from cnnforge.nn import set_float
from cnnforge.targets.generic.scores import evaluate_generic
from cnnforge.targets.generic.target import parse_generic
from cnnforge.train.datasets import SHAPES_CLASSES, ShapesDataset
from cnnforge.train.demo import shipped_checkpoint
from test_onnx_import import export

pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def trained_network(tmp_path_factory):
    model = set_float(load_model("qat-unet", {}, shipped_checkpoint())).eval()
    path = export(model, (3, 32, 32), tmp_path_factory.mktemp("onnx") / "qat-unet.onnx")
    return load_onnx(path, None)


def _evaluate(network, spec: str):
    train = ShapesDataset("train", 8, 32)
    calibration = torch.stack([train[i][0] for i in range(8)]).double().numpy() / 128
    return evaluate_generic(
        network, parse_generic(spec), ShapesDataset("val", 16, 32), calibration, len(SHAPES_CLASSES)
    )


def test_int16_target_scores_as_float(trained_network):
    result = _evaluate(trained_network, "generic")
    assert result.semantics.act_bits == 16 and result.images == 16
    assert result.pixels_agreeing == result.pixels == 16 * 32 * 32
    f, i = result.scores["float"], result.scores["integer"]
    assert f.miou > 0.5  # a trained model: the scores mean something
    assert (i.pixel_accuracy, i.miou) == (f.pixel_accuracy, f.miou)


def test_int8_target_loses_little(trained_network):
    result = _evaluate(trained_network, "generic:act_bytes=1,weight_bytes=1")
    assert result.semantics.act_bits == 8
    assert result.pixels_agreeing >= 0.97 * result.pixels
    f, i = result.scores["float"], result.scores["integer"]
    assert abs(f.miou - i.miou) < 0.03 and not np.isnan(i.miou)
