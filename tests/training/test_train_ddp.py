"""DDP through float and QAT: 2 processes equal 1, resume under torchrun, two nodes, errors.

Every test launches the user's command (``python -m torch.distributed.run`` is ``torchrun``)
with gloo on CPU, one torch thread per rank, a port chosen at run time and a time limit.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import cnnforge
from cnnforge.models.qat_unet import QatUNet
from cnnforge.nn import QATPolicy
from cnnforge.training.datasets import ShapesDataset
from cnnforge.training.loop import TrainConfig, Trainer, load_checkpoint
from cnnforge.training.qat import QatHooks

CHANNELS = (4, 8, 8, 8)  # QatUNet with BatchNorm (its default)
ARGS = [
    "qat-unet", "--model-arg", "channels=4,8,8,8", "--size", "16", "--batch-size", "4",
    "--train-length", "16", "--val-length", "4", "--lr", "1e-2", "--schedule", "none",
    "--optimizer", "sgd",
]  # fmt: skip
# SGD, not Adam: the bias before a BatchNorm has a zero gradient up to round-off, which Adam's
# normalisation would turn into lr-sized steps of either sign; SGD keeps round-off round-off.
LIMIT = 240  # seconds any one launch may take before the test fails (no hang)


def _free_port() -> int:
    """A TCP port nobody listens on now (a fixed port can linger in TIME_WAIT between runs)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env() -> dict[str, str]:
    """The workers import the cnnforge this test imports, with one torch thread each."""
    src = str(Path(cnnforge.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}


def _torchrun(*launcher: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *launcher, "-m", "cnnforge"]


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=LIMIT, **kwargs)


def _policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text("start_epoch: 1\n")
    return path


def _replay(tmp_path: Path, epochs: int) -> list[dict[str, torch.Tensor]]:
    """One process on the union of the ranks' batches; the weights after each epoch."""
    torch.manual_seed(0)
    model = QatUNet(channels=CHANNELS)
    cfg = TrainConfig(
        epochs=epochs,
        batch_size=4,
        lr=1e-2,
        schedule="none",
        optimizer="sgd",
        num_classes=5,
        replay_world_size=2,
    )
    states: list[dict[str, torch.Tensor]] = []
    trainer = Trainer(
        model,
        ShapesDataset("train", 16, 16),
        ShapesDataset("val", 4, 16),
        cfg,
        tmp_path / "one",
        QatHooks(QATPolicy(start_epoch=1)),
        on_epoch=lambda _: states.append(copy.deepcopy(model.state_dict())),
    )
    trainer.fit()
    return states


def _max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(
        float((a[k].double() - b[k].double()).abs().max()) for k in a if a[k].is_floating_point()
    )


@pytest.mark.slow
def test_two_processes_equal_one_through_float_and_qat(tmp_path):
    """2 ranks x batch 4 == one process on the union batches, after the float epoch and after
    each QAT epoch; the QAT epochs resume under torchrun from a float and from a QAT
    checkpoint. BatchNorm uses the global batch's statistics, so the equality includes it."""
    out = tmp_path / "ddp"
    policy = ["--qat-policy", str(_policy(tmp_path)), "-o", str(out)]
    launcher = _torchrun("--nproc_per_node", "2", "--master_port", str(_free_port()))
    first = _run([*launcher, "train", *ARGS, "--epochs", "1", *policy])
    assert first.returncode == 0, first.stderr
    weights = [load_checkpoint(out / "last.pth")]
    for epochs in ("2", "3"):
        launcher = _torchrun("--nproc_per_node", "2", "--master_port", str(_free_port()))
        more = _run([*launcher, "train", *ARGS, "--epochs", epochs, "--resume", *policy])
        assert more.returncode == 0, more.stderr
        weights.append(load_checkpoint(out / "last.pth"))
    assert [w["qat_active"] for w in weights] == [False, True, True]

    replay = _replay(tmp_path, epochs=3)
    differences = [
        _max_difference(w["state_dict"], r) for w, r in zip(weights, replay, strict=True)
    ]
    print("max |weight difference| after float, qat, qat epochs:", differences)
    for w, r in zip(weights, replay, strict=True):
        for key, value in r.items():
            torch.testing.assert_close(w["state_dict"][key], value, rtol=1e-5, atol=1e-5, msg=key)

    log = [json.loads(line) for line in (out / "train.log").read_text().splitlines()]
    assert [(e["rank"], e["epoch"], e["phase"]) for e in log] == [
        (0, 0, "float"),
        (0, 1, "qat"),
        (0, 2, "qat"),
    ]
    names = ["best.pth", "last.pth", "train.log"]
    assert sorted(p.name for p in out.iterdir()) == [".cnnforge-manifest.json", *names]
    assert first.stdout.count("train loss") == 1  # one table header: rank 1 prints nothing
    assert "warning" not in first.stderr.lower() or "rank 1" not in first.stderr


def _two_nodes(args: list[str]) -> list[tuple[tuple[str, str], int]]:
    """``torchrun --nnodes 2 --nproc_per_node 1`` started twice on 127.0.0.1 (two "machines"
    meeting through c10d rendezvous): each one's (stdout, stderr) and exit status."""
    endpoint = f"127.0.0.1:{_free_port()}"
    launcher = _torchrun(
        "--nnodes", "2", "--nproc_per_node", "1", "--rdzv-backend", "c10d",
        "--rdzv-endpoint", endpoint, "--rdzv-id", "cnnforge-test",
    )  # fmt: skip
    nodes = [
        subprocess.Popen(
            [*launcher, *args],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        return [(p.communicate(timeout=LIMIT), p.returncode) for p in nodes]
    finally:
        for p in nodes:
            p.kill()


@pytest.mark.slow
def test_two_nodes_on_localhost(tmp_path):
    """Two torchrun agents (one process each) train float then QAT; evaluate scores the result."""
    out = tmp_path / "two-nodes"
    policy = ["--qat-policy", str(_policy(tmp_path))]
    results = _two_nodes(["train", *ARGS, "--epochs", "2", *policy, "-o", str(out)])
    for (_, stderr), code in results:
        assert code == 0, stderr
    tables = [stdout for (stdout, _), _ in results if "epoch" in stdout]
    assert len(tables) == 1  # only rank 0's node prints
    assert "float" in tables[0] and "qat" in tables[0]
    log = [json.loads(line) for line in (out / "train.log").read_text().splitlines()]
    assert [(e["rank"], e["phase"]) for e in log] == [(0, "float"), (0, "qat")]
    scored = _run(
        [sys.executable, "-m", "cnnforge", "evaluate", "qat-unet", "--checkpoint",
         str(out / "best.pth"), "--model-arg", "channels=4,8,8,8", "--size", "16",
         "--length", "4"]
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    assert "bit-exact" in scored.stdout


@pytest.mark.slow
def test_a_failing_rank_on_another_node_ends_the_run_promptly(tmp_path):
    model = tmp_path / "failing.py"
    model.write_text(MODEL_FAILING_ON_RANK_1.format(failure="raise ValueError('broken')"))
    out = str(tmp_path / "run")
    args = ["train", f"{model}:FailsOnRank1", *ARGS[1:], "--epochs", "2", "-o", out]
    start = time.monotonic()
    results = _two_nodes(args)
    assert time.monotonic() - start < 90
    assert all(code != 0 for _, code in results)
    lines = [
        line for (_, err), _ in results for line in err.splitlines() if line.startswith("error:")
    ]
    assert sorted(lines)[1].startswith("error: rank 1: ") and "broken" in sorted(lines)[1]
    assert len(lines) == 2 and sorted(lines)[0].startswith("error: rank 0: lost contact"), lines


def test_every_trainable_parameter_reaches_the_loss_in_each_phase():
    """What DDP without find_unused_parameters needs: QAT freezes the folded BatchNorm."""
    from cnnforge.nn import enable_qat

    torch.manual_seed(0)
    model = QatUNet(channels=CHANNELS)
    x = torch.randn(2, 3, 16, 16)
    for phase in ("float", "qat"):
        if phase == "qat":
            enable_qat(model, QATPolicy(start_epoch=0))
        model.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        unused = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
        assert unused == [], phase
    frozen = sorted(
        {n.rsplit(".", 1)[0] for n, p in model.named_parameters() if not p.requires_grad}
    )
    assert frozen and all(name.endswith(".bn") or name == "bn" for name in frozen), frozen


def test_global_batchnorm_is_batchnorm_in_one_process():
    from cnnforge.training.distributed import global_batchnorm

    torch.manual_seed(0)
    plain = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    converted = global_batchnorm(copy.deepcopy(plain))
    assert list(plain.state_dict()) == list(converted.state_dict())
    x = torch.randn(4, 3, 8, 8)
    torch.testing.assert_close(converted(x), plain(x))
    torch.testing.assert_close(converted.state_dict(), plain.state_dict())


@pytest.mark.parametrize("value", ["0", "-3", "soon", "inf"])
def test_a_bad_timeout_is_an_input_error(monkeypatch, value):
    from cnnforge.errors import InputError
    from cnnforge.training.distributed import timeout

    monkeypatch.setenv("CNNFORGE_DIST_TIMEOUT", value)
    with pytest.raises(InputError, match="CNNFORGE_DIST_TIMEOUT"):
        timeout()


MODEL_FAILING_ON_RANK_1 = '''
import os
import time
from cnnforge.models.qat_unet import QatUNet


class FailsOnRank1(QatUNet):
    """Trains normally, except that rank 1 fails in its third training step."""

    steps = 0

    def forward(self, x):
        if self.training and os.environ.get("RANK") == "1":
            FailsOnRank1.steps += 1
            if FailsOnRank1.steps == 3:
                {failure}
        return super().forward(x)
'''


@pytest.mark.slow
@pytest.mark.parametrize(
    "failure",
    [
        "raise ValueError('the data on this node is broken')",
        "os.kill(os.getpid(), 9)",
        "time.sleep(600)",
    ],
    ids=["raises", "killed", "hangs"],
)
def test_a_failing_rank_ends_the_run_promptly_with_one_line(tmp_path, failure, monkeypatch):
    monkeypatch.setenv("CNNFORGE_DIST_TIMEOUT", "5")  # how long rank 0 waits for a hung rank
    model = tmp_path / "failing.py"
    model.write_text(MODEL_FAILING_ON_RANK_1.format(failure=failure))
    launcher = _torchrun("--nproc_per_node", "2", "--master_port", str(_free_port()))
    args = [f"{model}:FailsOnRank1", *ARGS[1:], "--epochs", "2", "-o", str(tmp_path / "out")]
    start = time.monotonic()
    result = _run([*launcher, "train", *args])
    elapsed = time.monotonic() - start
    assert result.returncode != 0
    assert elapsed < 60, elapsed
    ours = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    cause = [line for line in ours if "lost contact" not in line]
    if failure.startswith("raise"):  # the failing rank's own line names it
        assert len(cause) == 1, result.stderr
        assert cause[0].startswith("error: rank 1: ")
        assert "the data on this node is broken" in cause[0]
    elif failure.startswith("os.kill"):  # a killed rank cannot speak: torchrun's report does
        assert cause == [], result.stderr
        assert "rank      : 1" in result.stderr and "-9" in result.stderr
    else:  # rank 0 gives up on the hung rank after CNNFORGE_DIST_TIMEOUT; torchrun ends rank 1
        assert cause == [], result.stderr
        assert len([line for line in ours if "rank 0: lost contact" in line]) == 1, ours
    followers = [line for line in ours if "lost contact" in line]  # rank 0, stopped by rank 1
    assert all(line.startswith("error: rank 0: lost contact") for line in followers), ours
    assert len(followers) <= 1
    assert "cnnforge/train" not in result.stderr  # no traceback from the workers


def test_resume_with_a_mismatched_optimizer_state_is_an_input_error(tmp_path):
    """A QAT last.pth whose optimizer still holds the folded BatchNorm (older cnnforge)."""
    from cnnforge.errors import InputError
    from cnnforge.training.loop import make_optimizer, save_checkpoint

    def trainer() -> Trainer:
        torch.manual_seed(0)
        cfg = TrainConfig(epochs=2, batch_size=8, num_classes=5)
        model = QatUNet(channels=CHANNELS)
        train, val = ShapesDataset("train", 8, 16), ShapesDataset("val", 4, 16)
        return Trainer(model, train, val, cfg, tmp_path, QatHooks(QATPolicy(start_epoch=1)))

    first = trainer()
    first.fit()
    payload = load_checkpoint(tmp_path / "last.pth")
    first.model.requires_grad_(True)
    payload["optimizer"] = make_optimizer(first.model, first.config).state_dict()
    save_checkpoint(tmp_path / "last.pth", payload)
    with pytest.raises(InputError, match="optimizer state does not match"):
        trainer().resume(tmp_path / "last.pth")
