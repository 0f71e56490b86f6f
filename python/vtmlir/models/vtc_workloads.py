"""The five workloads of VTC's evaluation (VTC §7.1, Table 1) in plain PyTorch, at CPU-feasible sizes.

VTC evaluates "five real-world DNNs from various domains": Llama 3 and Gemma 2 decoder layers in
decode (query length 1, context 4096), an EfficientViT attention block, a YOLOv11 C3K2 block and a
ShuffleNet unit, at batch 1 and 16. These are the same structures, written after the official
implementations (Hugging Face `LlamaDecoderLayer` / `Gemma2DecoderLayer`, ultralytics `C3k2`,
torchvision `shufflenetv2.InvertedResidual`, mit-han-lab `efficientvit` `LiteMLA` + `MBConv`), with
random weights, fp32, and widths chosen so a batch-16 call runs in about a second on vtmlir's naive
CPU loops. Every data-movement op the paper's Figs. 2, 11 and 12 show is kept: the fused QKV split,
the KV-cache update (insert into the cache) and the valid-prefix slice, GQA's `repeat_kv`
(expand + reshape), transposes between heads and sequence, the C3K2 `chunk` and `cat`, the
ShuffleNet channel split, concat and shuffle (reshape / transpose / reshape), the EfficientViT
multi-scale concat, q/k/v slices, padding and reshapes.

Registered in `vtmlir.models.VTC_ZOO` (not `ZOO`: the per-model ZOO tests would run them at
benchmark size). `SMALL_SIZES[name]` are keyword arguments for the builder that keep the structure
and make a compile + run take well under a second (test/python/test_vtc_models.py).

All builders: `build_x(batch=1, seed=0, **sizes) -> (model, inputs)`, eval mode, deterministic.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._spec import finish, randomize_batchnorm
from .llama import RMSNorm, build_llama_decoder_layer, rotate_half

# -- Llama 3 ------------------------------------------------------------------------------------------


def build_llama3_decode(batch: int = 1, seed: int = 0, *, dim: int = 256, n_heads: int = 8,
                        n_kv_heads: int = 2, head_dim: int = 32, ffn_dim: int = 688,
                        max_ctx: int = 4096, position: int | None = None):
    """Llama-3-style decoder layer in decode (VTC Fig. 2, Table 1: query length 1, context 4096):
    fused QKV projection, GQA (4 query heads per KV head, Llama 3 8B's ratio), rotary with Llama 3's
    base 500000, KV-cache update at `position` (default the last slot, so attention covers the
    whole context) and `repeat_kv` before attention. Inputs x [B,1,dim], k/v caches
    [B, n_kv_heads, max_ctx, head_dim]; outputs (x', k_cache', v_cache')."""
    position = max_ctx - 1 if position is None else position
    return build_llama_decoder_layer(batch, seed, dim=dim, n_heads=n_heads, n_kv_heads=n_kv_heads,
                                     head_dim=head_dim, ffn_dim=ffn_dim, max_ctx=max_ctx,
                                     position=position, fused_qkv=True, rope_base=500000.0)


# -- Gemma 2 ------------------------------------------------------------------------------------------


class GemmaRMSNorm(RMSNorm):
    """Gemma's RMSNorm scales by (1 + w) (weights stored zero-centred)."""

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * (1.0 + self.weight)


class Gemma2DecoderLayer(nn.Module):
    """One Gemma 2 decoder layer in decode (Hugging Face `Gemma2DecoderLayer`): pre- and post-norms
    around attention and MLP, separate q/k/v projections, GQA, rotary, attention logit soft-capping
    `cap·tanh(s/cap)`, query scaling by `query_pre_attn_scalar^-1/2`, GeGLU MLP (tanh GELU).
    `sliding_window`: a local layer attends to the last `sliding_window` cache slots only
    (a slice of the cache), a global layer (None) to the whole valid prefix."""

    def __init__(self, dim, n_heads, n_kv_heads, head_dim, ffn_dim, max_ctx, position,
                 sliding_window=None, softcap=50.0, query_pre_attn_scalar=None, eps=1e-6):
        super().__init__()
        self.dim, self.n_heads, self.n_kv_heads, self.head_dim = dim, n_heads, n_kv_heads, head_dim
        self.max_ctx, self.position, self.window, self.softcap = max_ctx, position, sliding_window, softcap
        self.scaling = (query_pre_attn_scalar or head_dim) ** -0.5
        self.q_proj = nn.Linear(dim, n_heads * head_dim, bias=False)
        self.k_proj = nn.Linear(dim, n_kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(dim, n_kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(n_heads * head_dim, dim, bias=False)
        self.gate_proj = nn.Linear(dim, ffn_dim, bias=False)
        self.up_proj = nn.Linear(dim, ffn_dim, bias=False)
        self.down_proj = nn.Linear(ffn_dim, dim, bias=False)
        self.input_layernorm = GemmaRMSNorm(dim, eps)
        self.post_attention_layernorm = GemmaRMSNorm(dim, eps)
        self.pre_feedforward_layernorm = GemmaRMSNorm(dim, eps)
        self.post_feedforward_layernorm = GemmaRMSNorm(dim, eps)
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, x, k_cache, v_cache):
        b, s, _ = x.shape
        hd, h, kvh, p = self.head_dim, self.n_heads, self.n_kv_heads, self.position
        residual = x
        xn = self.input_layernorm(x)
        q = self.q_proj(xn).view(b, s, h, hd).transpose(1, 2)
        k = self.k_proj(xn).view(b, s, kvh, hd).transpose(1, 2)
        v = self.v_proj(xn).view(b, s, kvh, hd).transpose(1, 2)
        freqs = float(p) * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k_cache = k_cache.clone()
        v_cache = v_cache.clone()
        k_cache[:, :, p:p + s] = k
        v_cache[:, :, p:p + s] = v
        start = 0 if self.window is None else max(0, p + s - self.window)
        keys, values = k_cache[:, :, start:p + s], v_cache[:, :, start:p + s]
        rep, t = h // kvh, keys.shape[2]
        keys = keys[:, :, None].expand(b, kvh, rep, t, hd).reshape(b, h, t, hd)
        values = values[:, :, None].expand(b, kvh, rep, t, hd).reshape(b, h, t, hd)
        scores = torch.matmul(q, keys.transpose(2, 3)) * self.scaling
        scores = torch.tanh(scores / self.softcap) * self.softcap
        probs = torch.softmax(scores, dim=-1)
        attn = torch.matmul(probs, values).transpose(1, 2).reshape(b, s, h * hd)
        h1 = residual + self.post_attention_layernorm(self.o_proj(attn))
        n = self.pre_feedforward_layernorm(h1)
        mlp = self.down_proj(F.gelu(self.gate_proj(n), approximate="tanh") * self.up_proj(n))
        return h1 + self.post_feedforward_layernorm(mlp), k_cache, v_cache


class Gemma2LayerPair(nn.Module):
    """Gemma 2 alternates local (sliding-window) and global attention layers: a local layer followed
    by a global one, each with its own KV cache. forward(x, k0, v0, k1, v1) → (x', k0', v0', k1', v1')."""

    def __init__(self, **kw):
        super().__init__()
        window = kw.pop("sliding_window")
        self.local_layer = Gemma2DecoderLayer(**kw, sliding_window=window)
        self.global_layer = Gemma2DecoderLayer(**kw, sliding_window=None)

    def forward(self, x, k0, v0, k1, v1):
        x, k0, v0 = self.local_layer(x, k0, v0)
        x, k1, v1 = self.global_layer(x, k1, v1)
        return x, k0, v0, k1, v1


def build_gemma2_decode(batch: int = 1, seed: int = 0, *, dim: int = 256, n_heads: int = 8,
                        n_kv_heads: int = 4, head_dim: int = 32, ffn_dim: int = 512,
                        max_ctx: int = 4096, sliding_window: int = 1024, position: int | None = None):
    """Gemma-2-style local + global layer pair in decode (Table 1: query length 1, context 4096;
    Gemma 2 9B's GQA ratio 2). Inputs x [B,1,dim] and four caches [B, n_kv_heads, max_ctx, head_dim]
    filled up to `position` (default the last slot)."""
    torch.manual_seed(seed)
    position = max_ctx - 1 if position is None else position
    model = Gemma2LayerPair(dim=dim, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim,
                            ffn_dim=ffn_dim, max_ctx=max_ctx, position=position,
                            sliding_window=sliding_window)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, GemmaRMSNorm):
                m.weight.uniform_(-0.5, 0.5)
    x = torch.randn(batch, 1, dim)
    caches = []
    for _ in range(4):
        c = torch.zeros(batch, n_kv_heads, max_ctx, head_dim)
        c[:, :, :position] = torch.randn(batch, n_kv_heads, position, head_dim)
        caches.append(c)
    return finish(model, (x, *caches))


# -- YOLOv11 C3K2 -------------------------------------------------------------------------------------


class ConvBnSiLU(nn.Module):
    """ultralytics `Conv`: conv (no bias) + BN + SiLU."""

    def __init__(self, cin, cout, k=1, groups=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, 1, k // 2, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class YoloBottleneck(nn.Module):
    """ultralytics `Bottleneck` (3x3, 3x3, shortcut when shapes match)."""

    def __init__(self, cin, cout, shortcut=True, e=0.5):
        super().__init__()
        hidden = int(cout * e)
        self.cv1 = ConvBnSiLU(cin, hidden, 3)
        self.cv2 = ConvBnSiLU(hidden, cout, 3)
        self.add = shortcut and cin == cout

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3k(nn.Module):
    """ultralytics `C3k`: C3 with k×k bottlenecks: cv3(cat(m(cv1(x)), cv2(x)))."""

    def __init__(self, cin, cout, n=2, shortcut=True, e=0.5):
        super().__init__()
        hidden = int(cout * e)
        self.cv1 = ConvBnSiLU(cin, hidden, 1)
        self.cv2 = ConvBnSiLU(cin, hidden, 1)
        self.cv3 = ConvBnSiLU(2 * hidden, cout, 1)
        self.m = nn.Sequential(*(YoloBottleneck(hidden, hidden, shortcut, e=1.0) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class C3k2(nn.Module):
    """ultralytics `C3k2` (a `C2f`): y = chunk(cv1(x), 2); y += [m_i(y[-1])]; cv2(cat(y)) —
    VTC Fig. 11's Split and Concat."""

    def __init__(self, cin, cout, n=1, c3k=False, e=0.5, shortcut=True):
        super().__init__()
        self.c = int(cout * e)
        self.cv1 = ConvBnSiLU(cin, 2 * self.c, 1)
        self.cv2 = ConvBnSiLU((2 + n) * self.c, cout, 1)
        self.m = nn.ModuleList(C3k(self.c, self.c, 2, shortcut) if c3k else YoloBottleneck(self.c, self.c, shortcut)
                               for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


def build_yolo_c3k2(batch: int = 1, seed: int = 0, *, channels: int = 32, size: int = 64, n: int = 1,
                    c3k: bool = False):
    """YOLOv11n C3K2 block (Fig. 11) `C3k2(channels, channels, n, c3k)`; input [B, channels, size, size]
    (the paper: resolution 640; here a 64×64 feature map)."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = C3k2(channels, channels, n=n, c3k=c3k)
    randomize_batchnorm(model, g)
    return finish(model, (torch.randn(batch, channels, size, size, generator=g),))


# -- ShuffleNetV2 -------------------------------------------------------------------------------------


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """torchvision's channel shuffle: reshape → transpose → reshape."""
    b, c, h, w = x.shape
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, c, h, w)


class ShuffleUnit(nn.Module):
    """torchvision `shufflenetv2.InvertedResidual`, stride 1: channel split, branch on one half
    (1x1-BN-ReLU, depthwise 3x3-BN, 1x1-BN-ReLU), concat, channel shuffle (2 groups)."""

    def __init__(self, channels):
        super().__init__()
        c = channels // 2
        self.branch2 = nn.Sequential(
            nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
            nn.Conv2d(c, c, 3, 1, 1, groups=c, bias=False), nn.BatchNorm2d(c),
            nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU())

    def forward(self, x):
        x1, x2 = x.chunk(2, dim=1)
        return channel_shuffle(torch.cat((x1, self.branch2(x2)), dim=1), 2)


class ShuffleStage(nn.Module):
    """`units` stride-1 ShuffleNetV2 units in sequence (a shuffle feeds the next unit's split)."""

    def __init__(self, channels, units):
        super().__init__()
        self.units = nn.Sequential(*(ShuffleUnit(channels) for _ in range(units)))

    def forward(self, x):
        return self.units(x)


def build_shufflenet_unit(batch: int = 1, seed: int = 0, *, channels: int = 116, size: int = 28,
                          units: int = 2):
    """ShuffleNetV2 1.0× stage-2 units (116 channels at 28×28, what a 224 input gives there);
    input [B, channels, size, size]."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = ShuffleStage(channels, units)
    randomize_batchnorm(model, g)
    return finish(model, (torch.randn(batch, channels, size, size, generator=g),))


# -- EfficientViT -------------------------------------------------------------------------------------


class LiteMLA(nn.Module):
    """mit-han-lab EfficientViT `LiteMLA`: multi-scale ReLU linear attention. qkv = 1x1 conv; each
    scale aggregates qkv with a depthwise k×k conv and a grouped 1x1 conv; the scales are
    concatenated, reshaped to heads, q/k/v sliced, v padded with a row of ones (the normaliser),
    out = (v·kᵀ)·q divided by its last row, reshaped back and projected (1x1 conv + BN)."""

    def __init__(self, channels, dim=16, scales=(5,), eps=1e-15):
        super().__init__()
        heads = channels // dim
        total = heads * dim
        self.dim, self.eps = dim, eps
        self.qkv = nn.Conv2d(channels, 3 * total, 1, bias=False)
        self.aggreg = nn.ModuleList(
            nn.Sequential(nn.Conv2d(3 * total, 3 * total, s, padding=s // 2, groups=3 * total, bias=False),
                          nn.Conv2d(3 * total, 3 * total, 1, groups=3 * heads, bias=False))
            for s in scales)
        self.proj = nn.Sequential(nn.Conv2d(total * (1 + len(scales)), channels, 1, bias=False),
                                  nn.BatchNorm2d(channels))

    def forward(self, x):
        qkv = self.qkv(x)
        qkv = torch.cat([qkv] + [op(qkv) for op in self.aggreg], dim=1)
        b, _, h, w = qkv.shape
        qkv = torch.reshape(qkv, (b, -1, 3 * self.dim, h * w))
        q, k, v = qkv[:, :, :self.dim], qkv[:, :, self.dim:2 * self.dim], qkv[:, :, 2 * self.dim:]
        q, k = F.relu(q), F.relu(k)
        v = F.pad(v, (0, 0, 0, 1), mode="constant", value=1.0)
        out = torch.matmul(torch.matmul(v, k.transpose(-1, -2)), q)
        out = out[:, :, :-1] / (out[:, :, -1:] + self.eps)
        return self.proj(torch.reshape(out, (b, -1, h, w)))


class MBConv(nn.Module):
    """EfficientViT `MBConv`: 1x1 expand (BN, Hardswish), depthwise 3x3 (BN, Hardswish), 1x1 (BN)."""

    def __init__(self, channels, expand=4):
        super().__init__()
        mid = channels * expand
        self.body = nn.Sequential(
            nn.Conv2d(channels, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.Hardswish(),
            nn.Conv2d(mid, mid, 3, 1, 1, groups=mid, bias=False), nn.BatchNorm2d(mid), nn.Hardswish(),
            nn.Conv2d(mid, channels, 1, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x):
        return self.body(x)


class EfficientViTBlock(nn.Module):
    """EfficientViT `EfficientViTBlock`: x + LiteMLA(x), then x + MBConv(x) (VTC Fig. 12)."""

    def __init__(self, channels, dim=16, expand=4):
        super().__init__()
        self.context = LiteMLA(channels, dim)
        self.local = MBConv(channels, expand)

    def forward(self, x):
        x = x + self.context(x)
        return x + self.local(x)


def build_efficientvit_block(batch: int = 1, seed: int = 0, *, channels: int = 64, size: int = 32,
                             dim: int = 16, expand: int = 4):
    """EfficientViT-B style attention block (`channels // dim` heads of width `dim`, one 5×5
    aggregation scale); input [B, channels, size, size] (the paper: resolution 4096 at the first
    stage; here a 32×32 feature map)."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = EfficientViTBlock(channels, dim, expand)
    randomize_batchnorm(model, g)
    return finish(model, (torch.randn(batch, channels, size, size, generator=g),))


#: Builder keyword arguments per VTC_ZOO name that keep the structure at test size.
SMALL_SIZES: dict[str, dict] = {
    "vtc_llama3_decode": dict(dim=32, n_heads=4, n_kv_heads=2, head_dim=8, ffn_dim=48, max_ctx=16),
    "vtc_gemma2_decode": dict(dim=32, n_heads=4, n_kv_heads=2, head_dim=8, ffn_dim=48, max_ctx=16,
                              sliding_window=8),
    "vtc_yolo_c3k2": dict(channels=8, size=8),
    "vtc_shufflenet_unit": dict(channels=8, size=6, units=2),
    "vtc_efficientvit_block": dict(channels=16, size=6, dim=8, expand=2),
}

__all__ = [
    "C3k2", "EfficientViTBlock", "Gemma2DecoderLayer", "Gemma2LayerPair", "LiteMLA", "SMALL_SIZES",
    "ShuffleStage", "ShuffleUnit", "build_efficientvit_block", "build_gemma2_decode",
    "build_llama3_decode", "build_shufflenet_unit", "build_yolo_c3k2", "channel_shuffle",
]
