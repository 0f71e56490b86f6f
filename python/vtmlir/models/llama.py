"""A Llama-style decoder layer (Llama 2/3 architecture) in decode mode: one new token per sequence.

Structure (as in Hugging Face's `LlamaDecoderLayer`)::

    h   = x + o_proj(attn(rope(q), rope(k) → k_cache, v → v_cache))   with q,k,v from rms_norm(x)
    out = h + down_proj(silu(gate_proj(n)) * up_proj(n))              with n = rms_norm(h)

- RMSNorm with a learned scale, eps 1e-5.
- Grouped-query attention: `n_heads` query heads share `n_kv_heads` key/value heads; K/V heads are
  repeated (expand + reshape, as HF's `repeat_kv`) before the score matmul.
- q/k/v come from one fused `qkv_proj` split into three (`fused_qkv=True`, Llama-3 style
  checkpoints as served by vLLM/TensorRT-LLM) or from three separate projections.
- Rotary position embeddings (rotate-half form, base 10000): cos/sin computed for the current
  position from the inverse-frequency buffer.
- KV cache: `k_cache`, `v_cache` of shape [batch, n_kv_heads, max_ctx, head_dim] are inputs; the
  layer writes the new token's k/v at the current position and returns the updated caches as outputs.

Two ways to give the position:

- `position` baked at construction (default, `position_input=False`): the cache update is slice
  assignment on a clone (`c = cache.clone(); c[:, :, p:p+1] = k`), which torch-mlir lowers to
  `tensor.insert_slice`, and attention reads the valid prefix `cache[:, :, :p+1]`
  (`tensor.extract_slice`). This is the form the zoo uses: pure linalg-on-tensors.
- `position_input=True`: the position is an int64 tensor of shape [1] (an extra last input); the
  update is `index_copy`, which torch-mlir lowers to `tm_tensor.scatter` (not pure linalg), and
  attention covers the whole cache with a `-inf` mask beyond the position. Kept for the VTC work on
  the scatter form; not in the zoo.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ._spec import finish


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaDecoderLayer(nn.Module):
    """Decode-mode Llama layer. forward(x, k_cache, v_cache[, position]) → (out, k_cache', v_cache')."""

    def __init__(
        self,
        dim: int = 64,
        n_heads: int = 4,
        n_kv_heads: int = 2,
        head_dim: int = 16,
        ffn_dim: int = 172,
        max_ctx: int = 64,
        position: int = 7,
        fused_qkv: bool = True,
        position_input: bool = False,
        rope_base: float = 10000.0,
        eps: float = 1e-5,
    ):
        super().__init__()
        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads ({n_heads}) must be a multiple of n_kv_heads ({n_kv_heads})")
        if not 0 <= position < max_ctx:
            raise ValueError(f"position {position} outside the cache (max_ctx {max_ctx})")
        self.dim, self.n_heads, self.n_kv_heads, self.head_dim = dim, n_heads, n_kv_heads, head_dim
        self.max_ctx, self.position, self.position_input = max_ctx, position, position_input
        self.fused_qkv = fused_qkv
        q_out, kv_out = n_heads * head_dim, n_kv_heads * head_dim
        if fused_qkv:
            self.qkv_proj = nn.Linear(dim, q_out + 2 * kv_out, bias=False)
        else:
            self.q_proj = nn.Linear(dim, q_out, bias=False)
            self.k_proj = nn.Linear(dim, kv_out, bias=False)
            self.v_proj = nn.Linear(dim, kv_out, bias=False)
        self.o_proj = nn.Linear(q_out, dim, bias=False)
        self.gate_proj = nn.Linear(dim, ffn_dim, bias=False)
        self.up_proj = nn.Linear(dim, ffn_dim, bias=False)
        self.down_proj = nn.Linear(ffn_dim, dim, bias=False)
        self.input_layernorm = RMSNorm(dim, eps)
        self.post_attention_layernorm = RMSNorm(dim, eps)
        inv_freq = 1.0 / (rope_base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        # persistent: the FX importer's import_frozen_program fails on non-persistent buffers
        # ("Could not find state mapping for buffer").
        self.register_buffer("inv_freq", inv_freq)

    def _qkv(self, x: torch.Tensor):
        if self.fused_qkv:
            q_out, kv_out = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
            return self.qkv_proj(x).split([q_out, kv_out, kv_out], dim=-1)
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)

    def _rope_cos_sin(self, position):
        # position: python int (baked) or a float tensor of shape [1]
        freqs = position * self.inv_freq  # [head_dim/2]
        emb = torch.cat((freqs, freqs), dim=-1)  # [head_dim]
        return emb.cos(), emb.sin()

    def forward(self, x, k_cache, v_cache, position=None):
        b, s, _ = x.shape  # s == 1 in decode
        hd, h, kvh = self.head_dim, self.n_heads, self.n_kv_heads
        residual = x
        xn = self.input_layernorm(x)
        q, k, v = self._qkv(xn)
        q = q.view(b, s, h, hd).transpose(1, 2)  # [b, h, s, hd]
        k = k.view(b, s, kvh, hd).transpose(1, 2)  # [b, kvh, s, hd]
        v = v.view(b, s, kvh, hd).transpose(1, 2)

        if self.position_input:
            cos, sin = self._rope_cos_sin(position.to(torch.float32))
        else:
            cos, sin = self._rope_cos_sin(float(self.position))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin

        if self.position_input:
            k_cache = k_cache.index_copy(2, position, k)
            v_cache = v_cache.index_copy(2, position, v)
            keys, values = k_cache, v_cache
            valid = torch.arange(self.max_ctx, device=x.device) <= position  # [max_ctx]
            mask = torch.zeros(self.max_ctx, dtype=x.dtype).masked_fill(~valid, float("-inf"))
        else:
            p = self.position
            k_cache = k_cache.clone()
            v_cache = v_cache.clone()
            k_cache[:, :, p : p + s] = k
            v_cache[:, :, p : p + s] = v
            keys, values = k_cache[:, :, : p + s], v_cache[:, :, : p + s]
            mask = None

        rep = h // kvh
        t = keys.shape[2]
        keys = keys[:, :, None].expand(b, kvh, rep, t, hd).reshape(b, h, t, hd)
        values = values[:, :, None].expand(b, kvh, rep, t, hd).reshape(b, h, t, hd)

        scores = torch.matmul(q, keys.transpose(2, 3)) * (1.0 / math.sqrt(hd))  # [b, h, s, t]
        if mask is not None:
            scores = scores + mask
        probs = torch.softmax(scores, dim=-1)
        attn = torch.matmul(probs, values)  # [b, h, s, hd]
        attn = attn.transpose(1, 2).reshape(b, s, h * hd)
        h1 = residual + self.o_proj(attn)

        n = self.post_attention_layernorm(h1)
        out = h1 + self.down_proj(F.silu(self.gate_proj(n)) * self.up_proj(n))
        return out, k_cache, v_cache


def build_llama_decoder_layer(
    batch: int = 1,
    seed: int = 0,
    *,
    dim: int = 64,
    n_heads: int = 4,
    n_kv_heads: int = 2,
    head_dim: int = 16,
    ffn_dim: int = 172,
    max_ctx: int = 64,
    position: int = 7,
    fused_qkv: bool = True,
    position_input: bool = False,
    rope_base: float = 10000.0,
):
    """Inputs: hidden [batch, 1, dim], k_cache and v_cache [batch, n_kv_heads, max_ctx, head_dim]
    (filled with random values up to `position`, zeros after), plus position int64 [1] when
    `position_input`. Linear weights use nn.Linear's default init; RMSNorm scales are random.
    `rope_base`: the rotary base (Llama 2: 10000, Llama 3: 500000)."""
    torch.manual_seed(seed)
    model = LlamaDecoderLayer(
        dim, n_heads, n_kv_heads, head_dim, ffn_dim, max_ctx, position, fused_qkv, position_input,
        rope_base
    )
    with torch.no_grad():
        model.input_layernorm.weight.uniform_(0.5, 1.5)
        model.post_attention_layernorm.weight.uniform_(0.5, 1.5)
    x = torch.randn(batch, 1, dim)
    cache_shape = (batch, n_kv_heads, max_ctx, head_dim)
    k_cache = torch.zeros(cache_shape)
    v_cache = torch.zeros(cache_shape)
    k_cache[:, :, :position] = torch.randn(batch, n_kv_heads, position, head_dim)
    v_cache[:, :, :position] = torch.randn(batch, n_kv_heads, position, head_dim)
    inputs = (x, k_cache, v_cache)
    if position_input:
        inputs = inputs + (torch.tensor([position], dtype=torch.int64),)
    return finish(model, inputs)
