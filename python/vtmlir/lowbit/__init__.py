"""Arbitrary 1–8 bit element types, compact storage and weight-only quantisation (Tilus, issue 6).

- `LowBitType`, `parse_dtype`: the value sets (types.py; docs/lowbit.md has the tables).
- `pack_bits` / `unpack_bits`: compact storage with no bit gaps (storage.py, Tilus §6.1).
- `quantize(model, dtype=..., group_size=128)`: nn.Linear → `QuantizedLinear` (quantize.py).
- passes `subbyte-pack` (pack.py; recognize.py + evaluate.py find the quantised weights) and
  `subbyte-lower` (lower.py; convert.py emits the in-register casts; cpu_matmul.py the CPU vector
  loops of `cpu-vectorize`), imported by the pass registry.
- `gpu_matmul.QuantizedMatmulKernel`: the f16 × n-bit GPU kernels, mma.sync where the mma rule holds
  and f32 FMA otherwise (MLIR text in gpu_kernels.py; PTX via backend/cuda).
"""

from .evaluate import ConstantEvaluator, EvaluationError
from .quantize import QuantizedLinear, quantize, quantize_weight
from ..dialects.lowbit_storage import pack_bits, packed_nbytes, unpack_bits
from ..dialects.lowbit_types import FLOAT_SPECIALS, NAMED_FLOATS, LowBitType, all_types, parse_dtype

__all__ = [
    "ConstantEvaluator",
    "EvaluationError",
    "FLOAT_SPECIALS",
    "NAMED_FLOATS",
    "LowBitType",
    "QuantizedLinear",
    "all_types",
    "pack_bits",
    "packed_nbytes",
    "parse_dtype",
    "quantize",
    "quantize_weight",
    "unpack_bits",
]
