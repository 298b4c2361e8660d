"""The front door on the libraries people use: segmentation-models-pytorch, timm, torchvision.

These libraries pull a torch the test environment cannot pin, so they run in a venv of their own
(tests/support/library_styles.py reproduces each pattern that tripped cnnforge on them, and the
tests run those). Untrained weights only (``encoder_weights=None``, ``weights=None``): nothing
is downloaded. For each model, at 3x64x64: parameters counted by ``analyze`` against
``sum(p.numel())`` (and the unused ones it reports), MACs against forward hooks (torchinfo's
method: conv/linear modules, weights only; functional convs outside a conv module are not seen
by hooks), the capture path, ``check`` on MAX78000 and MAX78002 (fits, or the violated rules
with counts), and ``compile`` where a check fits. Prints a Markdown table.

    python3.11 -m venv /work/zoo-venv
    /work/zoo-venv/bin/pip install torch==2.14.1 torchvision==0.29.1 segmentation-models-pytorch \\
        timm PyYAML typer rich jinja2 matplotlib Pillow
    PYTHONPATH=src /work/zoo-venv/bin/python benchmarks/zoo_external.py [--only NAME] [--size 64]

``--smoke`` runs one row on a stand-in written in plain torch (a conv subclass whose own forward
pads "same" and calls ``F.conv2d``, the EfficientNet encoder's pattern) at 16x16, with no
library installed: the table's code path, as CI runs it.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]


def _smp(arch: str, encoder: str) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        import segmentation_models_pytorch as smp

        return getattr(smp, arch)(encoder_name=encoder, encoder_weights=None, classes=2)

    return build


def _tv(path: str, **kwargs: object) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        import torchvision

        module = torchvision.models
        for part in path.split("."):
            module = getattr(module, part)
        return module(weights=None, **kwargs)  # type: ignore[operator]

    return build


#: Name -> factory (untrained: nothing is downloaded).
MODELS: dict[str, Callable[[], nn.Module]] = {
    "smp Unet resnet18": _smp("Unet", "resnet18"),
    "smp Unet mobilenet_v2": _smp("Unet", "mobilenet_v2"),
    "smp Unet efficientnet-b0": _smp("Unet", "efficientnet-b0"),
    "smp Unet timm-efficientnet-b0": _smp("Unet", "timm-efficientnet-b0"),
    "smp FPN resnet18": _smp("FPN", "resnet18"),
    "smp DeepLabV3Plus resnet18": _smp("DeepLabV3Plus", "resnet18"),
    "smp Linknet resnet18": _smp("Linknet", "resnet18"),
    "tv lraspp_mobilenet_v3_large": _tv(
        "segmentation.lraspp_mobilenet_v3_large", weights_backbone=None
    ),
    "tv fcn_resnet50": _tv("segmentation.fcn_resnet50", weights_backbone=None, aux_loss=False),
    "tv mobilenet_v2": _tv("mobilenet_v2"),
    "tv resnet18": _tv("resnet18"),
}


def hook_macs(model: nn.Module, shape: tuple[int, ...]) -> int:
    """MACs by forward hooks on conv/linear modules (torchinfo's method, weights only)."""
    total = 0

    def hook(module: nn.Module, args: tuple[torch.Tensor, ...], out: object) -> None:
        nonlocal total
        if not isinstance(out, torch.Tensor):
            return
        if isinstance(module, nn.ConvTranspose1d | nn.ConvTranspose2d):
            total += module.weight.numel() * math.prod(args[0].shape[2:])
        elif isinstance(module, nn.Conv1d | nn.Conv2d):
            total += module.weight.numel() * math.prod(out.shape[2:])
        elif isinstance(module, nn.Linear):
            total += module.weight.numel() * math.prod(out.shape[1:-1])

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        with torch.no_grad():
            model.eval()(torch.zeros(1, *shape))
    finally:
        for handle in handles:
            handle.remove()
    return total


def _check(network: object, device: str) -> tuple[bool, str]:
    from cnnforge.api.targets import check_for, get_target

    report = check_for(network, get_target(device).device)  # type: ignore[arg-type]
    if report.fits:
        return True, "fits"
    rules = Counter(v.rule for v in report.violations)
    return False, ", ".join(f"{rule} x{n}" for rule, n in rules.most_common())


def _compile(name: str, size: int, device: str) -> str:
    """``cnnforge compile`` of ``name`` (a check that fit): exit status and its last line."""
    spec = f"{Path(__file__).resolve()}:{_factory_name(name)}"
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp) / "sample.npy"  # a seeded random input in the model's units
        gen = torch.Generator().manual_seed(0)
        np.save(sample, (torch.rand((3, size, size), generator=gen) * 2 - 1).numpy())
        run = subprocess.run(
            [sys.executable, "-m", "cnnforge", "compile", spec, "-i", f"3,{size},{size}",
             "--device", device, "--ptq", "--sample", str(sample), "--run",
             "-o", str(Path(tmp) / "out")],
            capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
    if run.returncode == 0:  # --run: the C self-test's verdict is in the summary table
        return "C self-test PASS" if " PASS " in f" {run.stdout} " else "exit 0"
    last = run.stderr.strip().splitlines()[-1:] or [""]
    return f"exit {run.returncode}: {last[0][:80]}"


def _factory_name(name: str) -> str:
    return "m_" + "".join(c if c.isalnum() else "_" for c in name)


for _name, _build in MODELS.items():  # file.py:Name specs for compile
    globals()[_factory_name(_name)] = _build


def row(name: str, size: int) -> list[str]:
    """One table row: analyze, hooks, check on both devices, compile where it fits."""
    from cnnforge.analysis import analyze_network
    from cnnforge.frontend.capture import capture
    from cnnforge.targets.max7800x.device import MAX78000

    torch.manual_seed(0)
    model = MODELS[name]().eval()
    shape = (3, size, size)
    numel = sum(p.numel() for p in model.parameters())
    start = time.perf_counter()
    try:
        network = capture(model, shape)
    except Exception as exc:  # the table says what failed; a traceback would hide the rest
        return [name, f"{numel:,}", "-", "-", "-", f"capture: {str(exc)[:160]}", "-", "-"]
    analysis = analyze_network(network, device=MAX78000)
    unused = sum(n for _, n in network.unused_params)
    params = f"{analysis.totals.params:,} (+{unused:,} unused) / {numel:,}"
    macs, hooks = analysis.totals.macs, hook_macs(model, shape)
    opaque = Counter(x.opaque_kind.partition(":")[0] for x in network.layers if x.opaque_kind)
    checks, compiled = [], "-"
    for device in ("MAX78000", "MAX78002"):
        fits, text = _check(network, device)
        checks.append(text)
        if fits and compiled == "-":
            compiled = _compile(name, size, device)
    seconds = f"{time.perf_counter() - start:.0f}s"
    same = "=" if macs == hooks else f"{macs - hooks:+,}"
    ops = ", ".join(f"{k} x{n}" for k, n in opaque.most_common(4)) or "-"
    return [name, params, f"{macs:,} vs {hooks:,} ({same})", ops, *checks, compiled, seconds]


HEADER = [
    "model",
    "params (analyze / numel)",
    "MACs analyze vs hooks",
    "OPAQUE rows",
    "check MAX78000",
    "check MAX78002",
    "compile",
    "time",
]


class _SamePadConv(nn.Conv2d):
    """A conv subclass with its own forward: pad "same", then F.conv2d on its own weight."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad = self.kernel_size[0] // 2
        x = nn.functional.pad(x, (pad, pad, pad, pad))
        return nn.functional.conv2d(x, self.weight, self.bias, self.stride)


def _stand_in() -> nn.Module:
    return nn.Sequential(
        _SamePadConv(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), _SamePadConv(8, 2, 1)
    )


STAND_IN = "stand-in: same-pad conv subclass (plain torch)"
MODELS[STAND_IN] = _stand_in
globals()[_factory_name(STAND_IN)] = _stand_in


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="model name (repeatable)")
    parser.add_argument("--size", type=int, default=64, help="input height and width")
    parser.add_argument("--smoke", action="store_true", help="the stand-in row at 16x16")
    args = parser.parse_args()
    if args.smoke:
        args.only, args.size = [STAND_IN], 16
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, input 3x{args.size}x{args.size}\n")
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER), flush=True)
    for name in args.only or MODELS:
        print("| " + " | ".join(row(name, args.size)) + " |", flush=True)


if __name__ == "__main__":
    main()
