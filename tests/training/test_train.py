"""Training: deterministic resume, DDP under torchrun equals its single-process replay."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cnnforge.models.qat_unet import QatUNet
from cnnforge.nn import QATPolicy
from cnnforge.outputs import MANIFEST
from cnnforge.training.datasets import ShapesDataset
from cnnforge.training.distributed import replay_batches
from cnnforge.training.loop import TrainConfig, Trainer, load_checkpoint
from cnnforge.training.qat import QatHooks

TINY = dict(channels=(4, 8, 8, 8), batchnorm=True)


def _free_port() -> int:
    """A TCP port nobody listens on now (a fixed port can linger in TIME_WAIT between runs)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Stop(Exception):
    pass


def _trainer(out: Path, epochs: int = 3, **config) -> Trainer:
    torch.manual_seed(0)
    model = QatUNet(**TINY)
    cfg = TrainConfig(epochs=epochs, batch_size=8, lr=5e-3, num_classes=5, **config)
    return Trainer(
        model,
        ShapesDataset("train", 24, 16),
        ShapesDataset("val", 8, 16),
        cfg,
        out,
        QatHooks(QATPolicy(start_epoch=2)),
    )


def test_resume_continues_with_identical_losses(tmp_path):
    full = _trainer(tmp_path / "full").fit()
    assert [r.phase for r in full] == ["float", "float", "qat"]

    def interrupt(record):
        if record.epoch == 0:
            raise _Stop

    first = _trainer(tmp_path / "cut")
    first.on_epoch = interrupt
    with pytest.raises(_Stop):
        first.fit()
    second = _trainer(tmp_path / "cut")
    second.resume(tmp_path / "cut" / "last.pth")
    resumed = second.fit()
    assert [r.train_loss for r in resumed] == [r.train_loss for r in full]
    assert [r.val_loss for r in resumed] == [r.val_loss for r in full]
    payload = load_checkpoint(tmp_path / "cut" / "last.pth")
    assert payload["epoch"] == 2 and payload["qat_active"] is True


def test_replay_batches_match_distributed_sampler():
    from torch.utils.data import DistributedSampler

    data = list(range(11))
    ranks = []
    for r in range(2):
        s = DistributedSampler(data, num_replicas=2, rank=r, shuffle=True, seed=5)
        s.set_epoch(3)
        ranks.append(list(s))
    batches = replay_batches(11, 2, seed=5, epoch=3, batch=4)
    assert batches[0] == ranks[0][:4] + ranks[1][:4]
    assert batches[1] == ranks[0][4:] + ranks[1][4:]


@pytest.mark.slow
def test_torchrun_two_processes_equal_single_process_replay(tmp_path):
    """2 ranks x batch 4 under DDP (gloo) == one process on the union batches, to 1e-5."""
    args = [
        "qat-unet", "--model-arg", "channels=4,8,8,8", "--model-arg", "batchnorm=false",
        "--size", "16", "--epochs", "1", "--batch-size", "4", "--train-length", "16",
        "--val-length", "4", "--no-qat", "--lr", "1e-2",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    out = ["-o", str(tmp_path / "ddp")]
    cmd = [*launcher, "--master_port", str(_free_port()), "-m", "cnnforge", "train", *args, *out]
    subprocess.run(cmd, check=True, env=env, capture_output=True, timeout=300)
    ddp = load_checkpoint(tmp_path / "ddp" / "last.pth")
    log = [json.loads(line) for line in (tmp_path / "ddp" / "train.log").read_text().splitlines()]
    assert [entry["rank"] for entry in log] == [0]  # one writer
    assert sorted(p.name for p in (tmp_path / "ddp").iterdir()) == [
        MANIFEST,  # rank 0 claims the directory (outputs.claim_directory)
        "best.pth",
        "last.pth",
        "train.log",
    ]

    torch.manual_seed(0)
    model = QatUNet(channels=(4, 8, 8, 8), batchnorm=False)
    cfg = TrainConfig(epochs=1, batch_size=4, lr=1e-2, num_classes=5, replay_world_size=2)
    trainer = Trainer(
        model, ShapesDataset("train", 16, 16), ShapesDataset("val", 4, 16), cfg, tmp_path / "one"
    )
    trainer.fit()
    for key, value in model.state_dict().items():
        torch.testing.assert_close(ddp["state_dict"][key], value, rtol=1e-5, atol=1e-6, msg=key)
