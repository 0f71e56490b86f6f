"""The Tilus mma rule and the Fig. 8 packing of a quantised weight's codes: pure functions of the
weight, shared by the standalone kernels (`gpu_matmul.QuantizedMatmulKernel`) and the CUDA backend's
schedule of quantised contractions (`subbyte-cuda-kernels`), which must not import the
backend's runtime (gpu_matmul does: it launches kernels)."""

from __future__ import annotations

import numpy as np
from torch_mlir import ir

from ..dialects.lowbit_storage import pack_bits
from ..dialects.lowbit_types import LowBitType
from .evaluate import affine_eval
from .gpu_kernels import MMA_TILE_K, MMA_TILE_M, MMA_TILE_N
from .quantize import QuantizedWeight
from .subbyte_pack import position_map


def mma_operand_exact(dtype: LowBitType) -> bool:
    """Whether every value of `dtype` minus any zero point is exactly an f16 (the mma B operand).

    Ints and uints: integers of at most 9 bits after the zero point, always exact. Floats: every finite
    value of the table must survive f32 -> f16 -> f32; the splits with 5+ exponent bits and a top
    exponent holding numbers (e5m0, e5m1, e6m0, e6m1, e7m0: max 65536 ... 2^64, beyond f16's 65504)
    and the wide-exponent splits whose small values fall below f16's 2^-24 (e6m1) fail.
    """
    if dtype.kind != "float":
        return True
    values = dtype.table[np.isfinite(dtype.table)]
    with np.errstate(over="ignore"):
        return bool(np.array_equal(values.astype(np.float16).astype(np.float32), values))


def mma_refusal(qweight: QuantizedWeight, m: int) -> str | None:
    """Why `mma.sync` cannot compute this weight exactly, or None when it can (the mma rule):

    1. every code value (minus the zero point) is exactly an f16 (`mma_operand_exact`), so the f16 B
       operand carries the exact value and the f16 x f16 products are exact in the f32 accumulator;
    2. the group size is a multiple of 16, so each m16n8k16 step lies in one scale group and the group
       scale multiplies the f32 partial sum of the group (it is never rounded into the f16 operand);
    3. the shape tiles into 16 x 8 x 16 mma tiles (M % 16 = N % 8 = K % 16 = 0).
    """
    n, k = qweight.codes.shape
    t = qweight.dtype
    if not mma_operand_exact(t):
        return f"the values of {t.name} are not all exact in f16 (max {t.max:g})"
    if qweight.group_size % MMA_TILE_K:
        return f"group size {qweight.group_size} is not a multiple of 16 (the mma k step)"
    if m % MMA_TILE_M or n % MMA_TILE_N or k % MMA_TILE_K:
        return f"the shape M={m} N={n} K={k} does not tile into 16 x 8 x 16 (needs M % 16, N % 8, K % 16 == 0)"
    return None


def largest_divisor(value: int, limit: int) -> int:
    """The largest power of two up to `limit` dividing `value`."""
    return next(d for d in (128, 64, 32, 16, 8, 4, 2, 1) if d <= limit and value % d == 0)


def pack_for_layout(qweight: QuantizedWeight, tile_layout: str) -> np.ndarray:
    """The weight codes (B[k, n] = W[n, k]) in the Fig. 8 order of `tile_layout`, packed compactly,
    plus 8 bytes of slack for the last thread's 8-byte vector load."""
    codes = qweight.codes.T  # [K, N]
    k, n = codes.shape
    with ir.Context():
        pos_map = position_map(k, n, tile_layout)
        pos = np.broadcast_to(affine_eval(pos_map.results[0], list(np.indices((k, n), dtype=np.int64))), (k, n))
    stream = np.zeros(k * n, dtype=np.uint8)
    stream[pos.reshape(-1)] = codes.reshape(-1)
    return np.concatenate([pack_bits(stream, qweight.dtype.bits), np.zeros(8, np.uint8)])
