"""Benchmark: the bit-exact simulator vs float PyTorch evaluation of the same network.

Two U-Nets at batch 64: the vendor's large CamVid U-Net (48 x 88 x 88 input, imported from
../shared/data/ai8x with its trained quantized weights; the plain-torch ``unet-large`` with
post-training quantization when that data is absent) and the seed-001 U-Net (``unet-voc``,
3 x 64 x 64, 8/16/32/64/128 channels, 21 classes), lowered and post-training quantized.
"Float" is ``sim.float_eval.run_float`` on float32 input: the same layers with their float
weights through PyTorch's convolutions. Prints both times and the ratio; asserts nothing.

    python benchmarks/simulate.py [--batch 64] [--repeat 3] [--threads N] [--smoke]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from cnnforge.ir import Network
from cnnforge.sim import simulate
from cnnforge.sim.float_eval import run_float

AI8X = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ai8x"


def vendor_unet() -> tuple[str, Network]:
    """The vendor's large U-Net with its trained weights, or a PTQ plain-torch twin."""
    yaml_path = AI8X / "networks" / "camvid-unet-large.yaml"
    ckpt = AI8X / "trained" / "ai85-camvid-unet-large-q.pth.tar"
    if yaml_path.exists() and ckpt.exists():
        from cnnforge.targets.max7800x.ai8x import read_ai8x

        return "vendor U-Net large (trained)", read_ai8x(
            yaml_path, ckpt, (48, 88, 88), device="MAX78000"
        ).network
    return "U-Net large (PTQ)", _ptq("unet-large", (48, 88, 88))


def seed_unet() -> tuple[str, Network]:
    return "seed-001 U-Net (PTQ)", _ptq("unet-voc", (3, 64, 64))


def _ptq(name: str, shape: tuple[int, ...]) -> Network:
    from cnnforge.api.targets import get_target
    from cnnforge.frontend import load_network
    from cnnforge.pipeline.quantized import quantized_network
    from cnnforge.samples import load_input_array

    calib = load_input_array(np.random.default_rng(0).integers(-128, 128, (4, *shape)))
    model = load_network(name, shape, {}, None)
    target = get_target("MAX78000")
    return quantized_network(
        model, target.device, 8, rules=target.rules, calibration=calib
    ).network


def best_of(fn, repeat: int) -> float:
    fn()  # warm-up (oneDNN primitive creation, allocator)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench(label: str, net: Network, batch: int, repeat: int) -> None:
    x = torch.from_numpy(np.random.default_rng(1).integers(-128, 128, (batch, *net.input_shape)))
    xf = x.float() / 128
    t_sim = best_of(lambda: simulate(net, x, device=None), repeat)
    t_float = best_of(lambda: run_float(net, xf), repeat)
    t_int = best_of(lambda: simulate(net, x[:2], engine="int64", device=None), 1) * batch / 2
    print(
        f"{label:30s} {len(net.layers):3d} layers  float {t_float:7.3f} s  "
        f"simulator {t_sim:7.3f} s  ratio sim/float {t_sim / t_float:5.2f}  "
        f"(int64 engine, extrapolated: {t_int:7.2f} s = {t_int / t_float:5.1f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.batch, args.repeat = 2, 1
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"batch {args.batch}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    for label, net in (vendor_unet(), seed_unet()):
        bench(label, net, args.batch, args.repeat)


if __name__ == "__main__":
    main()
