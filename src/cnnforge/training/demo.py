"""The demo's pieces (its sequence is api.demo.run_demo): the shipped small U-Net and checkpoint
(made by ``TRAIN_COMMAND``), retraining, the masks figure and the README."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import torch

from cnnforge.arithmetic import ACT_SCALE
from cnnforge.training.datasets import ShapesDataset
from cnnforge.training.evaluate import Evaluation

MODEL = "qat-unet"
SIZE = 32
CHECKPOINT = "qat_unet_shapes.pth"
TRAIN_COMMAND = (
    "cnnforge train qat-unet --dataset shapes --size 32 --epochs 30 --batch-size 16 --lr 5e-3 "
    "--train-length 3072 --val-length 256 --seed 0 -o runs/shapes"
)
HELD_OUT = 256  # images of the shapes 'test' split, never seen in training or validation


def shipped_checkpoint() -> Path:
    """Path of the checkpoint shipped inside the package (cnnforge/models/data)."""
    return Path(str(resources.files("cnnforge.models") / "data" / CHECKPOINT))


def quick_train(
    out_dir: Path, epochs: int = 12, lengths: tuple[int, int] = (1024, 256), on_epoch=None
) -> Path:
    """Retrain the demo model from scratch (shorter than TRAIN_COMMAND); returns best.pth."""
    from cnnforge.training.loop import TrainConfig
    from cnnforge.training.run import train_model

    config = TrainConfig(epochs=epochs, batch_size=16, lr=5e-3, seed=0)
    train_model(
        MODEL, {}, dataset="shapes", data=None, size=SIZE, config=config, out_dir=out_dir,
        lengths=lengths, on_epoch=on_epoch,
    )  # fmt: skip
    return out_dir / "best.pth"


def masks_figure(model: torch.nn.Module, dataset: ShapesDataset, path: Path, n: int = 6) -> None:
    """Input, ground truth, float and bit-exact masks for the first ``n`` held-out images."""
    import copy

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cnnforge.nn import set_float, set_quantized_eval
    from cnnforge.sim import simulate
    from cnnforge.training.evaluate import hardware_network

    float_model = set_float(copy.deepcopy(model)).eval()
    network = hardware_network(set_quantized_eval(copy.deepcopy(model)), (3, SIZE, SIZE))
    x = torch.stack([dataset[i][0] for i in range(n)]).to(torch.int64)
    truth = torch.stack([dataset[i][1] for i in range(n)])
    with torch.no_grad():
        float_pred = float_model(x.float() / ACT_SCALE).argmax(1)
    exact_pred = simulate(network, x, device=None).outputs[network.outputs[0]].argmax(1)
    fig, axes = plt.subplots(4, n, figsize=(1.6 * n, 6.6))
    rows = [("input", None), ("truth", truth), ("float", float_pred), ("bit-exact", exact_pred)]
    for r, (label, masks) in enumerate(rows):
        for c in range(n):
            ax = axes[r, c]
            if masks is None:
                ax.imshow(((x[c].permute(1, 2, 0).numpy() + 128) / 255.0).clip(0, 1))
            else:
                ax.imshow(masks[c].numpy(), cmap="tab10", vmin=0, vmax=9, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_ylabel(label)
    fig.tight_layout()
    fig.savefig(path, dpi=80, metadata={"Software": None})
    plt.close(fig)


def readme_text(evaluation: Evaluation, checkpoint: Path) -> str:
    lines = [
        "# cnnforge demo",
        "",
        f"Model `{MODEL}` ({checkpoint.name}), {evaluation.images} held-out `shapes` images.",
        "",
        "| mode | pixel acc % | mIoU % | mean Dice % |",
        "|---|---|---|---|",
    ]
    for mode, s in evaluation.scores.items():
        lines.append(
            f"| {mode} | {100 * s.pixel_accuracy:.2f} | {100 * s.miou:.2f} "
            f"| {100 * s.mean_dice:.2f} |"
        )
    lines += [
        "",
        f"QAT-eval vs bit-exact: {evaluation.outputs_differing} of "
        f"{evaluation.outputs_compared} output values differ.",
        "",
        "`compile/` holds the vendor YAML + checkpoint, the portable C with its self-test and",
        "`report.html`; `masks.png` shows input, truth, float and bit-exact masks.",
        "",
    ]
    return "\n".join(lines)
