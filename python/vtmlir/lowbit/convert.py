"""In-register conversion of an n-bit code (held in an i32) to f32 (Tilus §6.2 casting), as arith ops.

Shared by `subbyte-lower` (inside the fused matmul body) and the GPU kernel:

- `iN`: sign extension by a shift pair, `(c << (32 - N)) >>s (32 - N)`, then `sitofp`;
- `uN`: `uitofp`;
- float `eXmY` (bias B): bit-field extract and exponent/mantissa rebuild into the f32 bit pattern —
  sign `c >> (N-1)`, exponent e = (c >> Y) & (2^X - 1), mantissa m = c & (2^Y - 1);
  normal: `((e + 127 - B) << 23) | (m << (23 - Y))`; subnormal (e = 0): m · 2^(1-B-Y) as `uitofp(m)`
  with its exponent field lowered by B + Y - 1 (exact); specials: the NaN code of "nan" types, inf/NaN for an all-ones exponent in "ieee" types;
  finally the sign bit is OR-ed in and the word bitcast to f32. Every low-bit value is exact in f32,
  so this equals `LowBitType.table` bit for bit (tested for every code of every type);
- an arbitrary table (a recognised lookup that is no `LowBitType`): `tensor.extract` from it.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, tensor

from ..dialects.lowbit_types import LowBitType


def const_i32(value: int, like: ir.Type | None = None) -> ir.Value:
    """An i32 constant, or a splat of it when `like` is a vector type (vector<Nxi32>)."""
    i32 = ir.IntegerType.get_signless(32)
    if value >= 1 << 31:
        value -= 1 << 32
    attr = ir.IntegerAttr.get(i32, value)
    if like is not None and isinstance(like.maybe_downcast(), ir.VectorType):
        return arith.ConstantOp(like, ir.DenseElementsAttr.get_splat(like, attr)).result
    return arith.ConstantOp(i32, attr).result


def emit_unpack(lo: ir.Value, hi: ir.Value | None, shift: ir.Value, bits: int) -> ir.Value:
    """Tilus Fig. 7(b) on one code: i32 word = zext(lo) | zext(hi) << 8, >>u shift, & (2^bits - 1)."""
    i32 = ir.IntegerType.get_signless(32)
    word = arith.extui(i32, lo)
    if hi is not None:
        word = arith.ori(word, arith.shli(arith.extui(i32, hi), const_i32(8)))
    if bits == 8:
        return word
    return arith.andi(arith.shrui(word, shift), const_i32((1 << bits) - 1))


def emit_code_to_f32(code: ir.Value, dtype: LowBitType | None, table: ir.Value | None = None) -> ir.Value:
    """f32 value of the i32 `code` of `dtype` (or `table[code]` when `dtype` is None). `code` may also
    be a vector<Nxi32> (CPU vector loops, cpu_matmul.py): then every op is lane-wise, f32 -> vector<Nxf32>."""
    like = code.type
    f32, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)
    if isinstance(like.maybe_downcast(), ir.VectorType):
        shape = ir.VectorType(like).shape
        f32, i32 = ir.VectorType.get(shape, f32), like
    if dtype is None:
        index = arith.index_cast(ir.IndexType.get(), code)
        return tensor.extract(table, [index])
    n = dtype.bits
    if dtype.kind == "int":
        s = const_i32(32 - n, like)
        return arith.sitofp(f32, arith.shrsi(arith.shli(code, s), s))
    if dtype.kind == "uint":
        return arith.uitofp(f32, code)
    x, y, bias = dtype.exponent, dtype.mantissa, dtype.bias
    sign = arith.shrui(code, const_i32(n - 1, like))
    mag = arith.andi(code, const_i32((1 << (n - 1)) - 1, like))
    e = arith.shrui(mag, const_i32(y, like))
    m = arith.andi(mag, const_i32((1 << y) - 1, like))
    normal = arith.ori(arith.shli(arith.addi(e, const_i32(127 - bias, like)), const_i32(23, like)),
                       arith.shli(m, const_i32(23 - y, like)))
    # m · 2^(1-B-Y): convert m exactly, then lower the f32 exponent field by B + Y - 1 (exact, and
    # no float literal: the MLIR-side LLVM prints such constants in a hex form llvmlite cannot parse)
    m_bits = arith.bitcast(i32, arith.uitofp(f32, m))
    sub = arith.select(arith.cmpi(arith.CmpIPredicate.eq, m, const_i32(0, like)), const_i32(0, like),
                       arith.subi(m_bits, const_i32((bias + y - 1) << 23, like)))
    is_sub = arith.cmpi(arith.CmpIPredicate.eq, e, const_i32(0, like))
    word = arith.select(is_sub, sub, normal)
    if dtype.specials == "nan":
        is_nan = arith.cmpi(arith.CmpIPredicate.eq, mag, const_i32((1 << (n - 1)) - 1, like))
        word = arith.select(is_nan, const_i32(0x7FC00000, like), word)
    elif dtype.specials == "ieee":
        top = arith.cmpi(arith.CmpIPredicate.eq, e, const_i32((1 << x) - 1, like))
        inf_or_nan = arith.select(arith.cmpi(arith.CmpIPredicate.eq, m, const_i32(0, like)),
                                  const_i32(0x7F800000, like), const_i32(0x7FC00000, like))
        word = arith.select(top, inf_or_nan, word)
    word = arith.ori(word, arith.shli(sign, const_i32(31, like)))
    return arith.bitcast(f32, word)
