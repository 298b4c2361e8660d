"""Batches for training and evaluation: images prepared by worker processes (``--workers``),
pinned and copied to the device without waiting, the workers kept from one epoch to the next;
each epoch's batches chosen as ever (seed + epoch), however many workers there are.

A bad file met by a worker (a corrupt image, a mask with too many classes) is the same one-line
``InputError`` the main process would raise: the worker hands the error over instead of the
batch (torch would re-raise it with the worker's traceback pasted into its message).
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler
from torch.utils.data import default_collate as torch_collate

from cnnforge.errors import CnnforgeError
from cnnforge.training import distributed as dist_utils

PREFETCH = 4  # batches each worker prepares ahead of the one being trained on
CACHE_BYTES = 4 << 30  # the most one split's cached items take (ItemCache)
FORK_WARNING = r".*use of fork\(\) may lead to deadlocks"


class EpochBatches(Sampler[list[int]]):
    """The index batches of the epoch set by ``set_epoch``: in order, or shuffled by a generator
    seeded ``seed + epoch`` (shuffled under DDP: this rank's share, DistributedSampler's order;
    with ``replay_world`` > 1: the union batches of such a run, distributed.replay_batches)."""

    def __init__(
        self, n: int, batch: int, *, shuffle: bool, seed: int = 0, replay_world: int = 1
    ) -> None:
        self.n, self.batch, self.shuffle = n, batch, shuffle
        self.seed, self.replay_world = seed, replay_world
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _order(self) -> list[int]:
        ctx = dist_utils.context()
        if self.shuffle and ctx.world_size > 1:  # training under DDP; evaluation sees it all
            sampler = DistributedSampler(
                range(self.n), num_replicas=ctx.world_size, rank=ctx.rank,
                shuffle=self.shuffle, seed=self.seed,
            )  # fmt: skip
            sampler.set_epoch(self.epoch)
            return list(sampler)
        if not self.shuffle:
            return list(range(self.n))
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        # The DataLoader of earlier versions drew its workers' seed from this generator before
        # the permutation: drawn here too, so an epoch's batches are the ones they had.
        torch.empty((), dtype=torch.int64).random_(generator=g)
        return torch.randperm(self.n, generator=g).tolist()

    def __iter__(self) -> Iterator[list[int]]:
        if self.replay_world > 1 and self.shuffle:
            yield from dist_utils.replay_batches(
                self.n, self.replay_world, seed=self.seed, epoch=self.epoch, batch=self.batch
            )
            return
        order = self._order()
        for start in range(0, len(order), self.batch):
            yield order[start : start + self.batch]

    def __len__(self) -> int:
        world = dist_utils.context().world_size if self.shuffle else 1
        per_rank = -(-self.n // max(world, self.replay_world if self.shuffle else 1))
        return -(-per_rank // self.batch)


class _Failed:
    """A cnnforge error met in a worker, carried to the main process as it is."""

    def __init__(self, error: CnnforgeError) -> None:
        self.error = error


class _Indexed(Dataset):
    """``dataset``'s items with their indices, or ``_Failed`` where reading one raises a
    cnnforge error."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> Any:
        try:
            return index, self.dataset[index]
        except CnnforgeError as exc:
            return _Failed(exc)


#: Integer types shipped narrower when every value of a batch fits: the images' hardware
#: integers (int16 of [-128, 127]) as int8, masks (int64 class indices and VOID) as uint8.
NARROW = {torch.int16: torch.int8, torch.int64: torch.uint8}


@dataclass
class _Batch:
    """A batch as it travels from a worker: its item indices and its tensors (bound for a GPU:
    integers in the narrowest type that holds them, a quarter of the bytes to share, pin and
    copy), with the types the dataset gave them (restored on the device)."""

    indices: torch.Tensor
    tensors: tuple[torch.Tensor, ...]
    dtypes: tuple[torch.dtype, ...]

    def pin_memory(self) -> _Batch:
        """Pinned copies (the DataLoader's pinning thread calls this)."""
        return _Batch(self.indices, tuple(t.pin_memory() for t in self.tensors), self.dtypes)


def _stacked(column: list[torch.Tensor], narrowed: bool) -> torch.Tensor:
    """One position of the items, stacked; with ``narrowed`` in the narrow type when every
    value fits it."""
    narrow = NARROW.get(column[0].dtype) if narrowed else None
    if narrow is not None and all(t.dtype == column[0].dtype for t in column):
        info = torch.iinfo(narrow)
        if all(_within(t, info.min, info.max) for t in column):
            return torch_collate([t.to(narrow) for t in column])
    return torch_collate(column)


def _within(t: torch.Tensor, low: int, high: int) -> bool:
    return t.numel() == 0 or (low <= int(t.min()) and int(t.max()) <= high)


def _collate(items: list[Any], narrowed: bool = False) -> _Batch | _Failed:
    failed = next((item for item in items if isinstance(item, _Failed)), None)
    if failed is not None:
        return failed
    indices = torch.tensor([index for index, _ in items])
    columns = list(zip(*(item for _, item in items), strict=True))
    tensors = tuple(_stacked(list(c), narrowed) for c in columns)
    return _Batch(indices, tensors, tuple(c[0].dtype for c in columns))


class ItemCache:
    """A split's items on the training device, kept as they first arrive (on a GPU narrow
    integers, docs/training.md "Where training runs"): once every index of an epoch is there, its
    batches are gathered on the device, and no worker, pinning or copy is involved.

    Sound because every cnnforge dataset item is a pure function of its index (``shapes``
    renders from (seed, index), files are read without random augmentation). Bounded: a split
    whose items would take more than ``CACHE_BYTES`` (or an eighth of the memory free where it
    would live) is not cached, nor one whose items differ in shape or type.
    """

    def __init__(self, n: int, device: torch.device) -> None:
        self.n, self.device = n, device
        self.tensors: tuple[torch.Tensor, ...] | None = None
        self.dtypes: tuple[torch.dtype, ...] = ()
        self.held = torch.zeros(n, dtype=torch.bool)  # on the CPU: no device sync to ask
        self.usable = n > 0

    def holds(self, batches: list[list[int]]) -> bool:
        """Whether every index of ``batches`` is cached."""
        return self.usable and all(bool(self.held[b].all()) for b in batches)

    def store(self, indices: torch.Tensor, tensors: tuple[torch.Tensor, ...],
              dtypes: tuple[torch.dtype, ...]) -> None:  # fmt: skip
        """Keep the items ``indices`` of a batch already on the device."""
        if not self.usable:
            return
        if self.tensors is None:
            self.tensors = self._allocate(tensors)
            self.dtypes = dtypes
            if self.tensors is None:
                return
        if self.dtypes != dtypes or any(
            t.dtype != c.dtype or t.shape[1:] != c.shape[1:]
            for t, c in zip(tensors, self.tensors, strict=True)
        ):
            self.drop()  # items of another shape or type: not cached
            return
        where = indices.to(self.device, non_blocking=True)
        for cache, t in zip(self.tensors, tensors, strict=True):
            cache[where] = t
        self.held[indices] = True

    def batch(self, indices: list[int]) -> tuple[torch.Tensor, ...]:
        """The cached items ``indices``, stacked, in the dataset's types."""
        assert self.tensors is not None
        where = torch.tensor(indices).to(self.device, non_blocking=True)
        return tuple(c[where].to(d) for c, d in zip(self.tensors, self.dtypes, strict=True))

    def _allocate(self, like: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...] | None:
        item_bytes = sum(t[0].numel() * t.element_size() for t in like)
        if self.n * item_bytes > min(CACHE_BYTES, free_memory(self.device) // 8):
            self.drop()
            return None
        return tuple(torch.empty((self.n, *t.shape[1:]), dtype=t.dtype, device=self.device)
                     for t in like)  # fmt: skip

    def drop(self) -> None:
        self.usable, self.tensors = False, None


def free_memory(device: torch.device) -> int:
    """Bytes free on ``device``: the GPU's free memory, or the host's available memory (0 where
    the platform does not say)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


class Batches:
    """One split's ``(x, mask)`` batches on ``device``, epoch after epoch.

    ``workers`` > 0 prepares them in that many processes, started with the first epoch and kept
    until ``close``; on CUDA the batches are pinned and copied without blocking the host, their
    integers narrowed (``NARROW``) on the way and widened again on the device. With
    ``cache`` the items are kept on the device once seen (``ItemCache``): an epoch whose items
    are all there is served from it.
    """

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int,
        *,
        device: torch.device,
        workers: int = 0,
        shuffle: bool = False,
        seed: int = 0,
        replay_world: int = 1,
        cache: bool = False,
    ) -> None:
        self.device = device
        n = len(dataset)  # type: ignore[arg-type]
        self.sampler = EpochBatches(
            n, batch_size, shuffle=shuffle, seed=seed, replay_world=replay_world
        )
        self.cache = ItemCache(n, device) if cache else None
        workers = min(workers, len(self.sampler))  # no more processes than batches
        self.loader: DataLoader | None = DataLoader(
            _Indexed(dataset),
            batch_sampler=self.sampler,
            num_workers=workers,
            # narrow where the batches are copied to a GPU (on the CPU they would be widened
            # again in this process: twice the work, nothing saved)
            collate_fn=functools.partial(_collate, narrowed=device.type != "cpu"),
            pin_memory=device.type == "cuda",
            persistent_workers=workers > 0,
            prefetch_factor=PREFETCH if workers else None,
            # only the workers' seeds come from it (the batches are the sampler's): a generator
            # of its own keeps torch's global one untouched, as the runs before workers had it
            generator=torch.Generator().manual_seed(seed),
        )

    def epoch(self, epoch: int = 0) -> Iterator[tuple[torch.Tensor, ...]]:
        """The batches of ``epoch`` on the device."""
        assert self.loader is not None, "closed"
        self.sampler.set_epoch(epoch)
        if self.cache is not None:
            order = list(self.sampler)
            if self.cache.holds(order):
                yield from (self.cache.batch(indices) for indices in order)
                return
        with warnings.catch_warnings():
            # Python 3.12 warns on every fork of a process with threads (CUDA's, the pinning
            # thread); the workers only read files and numpy, never CUDA or those threads' locks
            warnings.filterwarnings("ignore", FORK_WARNING, DeprecationWarning)
            batches = iter(self.loader)  # starts the workers on the first epoch
        for batch in batches:
            if isinstance(batch, _Failed):
                raise batch.error
            narrow = tuple(t.to(self.device, non_blocking=True) for t in batch.tensors)
            if self.cache is not None:
                self.cache.store(batch.indices, narrow, batch.dtypes)
            yield tuple(t.to(d) for t, d in zip(narrow, batch.dtypes, strict=True))

    def close(self) -> None:
        """Stop the workers (they also stop when this object is collected) and free the cache."""
        self.loader = None
        self.cache = None
