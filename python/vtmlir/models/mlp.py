"""Multi-layer perceptron: a stack of `Linear` layers with GELU/ReLU activations.

The classic feed-forward classifier head (Linear → GELU → Linear → ReLU → Linear): exercises matmul
with bias broadcast and the two most common activations.
"""

from __future__ import annotations

import torch
from torch import nn

from ._spec import finish


class MLP(nn.Module):
    """Linear layers of widths `in_features → hidden... → out_features`; activations alternate
    GELU (tanh-free, erf form) and ReLU; no activation after the last layer."""

    def __init__(self, in_features: int = 64, hidden: tuple[int, ...] = (128, 128), out_features: int = 32):
        super().__init__()
        widths = (in_features, *hidden, out_features)
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(widths) - 2:
                layers.append(nn.GELU() if i % 2 == 0 else nn.ReLU())
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def build_mlp(batch: int = 1, seed: int = 0, in_features: int = 64, hidden=(128, 128), out_features: int = 32):
    torch.manual_seed(seed)
    model = MLP(in_features, tuple(hidden), out_features)
    return finish(model, (torch.randn(batch, in_features),))
