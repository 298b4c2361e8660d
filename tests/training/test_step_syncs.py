"""A training or distillation step reads nothing back from its tensors: on a GPU every such read
(``.item()``, ``float(t)``, ``bool(t)``, ...) waits for the queued work, so the per-step paths
keep the losses, shifts and indices on the device; only an epoch's end reads them (once)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from cnnforge.training import loop
from cnnforge.training.datasets import ShapesDataset
from cnnforge.training.loop import Trainer
from support.trainers import BATCHES, EPOCHS, tiny_trainer

#: torch's optimizers read their step counts, kept on the host on every device: not a wait
OPTIMIZERS = str(Path(torch.optim.__file__).parent)


def _from_optimizer() -> bool:
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return False
        if frame.f_code.co_filename.startswith(OPTIMIZERS):
            return True
        frame = frame.f_back
    return False


class _Counts(TorchDispatchMode):
    """Reads of a tensor's value (``.item()``, ``float(t)``, ``bool(t)``, ``int(t)``, an index:
    ``_local_scalar_dense``; ``tolist``, patched) and tensors made from Python data (a list
    index, ``torch.tensor(list)``: on a GPU each is a host-to-device copy)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = self.made = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name == "_local_scalar_dense" and not _from_optimizer():
            self.reads += 1
        elif name == "lift_fresh":
            self.made += 1
        return func(*args, **(kwargs or {}))


def _step_counts(trainer: Trainer, monkeypatch) -> list[tuple[int, int]]:
    """Per epoch, (reads, tensors made) from the end of its first step to the end of its
    last (each step whole, the next batch's loading included), while ``fit`` runs."""
    counts = _Counts()
    marks: list[tuple[int, int]] = []
    tolist = torch.Tensor.tolist

    def counted_tolist(self):
        counts.reads += 1
        return tolist(self)

    monkeypatch.setattr(torch.Tensor, "tolist", counted_tolist)
    trainer.on_batch = lambda done, total: marks.append((counts.reads, counts.made))
    with counts:
        trainer.fit()
    monkeypatch.undo()
    assert len(marks) == EPOCHS * BATCHES
    per_epoch = [marks[e * BATCHES : (e + 1) * BATCHES] for e in range(EPOCHS)]
    return [(m[-1][0] - m[0][0], m[-1][1] - m[0][1]) for m in per_epoch]


@pytest.mark.parametrize("distill", [False, True], ids=["train", "distill"])
@pytest.mark.parametrize("qat", [False, True], ids=["float", "qat"])
def test_a_step_reads_no_tensor(tmp_path: Path, monkeypatch, distill: bool, qat: bool) -> None:
    """No step after an epoch's first reads a value back (the first reads the QAT modules'
    stage and widths once, an epoch's end its loss sum, validation and the checkpoint theirs);
    the cached epochs make no tensor from Python data either (the first epoch's loading
    collates item indices on the host, in the workers on a GPU)."""
    (reads, _), (cached_reads, cached_made) = _step_counts(
        tiny_trainer(tmp_path / "run", distill, qat), monkeypatch
    )
    assert (reads, cached_reads, cached_made) == (0, 0, 0)


def test_a_read_in_the_step_is_counted(tmp_path: Path, monkeypatch) -> None:
    """The count sees a per-step ``.item()`` (say, a loss logged per batch) and a list index."""
    loss = loop.segmentation_loss

    def logged(logits, *args, **kwargs):
        value = loss(logits[:, [0, 1, 2, 3, 4]], *args, **kwargs)
        value.item()
        return value

    monkeypatch.setattr(loop, "segmentation_loss", logged)
    (reads, _), cached = _step_counts(tiny_trainer(tmp_path / "run", False, True), monkeypatch)
    assert (reads, cached) == (BATCHES - 1, (BATCHES - 1, BATCHES - 1))


def _end_reads(tmp_path: Path, val_images: int) -> list[int]:
    """Per epoch, the reads from the end of its last step to ``on_epoch``: the loss sum,
    validation and the checkpoint."""
    trainer = tiny_trainer(tmp_path / str(val_images), True, True)
    trainer.val_set = ShapesDataset("val", val_images, 16)
    counts, marks = _Counts(), []
    trainer.on_batch = lambda done, total: marks.append(counts.reads) if done == total else None
    trainer.on_epoch = lambda record: marks.append(counts.reads)
    with counts:
        trainer.fit()
    return [end - last for last, end in zip(marks[::2], marks[1::2], strict=True)]


def test_an_epoch_end_reads_as_much_for_any_number_of_validation_batches(tmp_path: Path) -> None:
    """Validation sums its loss and counts its confusion matrix where the batches are: one
    validation batch or three, the epoch's end reads the same few values."""
    one, three = _end_reads(tmp_path, 4), _end_reads(tmp_path, 12)
    assert one == three and max(one) <= 5
