"""The generic target's figures beside xfDNN's: whole-blob and tiled plans, both bounds.

For ResNet-50 (torchvision and Caffe layouts), GoogLeNet v1 (224x224, 2-byte activations) and
the seed U-Net ``unet-voc`` (3x64x64), at the figures' budgets and smaller ones, one Markdown
table: ops, DDR activation bytes of the whole-blob plan (cnnforge budget), xfDNN's published
figure where there is one, the whole-blob lower bound, the tiled plan (fused groups on row
bands: activations, weights, extra ops) and the tiled bound, with the ratios measured side by
side. Then, per network, the tiled plan with the most fused groups is simulated band by band
on its integers (integer.py through banded.py) and compared with the untiled simulation, bit
for bit, at full size. Prints; asserts nothing.

    python benchmarks/generic_tiling.py [--smoke]   # --smoke: unet-voc only
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from cnnforge.frontend import load_network
from cnnforge.targets.generic.banded import simulate_tiled
from cnnforge.targets.generic.budget_plan import GenericPlan, plan_generic
from cnnforge.targets.generic.integer import quantize_generic, simulate_generic
from cnnforge.targets.generic.target import parse_generic

MODELS = Path(__file__).resolve().parents[1] / "tests" / "support" / "generic_models.py"
#: xfDNN's published runs: DDR transfer bytes at the budget (ResNet-50 at 3 MB, GoogLeNet v1
#: at 5 MB on chip).
XFDNN = {("ResNet50", "3MiB"): 33_030_144, ("ResNet50Caffe", "3MiB"): 33_030_144}
XFDNN |= {("GoogLeNetV1", "5MiB"): 0}
#: (network, input shape, budgets): the figures' budget first.
NETWORKS = [
    ("ResNet50", (3, 224, 224), ("3MiB", "1MiB")),
    ("ResNet50Caffe", (3, 224, 224), ("3MiB", "1MiB")),
    ("GoogLeNetV1", (3, 224, 224), ("5MiB", "1MiB")),
    ("unet-voc", (3, 64, 64), ("64KiB", "32KiB")),
]


def _load(name: str, shape: tuple[int, ...]):
    return load_network(name if name == "unet-voc" else f"{MODELS}:{name}", shape)


def _row(name: str, budget: str, plan: GenericPlan) -> str:
    tiled, bound = plan.tiled, plan.tiled_bound
    whole_total = plan.allocation.transfer_bytes + plan.weight_ddr_bytes
    xfdnn = XFDNN.get((name, budget))
    cells = [
        f"{name} @ {budget}",
        f"{plan.ops:,}",
        f"{plan.allocation.transfer_bytes:,}",
        "-" if xfdnn is None else f"{xfdnn:,}",
        f"{plan.lower_bound:,}",
        f"{tiled.activation_bytes:,}",
        f"{tiled.weight_bytes:,}",
        f"{tiled.extra_ops:,}",
        f"{len(tiled.tiled)}",
        f"{bound.activation_bytes:,} + {bound.weight_bytes:,}",
        f"{tiled.ddr_bytes / max(bound.ddr_bytes, 1):.3f}",
        f"{whole_total / max(tiled.ddr_bytes, 1):.2f}",
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| network @ on-chip budget | ops | whole-blob plan: DDR activation bytes | xfDNN | "
    "whole-blob bound | tiled: DDR activation bytes | tiled: weight bytes | tiled: extra ops "
    "| fused groups | tiled bound (activations + weights) | tiled / tiled bound | "
    "whole-blob / tiled (with weights) |\n|" + "---|" * 12
)


def _equal(name: str, network, plans: list[GenericPlan]) -> list[str]:
    """Untiled and band-by-band integer simulation of each plan, compared bit for bit (the
    plans differ only in budget: one quantization, one untiled run)."""
    shape = network.input_shape
    rng = np.random.default_rng(0)
    q = quantize_generic(network, plans[0].target, rng.uniform(-1, 1, (2, *shape)))
    x = q.to_int(rng.uniform(-1, 1, (1, *shape)))
    start = time.perf_counter()
    untiled = simulate_generic(q, x)
    seconds = time.perf_counter() - start
    lines = []
    for plan in plans:
        start = time.perf_counter()
        tiled = simulate_tiled(q, plan.tiled, x)
        banded = time.perf_counter() - start
        compared = [n for n in tiled if n in untiled]
        same = sum(torch.equal(tiled[n], untiled[n]) for n in compared)
        groups = ", ".join(f"{g.name} ({g.band_count} bands)" for g in plan.tiled.tiled)
        lines.append(
            f"- {name} at {plan.target.onchip_bytes:,} B: {same} of {len(compared)} blobs "
            f"equal bit for bit ({'EQUAL' if same == len(compared) else 'DIFFERENT'}); "
            f"untiled {seconds:.1f} s, band by band {banded:.1f} s; fused: {groups}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="unet-voc only")
    args = parser.parse_args()
    networks = NETWORKS[-1:] if args.smoke else NETWORKS
    print(HEADER)
    checks = []
    for name, shape, budgets in networks:
        network = _load(name, shape)
        plans = [plan_generic(network, parse_generic(f"generic:onchip={b}")) for b in budgets]
        for budget, plan in zip(budgets, plans, strict=True):
            print(_row(name, budget, plan))
        checks.append((name, network, [p for p in plans if p.tiled.tiled]))
    print("\ntiled simulation against untiled (full size, seeded random input):")
    with torch.no_grad():
        for name, network, plans in checks:
            for line in _equal(name, network, plans) if plans else ():
                print(line, flush=True)


if __name__ == "__main__":
    main()
