"""Batches on their way to the device (docs/training.md, "Where training runs"): bound for a GPU
their integers travel narrow and arrive in the dataset's types with the same values, and with
``cache`` an epoch whose items are all kept on the device is served from there, the same batches
in the same order."""

from __future__ import annotations

import functools

import pytest
import torch
from torch.utils.data import Dataset

from cnnforge.training import loaders
from cnnforge.training.datasets import ShapesDataset
from cnnforge.training.loaders import Batches

CPU = torch.device("cpu")


class Counted(Dataset):
    """``ShapesDataset`` items, counting the reads (in this process: no workers)."""

    def __init__(self, n: int, size: int = 8) -> None:
        self.data = ShapesDataset("train", n, size)
        self.reads = 0

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int):
        self.reads += 1
        return self.data[i]


class Wide(Dataset):
    """Integers beyond the narrow types', and items of two shapes (never cached)."""

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int):
        side = 4 if i < 3 else 5
        return torch.full((1, side), 300 * i - 700, dtype=torch.int16), torch.full((side,), 999)


def _epochs(batches: Batches, count: int) -> list[list[tuple[torch.Tensor, ...]]]:
    try:
        return [list(batches.epoch(e)) for e in range(count)]
    finally:
        batches.close()


def _bound_for_a_gpu(batches: Batches) -> Batches:
    """``batches`` that narrow their integers as on the way to a GPU (widened again here)."""
    assert batches.loader is not None
    batches.loader.collate_fn = functools.partial(loaders._collate, narrowed=True)
    return batches


def test_batches_for_a_gpu_travel_narrow() -> None:
    data = ShapesDataset("train", 4, 8)
    batch = loaders._collate([(i, data[i]) for i in range(4)], narrowed=True)
    assert [t.dtype for t in batch.tensors] == [torch.int8, torch.uint8]
    assert batch.dtypes == (torch.int16, torch.int64) and batch.indices.tolist() == [0, 1, 2, 3]
    plain = loaders._collate([(i, data[i]) for i in range(4)])
    assert [t.dtype for t in plain.tensors] == [torch.int16, torch.int64]


@pytest.mark.parametrize("workers", [0, 1])
@pytest.mark.parametrize("narrowed", [False, True])
def test_batches_arrive_in_the_datasets_types_with_its_values(workers, narrowed) -> None:
    data = ShapesDataset("train", 6, 8)
    batches = Batches(data, 4, device=CPU, workers=workers, cache=True)
    epochs = _epochs(_bound_for_a_gpu(batches) if narrowed else batches, 2)
    want = [torch.stack([data[i][k] for i in range(6)]) for k in (0, 1)]
    for epoch in epochs:  # read, then from the cache
        for k in (0, 1):
            got = torch.cat([batch[k] for batch in epoch])
            assert got.dtype == want[k].dtype and torch.equal(got, want[k])


def test_items_no_narrow_type_holds_travel_as_they_are() -> None:
    (epoch,) = _epochs(_bound_for_a_gpu(Batches(Wide(), 3, device=CPU, workers=1)), 1)
    assert [b[0].dtype for b in epoch] == [torch.int16] * 2
    assert int(epoch[0][0].min()) == -700 and int(epoch[1][0].max()) == 800
    assert int(epoch[0][1].max()) == 999


def test_the_cache_serves_later_epochs_with_the_same_batches() -> None:
    """Epoch 0 reads every item, later epochs none; each epoch's batches (shuffled by seed +
    epoch) are those of an uncached run."""
    cached, plain = Counted(10), Counted(10)
    got = _epochs(Batches(cached, 4, device=CPU, shuffle=True, seed=3, cache=True), 3)
    want = _epochs(Batches(plain, 4, device=CPU, shuffle=True, seed=3), 3)
    assert cached.reads == 10 and plain.reads == 30
    for got_epoch, want_epoch in zip(got, want, strict=True):
        for g, w in zip(got_epoch, want_epoch, strict=True):
            assert all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(g, w, strict=True))


def test_the_cache_is_bounded(monkeypatch) -> None:
    """A split larger than the bound is read anew every epoch."""
    monkeypatch.setattr(loaders, "CACHE_BYTES", 100)
    data = Counted(6)
    _epochs(Batches(data, 4, device=CPU, cache=True), 2)
    assert data.reads == 12


def test_items_of_two_shapes_are_not_cached() -> None:
    batches = Batches(Wide(), 3, device=CPU, cache=True)
    first = list(batches.epoch(0))
    assert batches.cache is not None and not batches.cache.usable
    second = _epochs(batches, 1)[0]
    assert [b[0].shape for b in first] == [b[0].shape for b in second]
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first, second, strict=True))


def test_a_temporary_directory_too_long_for_the_workers_sockets_loads_in_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """A worker could not hand its batches over (the trainer would wait forever): the
    loading stays in the training process, with a note saying why and what to do."""
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    monkeypatch.setattr(loaders.tempfile, "tempdir", str(deep))
    assert not loaders.worker_sockets_fit()
    data = ShapesDataset("train", 8, 16)
    with pytest.warns(loaders.Note, match="TMPDIR"):
        batches = Batches(data, 4, device=torch.device("cpu"), workers=2)
    assert batches.loader is not None and batches.loader.num_workers == 0
    assert len(list(batches.epoch(0))) == 2
