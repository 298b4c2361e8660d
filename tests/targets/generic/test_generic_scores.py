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
from support.cli import run_cli
from support.onnx_export import export


@pytest.fixture(scope="module")
def trained_onnx(tmp_path_factory):
    model = set_float(load_model("qat-unet", {}, shipped_checkpoint())).eval()
    return export(model, (3, 32, 32), tmp_path_factory.mktemp("onnx") / "qat-unet.onnx")


@pytest.fixture(scope="module")
def trained_network(trained_onnx):
    return load_onnx(trained_onnx, None)


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


def test_budget_scores_shapes(trained_onnx, capsys):
    args = ["budget", str(trained_onnx), "-d", "generic:onchip=64KiB", "--accuracy"]
    code, out, err = run_cli([*args, "--dataset", "shapes", "--length", "4"], capsys)
    assert code == 0, err
    assert "shapes val, 4 images" in out and "arg-max agrees on 100.000% of pixels" in out
    code, _, err = run_cli([*args[:4], "--dataset", "shapes"], capsys)  # without --accuracy
    assert code == 2 and err.count("\n") == 1 and "--dataset shapes" in err
