"""Convolutional residual blocks in the style of ResNet (He et al., 2016).

- `ConvBnReluResidual`: conv3x3-BN-ReLU, conv3x3-BN, identity shortcut added, ReLU — the simplest
  residual block (same channels, stride 1).
- `BasicBlock`: torchvision's ResNet-18/34 `BasicBlock` with a downsampling shortcut
  (stride-2 1x1 conv + BN) because the block changes channels and resolution.
- `Bottleneck`: torchvision's ResNet-50 `Bottleneck` (v1.5: the stride sits on the 3x3 conv),
  1x1 reduce → 3x3 → 1x1 expand (expansion 4), with a 1x1 conv + BN projection shortcut.

All BatchNorms carry random running statistics (see `randomize_batchnorm`) so eval-mode BN does work.
"""

from __future__ import annotations

import torch
from torch import nn

from ._spec import finish, randomize_batchnorm


def conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


def conv1x1(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 1, stride=stride, bias=False)


class ConvBnReluResidual(nn.Module):
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + x)."""

    def __init__(self, channels: int = 16):
        super().__init__()
        self.conv1 = conv3x3(channels, channels)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = conv3x3(channels, channels)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)


class BasicBlock(nn.Module):
    """ResNet BasicBlock; `downsample` (1x1 conv stride s + BN) is built when shape changes."""

    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU()
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(conv1x1(inplanes, planes, stride), nn.BatchNorm2d(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """ResNet v1.5 Bottleneck: 1x1 → 3x3 (stride) → 1x1 (x4 channels), projection shortcut."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        width = planes
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = conv3x3(width, width, stride)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or inplanes != planes * self.expansion:
            self.downsample = nn.Sequential(
                conv1x1(inplanes, planes * self.expansion, stride), nn.BatchNorm2d(planes * self.expansion)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


def _build(model: nn.Module, input_shape: tuple[int, ...]):
    randomize_batchnorm(model)
    return finish(model, (torch.randn(*input_shape),))


def build_conv_bn_relu_residual(batch: int = 1, seed: int = 0, channels: int = 16, size: int = 16):
    torch.manual_seed(seed)
    return _build(ConvBnReluResidual(channels), (batch, channels, size, size))


def build_resnet_basic_block(batch: int = 1, seed: int = 0, inplanes: int = 16, planes: int = 32, stride: int = 2, size: int = 16):
    torch.manual_seed(seed)
    return _build(BasicBlock(inplanes, planes, stride), (batch, inplanes, size, size))


def build_resnet_bottleneck_block(batch: int = 1, seed: int = 0, inplanes: int = 32, planes: int = 16, stride: int = 2, size: int = 16):
    torch.manual_seed(seed)
    return _build(Bottleneck(inplanes, planes, stride), (batch, inplanes, size, size))
