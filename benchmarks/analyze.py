"""Benchmark: ``cnnforge`` analysis vs ``torchinfo.summary`` on a ResNet-50-sized model.

Both start from the built model and one 3x224x224 input shape: cnnforge captures (torch.fx trace
with shapes on the meta device, then the check against eager: one eager forward and one float
evaluation of the captured network on a seeded random input) and analyzes, as ``load_network``
does (the module handed over: the Network's arrays view its parameters); torchinfo runs its
hooked forward and summary. Also timed: the same capture keeping the module (weights copied),
the fx trace alone (unverified, what cnnforge did before the check) and the torch.export
fallback (export + ATen lowering + the same check). Best and median of the repeats, and the
first call in this process (what one CLI command pays; the first capture runs first). Prints
the times side by side with their ratios; asserts nothing about timings.

    python benchmarks/analyze.py [--repeat 3] [--size 224]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torchinfo
from torch import nn

from cnnforge.analysis import analyze_network
from cnnforge.frontend.capture import capture, check_input, compare
from cnnforge.frontend.torch_export import capture_export
from cnnforge.frontend.torch_fx import trace
from cnnforge.targets.max7800x.device import MAX78000


class Bottleneck(nn.Module):
    """ResNet-50's bottleneck block: 1x1 reduce, 3x3, 1x1 expand, residual add."""

    def __init__(self, c_in: int, width: int, stride: int) -> None:
        super().__init__()
        c_out = 4 * width
        self.conv1, self.bn1 = nn.Conv2d(c_in, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, c_out, 1, bias=False), nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or c_in != c_out:
            self.down = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + (x if self.down is None else self.down(x)))


class ResNet50(nn.Module):
    """A plain-torch ResNet-50 (25.6 M parameters, 4.1 G MACs at 224x224)."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        blocks, c_in = [], 64
        for width, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(count):
                blocks.append(Bottleneck(c_in, width, stride if i == 0 else 1))
                c_in = 4 * width
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c_in, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


def best_of(repeat: int, fn: Callable[[], object]) -> tuple[float, float]:
    """(minimum, median) wall time in seconds over ``repeat`` runs after one warm-up."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> None:
    """Time both tools and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.repeat, args.size = 1, 32
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = ResNet50().eval()
    shape = (3, args.size, args.size)

    start = time.perf_counter()
    result = analyze_network(capture(model, shape, handed_over=True), device=MAX78000)
    ours_first = time.perf_counter() - start
    start = time.perf_counter()
    stats = torchinfo.summary(model, input_size=(1, *shape), verbose=0)
    theirs_first = time.perf_counter() - start
    print(f"model: ResNet-50, input {shape}, torch threads 1, best/median of {args.repeat}")
    print(f"params: cnnforge {result.totals.params:,}  torchinfo {stats.total_params:,}")
    print(f"MACs:   cnnforge {result.totals.macs:,}  torchinfo {stats.total_mult_adds:,}")

    x = check_input(model, shape)

    def exported() -> None:
        captured = capture_export(model, shape, "ResNet50", x)
        with torch.no_grad():
            assert compare(captured, x, [model(x)]) is None
        analyze_network(captured.network, device=MAX78000)

    start = time.perf_counter()
    exported()
    export_first = time.perf_counter() - start
    ours = best_of(
        args.repeat,
        lambda: analyze_network(capture(model, shape, handed_over=True), device=MAX78000),
    )
    copying = best_of(args.repeat, lambda: analyze_network(capture(model, shape), device=MAX78000))
    unverified = best_of(args.repeat, lambda: analyze_network(trace(model, shape), device=MAX78000))
    network = trace(model, shape)
    analysis_only = best_of(args.repeat, lambda: analyze_network(network, device=MAX78000))
    theirs = best_of(
        args.repeat, lambda: torchinfo.summary(model, input_size=(1, *shape), verbose=0)
    )
    fallback = best_of(args.repeat, exported)
    rows = (
        ("cnnforge capture + analyze", ours),
        ("  same, copying the weights", copying),
        ("  fx trace + analyze only", unverified),
        ("  analyze_network only", analysis_only),
        ("torchinfo.summary", theirs),
        ("export fallback + analyze", fallback),
    )
    print(f"{'':32}{'best s':>10}{'median s':>10}")
    for label, (best, median) in rows:
        print(f"{label:32}{best:10.3f}{median:10.3f}")
    print(f"{'cnnforge capture, first call':32}{ours_first:10.3f}")
    print(f"{'torchinfo.summary, first call':32}{theirs_first:10.3f}")
    print(f"{'export fallback, first call':32}{export_first:10.3f}")
    print(
        f"ratio cnnforge (trace + verify + analyze) / torchinfo (best): {ours[0] / theirs[0]:.2f}"
    )
    print(
        f"ratio fx trace + analyze (unverified) / torchinfo (best): {unverified[0] / theirs[0]:.2f}"
    )
    print(f"ratio export fallback / torchinfo (best): {fallback[0] / theirs[0]:.2f}")


if __name__ == "__main__":
    main()
