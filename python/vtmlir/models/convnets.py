"""Whole image-classification networks for the layout work (VTensor §6, Table 1 / Fig. 13).

Plain PyTorch definitions written here (no torchvision), random weights, batch 1, small spatial
sizes so they import and run on a 2-core CPU:

- `ResNet` (He et al., 2016) with torchvision's v1.5 `Bottleneck` (`resnet.Bottleneck`):
  ResNet-50/101/152 = [3, 4, 6, 3] / [3, 4, 23, 3] / [3, 8, 36, 3] blocks;
- `DenseNet` (Huang et al., 2017), DenseNet-169 block config [6, 12, 32, 32], BN-ReLU-conv
  dense layers with a 1x1 bottleneck (bn_size 4) and concatenation, transitions halving channels;
- `MobileNetV2` (Sandler et al., 2018): inverted residuals, depthwise 3x3, ReLU6, torchvision's
  settings table;
- `Inception` (GoogLeNet-style, Szegedy et al., 2015): nine four-branch inception modules
  (1x1 | 1x1→3x3 | 1x1→3x3 | maxpool→1x1, concatenated), conv+BN+ReLU everywhere;
- `VGG` (Simonyan & Zisserman, 2015) VGG-19 configuration (16 convs, 5 max-pools), CIFAR-style head.

`width` divides every channel count of the reference network (and `growth` for DenseNet), which
keeps the topology — what layout resolution counts — and keeps every channel count that is a
multiple of 16 in the reference (VTensor's nChw16c blocking) a multiple of 16 at the default widths
registered in the zoo; only the weight volume shrinks.
"""

from __future__ import annotations

import torch
from torch import nn

from ._spec import finish, randomize_batchnorm
from .resnet import Bottleneck


def _conv_bn_relu(cin: int, cout: int, kernel: int, stride: int = 1, padding: int = 0,
                  groups: int = 1, act: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), act())


def _classifier(channels: int, classes: int) -> nn.Sequential:
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, classes))


# -- ResNet -----------------------------------------------------------------------------------------

RESNET_BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


class ResNet(nn.Module):
    """torchvision-style ResNet with Bottleneck blocks; `base` is the stem width (64 in the paper)."""

    def __init__(self, layers: tuple[int, ...], base: int = 64, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(
            _conv_bn_relu(3, base, 7, stride=2, padding=3), nn.MaxPool2d(3, stride=2, padding=1))
        stages, inplanes = [], base
        for i, n in enumerate(layers):
            planes = base * 2 ** i
            blocks = []
            for j in range(n):
                blocks.append(Bottleneck(inplanes, planes, stride=2 if (i > 0 and j == 0) else 1))
                inplanes = planes * Bottleneck.expansion
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.head = _classifier(inplanes, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(self.stem(x)))


# -- DenseNet ---------------------------------------------------------------------------------------


class _DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int, bn_size: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, bn_size * growth, 1, bias=False),
            nn.BatchNorm2d(bn_size * growth), nn.ReLU(),
            nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False))

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        return self.body(torch.cat(features, 1))


class _DenseBlock(nn.Module):
    def __init__(self, n: int, cin: int, growth: int, bn_size: int):
        super().__init__()
        self.layers = nn.ModuleList(_DenseLayer(cin + i * growth, growth, bn_size) for i in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


class DenseNet(nn.Module):
    """DenseNet-BC (torchvision layout: concatenation before each layer, BN-ReLU-conv1x1-avgpool
    transitions, final BN-ReLU)."""

    def __init__(self, blocks: tuple[int, ...] = (6, 12, 32, 32), growth: int = 32, init: int = 64,
                 bn_size: int = 4, classes: int = 10):
        super().__init__()
        layers: list[nn.Module] = [_conv_bn_relu(3, init, 7, stride=2, padding=3),
                                   nn.MaxPool2d(3, stride=2, padding=1)]
        c = init
        for i, n in enumerate(blocks):
            layers.append(_DenseBlock(n, c, growth, bn_size))
            c += n * growth
            if i != len(blocks) - 1:
                layers.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                                            nn.AvgPool2d(2, 2)))
                c //= 2
        layers += [nn.BatchNorm2d(c), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.head = _classifier(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


# -- MobileNetV2 ------------------------------------------------------------------------------------

#: torchvision's inverted-residual settings: expansion t, channels c, repeats n, first stride s.
MOBILENET_V2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                         (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_conv_bn_relu(cin, hidden, 1, act=nn.ReLU6))
        layers += [_conv_bn_relu(hidden, hidden, 3, stride, 1, groups=hidden, act=nn.ReLU6),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    def __init__(self, classes: int = 10, last: int = 1280):
        super().__init__()
        layers: list[nn.Module] = [_conv_bn_relu(3, 32, 3, stride=2, padding=1, act=nn.ReLU6)]
        c = 32
        for t, cout, n, s in MOBILENET_V2_SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(c, cout, s if i == 0 else 1, t))
                c = cout
        layers.append(_conv_bn_relu(c, last, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.head = _classifier(last, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


# -- Inception (GoogLeNet-style) ----------------------------------------------------------------------


class InceptionModule(nn.Module):
    """Four branches concatenated on channels: 1x1 | 1x1→3x3 | 1x1→3x3 | 3x3 maxpool→1x1."""

    def __init__(self, cin: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, pool: int):
        super().__init__()
        self.b1 = _conv_bn_relu(cin, c1, 1)
        self.b2 = nn.Sequential(_conv_bn_relu(cin, c3r, 1), _conv_bn_relu(c3r, c3, 3, padding=1))
        self.b3 = nn.Sequential(_conv_bn_relu(cin, c5r, 1), _conv_bn_relu(c5r, c5, 3, padding=1))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), _conv_bn_relu(cin, pool, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


#: GoogLeNet's inception modules (3a, 3b, 4a–4e, 5a, 5b); "M" is a stride-2 max-pool.
INCEPTION_CONFIG = ((192, 64, 96, 128, 16, 32, 32), (256, 128, 128, 192, 32, 96, 64), "M",
                    (480, 192, 96, 208, 16, 48, 64), (512, 160, 112, 224, 24, 64, 64),
                    (512, 128, 128, 256, 24, 64, 64), (512, 112, 144, 288, 32, 64, 64),
                    (528, 256, 160, 320, 32, 128, 128), "M",
                    (832, 256, 160, 320, 32, 128, 128), (832, 384, 192, 384, 48, 128, 128))


class Inception(nn.Module):
    def __init__(self, width: int = 1, classes: int = 10):
        super().__init__()
        layers: list[nn.Module] = [
            _conv_bn_relu(3, 64 // width, 7, stride=2, padding=3), nn.MaxPool2d(3, 2, padding=1),
            _conv_bn_relu(64 // width, 64 // width, 1), _conv_bn_relu(64 // width, 192 // width, 3, padding=1),
            nn.MaxPool2d(3, 2, padding=1)]
        c = 192 // width
        for entry in INCEPTION_CONFIG:
            if entry == "M":
                layers.append(nn.MaxPool2d(3, 2, padding=1))
                continue
            cin, *cs = (e // width for e in entry)
            assert cin == c, (cin, c)
            layers.append(InceptionModule(c, *cs))
            c = cs[0] + cs[2] + cs[4] + cs[5]
        self.features = nn.Sequential(*layers)
        self.head = _classifier(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


# -- VGG-19 -----------------------------------------------------------------------------------------

VGG19_CONFIG = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
                512, 512, 512, 512, "M")


class VGG(nn.Module):
    """VGG-19 features (conv3x3+ReLU, no BN, as in the paper's VGG19) and a linear head."""

    def __init__(self, width: int = 1, classes: int = 10, config=VGG19_CONFIG):
        super().__init__()
        layers: list[nn.Module] = []
        c = 3
        for v in config:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, v // width, 3, padding=1), nn.ReLU()]
                c = v // width
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(c, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


# -- builders ---------------------------------------------------------------------------------------


def _build(model: nn.Module, seed: int, batch: int, size: int):
    g = torch.Generator().manual_seed(seed)
    randomize_batchnorm(model, g)
    return finish(model, (torch.randn(batch, 3, size, size, generator=g),))


def build_resnet(depth: int = 50, batch: int = 1, seed: int = 0, base: int = 16, size: int = 32):
    torch.manual_seed(seed)
    return _build(ResNet(RESNET_BLOCKS[depth], base=base), seed, batch, size)


def build_resnet50(batch: int = 1, seed: int = 0, **kw):
    return build_resnet(50, batch, seed, **kw)


def build_resnet101(batch: int = 1, seed: int = 0, **kw):
    return build_resnet(101, batch, seed, **kw)


def build_resnet152(batch: int = 1, seed: int = 0, **kw):
    return build_resnet(152, batch, seed, **kw)


def build_densenet169(batch: int = 1, seed: int = 0, growth: int = 16, init: int = 32, size: int = 32):
    torch.manual_seed(seed)
    return _build(DenseNet((6, 12, 32, 32), growth=growth, init=init), seed, batch, size)


def build_mobilenet_v2(batch: int = 1, seed: int = 0, size: int = 32):
    torch.manual_seed(seed)
    return _build(MobileNetV2(), seed, batch, size)


def build_inception(batch: int = 1, seed: int = 0, width: int = 2, size: int = 32):
    torch.manual_seed(seed)
    return _build(Inception(width=width), seed, batch, size)


def build_vgg19(batch: int = 1, seed: int = 0, width: int = 4, size: int = 32):
    torch.manual_seed(seed)
    return _build(VGG(width=width), seed, batch, size)
