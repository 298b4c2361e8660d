"""Multi-process training on torch.distributed (launched by ``torchrun``).

Without ``torchrun`` (no WORLD_SIZE in the environment) everything degrades to one process.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import Dataset, DistributedSampler


@dataclass(frozen=True)
class DistContext:
    """Rank and world size of this process; ``wrap`` and ``mean`` are no-ops for one process."""

    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def wrap(self, model: nn.Module) -> nn.Module:
        if self.world_size == 1:
            return model
        return nn.parallel.DistributedDataParallel(model)

    def mean(self, value: float) -> float:
        if self.world_size == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(t)
        return float(t[0]) / self.world_size


def init_from_env() -> DistContext:
    """Join the process group torchrun describes (gloo on CPU, nccl with CUDA)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistContext()
    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return DistContext(rank=dist.get_rank(), world_size=dist.get_world_size())


def context() -> DistContext:
    """The current process's context (single process unless a group is initialized)."""
    if dist.is_available() and dist.is_initialized():
        return DistContext(rank=dist.get_rank(), world_size=dist.get_world_size())
    return DistContext()


def sampler_for(dataset: Dataset, *, shuffle: bool, seed: int, epoch: int):
    """A DistributedSampler set to ``epoch`` when distributed, else None."""
    ctx = context()
    if ctx.world_size == 1:
        return None
    sampler = DistributedSampler(
        dataset, num_replicas=ctx.world_size, rank=ctx.rank, shuffle=shuffle, seed=seed
    )
    sampler.set_epoch(epoch)
    return sampler


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def replay_batches(n: int, world: int, *, seed: int, epoch: int, batch: int) -> list[list[int]]:
    """The global batches of a ``world``-process run (DistributedSampler order), for one process.

    Rank r's k-th batch is ``perm[r::world][k*batch:(k+1)*batch]`` with the sampler's padded
    permutation; DDP averages the ranks' gradients, which for equal batch sizes is the gradient
    of their union. Training on these unions in one process therefore replays a DDP run.
    """
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    perm = torch.randperm(n, generator=g).tolist()
    total = math.ceil(n / world) * world
    perm += perm[: total - n]
    per_rank = [perm[r:total:world] for r in range(world)]
    steps = math.ceil(len(per_rank[0]) / batch)
    return [[i for p in per_rank for i in p[k * batch : (k + 1) * batch]] for k in range(steps)]
