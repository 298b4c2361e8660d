"""Float vs QAT-eval vs bit-exact: one model scored three ways on the same data; QAT-eval and
bit-exact must agree exactly, so ``Evaluation`` counts where they differ."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils.data import Dataset

from cnnforge.arithmetic import ACT_SCALE, output_unit
from cnnforge.compute import CPU, reproducible_math
from cnnforge.ir import Network
from cnnforge.training.datasets import VOID, fold, unfold
from cnnforge.training.loaders import Batches
from cnnforge.training.metrics import SegmentationScores, confusion_matrix, segmentation_scores


@dataclass(frozen=True)
class Evaluation:
    """Scores per mode (``float``, ``qat-eval``, ``bit-exact``) and the QAT/sim agreement."""

    scores: dict[str, SegmentationScores]
    outputs_compared: int
    outputs_differing: int
    images: int
    absent: dict[str, str] = field(default_factory=dict)  # mode -> why it has no row

    @property
    def float_only(self) -> bool:
        """The model has no QAT layers: only its float row exists."""
        return bool(self.absent)


#: Why a model of plain torch layers has no QAT-eval and bit-exact rows.
FLOAT_ONLY = (
    "the model has float weights only (no cnnforge.nn QAT layers): train it with `cnnforge "
    "train`, or quantize it post-training with `cnnforge compile --ptq`"
)


def hardware_network(model: nn.Module, input_shape: tuple[int, ...]) -> Network:
    """The quantized model as the simulator runs it: capture (QAT modules as leaves; checked
    against the eager model like every capture), lower."""
    from cnnforge.frontend.capture import capture
    from cnnforge.passes.lower import lower_to_hardware

    return lower_to_hardware(capture(model, input_shape, name=type(model).__name__), None).network


def _prepared(network: Network, xf: torch.Tensor) -> torch.Tensor:
    """The accelerator's input for the model input ``xf / 128``: through the network's host
    input normalization when it has one (passes/host_input.py), else ``xf`` itself."""
    if network.host_input is None:
        return xf
    from cnnforge.samples import quantize_floats

    normalized = network.host_input.apply(xf.cpu().numpy() / ACT_SCALE, xf.dim() - 1)
    return torch.from_numpy(quantize_floats(normalized)[0]).to(xf.device)


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
    device: torch.device = CPU,
    workers: int = 0,
) -> Evaluation:
    """Score ``model`` on ``dataset`` as float, QAT-eval and bit-exact simulation, on
    ``device`` (default the CPU) with ``workers`` data-loading processes."""
    from cnnforge.nn import qat_modules, set_float, set_quantized_eval

    float_model = set_float(copy.deepcopy(model)).eval().to(device)
    batches = Batches(dataset, batch_size, device=device, workers=workers)
    try:
        with torch.no_grad(), reproducible_math(device):
            if next(qat_modules(model), None) is None:  # plain torch: its float row, and why
                return _float_only(float_model, batches, num_classes, fold_factor, max_images)
            quant_model = set_quantized_eval(copy.deepcopy(model)).to(device)
            return _three_ways(
                float_model, quant_model, batches, num_classes, fold_factor, max_images
            )
    finally:
        batches.close()


def _three_ways(
    float_model: nn.Module,
    quant_model: nn.Module,
    batches: Batches,
    num_classes: int,
    fold_factor: int,
    max_images: int | None,
) -> Evaluation:
    from cnnforge.sim import simulate

    cms = {mode: None for mode in ("float", "qat-eval", "bit-exact")}
    compared = differing = images = 0
    network = scale = None
    for x, mask in batches.epoch():
        if max_images is not None and images >= max_images:
            break
        xf = fold(x.to(torch.int64), fold_factor)
        if network is None:  # captured from a CPU copy (capture runs the model on the CPU)
            network = hardware_network(copy.deepcopy(quant_model).cpu(), tuple(xf.shape[1:]))
            scale = output_scale(network)
        outs = {
            "float": float_model(xf.to(torch.float32) / ACT_SCALE).double(),
            "qat-eval": quant_model(xf.to(torch.float32) / ACT_SCALE).double(),
            "bit-exact": simulate(network, _prepared(network, xf), device=None)
            .outputs[network.outputs[0]]
            .double()
            * scale,
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


def _float_only(
    model: nn.Module, batches: Batches, num_classes: int, fold_factor: int, max_images: int | None
) -> Evaluation:
    """The float row of a model without QAT layers; the other rows say why they are absent."""
    cm = None
    images = 0
    for x, mask in batches.epoch():
        if max_images is not None and images >= max_images:
            break
        xf = fold(x.to(torch.int64), fold_factor)
        out = model(xf.to(torch.float32) / 128.0).double()
        part = confusion_matrix(unfold(out, fold_factor).argmax(dim=1), mask, num_classes, VOID)
        cm = part if cm is None else cm + part
        images += x.shape[0]
    absent = {"qat-eval": FLOAT_ONLY, "bit-exact": FLOAT_ONLY}
    return Evaluation({"float": segmentation_scores(cm)}, 0, 0, images, absent)
