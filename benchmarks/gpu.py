"""Benchmark: training, adapt and the bit-exact simulator on the CPU and on a CUDA GPU, side by
side in one run (docs/training.md, "Where training runs").

    python benchmarks/gpu.py [--smoke] [--cpu-only] [--out FILE] [--budget SECONDS]
                             [--sections 2,3,4] [--columns cpu2,gpu]

Sections, each time-boxed and on its own (a failure is printed and the next section runs):

1. exactness: the shipped ``qat-unet`` checkpoint on ``shapes`` validation images: QAT-eval and
   the simulator on each device, and the number of output values where any two differ (the
   promise: 0); then ``cnnforge evaluate`` as a user runs it;
2. training steps: images/s of Adam steps at batch 32, float and QAT, for ``qat-unet``
   (3x32x32) and ``unet-large`` (48x88x88) on every core of the CPU, on 2 threads and on the GPU;
3. end to end: ``cnnforge train`` epochs with data loading included (``unet-large
   --model-arg num_classes=5 --size 352 --fold 4``, and ``qat-unet`` at 32x32 through QAT): the
   first epoch renders the images in the worker processes, later ones read them from the cache
   on the training device (docs/training.md, "Where training runs");
4. adapt: ``cnnforge adapt`` of MONAI's BasicUNet at 32x32 on the GPU and on 2 CPU cores, the
   same settings (the CPU run is stopped at its time box; its epochs so far give the projection,
   labelled so): the part before training (the same on both) and the training epochs apart;
5. simulator: images/s of the bit-exact simulator on the CPU and the GPU.

Default: everything (the GPU rows need CUDA; without it that is said and the CPU rows run);
``--cpu-only``: the CPU rows at real sizes; ``--smoke``: the CPU, tiny sizes (a test runs it);
``--sections``: only those (numbers); ``--columns``: only those of ``cpu`` (every core),
``cpu2`` (2 cores), ``gpu``. Figures are printed, never asserted. Every line also goes to
``--out FILE``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

HERE = Path(__file__).resolve()
ADAPT_MODEL = f"{HERE.parent / 'adapt.py'}:MonaiBasicUNetFull"  # untrained: a timing
#: The code under test has device selection (``--cpu``, ``--gpus``): absent on older trees,
#: which this script also measures (the CPU rows of ``--cpu-only``, before and after).
HAS_DEVICES = importlib.util.find_spec("cnnforge.compute") is not None


@dataclass(frozen=True)
class Sizes:
    """What each section runs at (``--smoke``: tiny)."""

    batch: int = 32
    step_seconds: float = 3.0
    qat_unet: tuple[int, int, int] = (3, 32, 32)
    unet_large: tuple[int, int, int] = (48, 88, 88)
    e2e_size: int = 352
    e2e_gpu_images: int = 2048
    e2e_cpu_images: int = 32  # unet-large at 352 on the CPU: one batch an epoch
    e2e_val: int = 256
    shapes_gpu_images: int = 2048
    shapes_cpu_images: int = 256
    eval_images: int = 256
    sim_batch: int = 64
    adapt_images: int = 4096  # a real run: thousands of images, many epochs
    adapt_epochs: tuple[int, int] = (24, 8)  # float distillation, QAT
    adapt_batch: int = 128
    adapt_box_s: float = 55.0  # the 2-core CPU run: its first epochs, then projected
    adapt_gpu_box_s: float = 150.0
    budget_s: float = 295.0  # the whole run (one H200 machine: under 5 minutes)


SMOKE = Sizes(
    batch=4, step_seconds=0.0, qat_unet=(3, 16, 16), unet_large=(48, 16, 16), e2e_size=64,
    e2e_gpu_images=8, e2e_cpu_images=8, e2e_val=4, shapes_gpu_images=16, shapes_cpu_images=16,
    eval_images=8, sim_batch=2, adapt_images=0, adapt_box_s=0.0, budget_s=1e9,
)  # fmt: skip
#: --cpu-only on a 2-core machine: the same rows, adapt on fewer images so that it finishes.
CPU_ONLY = Sizes(
    adapt_images=256, adapt_epochs=(2, 2), adapt_batch=32, adapt_box_s=420.0, budget_s=1500.0
)
#: What ``--columns`` names, and which column each name is.
COLUMN_NAMES = ("cpu", "cpu2", "gpu")


class Report:
    """Every line printed at once (flushed) and appended to ``--out``."""

    def __init__(self, path: Path | None) -> None:
        self.file = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        if self.file is not None:
            self.file.write(text + "\n")
            self.file.flush()


class Clock:
    """The run's time budget."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


@dataclass(frozen=True)
class Where:
    """One column of the tables: a device and, on the CPU, the threads (and cores) it gets."""

    label: str
    device: torch.device
    threads: int | None = None
    cores: frozenset[int] | None = None  # CPU affinity of the CLI runs (None: all)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def name(self) -> str:
        """Its ``--columns`` name."""
        return "gpu" if self.cuda else "cpu2" if self.cores is not None else "cpu"


def columns(smoke: bool, cpu_only: bool) -> list[Where]:
    """Every core of the CPU, 2 threads (where the CPU has more), the GPU (where present)."""
    cores = sorted(os.sched_getaffinity(0))
    cpu = torch.device("cpu")
    rows = [Where(f"CPU {len(cores)} cores", cpu, len(cores))]
    if len(cores) > 2 and not smoke:
        rows.append(Where("CPU 2 cores", cpu, 2, frozenset(cores[:2])))
    if torch.cuda.is_available() and not (smoke or cpu_only):
        rows.append(Where(f"GPU {torch.cuda.get_device_name(0)}", torch.device("cuda", 0)))
    return rows


# ---- helpers ---------------------------------------------------------------------------------


def one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:400]


def run_section(say: Report, clock: Clock, title: str, need: float, body: Callable[[], None]):
    """``body()`` under a heading; its failure printed, never raised; skipped without time."""
    say(f"\n== {title}")
    if clock.left() < need:
        say(f"skipped: {clock.left():.0f} s of the budget left, this section needs ~{need:.0f} s")
        return
    start = time.monotonic()
    try:
        body()
    except Exception as exc:
        say(f"FAILED: {one_line(exc)}")
        for line in traceback.format_exc().splitlines()[-12:]:
            say(f"    {line}")
    say(f"({time.monotonic() - start:.0f} s)")


@contextlib.contextmanager
def threads(n: int | None) -> Iterator[None]:
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def arithmetic(device: torch.device, exact: bool):
    """The settings ``cnnforge train`` computes under (a no-op on trees without them)."""
    if not HAS_DEVICES:
        return contextlib.nullcontext()
    from cnnforge.compute import reproducible_math

    return reproducible_math(device, full_precision=exact)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device, seconds: float) -> tuple[int, float]:
    """Calls of ``fn`` after one warm-up, until ``seconds`` passed (at least one): (n, s)."""
    fn()
    sync(device)
    start, n = time.perf_counter(), 0
    while n < 1 or time.perf_counter() - start < seconds:
        fn()
        sync(device)
        n += 1
    return n, time.perf_counter() - start


def cli(args: list[str], where: Where, limit: float) -> tuple[int | None, list[tuple[float, str]]]:
    """``python -m cnnforge ARGS`` as a user runs it (same environment; on ``where.cores``):
    exit status (None: stopped at ``limit`` seconds) and its output lines with their times."""
    env = dict(os.environ)
    if where.threads:
        env["OMP_NUM_THREADS"] = str(where.threads)
    cores = where.cores
    proc = subprocess.Popen(
        [sys.executable, "-m", "cnnforge", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None,
    )
    start, lines = time.monotonic(), []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.monotonic() - start, line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code: int | None = proc.wait(timeout=max(limit, 1.0))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = None
    reader.join(timeout=5)
    return code, lines


def device_flags(where: Where) -> list[str]:
    """The CLI's device options for ``where`` (none on trees without them)."""
    if not HAS_DEVICES:
        return []
    return ["--gpus", str(where.device.index or 0)] if where.cuda else ["--cpu"]


# ---- 1. exactness ----------------------------------------------------------------------------


def exactness(say: Report, where: list[Where], sizes: Sizes, clock: Clock) -> None:
    """QAT-eval and simulator outputs of the shipped qat-unet on each device, compared."""
    from cnnforge.frontend.torch_fx import load_model
    from cnnforge.nn import set_quantized_eval
    from cnnforge.sim import simulate
    from cnnforge.training.datasets import ShapesDataset
    from cnnforge.training.demo import shipped_checkpoint
    from cnnforge.training.evaluate import hardware_network, output_scale

    quant = set_quantized_eval(load_model("qat-unet", {}, shipped_checkpoint()))
    network = hardware_network(copy.deepcopy(quant), (3, 32, 32))
    scale = output_scale(network)
    data = ShapesDataset("val", sizes.eval_images, 32)
    x = torch.stack([data[i][0] for i in range(len(data))]).to(torch.int64)
    outputs: dict[str, torch.Tensor] = {}
    for w in (w for w in where if w.threads is None or w.cores is None):
        model = copy.deepcopy(quant).to(w.device)
        with torch.no_grad(), arithmetic(w.device, exact=True):
            qat = model((x.to(w.device).float()) / 128).double().cpu()
            sim = simulate(network, x.to(w.device), device=None).outputs[network.outputs[0]]
        outputs[f"{w.label} QAT-eval"] = qat
        outputs[f"{w.label} simulator"] = sim.cpu().double() * scale
    reference = next(k for k in outputs if "simulator" in k)
    say(f"{x.shape[0]} validation images, {outputs[reference].numel():,} output values each")
    total = 0
    for name, values in outputs.items():
        if name != reference:
            differ = int((values != outputs[reference]).sum())
            total += differ
            say(f"  {name:40s} vs {reference}: {differ} values differ")
    say(f"  all {len(outputs)} equal on every value: {'yes' if total == 0 else 'NO'}")
    evaluate_cli(say, where, sizes, clock)


def evaluate_cli(say: Report, where: list[Where], sizes: Sizes, clock: Clock) -> None:
    """``cnnforge evaluate`` of the shipped checkpoint on the GPU (else the CPU), as a user."""
    from cnnforge.training.demo import shipped_checkpoint

    w = where[-1]
    args = ["evaluate", "qat-unet", "--checkpoint", str(shipped_checkpoint()),
            "--length", str(sizes.eval_images), *device_flags(w)]  # fmt: skip
    code, lines = cli(args, w, min(120.0, clock.left()))
    say(f"$ cnnforge {' '.join(args)}  (exit {code})")
    for _, line in lines:
        say(f"  | {line}")


# ---- 2. training steps -----------------------------------------------------------------------


def step_rate(name: str, shape, fold: int, qat: bool, w: Where, sizes: Sizes) -> float:
    """Images/s of Adam steps at ``sizes.batch`` on random data (the model's own loss path)."""
    from cnnforge.frontend.torch_fx import load_model
    from cnnforge.nn import QATPolicy, enable_qat
    from cnnforge.training.datasets import unfold

    torch.manual_seed(0)
    args = {"num_classes": 5} if name == "unet-large" else {}
    model = load_model(name, args, None)
    if qat:
        enable_qat(model, QATPolicy(start_epoch=0))
    model = model.to(w.device).train()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-128, 128, (sizes.batch, *shape), generator=g).float().div(128)
    side = shape[1] * fold
    mask = torch.randint(0, 5, (sizes.batch, side, side), generator=g)
    x, mask = x.to(w.device), mask.to(w.device)
    loss_fn = segmentation_loss()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(unfold(model(x), fold), mask).backward()
        optimizer.step()

    with threads(w.threads), arithmetic(w.device, exact=qat):
        n, seconds = timed(step, w.device, sizes.step_seconds)
    return n * sizes.batch / seconds


def segmentation_loss() -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The trainer's loss (deterministic on CUDA) where the tree has it, else cross-entropy."""
    try:
        from cnnforge.training.loop import segmentation_loss as loss
    except ImportError:
        return torch.nn.CrossEntropyLoss(ignore_index=255)
    return loss


def training_steps(say: Report, where: list[Where], sizes: Sizes, clock: Clock) -> None:
    say(f"images/s of one Adam step at batch {sizes.batch} (random data, no loading)")
    say(f"{'model':24s} {'phase':6s}" + "".join(f"{w.label:>28s}" for w in where))
    rows = [("qat-unet", sizes.qat_unet, 1, False), ("qat-unet", sizes.qat_unet, 1, True),
            ("unet-large", sizes.unet_large, 4, False)]  # fmt: skip
    for name, shape, fold, qat in rows:
        cells = []
        for w in where:
            if clock.left() < 20:
                cells.append("(no time)")
                continue
            try:
                cells.append(f"{step_rate(name, shape, fold, qat, w, sizes):,.0f}")
            except Exception as exc:
                cells.append(f"failed: {one_line(exc)[:60]}")
        label = f"{name} {'x'.join(map(str, shape))}"
        say(f"{label:24s} {'QAT' if qat else 'float':6s}" + "".join(f"{c:>28s}" for c in cells))
        ratios(say, where, cells)
    say("(unet-large is plain torch: no QAT layers, so its QAT phase trains as float)")


def ratios(say: Report, where: list[Where], cells: list[str]) -> None:
    """GPU / CPU ratios of one row, where both were measured."""
    values = {}
    for w, c in zip(where, cells, strict=True):
        with contextlib.suppress(ValueError):
            values[w.label] = float(c.replace(",", ""))
    gpu = next((v for k, v in values.items() if k.startswith("GPU")), None)
    if gpu is None:
        return
    parts = [f"{gpu / v:.1f}x {k}" for k, v in values.items() if not k.startswith("GPU") and v]
    say(f"{'':31s}GPU = " + ", ".join(parts))


# ---- 3. end to end ---------------------------------------------------------------------------


def train_run(say: Report, w: Where, args: list[str], images: int, clock: Clock) -> None:
    """One ``cnnforge train`` of 2 epochs; per-epoch images/s from train.log where it has them."""
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as tmp:
        out = Path(tmp) / "run"
        full = ["train", *args, "--train-length", str(images), "--epochs", "2",
                "--batch-size", "32", "-o", str(out), *device_flags(w)]  # fmt: skip
        code, lines = cli(full, w, min(600.0, clock.left() - 5))
        wall = lines[-1][0] if lines else 0.0
        shown = " ".join(a for a in full if a not in (str(out), "-o"))
        say(f"{w.label}: $ cnnforge {shown}")
        say(f"    exit {code}, {wall:.1f} s wall; first line: {lines[0][1] if lines else '-'}")
        if code != 0:
            for _, line in lines[-8:]:
                say(f"    | {line}")
        log = out / "train.log"
        records = [json.loads(x) for x in log.read_text().splitlines()] if log.is_file() else []
        for r in records:
            seconds = r.get("seconds")
            rate = f"{images / seconds:,.0f} images/s" if seconds else "no epoch time in log"
            shown = f"{seconds:.2f} s" if seconds else "-"
            data = "images rendered" if r["epoch"] == 0 else "images from the cache"
            say(f"    epoch {r['epoch']} ({r['phase']}): training pass {shown} = {rate} ({data}), "
                f"val mIoU {r['miou']:.3f}")  # fmt: skip


def end_to_end(say: Report, where: list[Where], sizes: Sizes, clock: Clock) -> None:
    say("cnnforge train, 2 epochs, batch 32, data loading included: epoch 0 renders the shapes "
        "images (in the workers, which it starts), epoch 1 reads them from the cache on the "
        "training device")
    large = ["unet-large", "--model-arg", "num_classes=5", "--size", str(sizes.e2e_size),
             "--fold", "4", "--no-qat"]  # fmt: skip
    small = ["qat-unet", "--size", str(sizes.qat_unet[1]), "--val-length", str(sizes.e2e_val)]
    for w in where:
        if clock.left() < 30:
            say(f"{w.label}: no time left")
            continue
        images = sizes.e2e_gpu_images if w.cuda else sizes.e2e_cpu_images
        val = sizes.e2e_val if w.cuda else min(sizes.e2e_val, 16)
        train_run(say, w, [*large, "--val-length", str(val)], images, clock)
        if clock.left() > 30 and w.cores is None:  # qat-unet: a float epoch, then a QAT epoch
            shapes = sizes.shapes_gpu_images if w.cuda else sizes.shapes_cpu_images
            train_run(say, w, small, shapes, clock)


# ---- 5. simulator ----------------------------------------------------------------------------


def simulator(say: Report, where: list[Where], sizes: Sizes, clock: Clock) -> None:
    from cnnforge.frontend.torch_fx import load_model
    from cnnforge.nn import set_quantized_eval
    from cnnforge.sim import simulate
    from cnnforge.training.demo import shipped_checkpoint
    from cnnforge.training.evaluate import hardware_network

    quant = set_quantized_eval(load_model("qat-unet", {}, shipped_checkpoint()))
    nets = [("qat-unet (shipped)", hardware_network(quant, (3, 32, 32)), sizes.sim_batch * 4)]
    if sizes.batch > 4:  # real sizes: the large U-Net too
        import simulate as simulate_benchmark  # benchmarks/simulate.py, beside this file

        label, net = simulate_benchmark.vendor_unet()
        nets.append((label, net, sizes.sim_batch // 4))
    say(f"{'network':32s} {'batch':>6s}" + "".join(f"{w.label:>28s}" for w in where))
    for label, net, batch in nets:
        g = torch.Generator().manual_seed(1)
        x = torch.randint(-128, 128, (batch, *net.input_shape), generator=g)
        cells = []
        for w in where:
            if clock.left() < 10:
                cells.append("(no time)")
                continue
            run = functools.partial(simulate, net, x.to(w.device), device=None)
            with threads(w.threads), arithmetic(w.device, exact=True):
                n, s = timed(run, w.device, sizes.step_seconds)
            cells.append(f"{n * batch / s:,.0f} images/s")
        say(f"{label:32s} {batch:6d}" + "".join(f"{c:>28s}" for c in cells))


# ---- 4. adapt --------------------------------------------------------------------------------


def adapt(say: Report, where: list[Where], sizes: Sizes, clock: Clock, reserve: float) -> None:
    """``cnnforge adapt`` of BasicUNet on the GPU (whole) and on 2 CPU cores (time-boxed), the
    same settings; ``reserve``: seconds kept for the sections after this one."""
    if not sizes.adapt_images:
        say("skipped at smoke size (benchmarks/adapt.py --smoke runs adapt)")
        return
    # the time-boxed CPU run first: whatever time is left is the GPU run's
    runs = [w for w in where if w.cores is not None] + [w for w in where if w.cuda]
    if not any(w.cuda for w in where):
        runs = [where[-1]]
    epochs, qat_epochs = sizes.adapt_epochs
    # exactly these epochs on both (--no-plateau): the CPU's projection is of the same run;
    # untrained (--allow-untrained): a timing, not a score
    settings = ["--size", "32", "--epochs", str(epochs), "--qat-epochs", str(qat_epochs),
                "--train-length", str(sizes.adapt_images), "--val-length", "128",
                "--batch-size", str(sizes.adapt_batch), "--no-plateau",
                "--allow-untrained"]  # fmt: skip
    totals: dict[str, tuple[float, str]] = {}
    per_epoch: dict[str, float] = {}
    fixed: dict[str, float] = {}
    for w in runs:
        box = min(sizes.adapt_gpu_box_s if w.cuda else sizes.adapt_box_s, clock.left() - reserve)
        with tempfile.TemporaryDirectory(prefix="gpu-bench-adapt-") as tmp:
            args = ["adapt", ADAPT_MODEL, *settings, "-o", str(Path(tmp) / "a"), *device_flags(w)]
            code, lines = cli(args, w, box)
        ends = [t for t, line in lines if line.startswith("epoch ")]
        model = ADAPT_MODEL.rpartition("/")[2]
        say(f"{w.label}: $ cnnforge adapt benchmarks/{model} {' '.join(settings)}")
        if code is None:
            say(f"    stopped at its time box, {box:.0f} s, after {len(ends)} of "
                f"{epochs + qat_epochs} epochs")  # fmt: skip
        elif lines:
            totals[w.label] = (lines[-1][0], "measured")
            say(f"    exit {code}, {lines[-1][0]:.1f} s wall")
        table = next((i for i, (_, line) in enumerate(lines) if line.startswith("segmentation")),
                     len(lines))  # fmt: skip
        for i, (t, line) in enumerate(lines):
            if i >= table or line.startswith(("epoch", "adapting on", "width", "error")):
                say(f"    {t:7.1f} s | {line}")
        starts = [t for t, line in lines if line.startswith("adapting on")]
        if starts:  # the fixed part: start-up, replacements, the width search
            fixed[w.label] = starts[0]
        epoch_s = epoch_seconds(lines)
        if epoch_s is not None:
            per_epoch[w.label] = epoch_s
        projected = projection(say, code, lines, epochs + qat_epochs)
        if projected is not None:
            totals[w.label] = (projected, "PROJECTED from its first epochs")
    adapt_ratios(say, totals, per_epoch, fixed)


def epoch_seconds(lines: list[tuple[float, str]]) -> float | None:
    """The median time of a run's epochs (training pass, validation, checkpoint), from the
    times its epoch lines came; the first epoch counts from the 'adapting on' line."""
    starts = [t for t, line in lines if line.startswith("adapting on")]
    ends = [t for t, line in lines if line.startswith("epoch ")]
    if not starts or not ends:
        return None
    times = sorted(b - a for a, b in zip([starts[0], *ends], ends, strict=False))
    return times[len(times) // 2]


def adapt_ratios(
    say: Report,
    totals: dict[str, tuple[float, str]],
    per_epoch: dict[str, float],
    fixed: dict[str, float] | None = None,
) -> None:
    """Side by side per run: the fixed part (until it trains), the median epoch and the whole
    run; then GPU against each CPU run for each."""
    fixed = fixed or {}
    labels = list(dict.fromkeys([*fixed, *per_epoch, *totals]))
    say(f"{'adapt':26}" + "".join(f"{label[:18]:>20}" for label in labels))
    rows = (("until it trains (fixed), s", fixed), ("epoch (median), s", per_epoch),
            ("whole run, s", {k: v[0] for k, v in totals.items()}))  # fmt: skip
    for name, values in rows:
        cells = (f"{values[k]:.1f}" if k in values else "-" for k in labels)
        say(f"{name:26}" + "".join(f"{c:>20}" for c in cells))
    gpu = next((k for k in labels if k.startswith("GPU")), None)
    for label in labels if gpu is not None else ():
        if label == gpu:
            continue
        for name, values in (("fixed part", fixed), ("epochs (median)", per_epoch)):
            if values.get(gpu) and label in values:
                say(f"adapt {name}: GPU {values[gpu]:.2f} s, {label} {values[label]:.2f} s: "
                    f"{values[label] / values[gpu]:.1f}x")  # fmt: skip
        if gpu in totals and label in totals:
            seconds, how = totals[label]
            say(f"adapt: GPU {totals[gpu][0]:.0f} s, {label} {seconds:.0f} s ({how}): "
                f"{seconds / totals[gpu][0]:.1f}x")  # fmt: skip


def projection(
    say: Report, code: int | None, lines: list[tuple[float, str]], epochs: int
) -> float | None:
    """A stopped run's total from its output so far: the first line comes once the model fits
    (the fixed part: replacements, width search), each epoch line when an epoch ends."""
    starts = [t for t, line in lines if line.startswith("adapting on")]
    ends = [t for t, line in lines if line.startswith("epoch ")]
    if code is not None or not starts or not ends:
        return None
    per_epoch = (ends[-1] - starts[0]) / len(ends)
    total = starts[0] + per_epoch * epochs
    say(f"    PROJECTED: {total:.0f} s for the {epochs} epochs ({starts[0]:.0f} s until it "
        f"trains, then {per_epoch:.1f} s per epoch over its first {len(ends)}; the QAT "
        f"network's build and the scoring not included)")  # fmt: skip
    return total


# ---- main ------------------------------------------------------------------------------------


def environment(say: Report, where: list[Where]) -> None:
    import numpy as np

    import cnnforge

    say(f"python {sys.version.split()[0]}, torch {torch.__version__}, numpy {np.__version__}, "
        f"cnnforge from {Path(cnnforge.__file__).parent}")  # fmt: skip
    say(f"CPU: {len(os.sched_getaffinity(0))} cores available, torch threads "
        f"{torch.get_num_threads()}")  # fmt: skip
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        say(f"CUDA {torch.version.cuda}: {props.name}, {props.total_memory / 2**30:.0f} GiB, "
            f"cuDNN {torch.backends.cudnn.version()}")  # fmt: skip
    else:
        say("CUDA: not available; the GPU rows are not measured")
    say("columns: " + ", ".join(w.label for w in where))


def numbers(text: str) -> set[int]:
    """``"2,3,4"`` -> {2, 3, 4} (``--sections``)."""
    try:
        chosen = {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give section numbers, e.g. 2,3,4") from None
    if not chosen or not chosen <= set(range(1, 6)):
        raise argparse.ArgumentTypeError(f"{text!r}: the sections are 1 to 5")
    return chosen


def names(text: str) -> set[str]:
    """``"cpu2,gpu"`` -> {"cpu2", "gpu"} (``--columns``)."""
    chosen = {part.strip() for part in text.split(",") if part.strip()}
    if not chosen or not chosen <= set(COLUMN_NAMES):
        raise argparse.ArgumentTypeError(f"{text!r}: the columns are {', '.join(COLUMN_NAMES)}")
    return chosen


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="the CPU, tiny sizes")
    parser.add_argument("--cpu-only", action="store_true", help="the CPU rows at real sizes")
    parser.add_argument("--out", type=Path, default=None, help="also write every line here")
    parser.add_argument("--budget", type=float, default=None, help="seconds for the whole run")
    parser.add_argument("--sections", type=numbers, default=set(range(1, 6)),
                        help="only these sections, e.g. 2,3,4")  # fmt: skip
    parser.add_argument("--columns", type=names, default=set(COLUMN_NAMES),
                        help=f"only these columns of {', '.join(COLUMN_NAMES)}")  # fmt: skip
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else CPU_ONLY if args.cpu_only else Sizes()
    budget = args.budget or sizes.budget_s
    say, clock = Report(args.out), Clock(budget)
    where = [w for w in columns(args.smoke, args.cpu_only) if w.name in args.columns]
    if not where:
        parser.error(f"none of the columns {','.join(sorted(args.columns))} is here")
    run_section(say, clock, "environment", 0, lambda: environment(say, where))
    reserve = 50.0 if 5 in args.sections else 5.0  # the simulator's time, where it runs
    sections = [
        ("1. exactness: QAT-eval and simulator on each device", 20, exactness),
        ("2. training steps", 30, training_steps),
        ("3. end to end: cnnforge train", 30, end_to_end),
        ("4. adapt: MONAI BasicUNet at 32x32", 60,
         functools.partial(adapt, reserve=reserve)),
        ("5. simulator", 10, simulator),
    ]  # fmt: skip
    for number, (title, need, body) in enumerate(sections, 1):
        if number in args.sections:
            run_section(say, clock, title, need, lambda body=body: body(say, where, sizes, clock))
    say(f"\ndone; {budget - clock.left():.0f} s" if not args.smoke else "\ndone")


if __name__ == "__main__":
    main()
