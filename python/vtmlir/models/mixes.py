"""Elementwise ops mixed with reductions: the glue that surrounds matmuls and convolutions.

`ElementwiseReductionMix` is not a published architecture; it is a deliberately dense mix of the
patterns a fusion pass must handle, each as it appears in real models:

- broadcasting a per-feature scale/shift (`x * gamma + beta`, rank-1 onto rank-3) and tanh;
- a numerically stable log-sum-exp along the last dim (max reduction, exp, sum, log), as in a
  cross-entropy loss;
- softmax along the last dim, weighted by a per-row mean (mean reduction along dim 1 broadcast back);
- a max reduction along a middle dim and a sum over two dims (`dim=(1, 2)`);
- a sigmoid gate mixing two branches.

Two outputs: a [batch, rows, cols] tensor and a [batch, cols] tensor, so multi-result functions are
covered as well.
"""

from __future__ import annotations

import torch
from torch import nn

from ._spec import finish


class ElementwiseReductionMix(nn.Module):
    def __init__(self, cols: int = 32):
        super().__init__()
        self.gamma = nn.Parameter(torch.randn(cols) * 0.5 + 1.0)
        self.beta = nn.Parameter(torch.randn(cols) * 0.1)

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        # x: [b, r, c], y: [b, 1, c]
        a = torch.tanh(x * self.gamma + self.beta)  # broadcast rank-1 params
        m = a.amax(dim=-1, keepdim=True)
        lse = m + torch.log(torch.exp(a - m).sum(dim=-1, keepdim=True))  # [b, r, 1]
        sm = torch.softmax(a * 2.0 + y, dim=-1)  # y broadcast along rows
        row_mean = sm.mean(dim=1, keepdim=True)  # [b, 1, c]
        gate = torch.sigmoid(x - lse)
        z = gate * sm + (1.0 - gate) * row_mean  # [b, r, c]
        col_max = torch.max(z, dim=1).values  # [b, c]
        total = z.sum(dim=(1, 2), keepdim=False)  # [b]
        summary = col_max / (total[:, None] + 1.0) + torch.exp(-y.squeeze(1).abs())
        return z, summary


def build_elementwise_reduction_mix(batch: int = 1, seed: int = 0, *, rows: int = 8, cols: int = 32):
    """Inputs: x [batch, rows, cols], y [batch, 1, cols]."""
    torch.manual_seed(seed)
    model = ElementwiseReductionMix(cols)
    return finish(model, (torch.randn(batch, rows, cols), torch.randn(batch, 1, cols)))
