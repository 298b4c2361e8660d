"""ResNet-50 in torchvision's layout and a GoogLeNet-v1 (Caffe bvlc_googlenet) like net.

torchvision itself is not usable here, so both are written out. ``ResNet50`` follows
torchvision's ``resnet50`` (Bottleneck v1.5: the stride on the 3x3 conv; module names
``conv1``, ``layer1.0.conv2``, ``layer1.0.downsample.0`` ...); ``stride_in_1x1=True`` gives the
original (Caffe) layout that xfDNN's published run used. ``GoogLeNetV1`` is bvlc_googlenet
without its LRN layers, its ceil-mode 3x3/2 max pools written as floor mode with padding 1
(same output sizes: 112 -> 56 -> 28 -> 14 -> 7).
"""

from __future__ import annotations

from torch import nn


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        downsample=None,
        stride_in_1x1: bool = False,
    ) -> None:
        super().__init__()
        s1, s3 = (stride, 1) if stride_in_1x1 else (1, stride)
        self.conv1 = nn.Conv2d(inplanes, planes, 1, stride=s1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=s3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet50(nn.Module):
    def __init__(self, num_classes: int = 1000, stride_in_1x1: bool = False) -> None:
        super().__init__()
        self.inplanes = 64
        self.stride_in_1x1 = stride_in_1x1
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(64, 3)
        self.layer2 = self._make_layer(128, 4, stride=2)
        self.layer3 = self._make_layer(256, 6, stride=2)
        self.layer4 = self._make_layer(512, 3, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * 4, num_classes)

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * 4:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * 4, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * 4),
            )
        layers = [Bottleneck(self.inplanes, planes, stride, downsample, self.stride_in_1x1)]
        self.inplanes = planes * 4
        layers += [
            Bottleneck(self.inplanes, planes, stride_in_1x1=self.stride_in_1x1)
            for _ in range(1, blocks)
        ]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1))


class ResNet50Caffe(ResNet50):
    """The original layout (stride on the first 1x1 conv), as in xfDNN's published run."""

    def __init__(self) -> None:
        super().__init__(stride_in_1x1=True)


def _conv_relu(cin: int, cout: int, k: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2), nn.ReLU())


class Inception(nn.Module):
    def __init__(self, cin, c1, c3r, c3, c5r, c5, pp) -> None:
        super().__init__()
        self.branch1 = _conv_relu(cin, c1, 1)
        self.branch2 = nn.Sequential(_conv_relu(cin, c3r, 1), _conv_relu(c3r, c3, 3))
        self.branch3 = nn.Sequential(_conv_relu(cin, c5r, 1), _conv_relu(c5r, c5, 5))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, 1, padding=1), _conv_relu(cin, pp, 1))

    def forward(self, x):
        import torch

        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class GoogLeNetV1(nn.Module):
    def __init__(self, num_classes: int = 1000, avgpool: int = 7) -> None:
        super().__init__()
        self.conv1 = _conv_relu(3, 64, 7, stride=2)
        self.pool1 = nn.MaxPool2d(3, 2, padding=1)
        self.conv2_reduce = _conv_relu(64, 64, 1)
        self.conv2 = _conv_relu(64, 192, 3)
        self.pool2 = nn.MaxPool2d(3, 2, padding=1)
        self.inception3a = Inception(192, 64, 96, 128, 16, 32, 32)
        self.inception3b = Inception(256, 128, 128, 192, 32, 96, 64)
        self.pool3 = nn.MaxPool2d(3, 2, padding=1)
        self.inception4a = Inception(480, 192, 96, 208, 16, 48, 64)
        self.inception4b = Inception(512, 160, 112, 224, 24, 64, 64)
        self.inception4c = Inception(512, 128, 128, 256, 24, 64, 64)
        self.inception4d = Inception(512, 112, 144, 288, 32, 64, 64)
        self.inception4e = Inception(528, 256, 160, 320, 32, 128, 128)
        self.pool4 = nn.MaxPool2d(3, 2, padding=1)
        self.inception5a = Inception(832, 256, 160, 320, 32, 128, 128)
        self.inception5b = Inception(832, 384, 192, 384, 48, 128, 128)
        self.avgpool = nn.AvgPool2d(avgpool)  # 7 at 224x224 (smaller inputs: smaller)
        self.dropout = nn.Dropout(0.4)
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x):
        x = self.pool2(self.conv2(self.conv2_reduce(self.pool1(self.conv1(x)))))
        x = self.pool3(self.inception3b(self.inception3a(x)))
        for block in (
            self.inception4a,
            self.inception4b,
            self.inception4c,
            self.inception4d,
            self.inception4e,
        ):
            x = block(x)
        x = self.pool4(x)
        x = self.avgpool(self.inception5b(self.inception5a(x)))
        return self.fc(self.dropout(x.flatten(1)))
