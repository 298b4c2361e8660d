"""The commands that chain training with the compiler, as functions: ``cnnforge.adapt`` (swap,
fit, distill, quantization-aware training, score) and ``cnnforge.demo`` (the offline
walk-through); same style as api/functions.py."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnnforge.api.functions import DEFAULT_DEVICE, _target, plan, quantize
from cnnforge.api.results import Adaptation, Demo, Evaluated

if TYPE_CHECKING:
    from cnnforge.devices import Capabilities
    from cnnforge.frontend.loading import ModelSpec
    from cnnforge.ir import Network
    from cnnforge.pipeline.targets import Target
    from cnnforge.training.loop import EpochRecord

#: adapt's caps on its float-distillation and QAT epochs (each stops earlier on a plateau).
ADAPT_EPOCHS = 60
ADAPT_QAT_EPOCHS = 40


def adapt(
    model: ModelSpec,
    output_dir: str | Path,
    *,
    checkpoint: str | Path | None = None,
    device: str | Capabilities = DEFAULT_DEVICE,
    dataset: str = "shapes",
    data: str | Path | None = None,
    size: int = 32,
    epochs: int = ADAPT_EPOCHS,
    qat_epochs: int = ADAPT_QAT_EPOCHS,
    width: str | float = "auto",
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    train_length: int = 1024,
    val_length: int = 256,
    resume: bool = False,
    overwrite: bool = False,
    allow_untrained: bool = False,
    plateau: bool = True,
    model_args: Mapping[str, Any] | None = None,
    on_epoch: Callable[[EpochRecord], None] | None = None,
    on_step: Callable[[str], None] | None = None,
    on_try: Callable[[dict[str, Any]], None] | None = None,
    on_batch: Callable[[int, int], None] | None = None,
    cpu: bool = False,
    gpus: str | Sequence[int] | None = None,
    workers: int | None = None,
    amp: bool = False,
    on_start: Callable[[Any], None] | None = None,
) -> Adaptation:
    """Replace the ops ``device`` lacks, widen or narrow to fit, distill and QAT-train until
    the scores plateau (``epochs``, ``qat_epochs``: the caps; ``plateau=False``: exactly
    those epochs, a fixed schedule for timings), as ``cnnforge adapt``; writes
    ``output_dir``/adapted.py, adapted.pth, adapt.json. An untrained ``model`` (a reference or
    class without ``checkpoint``) is refused unless ``allow_untrained`` (docs/adapt.md).
    Trains on a CUDA GPU where one is present (``cpu``, ``gpus``, ``workers``, ``amp`` and
    ``on_start`` as for ``cnnforge.train``).

    >>> a = cnnforge.adapt(model, "out", dataset="shapes")   # model: a trained nn.Module
    >>> a.scores["bit-exact"]["miou"], a.size["latency_us"]
    """
    from cnnforge.adaptation.fit import check_width
    from cnnforge.adaptation.run import adapt_model
    from cnnforge.compute import check_workers, choose_device, default_workers
    from cnnforge.training.loop import TrainConfig
    from cnnforge.training.run import DataSpec

    target = _target(device, "check")
    compute = choose_device(cpu=cpu, gpus=gpus)  # bad input: refused before any work
    loaders = default_workers(compute) if workers is None else check_workers(workers)
    text = check_width(str(width))
    folder = None if data is None else Path(data)
    spec = DataSpec(dataset, folder, size, train_length, val_length, seed)
    out = Path(output_dir)
    result = adapt_model(
        model, dict(model_args or {}), None if checkpoint is None else Path(checkpoint),
        target=target, data=spec, out=out,
        config=TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, amp=amp),
        width=text, resume=resume, qat_epochs=qat_epochs, overwrite=overwrite,
        allow_untrained=allow_untrained, plateau=plateau, on_epoch=on_epoch, on_step=on_step,
        on_try=on_try, on_batch=on_batch, compute=compute, workers=loaders, on_start=on_start,
        measure=lambda folder, shape: _adapted_size(folder, shape, target),
    )  # fmt: skip
    return Adaptation(result, out)


def demo(
    output_dir: str | Path = "cnnforge-demo",
    *,
    train: bool = False,
    run: bool = True,
    overwrite: bool = True,
    on_step: Callable[[str, int, int], None] | None = None,
    on_epoch: Callable[[EpochRecord], None] | None = None,
) -> Demo:
    """The offline walk-through (``cnnforge demo``): the shipped U-Net (retrained from scratch
    with ``train``) scored float vs QAT-eval vs bit-exact, compiled for MAX78000, its C
    self-test run (``run``), masks and a report written to ``output_dir``."""
    from cnnforge.api.walkthrough import run_demo
    from cnnforge.owners import scratch_dir
    from cnnforge.training.demo import quick_train

    with scratch_dir("demo") as tmp:
        checkpoint = quick_train(Path(tmp) / "train", on_epoch=on_epoch) if train else None
        result = run_demo(
            Path(output_dir), checkpoint=checkpoint, overwrite=overwrite, run_c=run,
            on_step=on_step,
        )  # fmt: skip
    return Demo(result, Evaluated(result.evaluation))


def _adapted_size(out: Path, shape: tuple[int, ...], target: Target) -> dict[str, Any]:
    """Parameters and weight bytes of adapt's result (as compiled), and the target planner's
    predicted latency where the target has one."""
    from cnnforge.errors import CnnforgeError

    device = target.device
    ref, ckpt = f"{out / 'adapted.py'}:Adapted", out / "adapted.pth"
    if target.plans == "place":
        try:
            planned = plan(ref, device, shape, checkpoint=ckpt)
        except CnnforgeError as exc:  # reported, not fatal: the scores stand
            q = quantize(ref, shape, device=device, checkpoint=ckpt)
            return {**_weights(q.network), "latency": f"not planned: {exc.one_line()}"}
        m = planned.metrics
        return {
            **_weights(planned.network), "cycles": m.cycles, "latency_us": m.time_us,
            "latency_model": "vendor" if m.vendor_latency_model else "relative",
            "kernel_words": m.kernel_words, "kernel_capacity": m.kernel_capacity,
        }  # fmt: skip
    return _weights(quantize(ref, shape, device=device, checkpoint=ckpt).network)


def _weights(network: Network) -> dict[str, int]:
    """Parameters (weights and biases) and their bytes at each layer's weight width."""
    params = weight_bytes = 0
    for x in network.layers:
        if x.weight is None:
            continue
        bias = 0 if x.bias is None else int(x.bias.size)
        params += int(x.weight.size) + bias
        bits = abs(x.quant.weight_bits) if x.quant is not None else 8
        weight_bytes += -(-int(x.weight.size) * bits // 8) + bias
    return {"params": params, "weight_bytes": weight_bytes}
