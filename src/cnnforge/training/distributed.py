"""Multi-process training under ``torchrun`` (one process without it): NCCL or gloo, and
``GlobalBatchNorm`` so N ranks of batch B train like one of batch N*B, on CPUs too."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn

from cnnforge.compute import CPU
from cnnforge.errors import InputError


@dataclass(frozen=True)
class DistContext:
    """Rank and world size of this process; ``wrap`` and ``mean`` are no-ops for one process."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = CPU  # this rank's (where its collectives' tensors live)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def wrap(self, model: nn.Module) -> nn.Module:
        """DDP around ``model`` as it trains now (only ``requires_grad`` parameters): wrap again
        when a phase changes what trains."""
        if self.world_size == 1:
            return model
        if self.device.type == "cuda":
            return nn.parallel.DistributedDataParallel(model, device_ids=[self.device.index])
        return nn.parallel.DistributedDataParallel(model)

    def mean(self, value: float) -> float:
        if self.world_size == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return float(t[0]) / self.world_size


TIMEOUT_S = 300  # a collective waiting longer than this ends the run (CNNFORGE_DIST_TIMEOUT)


def timeout() -> timedelta:
    """How long a collective waits for the other ranks: ``CNNFORGE_DIST_TIMEOUT`` seconds."""
    text = os.environ.get("CNNFORGE_DIST_TIMEOUT", str(TIMEOUT_S))
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 1e7:
        raise InputError(
            f"CNNFORGE_DIST_TIMEOUT={text!r} is not a positive number of seconds",
            hint=f"unset it for the default, {TIMEOUT_S}",
        )
    return timedelta(seconds=seconds)


def env_rank() -> int | None:
    """This process's rank when launched by torchrun with more than one process, else None."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    return int(os.environ.get("RANK", "0"))


def local_rank() -> int | None:
    """This process's index on its machine under torchrun with several processes, else None."""
    if env_rank() is None:
        return None
    return int(os.environ.get("LOCAL_RANK", "0"))


def local_processes() -> int:
    """Training processes on this machine (torchrun's LOCAL_WORLD_SIZE; 1 without torchrun)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1")) if env_rank() is not None else 1


def backend_for(device: torch.device, gpus: tuple[int, ...] | None) -> str:
    """NCCL when this rank has a GPU no other rank on its machine shares, else gloo."""
    if device.type != "cuda":
        return "gloo"
    shared = gpus is not None and len(set(gpus)) < len(gpus)
    return "gloo" if shared else "nccl"


def init_from_env(
    device: torch.device = CPU, gpus: tuple[int, ...] | None = None
) -> DistContext:
    """Join torchrun's process group computing on ``device`` (NCCL between GPUs, else gloo);
    ``timeout()`` bounds a wait on a hung rank."""
    if env_rank() is None:
        return DistContext(device=device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend_for(device, gpus), timeout=timeout())
    return DistContext(rank=dist.get_rank(), world_size=dist.get_world_size(), device=device)


def context() -> DistContext:
    """The current process's rank and world size (one process unless a group is initialized);
    its device is the CPU's: the trainer puts its own device in (``dataclasses.replace``)."""
    if dist.is_available() and dist.is_initialized():
        return DistContext(rank=dist.get_rank(), world_size=dist.get_world_size())
    return DistContext()


class _SumOverRanks(torch.autograd.Function):
    """All-reduce (sum) whose gradient is the all-reduced gradient: every rank's loss depends
    on every rank's input through the sum."""

    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(out)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(grad)
        return grad


class GlobalBatchNorm(nn.modules.batchnorm._BatchNorm):
    """BatchNorm with the global batch's statistics (autograd-aware all-reduced sums); plain
    BatchNorm outside training or a process group."""

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and dist.is_available() and dist.is_initialized()):
            return super().forward(x)
        if dist.get_world_size() == 1:
            return super().forward(x)
        self._check_input_dim(x)
        dims = [0, *range(2, x.dim())]
        shape = [1, x.shape[1]] + [1] * (x.dim() - 2)
        count = torch.tensor([x.numel() // x.shape[1]], dtype=torch.float64, device=x.device)
        dist.all_reduce(count)
        n = float(count[0])
        mean = _SumOverRanks.apply(x.sum(dims)) / n
        centred = x - mean.view(shape)
        var = _SumOverRanks.apply((centred * centred).sum(dims)) / n
        y = centred * torch.rsqrt(var + self.eps).view(shape)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        if self.track_running_stats:
            self._update_running(mean.detach(), var.detach(), n)
        return y

    def _update_running(self, mean: torch.Tensor, var: torch.Tensor, n: float) -> None:
        with torch.no_grad():
            self.num_batches_tracked.add_(1)
            factor = self.momentum
            if factor is None:
                factor = 1.0 / float(self.num_batches_tracked)
            unbiased = var * (n / max(n - 1.0, 1.0))
            self.running_mean.mul_(1 - factor).add_(mean.to(self.running_mean.dtype) * factor)
            self.running_var.mul_(1 - factor).add_(unbiased.to(self.running_var.dtype) * factor)


def global_batchnorm(model: nn.Module) -> nn.Module:
    """Replace every BatchNorm in ``model`` by a ``GlobalBatchNorm`` sharing its parameters and
    buffers (same state_dict keys, so checkpoints are unchanged); returns the model."""
    if isinstance(model, nn.modules.batchnorm._BatchNorm) and not isinstance(
        model, GlobalBatchNorm
    ):
        bn = GlobalBatchNorm(
            model.num_features, model.eps, model.momentum, model.affine, model.track_running_stats
        )
        if model.affine:
            bn.weight, bn.bias = model.weight, model.bias
        if model.track_running_stats:
            bn.running_mean, bn.running_var = model.running_mean, model.running_var
            bn.num_batches_tracked = model.num_batches_tracked
        bn.train(model.training)
        return bn
    for name, child in model.named_children():
        replaced = global_batchnorm(child)
        if replaced is not child:
            setattr(model, name, replaced)
    return model


def peer_failure(exc: BaseException) -> str | None:
    """The first sentence of a collective's failure (a rank died or timed out), else None."""
    text = str(exc)
    if not (isinstance(exc, dist.DistError) or "gloo" in text or "NCCL" in text):
        return None
    text = re.sub(r"^\[[^\]]*\]\s*", "", text.strip())  # gloo's [file.cc:line] prefix
    return text.split(". ")[0].splitlines()[0] if text else type(exc).__name__


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def replay_batches(n: int, world: int, *, seed: int, epoch: int, batch: int) -> list[list[int]]:
    """The global batches of a ``world``-process run (DistributedSampler order) for one process:
    training on these unions replays a DDP run."""
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    perm = torch.randperm(n, generator=g).tolist()
    total = math.ceil(n / world) * world
    perm += perm[: total - n]
    per_rank = [perm[r:total:world] for r in range(world)]
    steps = math.ceil(len(per_rank[0]) / batch)
    return [[i for p in per_rank for i in p[k * batch : (k + 1) * batch]] for k in range(steps)]
