"""A BERT-style encoder (post-LN, as in BERT) in plain PyTorch, for the DVM workloads (DVM §6 Table 2:
BERT with varying batch).

Not in `ZOO`: the DVM tests and benchmarks build it directly with dynamic batch/sequence dims
(`dynamic_shapes()`), which the zoo's static-shape tests do not cover. GELU is the tanh form, which
the DVM instruction set expresses (Exp/Div); the exact erf form has no Table 1 instruction. The
input is the embedded sequence (embeddings are gathers, outside DVM's vector/cube kernels).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.export import Dim


class BertLayer(nn.Module):
    def __init__(self, hidden: int = 64, heads: int = 4, ffn: int = 128, eps: float = 1e-12):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=eps)
        self.up = nn.Linear(hidden, ffn)
        self.down = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=eps)
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=-1)

        def heads(t):
            return t.reshape(b, s, self.heads, self.head_dim).transpose(1, 2).reshape(b * self.heads, s, self.head_dim)

        q, k, v = heads(q), heads(k), heads(v)
        att = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * self.head_dim ** -0.5, dim=-1)
        ctx = torch.bmm(att, v).reshape(b, self.heads, s, self.head_dim).transpose(1, 2).reshape(b, s, h)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.down(self.act(self.up(x))))


class BertEncoder(nn.Module):
    def __init__(self, layers: int = 2, hidden: int = 64, heads: int = 4, ffn: int = 128):
        super().__init__()
        self.layers = nn.ModuleList(BertLayer(hidden, heads, ffn) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def build_bert_encoder(batch: int = 2, seq: int = 8, layers: int = 2, hidden: int = 64, heads: int = 4,
                       ffn: int = 128, seed: int = 0):
    """(model in eval mode with seeded random weights, example input [batch, seq, hidden])."""
    torch.manual_seed(seed)
    model = BertEncoder(layers, hidden, heads, ffn).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    return model, (torch.randn(batch, seq, hidden),)


def dynamic_shapes(max_batch: int = 64):
    """torch.export dynamic shapes for `BertEncoder.forward(x)`: a dynamic batch (Table 2 varies
    BERT's batch). A dynamic sequence length too is not offered: torch-mlir lowers the
    `[b, s, h] -> [b*s, h]` views of `nn.Linear` with two dynamic dims to a `tensor.cast` to
    `[?, 1, h]` guarded by a runtime assert that s == 1 (wrong for every other s)."""
    return {"x": {0: Dim("batch", min=1, max=max_batch)}}
