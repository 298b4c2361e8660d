"""PTQ quality on the seed-001 U-Net: float model vs bit-exact simulation of the quantized network.

Prints, per weight width and clip method (and with/without calibration), the per-pixel argmax
agreement and the mean |float - quantized| on random int8 inputs. No assertions: a report.

    python benchmarks/ptq_agreement.py [--batch 8] [--seed 0] [--checkpoint float.pth]
"""

from __future__ import annotations

import argparse
import time

import torch

from cnnforge.frontend.torch_fx import load_model, trace
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.quant.ptq import quantize_with_scales
from cnnforge.sim import simulate


def measure(model, lowered, x, bits, clip, calibrate):
    """(argmax agreement, mean abs error, seconds) of one quantization setting."""
    start = time.perf_counter()
    calib = x[: max(1, len(x) // 2)] if calibrate else None
    qnet, exps = quantize_with_scales(lowered, bits, clip, calibration=calib, device=None)
    out = qnet.outputs[0]
    y_q = simulate(qnet, x, device=None).outputs[out].double() * 2.0 ** exps[out] / 128
    with torch.no_grad():
        y_f = model(x.float() / 128).double()
    agree = (y_q.argmax(1) == y_f.argmax(1)).double().mean().item()
    return agree, (y_q - y_f).abs().mean().item(), time.perf_counter() - start


def settle_batchnorm(model: torch.nn.Module, x: torch.Tensor) -> None:
    """Untrained weights: BN statistics from the data (as training would set them), so that the
    outputs depend on the input instead of being dominated by the biases."""
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module.momentum = None  # cumulative average
            module.reset_running_stats()
    model.train()
    with torch.no_grad():
        for chunk in x.split(4):
            model(chunk.float() / 128)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="unet-voc")
    parser.add_argument("--shape", default="3,64,64")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.shape, args.batch = "3,16,16", 2
    torch.manual_seed(args.seed)
    shape = tuple(int(v) for v in args.shape.split(","))
    model = load_model(args.model, {}, args.checkpoint)
    x = torch.randint(-128, 128, (args.batch, *shape))
    if args.checkpoint is None:
        settle_batchnorm(model, x)
    model.eval()
    lowered = lower_to_hardware(trace(model, shape, name=args.model), device=None).network
    with torch.no_grad():
        classes = model(x.float() / 128).argmax(1).flatten()
    share = torch.bincount(classes).max().item() / classes.numel()
    print(
        f"{args.model} {shape}, batch {args.batch}, seed {args.seed}; "
        f"float argmax: {len(classes.unique())} classes, most common {share:.3f}"
    )
    print(f"{'bits':>4} {'clip':>7} {'calib':>5} {'argmax agree':>13} {'mean|err|':>10} {'s':>6}")
    for bits in (8, 4):
        for clip in ("max", "avgmax"):
            for calibrate in (False, True):
                agree, err, secs = measure(model, lowered, x, bits, clip, calibrate)
                print(
                    f"{bits:>4} {clip:>7} {calibrate!s:>5} {agree:>13.4f} {err:>10.5f} {secs:>6.1f}"
                )


if __name__ == "__main__":
    main()
