"""A pre-LayerNorm transformer encoder block (GPT-2 / ViT style).

    h   = x + out_proj(mha(ln1(x)))
    out = h + fc2(gelu(fc1(ln2(h))))

Multi-head self-attention is written out explicitly — one fused qkv Linear, split, head reshape and
transpose, `q @ kᵀ / sqrt(d)`, softmax, `@ v`, merge heads — rather than through
`nn.MultiheadAttention` / `scaled_dot_product_attention`, so the importer sees matmul, softmax and
the data-movement ops around them. No mask (encoder). GELU is the exact (erf) form.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._spec import finish


class TransformerBlock(nn.Module):
    def __init__(self, dim: int = 64, n_heads: int = 4, mlp_ratio: int = 4, eps: float = 1e-5):
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"dim ({dim}) must be a multiple of n_heads ({n_heads})")
        self.dim, self.n_heads, self.head_dim = dim, n_heads, dim // n_heads
        self.ln1 = nn.LayerNorm(dim, eps=eps)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out_proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim, eps=eps)
        self.fc1 = nn.Linear(dim, mlp_ratio * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(mlp_ratio * dim, dim)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h, hd = self.n_heads, self.head_dim
        q, k, v = self.qkv(x).split(d, dim=-1)
        q = q.reshape(b, s, h, hd).transpose(1, 2)  # [b, h, s, hd]
        k = k.reshape(b, s, h, hd).transpose(1, 2)
        v = v.reshape(b, s, h, hd).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, d)
        return self.out_proj(out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.ln1(x))
        return h + self.fc2(self.act(self.fc1(self.ln2(h))))


def build_transformer_block(batch: int = 1, seed: int = 0, *, seq: int = 16, dim: int = 64, n_heads: int = 4):
    """Input: tokens [batch, seq, dim]. LayerNorm affine parameters are random, not 1/0."""
    torch.manual_seed(seed)
    model = TransformerBlock(dim, n_heads)
    with torch.no_grad():
        for ln in (model.ln1, model.ln2):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.normal_(0.0, 0.1)
    return finish(model, (torch.randn(batch, seq, dim),))
