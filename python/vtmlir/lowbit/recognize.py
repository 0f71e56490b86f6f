"""Recognising a quantised weight: which low-bit codes, conversion and per-group constants a matmul
operand computed from constants holds (the analysis half of `subbyte-pack`, Tilus §6).

A matmul operand B [K, N] is a *quantised weight* when it is computed only from constants and its
computation splits into three parts (what `QuantizedLinear` imports to, docs/lowbit.md):

1. the **codes**: an integer tensor whose values, masked to n bits, are exactly the codes stored in
   an n-bit packed `i8` constant (n = 8 · bytes / codes, padded to groups of 8; the multiset of
   codes is checked against `unpack_bits` of that constant);
2. the **conversion** `X`: one elementwise `linalg.generic` from those integers to f32 —
   sign-extending (`iN`), plain (`uN`), or a table lookup (floats); which one is read off the values:
   V(code) must equal sext(code), code, or a `LowBitType` float table bit for bit, else the table
   itself is kept (an arbitrary 2^n-entry lookup);
3. the **dequantisation steps** from X to B: reshapes and transposes (tracked as a permutation of code
   positions) and elementwise `linalg.generic`s with one operand on this path and any number of
   constant side operands (scales, zero points). Their bodies are kept as they are (subbyte-pack
   clones them), so the packed form computes bit for bit what the imported graph computed; their side
   operands are evaluated and re-laid out to B's [K, N] index space, then compressed to the coarsest
   per-group form `A[n, k // G]` that reproduces them exactly (G found numerically: 128 for
   `quantize(..., group_size=128)`).

Everything is established by evaluating the constant subgraph (evaluate.py), not by matching the
importer's exact op sequence, so a different but equivalent graph is recognised as well; anything
unexpected returns `None` with a reason (`recognize_weight`), never a wrong rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import linalg

from .evaluate import ConstantEvaluator, EvaluationError, affine_eval, int_width, unsigned, wrap
from ..dialects.lowbit_storage import unpack_bits
from ..dialects.lowbit_types import LowBitType, all_types

LAYOUT_OPS = ("tensor.expand_shape", "tensor.collapse_shape", "linalg.transpose")


class NotQuantized(Exception):
    """The operand is not a quantised weight (the message says why)."""


@dataclass
class SideOperand:
    """A constant operand of a dequantisation step, compact: `array[n, k // group]` (float or int)."""

    array: np.ndarray
    group: int
    element_type: ir.Type


@dataclass
class DequantStep:
    """One elementwise generic between the conversion and the matmul: its body is cloned; input
    `path` is the value being dequantised, every other input is a `SideOperand`."""

    op: ir.Operation
    path: int
    sides: dict[int, SideOperand] = field(default_factory=dict)


@dataclass
class QuantizedOperand:
    """A recognised quantised weight B [K, N] of `matmul` (operand `operand`)."""

    matmul: ir.Operation
    operand: int
    codes: np.ndarray                 # uint8 [K, N]: the code of B[k, n]
    bits: int
    kind: str                         # "int", "uint", "float" (a LowBitType float) or "table"
    dtype: LowBitType | None          # None for "table"
    table: np.ndarray | None          # f32 [2^bits] for "table" (and floats, for reference)
    steps: list[DequantStep]
    packed_bytes: int                 # bytes of the packed constant found in the graph
    value_type: ir.Type               # element type of the converted values (f32)

    @property
    def type_name(self) -> str:
        return self.dtype.name if self.dtype is not None else f"table{self.bits}"


def backward_slice(value) -> list:
    """Ops the value depends on (inside generic bodies too); raises NotQuantized on a block argument
    of the function (the operand is not a constant)."""
    seen, order, stack = set(), [], [value]
    while stack:
        v = stack.pop()
        owner = v.owner
        if not isinstance(owner, (ir.Operation, ir.OpView)):
            parent = owner.owner if isinstance(owner, ir.Block) else None
            if parent is not None and parent.name == "linalg.generic":
                continue  # a block argument of a generic body: its operands are visited
            raise NotQuantized("it depends on a function argument")
        op = owner.operation
        if op in seen:
            continue
        seen.add(op)
        order.append(op)
        stack.extend(op.operands)
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    for operand in inner.operands:
                        if _defined_outside(operand, op):
                            stack.append(operand)
    return order


def _defined_outside(value, op) -> bool:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return False
    parent = owner.operation.parent
    while parent is not None:
        if parent.operation == op:
            return False
        parent = parent.operation.parent
    return True


def _is_identity(m) -> bool:
    return all(isinstance(e, ir.AffineDimExpr) and e.position == k for k, e in enumerate(m.results)) \
        and m.n_dims == len(m.results)


def _maps(op):
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _all_parallel(op) -> bool:
    parallel = ir.AttrBuilder.get("linalg.IteratorTypeEnum")(linalg.IteratorType.parallel, op.context)
    return all(a == parallel for a in ir.ArrayAttr(op.attributes["iterator_types"]))


def _is_conversion(op) -> bool:
    """An elementwise generic from one integer tensor to a float tensor (identity maps)."""
    if op.name != "linalg.generic" or len(op.results) != 1 or len(op.operands) != 2 or not _all_parallel(op):
        return False
    src = ir.RankedTensorType(op.operands[0].type).element_type
    dst = ir.RankedTensorType(op.results[0].type).element_type
    return int_width(src) is not None and int_width(dst) is None and all(_is_identity(m) for m in _maps(op))


def _group_compress(a: np.ndarray) -> tuple[np.ndarray, int]:
    """[K, N] → ([N, K // G], G) for the largest G with a[k, n] == c[n, k // G] bit for bit."""
    k, _ = a.shape
    # compared bit for bit (-0.0 is not 0.0); f16 (a half model) has 2-byte elements
    bits = np.ascontiguousarray(a).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]) \
        if a.dtype.kind == "f" else a
    for g in sorted((d for d in range(1, k + 1) if k % d == 0), reverse=True):
        blocks = bits.reshape(k // g, g, -1)
        if np.array_equal(blocks, np.broadcast_to(blocks[:, :1, :], blocks.shape)):
            return np.ascontiguousarray(a.reshape(k // g, g, -1)[:, 0, :].T), g
    raise AssertionError("unreachable: G = 1 always compresses")


def recognize_weight(matmul, operand: int = 1, evaluate: ConstantEvaluator | None = None) -> QuantizedOperand:
    """The quantised weight operand `operand` of `matmul`, or `NotQuantized` saying why not."""
    ev = evaluate or ConstantEvaluator()
    b = matmul.operands[operand]
    btype = ir.RankedTensorType(b.type)
    if btype.rank != 2:
        raise NotQuantized(f"operand {operand} has rank {btype.rank}, not 2")
    backward_slice(b)  # constant-only, else NotQuantized
    # Walk from B back to the conversion, recording the dequantisation chain.
    chain, cur = [], b
    sizes: dict = {}
    while True:
        owner = cur.owner
        if not isinstance(owner, (ir.Operation, ir.OpView)):
            raise NotQuantized("the chain reaches a block argument")
        op = owner.operation
        if op.name in LAYOUT_OPS:
            chain.append((op, 0))
            cur = op.operands[0]
        elif _is_conversion(op):
            conversion = op
            break
        elif op.name == "linalg.generic" and len(op.results) == 1 and _all_parallel(op):
            n_in = len(op.operands) - 1
            maps = _maps(op)
            if not _is_identity(maps[-1]):
                raise NotQuantized("a dequantisation step has a non-identity output map")
            path = max(range(n_in), key=lambda i: _slice_size(op.operands[i], sizes))
            if not _is_identity(maps[path]):
                raise NotQuantized("a dequantisation step reads its input through a non-identity map")
            chain.append((op, path))
            cur = op.operands[path]
        else:
            raise NotQuantized(f"op '{op.name}' on the dequantisation path")
    try:
        c = np.asarray(ev(conversion.operands[0]), np.int64).reshape(-1)
        v = np.asarray(ev(conversion.results[0])).reshape(-1)
    except EvaluationError as err:
        raise NotQuantized(str(err)) from None
    count = c.size
    packed = _packed_constant(conversion.operands[0], ev)
    if packed is None:
        raise NotQuantized("no i8 constant holds its codes")
    padded = (count + 7) // 8 * 8
    if (packed.size * 8) % padded:
        raise NotQuantized(f"{packed.size} bytes do not hold {count} codes of a whole bit width")
    bits = packed.size * 8 // padded
    if not 1 <= bits <= 8:
        raise NotQuantized(f"{packed.size} bytes for {count} codes is not 1..8 bits per code")
    codes = unsigned(c, bits).astype(np.uint8)
    stored = unpack_bits(unsigned(packed, 8).astype(np.uint8), bits, count)
    if not np.array_equal(np.sort(codes), np.sort(stored)):
        raise NotQuantized(f"the codes are not the {bits}-bit codes of the packed constant")
    kind, dtype, table = _classify(conversion, c, codes, v, bits, ev)
    # Forward through the chain: positions of codes, side operands in code order.
    pos = np.arange(count, dtype=np.int64).reshape(ir.RankedTensorType(conversion.results[0].type).shape)
    steps = []
    for op, path in reversed(chain):
        if op.name == "linalg.transpose":
            pos = np.transpose(pos, list(ir.DenseI64ArrayAttr(op.attributes["permutation"])))
        elif op.name in LAYOUT_OPS:
            pos = pos.reshape(ir.RankedTensorType(op.results[0].type).shape)
        else:
            step = DequantStep(op, path)
            maps = _maps(op)
            for i in range(len(op.operands) - 1):
                if i == path:
                    continue
                arr = np.asarray(ev(op.operands[i]))
                dims = list(np.indices(pos.shape, dtype=np.int64))
                index = tuple(np.broadcast_to(affine_eval(e, dims), pos.shape) for e in maps[i].results)
                full = arr[index] if index else np.broadcast_to(arr, pos.shape)
                by_code = np.empty(count, dtype=full.dtype)
                by_code[pos.reshape(-1)] = full.reshape(-1)
                step.sides[i] = by_code  # re-laid out below, once pos is final
            steps.append(step)
    if tuple(pos.shape) != tuple(btype.shape):
        raise NotQuantized(f"the chain ends in shape {list(pos.shape)}, not B's {list(btype.shape)}")
    for step in steps:
        for i, by_code in list(step.sides.items()):
            compact, group = _group_compress(by_code[pos])
            etype = ir.RankedTensorType(step.op.operands[i].type).element_type
            step.sides[i] = SideOperand(compact, group, etype)
    value_type = ir.RankedTensorType(conversion.results[0].type).element_type
    return QuantizedOperand(matmul, operand, codes[pos], bits, kind, dtype, table, steps, packed.size, value_type)


def _slice_size(value, cache) -> int:
    if value not in cache:
        try:
            cache[value] = len(backward_slice(value))
        except NotQuantized:
            cache[value] = -1
    return cache[value]


def _packed_constant(value, ev) -> np.ndarray | None:
    """The largest 8-bit integer tensor constant the codes are computed from."""
    best = None
    for op in backward_slice(value):
        if op.name != "arith.constant" or not isinstance(op.results[0].type.maybe_downcast(), ir.RankedTensorType):
            continue
        if int_width(ir.RankedTensorType(op.results[0].type).element_type) != 8:
            continue
        arr = np.asarray(ev(op.results[0])).reshape(-1)
        if best is None or arr.size > best.size:
            best = arr
    return best


def _classify(conversion, c, codes, v, bits, ev):
    """(kind, LowBitType or None, table or None) of the conversion, read off the values."""
    body = conversion.regions[0].blocks[0]
    lookups = [op for op in body.operations if op.operation.name == "tensor.extract"]
    v32 = np.asarray(v, np.float32)
    if lookups:
        table = np.asarray(ev(lookups[0].operation.operands[0]), np.float32).reshape(-1)
        if table.size != 1 << bits:
            raise NotQuantized(f"the lookup table has {table.size} entries, not 2^{bits}")
        if not _same_bits(table[codes], v32):
            raise NotQuantized("the converted values are not table[code]")
        for t in all_types():
            if t.is_float and t.bits == bits and _same_bits(t.table, table):
                return "float", t, t.table.copy()
        return "table", None, table
    if bits >= 2 and np.array_equal(c, wrap(codes, bits)) and np.any(c < 0):
        kind = "int"
    elif np.array_equal(c, codes.astype(np.int64)):
        kind = "uint"
    else:
        raise NotQuantized(f"the integers converted are not {bits}-bit codes")
    t = LowBitType.int(bits) if kind == "int" else LowBitType.uint(bits)
    expect = t.decode(codes)
    if not _same_bits(expect, v32):
        raise NotQuantized(f"the conversion is not the value of {t.name} codes")
    return kind, t, None


def _same_bits(a, b) -> bool:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    nan = np.isnan(a)
    return a.shape == b.shape and np.array_equal(nan, np.isnan(b)) and np.array_equal(
        a[~nan].view(np.uint32), b[~nan].view(np.uint32))
