"""The `lowbit` dialect: the contract between `subbyte-pack` and `subbyte-lower` (Tilus §6, docs/lowbit.md).

- `lowbit.unpack` — the logical sub-byte tensor whose codes are packed in a byte tensor:

      %codes = "lowbit.unpack"(%packed) {dtype = "i3", position = affine_map<(d0, d1) -> (...)>,
                                         tile_layout = ""} : (tensor<7xi8>) -> tensor<8x2xi3>

  element x's code is stream bits ``[position(x) · n, position(x) · n + n)`` of `%packed` (n = the
  result's element bit width, `vtmlir.lowbit.storage`). `dtype` names the value set (a
  `vtmlir.lowbit.LowBitType` name, or ``tableN``: codes looked up in a table); the result's element
  type is the builtin type holding the codes (`iN`, `f8E4M3FN`, `f4E2M1FN`, ...; `iN` where MLIR has
  no builtin for the type). `tile_layout` is the register layout the packing followed ("" for the
  plain order). The verifier checks all of it.
- Discardable attributes on the linalg ops `subbyte-pack` writes, read by `dequantized_type` /
  `is_code_conversion` only: `lowbit.dequantize = "<dtype>"` on the dequantisation generic,
  `lowbit.value` on the op of its body that converts the code to a number, `lowbit.fused` on the
  generic `subbyte-lower` fuses into the matmul.

Why an op plus discardable attributes rather than `!vt.float`-typed tensors: upstream ops (`arith`,
`linalg`'s body) cannot compute on a dynamic type, so the dequantisation body works on the builtin
code type; and `ext` has no hook to verify discardable attributes on other dialects' ops, so those
have one decoder each (docs/design.md §4).

No `from __future__ import annotations` here: `ext` reads the annotations as real objects.
"""

from torch_mlir import ir
from torch_mlir.dialects import ext
from torch_mlir.dialects.ext import Operand, Result

from ._ext_support import fail, missing_attribute, ranked_shape

DEQUANTIZE_ATTR = "lowbit.dequantize"
VALUE_ATTR = "lowbit.value"
FUSED_ATTR = "lowbit.fused"


class LowbitDialect(ext.Dialect, name="lowbit"):
    pass


class UnpackOp(LowbitDialect.Operation, name="unpack", traits=[ext.Pure]):
    """result[x] = the code at stream position position(x) of `packed` (see the module docstring).

    Build with `UnpackOp(packed, dtype, position, tile_layout, result_type)` (attributes as
    `StringAttr`, `AffineMapAttr`, `StringAttr`)."""

    packed: Operand[ir.RankedTensorType]
    dtype: ir.StringAttr
    position: ir.AffineMapAttr
    tile_layout: ir.StringAttr
    result: Result[ir.RankedTensorType]

    @property
    def bits(self) -> int:
        return code_bits(ir.RankedTensorType(self.result.type).element_type)

    @property
    def dtype_name(self) -> str:
        return ir.StringAttr(self.dtype).value

    @property
    def position_map(self) -> ir.AffineMap:
        return ir.AffineMapAttr(self.position).value

    @property
    def tile_layout_text(self) -> str:
        return ir.StringAttr(self.tile_layout).value

    @staticmethod
    def verify_invariants(op) -> bool:
        if missing_attribute(op, "dtype", "position", "tile_layout"):
            return False
        packed, result = ranked_shape(op.packed), ranked_shape(op.result)
        byte = ir.RankedTensorType(op.packed.type).element_type if packed is not None else None
        if packed is None or len(packed) != 1 or packed[0] < 0 or not isinstance(byte, ir.IntegerType) \
                or byte.width != 8 or not byte.is_signless:
            return fail(op, f"packed must be a static 1-d tensor of i8, got {op.packed.type}")
        if result is None or any(d < 0 for d in result):
            return fail(op, f"result must be a statically shaped tensor, got {op.result.type}")
        bits = code_bits(ir.RankedTensorType(op.result.type).element_type)
        if bits is None:
            return fail(op, f"result element type must hold 1-8 bit codes (iN or a builtin float of at "
                            f"most 8 bits), got {ir.RankedTensorType(op.result.type).element_type}")
        name = ir.StringAttr(op.dtype).value
        dtype_bits = _dtype_bits(name)
        if dtype_bits is None:
            return fail(op, f"dtype {name!r} is not a low-bit type name (i3, u4, e2m1, table4, ...)")
        if dtype_bits != bits:
            return fail(op, f"dtype {name!r} has {dtype_bits}-bit codes but the result holds {bits}-bit codes")
        pos = ir.AffineMapAttr(op.position).value
        if pos.n_dims != len(result) or pos.n_symbols != 0 or len(pos.results) != 1:
            return fail(op, f"position must map the {len(result)} result indices to one stream position, "
                            f"got {pos}")
        numel = 1
        for d in result:
            numel *= d
        if packed[0] * 8 < numel * bits:
            return fail(op, f"packed holds {packed[0]} bytes, fewer than {numel} codes of {bits} bits")
        return True


def code_bits(t: ir.Type) -> int | None:
    """Bit width of a code element type (`iN` or a builtin float of 1-8 bits), None otherwise."""
    t = ir.Type(t).maybe_downcast()
    if isinstance(t, (ir.IntegerType, ir.FloatType)) and 1 <= t.width <= 8:
        return t.width
    return None


def _dtype_bits(name: str) -> int | None:
    if name.startswith("table") and name[5:].isdigit():
        return int(name[5:]) if 1 <= int(name[5:]) <= 8 else None
    from vtmlir.lowbit.types import parse_dtype  # the value sets (`!vt.float` reads them too)

    try:
        return parse_dtype(name).bits
    except (ValueError, KeyError):
        return None


def unpack_op(op) -> "UnpackOp | None":
    """`op` as a `lowbit.unpack` (None for any other op)."""
    op = op.operation if hasattr(op, "operation") else op
    return op.opview if op.name == "lowbit.unpack" else None


def dequantized_type(op) -> str | None:
    """The dtype of a dequantisation generic (`lowbit.dequantize`), None for any other op."""
    attrs = op.operation.attributes
    return ir.StringAttr(attrs[DEQUANTIZE_ATTR]).value if DEQUANTIZE_ATTR in attrs else None


def is_code_conversion(op) -> bool:
    """Whether `op` is the conversion of a code to a number in a dequantisation body (`lowbit.value`)."""
    return VALUE_ATTR in op.operation.attributes
