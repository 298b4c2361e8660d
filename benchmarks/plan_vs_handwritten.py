"""Benchmark: the automatic plan vs the vendor's hand-written camvid-unet-large-fakept.yaml.

Same network, same device (MAX78000), measured by the same code (cnnforge.targets.max7800x.metrics):
estimated cycles by the vendor's latency model (docs/hardware/devices.md §5), the highest
data-memory byte used per instance, and the peak of live data bytes over all instances. Three
columns:

- vendor: the hand-written YAML as imported (its copy layer is a 1x1 identity conv, "fakept");
- ours on the same imported network (the fakept conv kept as a layer to place);
- ours on the plain-torch ``unet-large`` (cnnforge.models), lowered: the planner inserts its own
  copy (a passthrough) where the vendor wrote ``pt``.

Ratios are ours / vendor (below 1 is better). Planning wall time is printed; nothing is asserted.

    python benchmarks/plan_vs_handwritten.py [--size 88] [--data ../shared/data/ai8x]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from cnnforge.frontend import load_network
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.targets.max7800x.ai8x import load_ai8x
from cnnforge.targets.max7800x.metrics import PlanMetrics, plan_metrics, with_cycles
from cnnforge.targets.max7800x.planner import plan_network
from cnnforge.targets.max7800x.validate import validate_plan

DEVICE = "MAX78000"
YAML = "networks/camvid-unet-large-fakept.yaml"
CKPT = "trained/ai85-camvid-unet-large-fakept-q.pth.tar"
ROWS = (
    ("estimated cycles", "cycles"),
    ("highest byte used / instance", "high_water_bytes"),
    ("peak live bytes (all instances)", "peak_live_bytes"),
    ("hardware layers", "layers"),
)


def _ours(network, label: str) -> tuple[PlanMetrics, float]:
    start = time.perf_counter()
    out, plan = plan_network(network, DEVICE)
    wall = time.perf_counter() - start
    issues = validate_plan(out, plan, DEVICE)
    print(f"{label}: planned in {wall:.3f} s, validator issues: {len(issues)}")
    return plan_metrics(out, plan, DEVICE), wall


def compare(data: Path, size: int) -> None:
    """Print the three plans side by side for a size x size (folded) input."""
    shape = (48, size, size)
    network, vendor_plan = load_ai8x(data / YAML, data / CKPT, shape, device="MAX78000")
    strict = validate_plan(network, vendor_plan, DEVICE)
    loose = validate_plan(network, vendor_plan, DEVICE, allow_overlap=True)
    print(f"\n== camvid U-Net, input {shape}, {DEVICE} ==")
    print(f"vendor plan: validator issues strict {len(strict)}, with --overlap-data {len(loose)}")
    vendor = plan_metrics(network, with_cycles(network, vendor_plan), DEVICE)
    same, _ = _ours(network, "ours (imported network)")
    torch_net = lower_to_hardware(load_network("unet-large", shape), device=None).network
    plain, _ = _ours(torch_net, "ours (plain-torch unet-large)")
    head = (
        f"{'':34s}{'vendor':>12s}{'ours(same)':>12s}{'ratio':>8s}{'ours(torch)':>13s}{'ratio':>8s}"
    )
    print(head)
    for label, key in ROWS:
        v, a, b = getattr(vendor, key), getattr(same, key), getattr(plain, key)
        print(f"{label:34s}{v:>12d}{a:>12d}{a / v:>8.3f}{b:>13d}{b / v:>8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, action="append", help="folded input H=W (88, 48)")
    default = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ai8x"
    parser.add_argument("--data", type=Path, default=default)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.size = [48]
    for size in args.size or (88, 48):
        compare(args.data, size)


if __name__ == "__main__":
    main()
