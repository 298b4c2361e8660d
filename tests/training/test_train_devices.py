"""Where train and evaluate run (docs/training.md, "Where training runs"): the first line says
so, ``--cpu``/``--gpus``/``--workers`` mistakes are one line with exit 2 and nothing written,
data-loading workers give the same run as none, bf16 autocast only in float epochs. CUDA is
absent here; its presence is simulated where the choice alone is tested."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.errors import InputError
from cnnforge.models.qat_unet import QatUNet
from cnnforge.nn import QATPolicy
from cnnforge.training.datasets import ShapesDataset
from cnnforge.training.demo import shipped_checkpoint
from cnnforge.training.loop import TrainConfig, Trainer, load_checkpoint
from cnnforge.training.qat import QatHooks
from support.cli import run_cli
from support.folders import folder_with_a_corrupt_image

TINY = ["qat-unet", "--model-arg", "channels=4,8,8,8", "--size", "16", "--epochs", "1",
        "--train-length", "8", "--val-length", "4", "--batch-size", "4"]  # fmt: skip


def _one_error(capsys, args: list[str]) -> str:
    code, out, err = run_cli(args, capsys)
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, out + err
    return lines[0]


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--gpus", "0"], "--gpus 0: there is no CUDA device 0"),
        (["--gpus", "1,0"], "there is no CUDA device 1"),
        (["--cpu", "--gpus", "0"], "--cpu and --gpus exclude each other"),
        (["--gpus", "x"], "not a list of GPU indices"),
        (["--workers", "-1"], "--workers -1 is negative"),
    ],
)
def test_train_device_mistakes_are_one_line_and_write_nothing(
    tmp_path: Path, capsys, flags: list[str], needle: str
) -> None:
    out = tmp_path / "run"
    line = _one_error(capsys, ["train", *TINY, "-o", str(out), *flags])
    assert needle in line and "hint:" in line
    assert not out.exists()


def test_a_missing_gpu_names_the_ones_there(tmp_path: Path, capsys, monkeypatch) -> None:
    """With (a simulated) one GPU, index 3 is refused naming 0..0, before anything is read."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    out = tmp_path / "run"
    line = _one_error(capsys, ["train", *TINY, "-o", str(out), "--gpus", "3"])
    assert "no CUDA device 3 (1 CUDA device(s): 0..0)" in line and not out.exists()
    ckpt = str(shipped_checkpoint())
    line = _one_error(capsys, ["evaluate", "qat-unet", "--checkpoint", ckpt, "--gpus", "3"])
    assert "no CUDA device 3" in line


def test_evaluate_gpu_mistake_is_one_line(capsys) -> None:
    ckpt = str(shipped_checkpoint())
    line = _one_error(capsys, ["evaluate", "qat-unet", "--checkpoint", ckpt, "--gpus", "7"])
    assert "no CUDA device 7" in line


def test_train_says_where_it_runs_and_times_its_epochs(tmp_path: Path, capsys) -> None:
    """The first line names the CPU and its threads; a worker process loads the data; the log
    and the table give each epoch's training time."""
    out = tmp_path / "run"
    code, stdout, err = run_cli(["train", *TINY, "-o", str(out), "--workers", "1"], capsys)
    assert code == 0, err
    assert stdout.splitlines()[0] == f"training on the CPU, {torch.get_num_threads()} threads"
    assert "train s" in stdout
    (record,) = [json.loads(x) for x in (out / "train.log").read_text().splitlines()]
    assert record["seconds"] > 0
    payload = load_checkpoint(out / "last.pth")
    assert all(t.device.type == "cpu" for t in payload["state_dict"].values())


def test_evaluate_says_where_it_runs(capsys) -> None:
    args = ["evaluate", "qat-unet", "--checkpoint", str(shipped_checkpoint()), "--length", "8",
            "--cpu", "--workers", "0"]  # fmt: skip
    code, stdout, err = run_cli(args, capsys)
    assert code == 0, err
    lines = stdout.splitlines()
    assert lines[0] == f"evaluating on the CPU, {torch.get_num_threads()} threads"
    assert "QAT-eval == bit-exact on all 40,960 output values" in lines[-1]


def test_api_refuses_a_missing_gpu_before_any_work(tmp_path: Path) -> None:
    import cnnforge

    with pytest.raises(InputError, match="no CUDA device 0"):
        cnnforge.train("qat-unet", tmp_path / "run", gpus="0")
    assert not (tmp_path / "run").exists()
    with pytest.raises(InputError, match="--workers -3"):
        cnnforge.train("qat-unet", tmp_path / "run", workers=-3)
    assert not (tmp_path / "run").exists()


# ---- the trainer: workers, autocast -----------------------------------------------------------


def _trainer(out: Path, *, workers: int = 0, amp: bool = False, epochs: int = 3) -> Trainer:
    torch.manual_seed(0)
    cfg = TrainConfig(epochs=epochs, batch_size=8, lr=5e-3, num_classes=5, amp=amp)
    return Trainer(
        QatUNet(channels=(4, 8, 8, 8)), ShapesDataset("train", 24, 16),
        ShapesDataset("val", 8, 16), cfg, out, QatHooks(QATPolicy(start_epoch=2)),
        workers=workers,
    )  # fmt: skip


def test_workers_train_exactly_as_the_main_process(tmp_path: Path) -> None:
    """Two worker processes (kept across epochs) give the losses and weights of none."""
    alone = _trainer(tmp_path / "a")
    with_workers = _trainer(tmp_path / "b", workers=2)
    first, second = alone.fit(), with_workers.fit()
    assert [r.train_loss for r in first] == [r.train_loss for r in second]
    assert [r.val_loss for r in first] == [r.val_loss for r in second]
    a, b = alone.model.state_dict(), with_workers.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert with_workers._batches == {}  # the workers are stopped once fit returns


def test_amp_autocasts_float_epochs_only(tmp_path: Path, monkeypatch) -> None:
    """bfloat16 autocast (the CPU's here) in the float epochs, none once QAT is on."""
    seen: list[tuple[str, bool]] = []
    trainer = _trainer(tmp_path / "amp", amp=True)
    original = trainer.autocast

    def spy():
        seen.append(("qat" if trainer.qat.active else "float", trainer.config.amp))
        manager = original()
        seen[-1] = (seen[-1][0], manager.fast_dtype == torch.bfloat16 and manager._enabled)
        return manager

    monkeypatch.setattr(trainer, "autocast", spy)
    history = trainer.fit()
    assert [r.phase for r in history] == ["float", "float", "qat"]
    assert {phase: on for phase, on in seen} == {"float": True, "qat": False}
    assert all(r.train_loss == r.train_loss for r in history)  # finite, not NaN


def test_a_bad_file_in_a_worker_is_the_one_line_error(tmp_path: Path) -> None:
    """A corrupt image read by a worker process raises the same InputError as without one."""
    from cnnforge.training.datasets import folder_dataset
    from cnnforge.training.loaders import Batches

    root = folder_with_a_corrupt_image(tmp_path / "data", 8)
    batches = Batches(folder_dataset(root, "train", 8, 5), 1, device=torch.device("cpu"),
                      workers=1)  # fmt: skip
    try:
        with pytest.raises(InputError) as info:
            list(batches.epoch())
    finally:
        batches.close()
    assert "b.png" in str(info.value) and "\n" not in str(info.value)
    assert "DataLoader worker process" not in str(info.value)


def test_workers_run_in_other_processes_and_persist(tmp_path: Path) -> None:
    """Items come from worker processes, the same ones epoch after epoch."""
    from torch.utils.data import Dataset

    from cnnforge.training.loaders import Batches

    class Pids(Dataset):
        def __len__(self) -> int:
            return 8

        def __getitem__(self, i: int):
            return torch.tensor(os.getpid()), torch.tensor(i)

    batches = Batches(Pids(), 2, device=torch.device("cpu"), workers=2, shuffle=True)
    try:
        epochs = [
            [(int(p), int(i)) for x, y in batches.epoch(e) for p, i in zip(x, y, strict=True)]
            for e in range(2)
        ]
    finally:
        batches.close()
    pids = [{p for p, _ in e} for e in epochs]
    assert os.getpid() not in pids[0] and pids[0] == pids[1] and len(pids[0]) == 2
    assert [sorted(i for _, i in e) for e in epochs] == [list(range(8))] * 2


@settings(max_examples=60)
@given(st.integers(1, 40), st.integers(1, 9), st.integers(0, 1000), st.integers(0, 50))
def test_epoch_batches_are_the_ones_of_earlier_versions(n, batch, seed, epoch) -> None:
    """The shuffled batches of an epoch are those of the DataLoader the trainer used before it
    had workers (a generator seeded seed + epoch, the shipped checkpoint's recipe)."""
    from torch.utils.data import DataLoader

    from cnnforge.training.loaders import EpochBatches

    sampler = EpochBatches(n, batch, shuffle=True, seed=seed)
    sampler.set_epoch(epoch)
    generator = torch.Generator().manual_seed(seed + epoch)
    before = DataLoader(range(n), batch_size=batch, shuffle=True, generator=generator)
    assert list(sampler) == [b.tolist() for b in before]
    assert len(sampler) == len(before)
    in_order = EpochBatches(n, batch, shuffle=False)
    assert [i for b in in_order for i in b] == list(range(n))
