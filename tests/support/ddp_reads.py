"""Run by torchrun (gloo, one process per rank): quantization-aware steps of a small QatUNet
under DDP; each rank prints the value reads (``.item()``, ``float(t)``, ...) of every step, which
on GPUs would each wait for the device (tests/training/test_train_ddp.py)."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from cnnforge.models.qat_unet import QatUNet
from cnnforge.nn import QATPolicy, enable_qat


class Reads(TorchDispatchMode):
    """Counts ``_local_scalar_dense``: every read of a tensor's value goes through it."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.reads += func.overloadpacket.__name__ == "_local_scalar_dense"
        return func(*args, **(kwargs or {}))


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = QatUNet(channels=(4, 8, 8, 8))
    enable_qat(model, QATPolicy())
    net = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=1e-2)
    x, reads = torch.randn(2, 3, 16, 16), []
    for _ in range(3):
        with Reads() as counted:
            net(x).float().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        reads.append(counted.reads)
    print(f"rank {dist.get_rank()} reads {reads}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
