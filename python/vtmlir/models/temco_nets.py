"""The TeMCO evaluation models (§4, Fig. 10–11): 10 networks of 5 families, plain PyTorch, random weights.

The paper decomposes AlexNet, VGG-11/16, ResNet-18/50, DenseNet-121 and a smaller DenseNet, UNet in
two sizes (and one more model) with Tucker-2 at rank ratio 0.1 and measures the internal-tensor peak.
Here the topologies are the reference ones (layer counts, kernel sizes, strides, pooling, skip
connections, concatenations) at reduced channel widths and image sizes so that all four variants
(original, decomposed, Skip-Opt, Skip-Opt+Fusion) compile and run on a 2-core CPU at batch 4 and 32:

| name | reference | here |
|---|---|---|
| `temco_alexnet` | AlexNet (Krizhevsky et al., 2012) | channels /4, input 63×63, classifier 256 |
| `temco_vgg11`, `temco_vgg16` | VGG configs A and D | channels /8, input 32×32 |
| `temco_resnet18`, `temco_resnet34` | BasicBlock ResNets [2,2,2,2], [3,4,6,3] | stem 16, input 32×32 |
| `temco_resnet50` | Bottleneck ResNet [3,4,6,3] (`convnets.ResNet`) | stem 8, input 32×32 |
| `temco_densenet121`, `temco_densenet_small` | DenseNet-BC [6,12,24,16] / [4,4,4] | growth 8, stem 16, input 32×32 |
| `temco_unet`, `temco_unet_small` | UNet (Ronneberger et al., 2015), 4 / 3 levels | base 16 / 8, input 32×32 |

Builders take `batch`, `seed` and `size` (the image side), so tests use smaller images.
"""

from __future__ import annotations

import torch
from torch import nn

from ._spec import finish, randomize_batchnorm
from .convnets import DenseNet, ResNet, VGG
from .resnet import BasicBlock

VGG11_CONFIG = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")
VGG16_CONFIG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


class AlexNet(nn.Module):
    """AlexNet: conv11/4 → pool → conv5 → pool → conv3 ×3 → pool → 3 linear layers (dropout is a no-op
    in eval mode and left out)."""

    def __init__(self, width: int = 4, classes: int = 10, hidden: int = 256):
        super().__init__()
        c = [64 // width, 192 // width, 384 // width, 256 // width, 256 // width]
        self.features = nn.Sequential(
            nn.Conv2d(3, c[0], 11, stride=4, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(c[0], c[1], 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(c[1], c[2], 3, padding=1), nn.ReLU(),
            nn.Conv2d(c[2], c[3], 3, padding=1), nn.ReLU(),
            nn.Conv2d(c[3], c[4], 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c[4], hidden), nn.ReLU(),
                                  nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class BasicResNet(nn.Module):
    """ResNet-18/34: conv3x3 stem (CIFAR-style, no stem pooling at 32×32), BasicBlock stages."""

    def __init__(self, layers: tuple[int, ...], base: int = 16, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, base, 3, padding=1, bias=False), nn.BatchNorm2d(base), nn.ReLU())
        stages, inplanes = [], base
        for i, n in enumerate(layers):
            planes = base * 2 ** i
            blocks = []
            for j in range(n):
                blocks.append(BasicBlock(inplanes, planes, stride=2 if (i > 0 and j == 0) else 1))
                inplanes = planes
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(inplanes, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(self.stem(x)))


class _DoubleConv(nn.Sequential):
    def __init__(self, cin: int, cout: int):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class UNet(nn.Module):
    """UNet: `levels` down steps (double conv, max-pool), a bottleneck, and up steps (nearest 2×
    upsampling, conv3x3 halving channels, concatenation with the skip, double conv), 1×1 head."""

    def __init__(self, levels: int = 4, base: int = 16, classes: int = 2):
        super().__init__()
        widths = [base * 2 ** i for i in range(levels + 1)]
        self.down = nn.ModuleList()
        cin = 3
        for w in widths[:-1]:
            self.down.append(_DoubleConv(cin, w))
            cin = w
        self.pool = nn.MaxPool2d(2, 2)
        self.bottom = _DoubleConv(widths[-2], widths[-1])
        self.up = nn.ModuleList()
        self.reduce = nn.ModuleList()
        self.merge = nn.ModuleList()
        for w_low, w in zip(reversed(widths[1:]), reversed(widths[:-1])):
            self.up.append(nn.Upsample(scale_factor=2, mode="nearest"))
            self.reduce.append(nn.Conv2d(w_low, w, 3, padding=1))
            self.merge.append(_DoubleConv(2 * w, w))
        self.head = nn.Conv2d(base, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottom(x)
        for up, reduce, merge, skip in zip(self.up, self.reduce, self.merge, reversed(skips)):
            x = merge(torch.cat([skip, reduce(up(x))], 1))
        return self.head(x)


def _build(model: nn.Module, seed: int, batch: int, size: int):
    g = torch.Generator().manual_seed(seed)
    randomize_batchnorm(model, g)
    return finish(model, (torch.randn(batch, 3, size, size, generator=g),))


def build_alexnet(batch: int = 4, seed: int = 0, size: int = 63):
    torch.manual_seed(seed)
    return _build(AlexNet(), seed, batch, size)


def build_vgg11(batch: int = 4, seed: int = 0, size: int = 32):
    torch.manual_seed(seed)
    return _build(VGG(width=8, config=VGG11_CONFIG), seed, batch, size)


def build_vgg16(batch: int = 4, seed: int = 0, size: int = 32):
    torch.manual_seed(seed)
    return _build(VGG(width=8, config=VGG16_CONFIG), seed, batch, size)


def build_resnet18(batch: int = 4, seed: int = 0, size: int = 32):
    torch.manual_seed(seed)
    return _build(BasicResNet((2, 2, 2, 2), base=16), seed, batch, size)


def build_resnet34(batch: int = 4, seed: int = 0, size: int = 32):
    torch.manual_seed(seed)
    return _build(BasicResNet((3, 4, 6, 3), base=16), seed, batch, size)


def build_resnet50(batch: int = 4, seed: int = 0, size: int = 32):
    torch.manual_seed(seed)
    return _build(ResNet((3, 4, 6, 3), base=8), seed, batch, size)


def build_densenet121(batch: int = 4, seed: int = 0, size: int = 32):
    torch.manual_seed(seed)
    return _build(DenseNet((6, 12, 24, 16), growth=8, init=16), seed, batch, size)


def build_densenet_small(batch: int = 4, seed: int = 0, size: int = 32):
    torch.manual_seed(seed)
    return _build(DenseNet((4, 4, 4), growth=8, init=16), seed, batch, size)


def build_unet(batch: int = 4, seed: int = 0, size: int = 32):
    torch.manual_seed(seed)
    return _build(UNet(levels=4, base=16), seed, batch, size)


def build_unet_small(batch: int = 4, seed: int = 0, size: int = 32):
    torch.manual_seed(seed)
    return _build(UNet(levels=3, base=8), seed, batch, size)


#: name -> (builder, description, smallest convenient test size)
TEMCO_MODELS = {
    "temco_alexnet": (build_alexnet, "AlexNet, channels /4, classifier 256; input [B, 3, 63, 63]", 63),
    "temco_vgg11": (build_vgg11, "VGG-11 (config A), channels /8; input [B, 3, 32, 32]", 32),
    "temco_vgg16": (build_vgg16, "VGG-16 (config D), channels /8; input [B, 3, 32, 32]", 32),
    "temco_resnet18": (build_resnet18, "ResNet-18 (BasicBlock [2,2,2,2]), stem 16; input [B, 3, 32, 32]", 16),
    "temco_resnet34": (build_resnet34, "ResNet-34 (BasicBlock [3,4,6,3]), stem 16; input [B, 3, 32, 32]", 16),
    "temco_resnet50": (build_resnet50, "ResNet-50 (Bottleneck [3,4,6,3]), stem 8; input [B, 3, 32, 32]", 32),
    "temco_densenet121": (build_densenet121, "DenseNet-121-style (blocks [6,12,24,16], growth 8, stem 16); "
                          "input [B, 3, 32, 32]", 32),
    "temco_densenet_small": (build_densenet_small, "DenseNet-BC blocks [4,4,4], growth 8, stem 16; "
                             "input [B, 3, 32, 32]", 32),
    "temco_unet": (build_unet, "UNet, 4 levels, base 16, nearest upsampling; input [B, 3, 32, 32]", 16),
    "temco_unet_small": (build_unet_small, "UNet, 3 levels, base 8; input [B, 3, 32, 32]", 8),
}
