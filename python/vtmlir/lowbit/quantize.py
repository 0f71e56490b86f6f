"""Weight-only quantisation of `nn.Linear` to 1–8 bit types with per-group scales (Tilus §8.3).

Tilus evaluates "sub-channel quantization" with group size 128 along the reduction dimension K
(§8.3) for every int/uint/float type of 1–8 bits. `quantize(model, dtype, group_size)` produces the
same kind of model for vtmlir: each `nn.Linear` becomes a `QuantizedLinear` that holds

- `packed`: the codes of W[N, K] (row-major), stored compactly with no bit gaps (storage.py, §6.1),
  padded to whole groups of 8 codes (8 codes of n bits = n bytes);
- `scales`: float32 [N, K / group_size];
- `zeros`: uint8 [N, K / group_size], integer zero points, for unsigned types only;
- `table`: float32 [2^n], the decode table, for float types only.

Per group g of row r (w = the group's weights, amax = max |w|):
- signed int iN:  scale = amax / (2^(n-1) - 1), code = enc(w / scale),    W' = value(code) * scale
  (symmetric; for i2 the code -2 is never produced).
- unsigned uN:   scale = (max w - min w) / (2^n - 1), zero = clamp(rint(-min w / scale), 0, 2^n-1),
                 code = enc(w / scale + zero),     W' = (code - zero) * scale  (asymmetric).
- float eXmY:    scale = amax / max(type),         code = enc(w / scale),    W' = value(code) * scale.
A group of zeros gets scale 1. `enc` is `LowBitType.encode` (round to nearest even, saturating).

`QuantizedLinear.forward` dequantises with plain torch ops — the §6.1 byte loads (index, OR,
SHIFT, AND), sign extension or the decode table, the scale multiply — then `F.linear`. So the model
imports with `vtmlir.import_torch` and compiles with `vtmlir.compile` today, before `subbyte-lower`
exists; that pass is what will turn this dequantise-then-matmul into packed loads in the kernel.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..dialects.lowbit_storage import pack_bits, unpack_bits
from ..dialects.lowbit_types import LowBitType, parse_dtype


@dataclass
class QuantizedWeight:
    """The result of quantising one weight matrix: codes [N, K] (uint8), scales, zero points."""

    dtype: LowBitType
    group_size: int
    codes: np.ndarray
    scales: np.ndarray
    zeros: np.ndarray | None

    def dequantize(self) -> np.ndarray:
        """W' [N, K] float32, computed with numpy from the codes (the reference for the torch path)."""
        n, k = self.codes.shape
        values = self.dtype.decode(self.codes).reshape(n, k // self.group_size, self.group_size)
        if self.zeros is not None:
            values = values - self.zeros[..., None].astype(np.float32)
        return (values * self.scales[..., None]).reshape(n, k).astype(np.float32)


def quantize_weight(weight, dtype, group_size: int | None = 128) -> QuantizedWeight:
    """Quantise a [N, K] weight with one scale (and zero point, unsigned types) per `group_size`
    consecutive elements of a row. `group_size=None` (or -1) means one group per row."""
    t = parse_dtype(dtype)
    w = weight.detach().to(torch.float32).cpu().numpy() if isinstance(weight, torch.Tensor) else np.asarray(weight, np.float32)
    if w.ndim != 2:
        raise ValueError(f"expected a [N, K] weight, got shape {w.shape}")
    n, k = w.shape
    g = _group_size(k, group_size)
    grouped = w.reshape(n, k // g, g)
    zeros = None
    if t.kind == "uint":
        lo, hi = grouped.min(axis=2), grouped.max(axis=2)
        scales = ((hi - lo) / np.float32(t.num_codes - 1)).astype(np.float32)
        scales = np.where(scales > 0, scales, np.float32(1.0))
        zeros = np.clip(np.rint(-lo / scales), 0, t.num_codes - 1).astype(np.uint8)
        scaled = grouped / scales[..., None] + zeros[..., None].astype(np.float32)
    else:
        amax = np.abs(grouped).max(axis=2)
        scales = (amax / np.float32(t.max)).astype(np.float32)
        scales = np.where(scales > 0, scales, np.float32(1.0))
        scaled = grouped / scales[..., None]
    codes = t.encode(scaled.astype(np.float32)).reshape(n, k)
    return QuantizedWeight(t, g, codes, scales.astype(np.float32), zeros)


class QuantizedLinear(nn.Module):
    """`y = x @ W'^T + b` with W' dequantised from compactly packed low-bit codes (module docstring)."""

    def __init__(self, qweight: QuantizedWeight, bias: torch.Tensor | None = None):
        super().__init__()
        t = qweight.dtype
        self.dtype_spec = t
        self.group_size = qweight.group_size
        self.out_features, self.in_features = qweight.codes.shape
        count = qweight.codes.size
        padded = np.zeros((count + 7) // 8 * 8, dtype=np.uint8)  # whole groups of 8 codes = n bytes
        padded[:count] = qweight.codes.reshape(-1)
        self.register_buffer("packed", torch.from_numpy(pack_bits(padded, t.bits)))
        self.register_buffer("scales", torch.from_numpy(qweight.scales.copy()))
        self.register_buffer("zeros", None if qweight.zeros is None else torch.from_numpy(qweight.zeros.copy()))
        self.register_buffer("table", torch.from_numpy(t.table.copy()) if t.is_float else None)
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone(), requires_grad=False)

    @classmethod
    def from_linear(cls, linear: nn.Linear, dtype, group_size: int | None = 128) -> "QuantizedLinear":
        return cls(quantize_weight(linear.weight, dtype, group_size), linear.bias)

    def codes(self) -> torch.Tensor:
        """The codes [N, K] as int32, unpacked with torch ops: Tilus Fig. 7(b) unrolled over the 8
        codes that fill each group of n bytes (byte index and shift are compile-time constants)."""
        n = self.dtype_spec.bits
        data = self.packed.reshape(-1, n).to(torch.int32)
        mask = (1 << n) - 1
        columns = []
        for k in range(8):
            byte, offset = divmod(k * n, 8)
            word = data[:, byte]
            if offset + n > 8:  # the code spans two bytes: OR in the next one
                word = word | (data[:, byte + 1] << 8)
            columns.append((word >> offset) & mask)
        codes = torch.stack(columns, dim=1).reshape(-1)
        return codes[: self.out_features * self.in_features].reshape(self.out_features, self.in_features)

    def dequantized_weight(self) -> torch.Tensor:
        """W' [N, K] float32 with torch ops (what `forward` multiplies by)."""
        t, n = self.dtype_spec, self.dtype_spec.bits
        codes = self.codes()
        if t.kind == "float":
            values = self.table[codes.reshape(-1).to(torch.int64)].reshape(codes.shape)
        elif t.kind == "int":
            values = (codes - ((codes >> (n - 1)) << n)).to(torch.float32)  # two's-complement sign extension
        else:
            values = codes.to(torch.float32)
        groups = self.in_features // self.group_size
        values = values.reshape(self.out_features, groups, self.group_size)
        if self.zeros is not None:
            values = values - self.zeros.to(torch.float32).unsqueeze(-1)
        return (values * self.scales.unsqueeze(-1)).reshape(self.out_features, self.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.dequantized_weight().to(x.dtype)
        return F.linear(x, w, None if self.bias is None else self.bias.to(x.dtype))

    def weight_bytes(self) -> int:
        """Bytes of weight storage: packed codes + scales + zero points (bias and table excluded)."""
        zeros = 0 if self.zeros is None else self.zeros.numel()
        return self.packed.numel() + 4 * self.scales.numel() + zeros

    def quantized_weight(self) -> QuantizedWeight:
        """Back to a `QuantizedWeight` (codes unpacked with numpy, independently of `codes()`)."""
        count = self.out_features * self.in_features
        codes = unpack_bits(self.packed.numpy(), self.dtype_spec.bits, count).reshape(self.out_features, self.in_features)
        zeros = None if self.zeros is None else self.zeros.numpy()
        return QuantizedWeight(self.dtype_spec, self.group_size, codes, self.scales.numpy(), zeros)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"dtype={self.dtype_spec.name}, group_size={self.group_size}, bias={self.bias is not None}")


def quantize(model: nn.Module, dtype="u4", group_size: int | None = 128, *, include=None) -> nn.Module:
    """A copy of `model` with every `nn.Linear` (whose qualified name `include(name)` accepts, if
    given) replaced by a `QuantizedLinear` of `dtype` (a `LowBitType` or a name such as "i4", "u3",
    "e3m2", "f8e4m3"). The model given is left unchanged. Every quantised layer's in_features must be
    a multiple of `group_size` (`None` = one group per output row)."""
    t = parse_dtype(dtype)
    if isinstance(model, nn.Linear):
        return QuantizedLinear.from_linear(model, t, group_size)
    result = copy.deepcopy(model)
    for name, module in list(result.named_modules()):
        for child_name, child in list(module.named_children()):
            qualified = f"{name}.{child_name}" if name else child_name
            if isinstance(child, nn.Linear) and (include is None or include(qualified)):
                setattr(module, child_name, QuantizedLinear.from_linear(child, t, group_size))
    return result


def _group_size(k: int, group_size: int | None) -> int:
    if group_size is None or group_size == -1:
        return k
    if not isinstance(group_size, int) or group_size <= 0:
        raise ValueError(f"group_size must be a positive int, -1 or None, not {group_size!r}")
    if k % group_size:
        raise ValueError(f"in_features {k} is not a multiple of group_size {group_size}; "
                         f"pick a divisor of {k} or group_size=None (one group per row)")
    return group_size
