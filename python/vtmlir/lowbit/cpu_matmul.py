"""The CPU form of a quantised matmul: word-at-a-time vector loops (`subbyte-lower{cpu-vectorize=1}`).

The portable lowering (lower.py) fuses unpacking into a scalar (m, n, k) `linalg.generic`: per
multiply one byte-window load, a variable shift, the conversion and the dequantisation — repeated for
each of the M rows. On the CPU this form replaces `matmul(x, dequantize(codes))` by

    for n in 0..N:                                  // output column = weight row (stream order)
      for each block of R rows m0..m0+R:            // R = the largest divisor of M up to MAX_ROWS
        acc[0..R] = 0 : vector<8xf32>
        for kw in 0..K/8:                           // one word: 8 codes of n bits = n bytes (§6.1)
          word  = vector.load packed[n*K*bits/8 + kw*bits] : vector<8xi8>, bitcast to i64 (i32: n <= 4)
          codes = (broadcast(word) >> [0, n, .., 7n]) & (2^n - 1) : vector<8xi32>
          w     = conversion(codes) : vector<8xf32>    // ints: shift-pair sign extension + sitofp;
                                                       // uints: uitofp; floats: the exponent /
                                                       // mantissa rebuild lane-wise, or a 2^n-entry
                                                       // f32 lookup table (vector.gather): both exact
          w     = the dequantisation body on vectors  // zero point and scale: one scalar per word
          acc[r] += x[m0+r, 8kw : 8kw+8] * w           // the unpacked word reused by all R rows
        out[m0+r, n] += reduce_add(acc[r])

so each word is unpacked and converted once per R rows (Tilus' point: casting cost is amortised over
the rows that consume it), every operation is an 8-lane vector op, and the packed weight is read once
per row block. Numerics: the same dequantised weights bit for bit (the body's ops are applied
lane-wise), sums in a different order than the scalar loop (8 partial sums, then a horizontal add).

Applies when (checked; otherwise the portable lowering is used and a remark names the reason): f32
matmul with static shapes, K % 8 = 0, the weight in the default stream order (`local(K, 1)`:
position n*K + k), every scale / zero-point index constant over each word (group size % 8 = 0), and a
dequantisation body of elementwise arith/math ops. The packed constant gets 8 bytes of slack so the
last word's 8-byte load stays in bounds.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import affine, arith, bufferization, memref, scf, tensor, vector

from ..dialects.lowbit import is_code_conversion
from ..temco.weights import constant_array, make_constant
from .convert import emit_code_to_f32
from .evaluate import affine_eval
from .types import parse_dtype

LANES = 8     # codes per word: 8 codes of n bits are exactly n bytes
MAX_ROWS = 8  # rows per block: 8 accumulators + weights + activations fit the 16 AVX registers


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _splat(vtype: ir.VectorType, value) -> ir.Value:
    elem = vtype.element_type
    attr = ir.FloatAttr.get(elem, value) if isinstance(elem, ir.FloatType) else ir.IntegerAttr.get(elem, value)
    return arith.ConstantOp(vtype, ir.DenseElementsAttr.get_splat(vtype, attr)).result


def _to_buffer(value: ir.Value) -> ir.Value:
    t = ir.RankedTensorType(value.type)
    return bufferization.ToBufferOp(ir.MemRefType.get(t.shape, t.element_type), value, read_only=True).result


def _maps(op):
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _rows_per_block(m: int) -> int:
    return next(r for r in range(min(m, MAX_ROWS), 0, -1) if m % r == 0)


class NotVectorizable(Exception):
    """The quantised matmul does not have the form the vector loops need; the message says why."""


def check(matmul, dequant, cast) -> None:
    """Raise `NotVectorizable` unless `vectorize` applies (see the module docstring)."""
    x, w, acc = (ir.RankedTensorType(v.type) for v in matmul.operands[:3])
    if not all(isinstance(t.element_type, ir.F32Type) for t in (x, w, acc)) or not all(t.has_static_shape for t in (x, w)):
        raise NotVectorizable("the matmul is not f32 with static shapes")
    k, n = w.shape
    if k % LANES:
        raise NotVectorizable(f"K = {k} is not a multiple of {LANES}")
    packed = cast.operands[0].owner
    if isinstance(packed, ir.Block) or constant_array(packed) is None:
        raise NotVectorizable("the packed weight is not a constant")
    grid = list(np.indices((k, n), dtype=np.int64))
    position = cast.position_map
    if not np.array_equal(np.broadcast_to(affine_eval(position.results[0], grid), (k, n)), grid[1] * k + grid[0]):
        raise NotVectorizable("the weight is not in the default stream order (tile-layout local(K, 1))")
    maps = _maps(dequant)
    n_in = len(dequant.operands) - 1
    if dequant.operands[0] != cast.results[0] or maps[0] != ir.AffineMap.get_identity(2):
        raise NotVectorizable("the dequantisation does not read the codes first, through the identity")
    for side_map in maps[1:n_in]:
        for expr in side_map.results:
            idx = np.broadcast_to(affine_eval(expr, grid), (k, n))
            if not np.array_equal(idx, idx[(grid[0] // LANES) * LANES, grid[1]]):
                raise NotVectorizable("a scale or zero point changes inside a word of 8 codes (group size % 8 != 0)")
    started = False
    for op in dequant.regions[0].blocks[0].operations:
        op = op.operation
        if not started:
            started = is_code_conversion(op)
            continue
        if op.name == "linalg.yield":
            break
        if op.name.split(".")[0] not in ("arith", "math") or len(op.results) != 1 or len(op.regions):
            raise NotVectorizable(f"the dequantisation body holds '{op.name}'")


def vectorize(matmul, dequant, cast) -> None:
    """Replace `matmul` (and its dequantisation) by the vector loop nest; `check` must have passed."""
    bits, name = cast.bits, cast.dtype_name
    dtype = None if name.startswith("table") else parse_dtype(name)
    x, acc = matmul.operands[0], matmul.operands[2]
    m_size, k_size = ir.RankedTensorType(x.type).shape
    n_size = ir.RankedTensorType(matmul.operands[1].type).shape[1]
    rows = _rows_per_block(m_size)
    f32, i8, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(32)
    body = dequant.regions[0].blocks[0]
    n_in = len(dequant.operands) - 1
    with ir.InsertionPoint(matmul), matmul.location:
        v_f32, v_i32 = (ir.VectorType.get([LANES], t) for t in (f32, i32))
        packed = np.concatenate([constant_array(cast.operands[0].owner).view(np.uint8), np.zeros(8, np.uint8)])
        packed_mem = _to_buffer(make_constant(packed.view(np.int8), i8))
        x_mem = _to_buffer(x)
        sides = [_to_buffer(v) for v in dequant.operands[1:n_in]]
        side_maps = _maps(dequant)[1:n_in]
        table = _lookup_table(body, dtype, rows)
        table_mem = _to_buffer(make_constant(table, f32)) if table is not None else None
        c0, c1 = _index(0), _index(1)
        row_bytes = k_size * bits // LANES
        n_loop = scf.ForOp(c0, _index(n_size), c1, [acc])
        with ir.InsertionPoint(n_loop.body):
            col = n_loop.induction_variable
            m_loop = scf.ForOp(c0, _index(m_size), _index(rows), [n_loop.inner_iter_args[0]])
            with ir.InsertionPoint(m_loop.body):
                m0 = m_loop.induction_variable
                zero = _splat(v_f32, 0.0)
                k_loop = scf.ForOp(c0, _index(k_size // LANES), c1, [zero] * rows)
                with ir.InsertionPoint(k_loop.body):
                    kw = k_loop.induction_variable
                    k0 = arith.muli(kw, _index(LANES))
                    byte = arith.addi(arith.muli(col, _index(row_bytes)), arith.muli(kw, _index(bits)))
                    codes = _unpack_word(packed_mem, byte, bits, v_i32)
                    if table_mem is not None:
                        mask = _splat(ir.VectorType.get([LANES], ir.IntegerType.get_signless(1)), 1)
                        weight = vector.GatherOp(v_f32, table_mem, [c0], codes, mask, zero).result
                    else:
                        weight = emit_code_to_f32(codes, dtype)
                    side_values = []
                    for side_mem, side_map in zip(sides, side_maps):
                        idx = [affine.apply(ir.AffineMap.get(2, 0, [e]), [k0, col]) for e in side_map.results]
                        side_values.append(memref.LoadOp(side_mem, idx).result)
                    weight = _vector_body(body, weight, side_values, n_in)
                    new_acc = []
                    for r in range(rows):
                        row = arith.addi(m0, _index(r))
                        xv = vector.LoadOp(v_f32, x_mem, [row, k0]).result
                        new_acc.append(arith.addf(k_loop.inner_iter_args[r], arith.mulf(xv, weight)))
                    scf.YieldOp(new_acc)
                out = m_loop.inner_iter_args[0]
                for r in range(rows):
                    row = arith.addi(m0, _index(r))
                    total = vector.ReductionOp(f32, vector.CombiningKind.ADD, k_loop.results[r]).result
                    old = tensor.extract(out, [row, col])
                    out = tensor.insert(arith.addf(old, total), out, [row, col])
                scf.YieldOp([out])
            scf.YieldOp([m_loop.results[0]])
    matmul.results[0].replace_all_uses_with(n_loop.results[0])
    matmul.erase()
    _erase_if_unused(dequant)


def _unpack_word(packed_mem: ir.Value, byte: ir.Value, bits: int, v_i32: ir.Type) -> ir.Value:
    """The 8 codes of the word at `byte` as vector<8xi32>: one vector load of the word's bytes,
    reinterpreted as one integer (i32 when 8n <= 32 bits, else i64), broadcast, shifted right by
    [0, n, ..., 7n] and masked. The narrower word halves the shift work for n <= 4."""
    word_type = ir.IntegerType.get_signless(32 if bits * LANES <= 32 else 64)
    width = word_type.width
    raw = vector.LoadOp(ir.VectorType.get([width // 8], ir.IntegerType.get_signless(8)), packed_mem, [byte]).result
    word = vector.extract(vector.BitCastOp(ir.VectorType.get([1], word_type), raw).result, [], [0])
    v_word = ir.VectorType.get([LANES], word_type)
    shifts = arith.ConstantOp(v_word, ir.DenseElementsAttr.get(
        np.arange(LANES, dtype=np.int64 if width == 64 else np.int32) * bits, type=v_word)).result
    codes = arith.andi(arith.shrui(vector.BroadcastOp(v_word, word).result, shifts), _splat(v_word, (1 << bits) - 1))
    return codes if width == 32 else arith.trunci(v_i32, codes)


def _erase_if_unused(op) -> None:
    """Erase `op` and then, transitively, the producers only it used (the dequant generic, its
    tensor.empty, the cast and the old packed constant, scales)."""
    operands = [v.owner for v in op.operands if not isinstance(v.owner, ir.Block)]
    if any(list(r.uses) for r in op.results):
        return
    op.erase()
    for producer in operands:
        producer = producer.operation
        if producer.name in ("tensor.empty", "arith.constant", "lowbit.unpack") \
                and all(not list(r.uses) for r in producer.results):
            _erase_if_unused(producer)


def _lookup_table(body, dtype, rows: int) -> np.ndarray | None:
    """The 2^n-entry f32 table the codes are looked up in (`vector.gather`), or None to convert
    them arithmetically (convert.emit_code_to_f32 on vector<8xi32>). Both are exact. A recognised
    table that is no `LowBitType` always uses the table; ints and uints never do (2-3 vector ops).
    Floats: measured on this machine's AMD EPYC (AVX2, where gathers are slow), the arithmetic
    rebuild (~12 ops) is 10-35 % faster for GEMV; when the word serves a block of >= 4 rows its cost
    is amortised and the table wins only for the types whose NaN / inf handling adds selects
    (specials "nan" / "ieee": e4m3, e5m2, 20-30 % at batch 16)."""
    if dtype is None:
        for op in body.operations:
            op = op.operation
            if op.name == "tensor.extract":
                return constant_array(op.operands[0].owner).astype(np.float32)
        raise AssertionError("a table conversion without tensor.extract")
    if dtype.kind == "float" and dtype.specials != "finite" and rows >= 4:
        return dtype.table.astype(np.float32)
    return None


def _is_vector(value: ir.Value) -> bool:
    return isinstance(value.type.maybe_downcast(), ir.VectorType)


def _vector_body(body, weight: ir.Value, side_values: list, n_in: int) -> ir.Value:
    """The dequantisation body after the conversion, lane-wise: ops touching the weight become vector
    ops (scalars broadcast), the others stay scalar."""
    args = list(body.arguments)
    mapping = {a: v for a, v in zip(args[1:n_in], side_values)}
    started = False
    for op in body.operations:
        op = op.operation
        if not started:
            if is_code_conversion(op):
                mapping[op.results[0]] = weight
                started = True
            continue
        if op.name == "linalg.yield":
            return mapping[op.operands[0]]
        operands = [mapping.get(v, v) for v in op.operands]
        if not any(_is_vector(v) for v in operands):
            new = op.clone()
            for j, v in enumerate(operands):
                new.operands[j] = v
            mapping[op.results[0]] = new.results[0]
            continue
        operands = [v if _is_vector(v) else
                    vector.BroadcastOp(ir.VectorType.get([LANES], v.type), v).result for v in operands]
        new = ir.Operation.create(op.name, results=[ir.VectorType.get([LANES], op.results[0].type)],
                                  operands=operands,
                                  attributes={key: op.attributes[key] for key in op.attributes})
        mapping[op.results[0]] = new.results[0]
    raise AssertionError("a dequantisation body without linalg.yield")
