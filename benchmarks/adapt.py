"""MONAI's zoo defaults at small widths, trained as float on ``shapes`` the way a user does
(``cnnforge train --no-qat --epochs 12``), then ``cnnforge adapt``-ed: replacements, the width
chosen, original float | adapted float | QAT-eval | bit-exact mIoU side by side, the epochs the
plateau rule ran, the result's size and predicted latency, minutes.

    python benchmarks/adapt.py [--smoke] [--epochs 12] [--models UNet,...] [--seeds UNet=0+1]

``--smoke``: tiny sizes (a test runs it). Models are named ``benchmarks/adapt.py:Monai<Name>``
(``Monai<Name>Full``: MONAI's own default widths). Every row is one float training and one
adapt with the same seed; ``--seeds`` gives a model more rows (default: UNet with seeds 0 and 1).

The segmentation-models-pytorch U-Net on ResNet-18 (``SmpUNet``, on the MAX78002: more layers
than the MAX78000 has, even after the depth cut) runs from the separate venv that
benchmarks/zoo_external.py describes (smp pulls a newer torch; that venv has no MONAI):

    PYTHONPATH=src /work/zoo-venv/bin/python benchmarks/adapt.py --models SmpUNet
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve()


def MonaiUNet() -> nn.Module:
    """MONAI's UNet (InstanceNorm + PReLU, strided convs) at 8 to 32 channels."""
    from monai.networks.nets import UNet

    return UNet(2, 3, 5, channels=(8, 16, 32), strides=(2, 2))


def MonaiBasicUNet() -> nn.Module:
    """MONAI's BasicUNet (InstanceNorm + LeakyReLU, max pools) at 8 to 64 channels."""
    from monai.networks.nets import BasicUNet

    return BasicUNet(spatial_dims=2, in_channels=3, out_channels=5, features=(8, 8, 16, 32, 64, 8))


def MonaiAttentionUnet() -> nn.Module:
    """MONAI's AttentionUnet (sigmoid gates, BatchNorm + ReLU) at 8 to 32 channels."""
    from monai.networks.nets import AttentionUnet

    return AttentionUnet(2, 3, 5, channels=(8, 16, 32), strides=(2, 2))


def MonaiDynUNet() -> nn.Module:
    """MONAI's DynUNet (InstanceNorm + LeakyReLU, residual-free blocks) at 8 to 32 filters."""
    from monai.networks.nets import DynUNet

    k, s = [3, 3, 3], [1, 2, 2]
    return DynUNet(
        2, 3, 5, kernel_size=k, strides=s, upsample_kernel_size=[2, 2], filters=[8, 16, 32]
    )


def MonaiSegResNet() -> nn.Module:
    """MONAI's SegResNet: pre-activation norms, which adapt refuses by name."""
    from monai.networks.nets import SegResNet

    return SegResNet(spatial_dims=2, in_channels=3, out_channels=5, init_filters=8)


def MonaiUNetFull() -> nn.Module:
    """MONAI's UNet at the widths of its documentation's example (16 to 256)."""
    from monai.networks.nets import UNet

    return UNet(2, 3, 5, channels=(16, 32, 64, 128, 256), strides=(2, 2, 2, 2))


def MonaiBasicUNetFull() -> nn.Module:
    """MONAI's BasicUNet at its default widths (32 to 256; benchmarks/gpu.py times it)."""
    from monai.networks.nets import BasicUNet

    return BasicUNet(spatial_dims=2, in_channels=3, out_channels=5)


def SmpUNet() -> nn.Module:
    """segmentation-models-pytorch's U-Net on ResNet-18 (untrained encoder: nothing is
    downloaded); smp pulls a newer torch, so it runs from its own venv (module docstring)."""
    import segmentation_models_pytorch as smp

    return smp.Unet("resnet18", encoder_weights=None, in_channels=3, classes=5)


MODELS = ("UNet", "BasicUNet", "AttentionUnet", "DynUNet", "SegResNet")
#: Models whose default device is not --device's: the smp U-Net has 40 hardware layers after
#: the depth cut (its decoder alone has 16), more than the MAX78000's 32.
DEVICES = {"SmpUNet": "MAX78002"}


def factory(name: str) -> str:
    """The function of this file that builds ``name`` (MONAI's as ``Monai<Name>``)."""
    return f"Monai{name}" if f"Monai{name}" in globals() else name


def run_one(name: str, seed: int, args: argparse.Namespace, work: Path) -> dict:
    """Train float (as ``cnnforge train --no-qat`` does), adapt; the benchmark's row."""
    import cnnforge
    from cnnforge.adaptation.fit import preflight
    from cnnforge.api.targets import device_for, get_target
    from cnnforge.errors import CnnforgeError

    spec, start = f"{HERE}:{factory(name)}", time.monotonic()
    row: dict = {"model": name, "seed": seed}
    device = DEVICES.get(name, args.device)
    try:  # refusals before the float training they would waste
        target = get_target(device)
        device_for(target, "check")
        preflight(globals()[factory(name)](), (3, args.size, args.size), target)
    except CnnforgeError as exc:
        return {**row, "error": exc.one_line(), "minutes": _minutes(start)}
    folder = work / f"{name}-{seed}"
    lengths = {"train_length": args.train_length, "val_length": args.val_length}
    if not (folder / "float.pth").is_file():  # a --work folder keeps the float models
        cnnforge.train(spec, folder / "float", size=args.size, epochs=args.epochs, seed=seed,
                       qat=False, **lengths)  # fmt: skip
        best = torch.load(folder / "float" / "best.pth", weights_only=True)["state_dict"]
        torch.save(best, folder / "float.pth")
    try:
        result = cnnforge.adapt(
            spec, folder / "adapt", checkpoint=folder / "float.pth", device=device,
            size=args.size, epochs=args.adapt_epochs, qat_epochs=args.qat_epochs, seed=seed,
            width=args.width, overwrite=True, **lengths,
        ).record  # fmt: skip
    except CnnforgeError as exc:
        return {**row, "error": exc.one_line(), "minutes": _minutes(start)}
    scores = {k: v["miou"] for k, v in result.scores.items()}
    return {
        **row, "device": device, "replacements": len(result.replacements),
        "width": result.width, "cap": result.cap, "scores": scores, "epochs": result.epochs,
        "size": result.size, "minutes": _minutes(start),
    }  # fmt: skip


def _minutes(start: float) -> float:
    return (time.monotonic() - start) / 60


def _seeds(text: str) -> dict[str, list[int]]:
    """``UNet=0+1,BasicUNet=2`` -> {"UNet": [0, 1], "BasicUNet": [2]}."""
    out: dict[str, list[int]] = {}
    for item in filter(None, text.split(",")):
        name, _, seeds = item.partition("=")
        out[name] = [int(s) for s in seeds.split("+")]
    return out


HEADER = (
    f"{'model':14} {'seed':>4} {'repl':>4} {'width':>9} {'float':>6} {'adapted':>7} "
    f"{'QAT':>6} {'bit-ex':>6} {'vs float':>8} {'params':>16} {'latency':>9} {'epochs':>6} "
    f"{'min':>5}"
)


def row_text(r: dict) -> str:
    """One printed row: mIoU % of the four rows, bit-exact minus original float, the params
    of the original and of the result, the predicted latency, the epochs the plateaus ran."""
    if "error" in r:
        return f"{r['model']:14} {r['seed']:4d} refused: {r['error']} ({r['minutes']:.1f} min)"
    s, size = r["scores"], r["size"]
    width = f"{r['width']:g}" + ("" if r["cap"] is None else f"/{r['cap']}")
    params = f"{size['original_params']:,}>{size.get('params', 0):,}"
    latency = f"{size['latency_us']:.0f}us" if "latency_us" in size else "-"
    epochs = f"{r['epochs'].get('distill', 0)}+{r['epochs'].get('qat', 0)}"
    four = [100 * s[k] for k in ("original float", "adapted float", "QAT-eval", "bit-exact")]
    return (
        f"{r['model']:14} {r['seed']:4d} {r['replacements']:4d} {width:>9} {four[0]:6.2f} "
        f"{four[1]:7.2f} {four[2]:6.2f} {four[3]:6.2f} {four[3] - four[0]:+8.2f} {params:>16} "
        f"{latency:>9} {epochs:>6} {r['minutes']:5.1f}"
    )


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--epochs", type=int, default=12, help="float training epochs")
    parser.add_argument("--adapt-epochs", type=int, default=60, help="distillation cap")
    parser.add_argument("--qat-epochs", type=int, default=40, help="QAT cap")
    parser.add_argument("--width", default="auto")
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--train-length", type=int, default=1024)
    parser.add_argument("--val-length", type=int, default=256)
    parser.add_argument("--device", default="MAX78000")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--seeds", default="UNet=0+1", help="more seeds per model (default 0)")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs, args.adapt_epochs, args.qat_epochs, args.size = 1, 1, 1, 32
        args.train_length, args.val_length, args.seeds = 32, 16, ""
    torch.set_num_threads(1)
    work = args.work or Path(tempfile.mkdtemp(prefix="adapt-bench-"))
    seeds = _seeds(args.seeds)
    rows = [
        run_one(name, seed, args, work)
        for name in args.models.split(",")
        for seed in seeds.get(name, [0])
    ]
    print("mIoU % on the same validation images; width: multiplier/cap; params: original>result")
    print(HEADER)
    for r in rows:
        print(row_text(r))
    return rows


if __name__ == "__main__":
    main()
