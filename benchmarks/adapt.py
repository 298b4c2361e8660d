"""MONAI's zoo defaults trained as float on ``shapes``, then ``cnnforge adapt``-ed: replacements,
original float mIoU vs adapted bit-exact mIoU, minutes.

    python benchmarks/adapt.py [--smoke] [--epochs 12] [--adapt-epochs 30] [--models UNet,...]

``--smoke``: tiny sizes (a test runs it). Models are named ``benchmarks/adapt.py:Monai<Name>``.

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
    from monai.networks.nets import UNet

    return UNet(2, 3, 5, channels=(16, 32, 64, 128, 256), strides=(2, 2, 2, 2))


def MonaiBasicUNet() -> nn.Module:
    from monai.networks.nets import BasicUNet

    return BasicUNet(spatial_dims=2, in_channels=3, out_channels=5)


def MonaiAttentionUnet() -> nn.Module:
    from monai.networks.nets import AttentionUnet

    return AttentionUnet(2, 3, 5, channels=(16, 32, 64, 128), strides=(2, 2, 2))


def MonaiSegResNet() -> nn.Module:
    from monai.networks.nets import SegResNet

    return SegResNet(spatial_dims=2, in_channels=3, out_channels=5)


def MonaiDynUNet() -> nn.Module:
    from monai.networks.nets import DynUNet

    k = [3, 3, 3, 3]
    return DynUNet(2, 3, 5, kernel_size=k, strides=[1, 2, 2, 2], upsample_kernel_size=[2, 2, 2])


def SmpUNet() -> nn.Module:
    """segmentation-models-pytorch's U-Net on ResNet-18 (untrained encoder: nothing is
    downloaded); smp pulls a newer torch, so it runs from its own venv (module docstring)."""
    import segmentation_models_pytorch as smp

    return smp.Unet("resnet18", encoder_weights=None, in_channels=3, classes=5)


MODELS = ("UNet", "BasicUNet", "AttentionUnet", "SegResNet", "DynUNet")
#: Models whose default device is not --device's: the smp U-Net has 40 hardware layers after
#: the depth cut (its decoder alone has 16), more than the MAX78000's 32.
DEVICES = {"SmpUNet": "MAX78002"}


def factory(name: str) -> str:
    """The function of this file that builds ``name`` (MONAI's as ``Monai<Name>``)."""
    return f"Monai{name}" if f"Monai{name}" in globals() else name


def run_one(name: str, args: argparse.Namespace, work: Path) -> dict:
    """Train float, adapt; the row of the benchmark's table."""
    from cnnforge.adapt.run import adapt_model, preflight
    from cnnforge.api.targets import device_for, get_target
    from cnnforge.errors import CnnforgeError
    from cnnforge.training.loop import TrainConfig
    from cnnforge.training.run import DataSpec, train_model

    spec = f"{HERE}:{factory(name)}"
    start = time.monotonic()
    target = get_target(DEVICES.get(name, args.device))
    device_for(target, "check")
    try:  # refusals before the float training they would waste
        preflight(globals()[factory(name)](), (3, args.size, args.size), target)
    except CnnforgeError as exc:
        return {"model": name, "error": exc.one_line(), "minutes": _minutes(start)}
    config = TrainConfig(epochs=args.epochs, batch_size=32, lr=3e-3, seed=0)
    lengths = (args.train_length, args.val_length)
    if not (work / name / "float.pth").is_file():  # a --work folder keeps the float models
        train_model(spec, {}, dataset="shapes", data=None, size=args.size, config=config,
                    out_dir=work / name / "float", qat=False, lengths=lengths)  # fmt: skip
        best = torch.load(work / name / "float" / "best.pth", weights_only=True)["state_dict"]
        torch.save(best, work / name / "float.pth")
    data = DataSpec("shapes", None, args.size, *lengths, 0)
    try:
        result = adapt_model(
            spec, {}, work / name / "float.pth", target=target, data=data,
            out=work / name / "adapt",
            config=TrainConfig(epochs=args.adapt_epochs, batch_size=32, lr=3e-3, seed=0),
            qat_epochs=args.qat_epochs, overwrite=True,
        )  # fmt: skip
    except CnnforgeError as exc:
        return {"model": name, "error": exc.one_line(), "minutes": _minutes(start)}
    return {
        "model": name,
        "device": target.name,
        "replacements": len(result.replacements),
        "width": result.width,
        "cap": result.cap,
        "qat_miou": result.scores["QAT-eval"]["miou"],
        "float_miou": result.scores["original float"]["miou"],
        "bit_exact_miou": result.scores["bit-exact"]["miou"],
        "minutes": _minutes(start),
    }


def _minutes(start: float) -> float:
    return (time.monotonic() - start) / 60


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--adapt-epochs", type=int, default=30)
    parser.add_argument("--qat-epochs", type=int, default=20)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--train-length", type=int, default=1024)
    parser.add_argument("--val-length", type=int, default=256)
    parser.add_argument("--device", default="MAX78000")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs, args.adapt_epochs, args.qat_epochs, args.size = 1, 1, 1, 32
        args.train_length, args.val_length = 32, 16
    torch.set_num_threads(1)
    work = args.work or Path(tempfile.mkdtemp(prefix="adapt-bench-"))
    rows = [run_one(name, args, work) for name in args.models.split(",")]
    print(
        f"{'model':14} {'device':9} {'repl':>5} {'width':>6} {'cap':>4} {'float mIoU':>11} "
        f"{'bit-exact':>10} {'min':>6}"
    )
    for r in rows:
        if "error" in r:
            print(f"{r['model']:14} refused: {r['error']} ({r['minutes']:.1f} min)")
            continue
        print(
            f"{r['model']:14} {r['device']:9} {r['replacements']:5d} {r['width']:6.3f} "
            f"{r['cap'] or '-':>4} "
            f"{100 * r['float_miou']:10.2f}% {100 * r['bit_exact_miou']:9.2f}% {r['minutes']:6.1f}"
        )
    return rows


if __name__ == "__main__":
    main()
