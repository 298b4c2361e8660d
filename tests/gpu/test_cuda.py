"""On a CUDA GPU (every test here is skipped without one): the default device and ``--gpus``,
the simulator's exactness on the GPU, QAT-eval == bit-exact on the GPU and equal to the CPU's,
a resumed GPU run equal to an uninterrupted one with device-free checkpoints, bf16 autocast in
float epochs only, training and distillation steps that never wait for the GPU, adapt's
forked width search in a process using CUDA, and two torchrun processes sharing the GPU equal
to one process.

    python -m pytest -m cuda -rA -p no:cacheprovider tests/gpu   # a minute or two on one GPU
"""

from __future__ import annotations

import copy
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings

import cnnforge
from cnnforge.compute import choose_device, describe
from cnnforge.models.qat_unet import QatUNet
from cnnforge.nn import QATPolicy
from cnnforge.sim import simulate
from cnnforge.training.datasets import ShapesDataset
from cnnforge.training.demo import shipped_checkpoint
from cnnforge.training.loop import TrainConfig, Trainer, load_checkpoint
from cnnforge.training.qat import QatHooks
from support.sim_layers import weight_layers
from support.trainers import tiny_trainer

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
GPU = torch.device("cuda", 0)
LIMIT = 240


def _env() -> dict[str, str]:
    src = str(Path(cnnforge.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def _cnnforge(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "cnnforge", *args]
    run = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=LIMIT)
    print(f"$ cnnforge {' '.join(args)}\n{run.stdout}{run.stderr}")
    return run


# ---- where it runs ----------------------------------------------------------------------------


def test_the_gpu_is_the_default_and_gpus_picks_it() -> None:
    assert choose_device() == GPU and choose_device(gpus="0") == GPU
    assert describe(GPU) == f"cuda:0, {torch.cuda.get_device_name(0)}"


def test_evaluate_on_the_gpu_from_the_command_line() -> None:
    """``--gpus 0``: the first line names the GPU, the last says QAT-eval == bit-exact;
    ``--gpus 7``: one line, exit 2."""
    ckpt = str(shipped_checkpoint())
    run = _cnnforge("evaluate", "qat-unet", "--checkpoint", ckpt, "--length", "64", "--gpus", "0")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == f"evaluating on cuda:0, {torch.cuda.get_device_name(0)}"
    assert lines[-1] == "QAT-eval == bit-exact on all 327,680 output values"
    bad = _cnnforge("evaluate", "qat-unet", "--checkpoint", ckpt, "--gpus", "7")
    errors = [line for line in bad.stderr.splitlines() if line.strip()]
    assert bad.returncode == 2 and len(errors) == 1 and "no CUDA device 7" in errors[0]


# ---- the simulator on the GPU -----------------------------------------------------------------


@settings(max_examples=120)
@given(weight_layers())
def test_every_engine_on_the_gpu_equals_int64_on_the_cpu(case) -> None:
    net, x = case
    want = simulate(net, x, engine="int64", device=None).outputs["w"]
    for engine in ("fast", "gemm", "float64"):
        got = simulate(net, torch.from_numpy(x).to(GPU), engine=engine, device=None)
        assert got.outputs["w"].device == GPU
        assert torch.equal(got.outputs["w"].cpu(), want), engine


def test_tf32_on_makes_the_gpu_engine_fall_back_exactly() -> None:
    """With TF32 allowed the float32 form is not exact: simulate uses float64, same integers."""
    from cnnforge.compute import float32_matmul_exact
    from cnnforge.ir import INPUT, Layer, Network, Op, Quantized

    g = torch.Generator().manual_seed(0)
    w = torch.randint(-128, 128, (8, 200, 3, 3), generator=g).numpy()
    layer = Layer("w", Op.CONV2D, (INPUT,), (), in_channels=200, out_channels=8,
                  kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1),
                  quant=Quantized(8, w, None, -8))  # fmt: skip
    net = Network("n", (200, 6, 6), (layer,))
    x = torch.randint(-128, 128, (4, 200, 6, 6), generator=g)
    want = simulate(net, x, engine="int64", device=None).outputs["w"]
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        assert not float32_matmul_exact(GPU)
        assert torch.equal(simulate(net, x.to(GPU), device=None).outputs["w"].cpu(), want)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_api_simulate_on_the_gpu_equals_the_cpu() -> None:
    q = cnnforge.quantize("qat-unet", (3, 32, 32), checkpoint=shipped_checkpoint())
    data = ShapesDataset("test", 16, 32)
    x = torch.stack([data[i][0] for i in range(16)]).numpy()
    assert (cnnforge.simulate(q.network, x) == cnnforge.simulate(q.network, x, cpu=True)).all()


def test_gpu_qat_eval_equals_the_simulator_and_the_cpu() -> None:
    """The shipped checkpoint on 256 validation images: on the GPU, QAT-eval == bit-exact on
    every value, and both equal the CPU's simulator output value for value."""
    from cnnforge.frontend.torch_fx import load_model
    from cnnforge.nn import set_quantized_eval
    from cnnforge.training.evaluate import evaluate_three_ways, hardware_network, output_scale

    model = load_model("qat-unet", {}, shipped_checkpoint())
    data = ShapesDataset("val", 256, 32)
    on_gpu = evaluate_three_ways(model, data, 5, device=GPU, workers=2)
    on_cpu = evaluate_three_ways(model, data, 5)
    assert on_gpu.outputs_compared == 256 * 5 * 32 * 32 and on_gpu.outputs_differing == 0
    for mode in ("qat-eval", "bit-exact"):
        assert on_gpu.scores[mode] == on_cpu.scores[mode], mode
    quant = set_quantized_eval(copy.deepcopy(model))
    network = hardware_network(copy.deepcopy(quant), (3, 32, 32))
    x = torch.stack([data[i][0] for i in range(256)]).to(torch.int64)
    cpu_sim = simulate(network, x, device=None).outputs[network.outputs[0]]
    with torch.no_grad():
        gpu_qat = quant.to(GPU)(x.to(GPU).float() / 128).double().cpu()
    gpu_sim = simulate(network, x.to(GPU), device=None).outputs[network.outputs[0]].cpu()
    assert torch.equal(gpu_sim, cpu_sim)
    assert torch.equal(gpu_qat, cpu_sim.double() * output_scale(network))


# ---- training on the GPU ----------------------------------------------------------------------


class _Stop(Exception):
    pass


def _trainer(out: Path, amp: bool = False) -> Trainer:
    torch.manual_seed(0)
    cfg = TrainConfig(epochs=3, batch_size=8, lr=5e-3, num_classes=5, amp=amp)
    return Trainer(
        QatUNet(channels=(4, 8, 8, 8)), ShapesDataset("train", 48, 16),
        ShapesDataset("val", 16, 16), cfg, out, QatHooks(QATPolicy(start_epoch=2)),
        device=GPU, workers=2,
    )  # fmt: skip


def test_a_resumed_gpu_run_has_the_losses_of_an_uninterrupted_one(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        full = _trainer(tmp_path / "full").fit()
        first = _trainer(tmp_path / "cut")
        first.on_epoch = lambda r: (_ for _ in ()).throw(_Stop) if r.epoch == 0 else None
        with pytest.raises(_Stop):
            first.fit()
        second = _trainer(tmp_path / "cut")
        second.resume(tmp_path / "cut" / "last.pth")
        resumed = second.fit()
    assert [r.phase for r in full] == ["float", "float", "qat"]
    assert [r.train_loss for r in resumed] == [r.train_loss for r in full]
    assert [r.val_loss for r in resumed] == [r.val_loss for r in full]
    payload = torch.load(tmp_path / "cut" / "last.pth", weights_only=True)  # no map_location
    tensors = [*payload["state_dict"].values()]
    tensors += [t for s in payload["optimizer"]["state"].values() for t in s.values()]
    assert all(t.device.type == "cpu" for t in tensors if isinstance(t, torch.Tensor))
    nondeterministic = [str(w.message) for w in caught if "determinis" in str(w.message)]
    assert nondeterministic == [], nondeterministic


def test_amp_on_the_gpu_trains_float_epochs_only(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path / "amp", amp=True)
    history = trainer.fit()
    assert [r.phase for r in history] == ["float", "float", "qat"]
    assert all(r.train_loss == r.train_loss for r in history)
    assert not trainer.autocast()._enabled  # QAT is on at the end: no autocast


@pytest.mark.parametrize("distill", [False, True], ids=["train", "distill"])
@pytest.mark.parametrize("qat", [False, True], ids=["float", "qat"])
def test_a_step_on_the_gpu_waits_for_nothing(tmp_path: Path, distill: bool, qat: bool) -> None:
    """Every step after an epoch's first (the next batch's loading included, from the loader
    and from the device cache) under torch's CUDA sync debug mode: no wait for the GPU."""

    def strict(done: int, total: int) -> None:
        torch.cuda.set_sync_debug_mode("warn" if done < total else "default")

    trainer = tiny_trainer(tmp_path / "run", distill, qat, device=GPU)
    trainer.on_batch = strict
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer.fit()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    waits = [str(w.message) for w in caught if "synchroniz" in str(w.message)]
    assert waits == [], waits


def test_the_forked_width_search_after_cuda_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """adapt's width search forks its checks after the run has started CUDA: no child fails
    (each would be computed again in the parent) and the result is one worker's."""
    from torch import nn

    import cnnforge.adaptation.fit as fit
    import cnnforge.adaptation.forked as forked
    from cnnforge.api.targets import get_target

    torch.zeros(1, device=GPU).sum().item()  # CUDA started in this process
    failed, answer = [], forked._answer

    def watched(pid: int, fd: int):
        got = answer(pid, fd)
        if got is forked._MISSING:
            failed.append(pid)
        return got

    monkeypatch.setattr(forked, "_answer", watched)
    layers = [nn.Conv2d(3, 80, 3, padding=1), nn.ReLU()]
    layers += [m for _ in range(12) for m in (nn.Conv2d(80, 80, 3, padding=1), nn.ReLU())]
    model, target = nn.Sequential(*layers, nn.Conv2d(80, 5, 1)).eval(), get_target("MAX78000")
    found = []
    for workers in (1, 4):
        checked = fit.Checked()
        adapted, _ = fit.preflight(copy.deepcopy(model), (3, 8, 8), target, checked)
        found.append(fit.choose_width(adapted, (3, 8, 8), target, "auto", checked, workers)[1:4])
    assert found[0] == found[1] and len(found[0][2]) > 4 and failed == []


def test_two_processes_sharing_the_gpu_equal_one(tmp_path: Path) -> None:
    """``torchrun --nproc_per_node 2 ... --gpus 0,0``: two ranks on one GPU (gloo), a float
    and a QAT epoch, equal to one process on the union batches, to float round-off."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    policy = tmp_path / "policy.yaml"
    policy.write_text("start_epoch: 1\n")
    args = [
        "qat-unet", "--model-arg", "channels=4,8,8,8", "--size", "16", "--batch-size", "4",
        "--train-length", "16", "--val-length", "4", "--lr", "1e-2", "--schedule", "none",
        "--optimizer", "sgd", "--epochs", "2", "--qat-policy", str(policy), "--gpus", "0,0",
        "-o", str(tmp_path / "ddp"),
    ]  # fmt: skip
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                "--master_port", str(port), "-m", "cnnforge", "train"]  # fmt: skip
    run = subprocess.run([*launcher, *args], capture_output=True, text=True, env=_env(),
                         timeout=LIMIT)  # fmt: skip
    print(run.stdout, run.stderr[-3000:])
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines()[0].startswith("training on cuda:0")
    ddp = load_checkpoint(tmp_path / "ddp" / "last.pth")["state_dict"]
    torch.manual_seed(0)
    cfg = TrainConfig(epochs=2, batch_size=4, lr=1e-2, schedule="none", optimizer="sgd",
                      num_classes=5, replay_world_size=2)  # fmt: skip
    model = QatUNet(channels=(4, 8, 8, 8))
    Trainer(model, ShapesDataset("train", 16, 16), ShapesDataset("val", 4, 16), cfg,
            tmp_path / "one", QatHooks(QATPolicy(start_epoch=1)), device=GPU).fit()  # fmt: skip
    # the float epoch's convolutions use TF32 as torch does by default (docs/training.md):
    # the two ways of batching round differently there, hence 1e-4 (per-rank BatchNorm
    # statistics instead of global ones differ by ~1e-2)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(ddp[key], value.cpu(), rtol=1e-4, atol=1e-4, msg=key)
