"""Batches for training and evaluation: images prepared by worker processes (``--workers``),
pinned and copied to the device without waiting, the workers kept from one epoch to the next;
each epoch's batches chosen as ever (seed + epoch), however many workers there are.

A bad file met by a worker (a corrupt image, a mask with too many classes) is the same one-line
``InputError`` the main process would raise: the worker hands the error over instead of the
batch (torch would re-raise it with the worker's traceback pasted into its message).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler
from torch.utils.data import default_collate as torch_collate

from cnnforge.errors import CnnforgeError
from cnnforge.training import distributed as dist_utils

PREFETCH = 4  # batches each worker prepares ahead of the one being trained on
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


class _Guarded(Dataset):
    """``dataset`` whose items are ``_Failed`` where reading one raises a cnnforge error."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> Any:
        try:
            return self.dataset[index]
        except CnnforgeError as exc:
            return _Failed(exc)


def _collate(items: list[Any]) -> Any:
    failed = next((item for item in items if isinstance(item, _Failed)), None)
    return failed if failed is not None else torch_collate(items)


class Batches:
    """One split's ``(x, mask)`` batches on ``device``, epoch after epoch.

    ``workers`` > 0 prepares them in that many processes, started with the first epoch and kept
    until ``close``; on CUDA the batches are pinned and copied without blocking the host.
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
    ) -> None:
        self.device = device
        n = len(dataset)  # type: ignore[arg-type]
        self.sampler = EpochBatches(
            n, batch_size, shuffle=shuffle, seed=seed, replay_world=replay_world
        )
        workers = min(workers, len(self.sampler))  # no more processes than batches
        self.loader: DataLoader | None = DataLoader(
            _Guarded(dataset) if workers else dataset,
            batch_sampler=self.sampler,
            num_workers=workers,
            collate_fn=_collate if workers else None,
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
        with warnings.catch_warnings():
            # Python 3.12 warns on every fork of a process with threads (CUDA's, the pinning
            # thread); the workers only read files and numpy, never CUDA or those threads' locks
            warnings.filterwarnings("ignore", FORK_WARNING, DeprecationWarning)
            batches = iter(self.loader)  # starts the workers on the first epoch
        for batch in batches:
            if isinstance(batch, _Failed):
                raise batch.error
            yield tuple(t.to(self.device, non_blocking=True) for t in batch)

    def close(self) -> None:
        """Stop the workers (they also stop when this object is collected)."""
        self.loader = None
