"""Batches for training and evaluation from worker processes (``--workers``), the same for any
worker count; a worker's bad file is the main process's one-line ``InputError``."""

from __future__ import annotations

import functools
import os
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler
from torch.utils.data import default_collate as torch_collate

from cnnforge.errors import CnnforgeError, Note
from cnnforge.training import distributed as dist_utils

PREFETCH = 4  # batches each worker prepares ahead of the one being trained on
#: The longest path of a Unix socket (sun_path holds 108 bytes on Linux, with its NUL).
SOCKET_PATH_MAX = 107
#: What multiprocessing adds to the temporary directory for a worker's socket, which passes
#: the batches' shared memory to the trainer: ``/pymp-XXXXXXXX/listener-XXXXXXXX``.
SOCKET_SUFFIX = len("/pymp-XXXXXXXX/listener-XXXXXXXX")


def worker_sockets_fit() -> bool:
    """Whether a worker's socket path fits under the temporary directory; where not, batches
    cannot be handed over, so loading stays in the training process."""
    return len(os.fsencode(tempfile.gettempdir())) + SOCKET_SUFFIX <= SOCKET_PATH_MAX
CACHE_BYTES = 4 << 30  # the most one split's cached items take (ItemCache)
FORK_WARNING = r".*use of fork\(\) may lead to deadlocks"


class EpochBatches(Sampler[list[int]]):
    """The index batches of the epoch set by ``set_epoch``: in order, or shuffled seeded
    ``seed + epoch`` (under DDP or ``replay_world``, in DistributedSampler's order)."""

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
    """A batch as it travels from a worker: its item indices and tensors (narrowed for a GPU)
    with the types the dataset gave them (restored on the device)."""

    indices: torch.Tensor
    tensors: tuple[torch.Tensor, ...]
    dtypes: tuple[torch.dtype, ...]

    def pin_memory(self) -> _Batch:
        """Pinned copies (the DataLoader's pinning thread calls this), the indices too: the
        cache's copy of them to the device then does not wait for the GPU."""
        pinned = tuple(t.pin_memory() for t in self.tensors)
        return _Batch(self.indices.pin_memory(), pinned, self.dtypes)


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
    """A split's items kept on the training device once seen (docs/training.md), sound because every
    item is a pure function of its index; bounded by ``CACHE_BYTES`` and free memory."""

    def __init__(self, n: int, device: torch.device) -> None:
        self.n, self.device = n, device
        self.tensors: tuple[torch.Tensor, ...] | None = None
        self.dtypes: tuple[torch.dtype, ...] = ()
        self.held = torch.zeros(n, dtype=torch.bool)  # on the CPU: no device sync to ask
        self.usable = n > 0

    def holds(self, batches: list[list[int]]) -> bool:
        """Whether every index of ``batches`` is cached."""
        every = [i for b in batches for i in b]
        return self.usable and bool(self.held[every].all())

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

    def batches(self, batches: list[list[int]]) -> Iterator[tuple[torch.Tensor, ...]]:
        """The cached items of each of ``batches``, stacked, in the dataset's types; the
        indices go to the device in one pinned copy for all of them, not one per batch."""
        assert self.tensors is not None
        every = torch.tensor([i for b in batches for i in b], dtype=torch.int64)
        if self.device.type == "cuda":
            every = every.pin_memory()
        where = every.to(self.device, non_blocking=True).split([len(b) for b in batches])
        for w in where:
            yield tuple(c[w].to(d) for c, d in zip(self.tensors, self.dtypes, strict=True))

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
    """One split's ``(x, mask)`` batches on ``device``, epoch after epoch, from ``workers``
    processes kept until ``close`` (pinned and narrowed on CUDA), or from the ``cache``."""

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
        if workers and not worker_sockets_fit():
            warnings.warn(
                f"the temporary directory {tempfile.gettempdir()} is too long a path for the "
                "data-loading workers' sockets: loading in the training process (set TMPDIR "
                "to a shorter path to use workers)",
                Note,
                stacklevel=2,
            )
            workers = 0
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
                yield from self.cache.batches(order)
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
