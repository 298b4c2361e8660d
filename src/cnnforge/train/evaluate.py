"""Float vs QAT-eval vs bit-exact: one model scored three ways on the same data.

- ``float``: the trained float weights, no quantization (``cnnforge.nn.set_float``);
- ``qat-eval``: the QAT modules in quantized evaluation (``set_quantized_eval``);
- ``bit-exact``: the model traced and lowered to hardware layers, run by the integer simulator.

QAT-eval and bit-exact must agree exactly (nn/layers.py states the identity); ``Evaluation``
counts the output values where they differ so a regression shows as a number, not a hunch.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from cnnforge.arithmetic import ACT_SCALE, output_unit
from cnnforge.ir import Network
from cnnforge.train.datasets import VOID, fold, unfold
from cnnforge.train.metrics import SegmentationScores, confusion_matrix, segmentation_scores


@dataclass(frozen=True)
class Evaluation:
    """Scores per mode (``float``, ``qat-eval``, ``bit-exact``) and the QAT/sim agreement."""

    scores: dict[str, SegmentationScores]
    outputs_compared: int
    outputs_differing: int
    images: int


def hardware_network(model: nn.Module, input_shape: tuple[int, ...]) -> Network:
    """The quantized model as the simulator runs it: capture (QAT modules as leaves; checked
    against the eager model like every capture), lower."""
    from cnnforge.frontend.capture import capture
    from cnnforge.passes.lower import lower_to_hardware

    return lower_to_hardware(capture(model, input_shape, name=type(model).__name__)).network


def output_scale(network: Network) -> float:
    """Factor from the simulator's integer output to the QAT module's float output."""
    last = network.layer(network.outputs[0])
    if last.quant is None:
        return output_unit(8, 0, False)
    return output_unit(last.quant.weight_bits, last.quant.output_shift, last.wide)


def evaluate_three_ways(
    model: nn.Module,
    dataset: Dataset,
    num_classes: int,
    *,
    fold_factor: int = 1,
    batch_size: int = 64,
    max_images: int | None = None,
) -> Evaluation:
    """Score ``model`` on ``dataset`` as float, QAT-eval and bit-exact simulation."""
    from cnnforge.nn import set_float, set_quantized_eval
    from cnnforge.sim import simulate

    float_model = set_float(copy.deepcopy(model)).eval()
    quant_model = set_quantized_eval(copy.deepcopy(model))
    cms = {mode: None for mode in ("float", "qat-eval", "bit-exact")}
    compared = differing = images = 0
    network = scale = None
    with torch.no_grad():
        for x, mask in DataLoader(dataset, batch_size=batch_size, shuffle=False):
            if max_images is not None and images >= max_images:
                break
            xf = fold(x.to(torch.int64), fold_factor)
            if network is None:
                network = hardware_network(quant_model, tuple(xf.shape[1:]))
                scale = output_scale(network)
            outs = {
                "float": float_model(xf.to(torch.float32) / ACT_SCALE).double(),
                "qat-eval": quant_model(xf.to(torch.float32) / ACT_SCALE).double(),
                "bit-exact": simulate(network, xf).outputs[network.outputs[0]].double() * scale,
            }
            compared += outs["qat-eval"].numel()
            differing += int((outs["qat-eval"] != outs["bit-exact"]).sum())
            images += x.shape[0]
            for mode, out in outs.items():
                pred = unfold(out, fold_factor).argmax(dim=1)
                cm = confusion_matrix(pred, mask, num_classes, VOID)
                cms[mode] = cm if cms[mode] is None else cms[mode] + cm
    scores = {mode: segmentation_scores(cm) for mode, cm in cms.items()}
    return Evaluation(scores, compared, differing, images)
