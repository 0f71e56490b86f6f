"""`ModelSpec`, the registry entry of the model zoo, and helpers shared by the model families."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn


@dataclass(frozen=True)
class ModelSpec:
    """One zoo entry: how to build a model and example inputs for it.

    `build(batch=1, seed=0)` returns `(model, inputs)`: an `nn.Module` in eval mode with
    deterministic random weights (seeded by `seed`) and a tuple of example input tensors whose
    leading dimension is `batch`.
    """

    name: str
    description: str
    builder: Callable[..., tuple[nn.Module, tuple[torch.Tensor, ...]]] = field(repr=False)
    family: str = ""

    def build(self, batch: int = 1, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        return self.builder(batch=batch, seed=seed)


def randomize_batchnorm(module: nn.Module, generator: torch.Generator | None = None) -> None:
    """Give every BatchNorm non-trivial affine parameters and running statistics.

    Freshly constructed BatchNorms have mean 0, var 1, weight 1, bias 0: eval-mode BN is then the
    identity and a compiler that dropped it would still pass. Random values make it real work.
    """
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            with torch.no_grad():
                m.weight.copy_(torch.empty(n).uniform_(0.5, 1.5, generator=generator))
                m.bias.copy_(torch.randn(n, generator=generator) * 0.1)
                m.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                m.running_var.copy_(torch.empty(n).uniform_(0.5, 2.0, generator=generator))


def finish(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Put a built model in eval mode with gradients off."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, inputs
