"""Hand-written models in the styles of segmentation-models-pytorch, timm and torchvision.

The libraries pull a torch the test environment cannot pin, so each pattern that tripped
cnnforge on them is reproduced here in a few lines (benchmarks/zoo_external.py runs the real
ones): an ``nn.Conv2d`` subclass whose ``forward`` pads and calls ``F.conv2d`` with its own
weight (efficientnet's ``Conv2dStaticSamePadding``), weight standardization over a parameter,
``F.linear`` with module parameters, an FPN decoder that sums its branches with
``torch.stack(features).sum(dim=0)``, squeeze-excite (global pooling multiplied back), encoder
stages kept beyond the depth used (unused parameters), constant scales next to convs, and an
input normalization at the model start. Named by the CLI as
``tests/support/library_styles.py:Name``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class Conv2dStaticSamePadding(nn.Conv2d):
    """efficientnet_pytorch's same-padding conv: a pad module, then ``F.conv2d``."""

    def __init__(
        self, cin: int, cout: int, kernel: int, stride: int = 1, size: int = 32, **kwargs: object
    ) -> None:
        super().__init__(cin, cout, kernel, stride, **kwargs)  # type: ignore[arg-type]
        out = math.ceil(size / stride)
        pad = max((out - 1) * stride + kernel - size, 0)
        self.static_padding = nn.ZeroPad2d((pad // 2, pad - pad // 2, pad // 2, pad - pad // 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.static_padding(x)
        return F.conv2d(
            x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )


class StdConv2d(nn.Conv2d):
    """timm's weight-standardized conv: the weight is a function of a parameter."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        mean = w.mean(dim=(1, 2, 3), keepdim=True)
        var = w.var(dim=(1, 2, 3), keepdim=True, unbiased=False)
        w = (w - mean) / torch.sqrt(var + 1e-6)
        return torch.conv2d(x, w, self.bias, self.stride, self.padding)


class SqueezeExcite(nn.Module):
    """Global average pool, two 1x1 convs, sigmoid, multiplied back onto the input."""

    def __init__(self, channels: int, reduced: int) -> None:
        super().__init__()
        self.reduce = nn.Conv2d(channels, reduced, 1)
        self.expand = nn.Conv2d(reduced, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.mean((2, 3), keepdim=True)
        s = torch.sigmoid(self.expand(F.relu(self.reduce(s))))
        return x * s


class EfficientStyle(nn.Module):
    """Same-padding convs (stride 2 stem), a depthwise conv, squeeze-excite, a 1x1 head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = Conv2dStaticSamePadding(3, 16, 3, 2, size=32, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.dw = Conv2dStaticSamePadding(16, 16, 3, 1, size=16, groups=16, bias=False)
        self.se = SqueezeExcite(16, 4)
        self.head = Conv2dStaticSamePadding(16, 8, 1, 1, size=16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.stem(x)))
        x = self.se(F.relu(self.dw(x)))
        return self.head(x)


class StdConvNet(nn.Module):
    """A weight-standardized conv and an ``F.linear`` on the module's own parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = StdConv2d(3, 8, 3, padding=1)
        self.weight = nn.Parameter(torch.randn(10, 8))
        self.bias = nn.Parameter(torch.randn(10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return F.linear(x, self.weight, self.bias)


class StackSumFPN(nn.Module):
    """smp's FPN merge: ``torch.stack(features).sum(dim=0)`` over same-shape branches."""

    def __init__(self, reduce: str = "sum") -> None:
        super().__init__()
        self.reduce = reduce
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.branches = nn.ModuleList(nn.Conv2d(8, 8, 3, padding=1) for _ in range(3))
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem(x))
        features = [branch(x) for branch in self.branches]
        stacked = torch.stack(features)
        x = stacked.sum(dim=0) if self.reduce == "sum" else stacked.mean(dim=0)
        return self.head(x)


class StackMeanFPN(StackSumFPN):
    """The same merge with ``mean(dim=0)``: an add, then a constant scale."""

    def __init__(self) -> None:
        super().__init__("mean")


class UnusedStages(nn.Module):
    """An encoder with more stages than its depth uses (smp's ``encoder_depth``)."""

    def __init__(self, depth: int = 2) -> None:
        super().__init__()
        self.depth = depth
        self.stages = nn.ModuleList(
            nn.Conv2d(3 if i == 0 else 8, 8, 3, padding=1) for i in range(4)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for stage in self.stages[: self.depth]:
            x = F.relu(stage(x))
        return x


class ConstantScales(nn.Module):
    """``conv(x) * 4`` and ``relu(conv(x)) * gain + 0.25`` before a 1x1 conv."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 4, 1)
        self.register_buffer("gain", torch.linspace(0.5, 2.0, 8).view(1, 8, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x) * 4
        x = F.relu(self.conv2(x)) * self.gain + 0.25
        return self.head(x)


class NormalizedInput(nn.Module):
    """An input normalization ``(x - mean) / std`` at the model's start, then a padded conv."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv((x - self.mean) / self.std))


class Normalize(nn.Module):
    """torchvision's ``transforms.Normalize`` as it is written: type and value checks torch.fx
    cannot trace, then an in-place ``sub_``/``div_`` on (a clone of) the input."""

    def __init__(self, mean: list[float], std: list[float], inplace: bool = False) -> None:
        super().__init__()
        self.mean, self.std, self.inplace = mean, std, inplace

    def forward(self, tensor: torch.Tensor) -> torch.Tensor:
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"img should be Tensor Image. Got {type(tensor)}")
        if tensor.ndim < 3:
            raise ValueError("Expected tensor to be a tensor image of size (..., C, H, W)")
        if not self.inplace:
            tensor = tensor.clone()
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype, device=tensor.device)
        std = torch.as_tensor(self.std, dtype=tensor.dtype, device=tensor.device)
        if (std == 0).any():
            raise ValueError("std evaluated to zero, leading to division by zero.")
        return tensor.sub_(mean.view(-1, 1, 1)).div_(std.view(-1, 1, 1))


class NormalizeModuleInput(nn.Module):
    """A torchvision-style ``Normalize`` module at the model's start, then a padded conv."""

    def __init__(self) -> None:
        super().__init__()
        self.normalize = Normalize([0.5, 0.25, 0.125], [0.25, 0.5, 2.0])
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.relu(self.conv(self.normalize(x))))


class BilinearHead(nn.Module):
    """DeepLabV3+-style: a stride-4 encoder and a bilinear upsample back to the input size
    computed from the input's shape (``x.shape[-2:]``)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 8, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size = x.shape[-2:]
        y = self.head(self.down(x))
        if isinstance(size, torch.Size):  # what eager and export see; fx proxies differ
            return F.interpolate(y, size=size, mode="bilinear", align_corners=False)
        return y


#: Model name -> input shape (C, H, W).
STYLES = {
    "EfficientStyle": (3, 32, 32),
    "StdConvNet": (3, 16, 16),
    "StackSumFPN": (3, 16, 16),
    "StackMeanFPN": (3, 16, 16),
    "UnusedStages": (3, 16, 16),
    "ConstantScales": (3, 16, 16),
    "NormalizedInput": (3, 16, 16),
    "NormalizeModuleInput": (3, 16, 16),
    "BilinearHead": (3, 32, 32),
}


class LRASPPStyle(nn.Module):
    """torchvision's LRASPP head: a stride-8 encoder, a global-pooling gate multiplied back,
    and an ``align_corners=True`` bilinear upsample to the input (captured by torch.export)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            *(m for i in range(3) for m in (nn.Conv2d(3 if i == 0 else 8, 8, 3, 2, 1), nn.ReLU()))
        )
        self.cbr = nn.Conv2d(8, 8, 1)
        self.scale = nn.Conv2d(8, 8, 1)
        self.classifier = nn.Conv2d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.encoder(x)
        gate = torch.sigmoid(self.scale(F.adaptive_avg_pool2d(f, 1)))
        y = self.classifier(F.relu(self.cbr(f)) * gate)
        return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=True)


STYLES["LRASPPStyle"] = (3, 32, 32)


class BatchNormAct2d(nn.BatchNorm2d):
    """timm's BatchNormAct2d: ``F.batch_norm`` on its own statistics, then an activation."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, self.training,
            0.1, self.eps,
        )  # fmt: skip
        return F.relu(x)


class TimmStyle(nn.Module):
    """A conv and timm's BatchNormAct2d (folded into the conv like a BatchNorm2d)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = BatchNormAct2d(8)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


STYLES["TimmStyle"] = (3, 16, 16)
