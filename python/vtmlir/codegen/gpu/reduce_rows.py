"""`codegen-gpu-reduce-rows`: row reductions (softmax's max and sum, LayerNorm's and RMSNorm's
moments, row sums and means) become `gpu.launch` kernels that reduce each row with warp shuffles.

A row reduction at the kernel level is a `linalg.generic` with parallel loops (the rows) and one
innermost reduction loop (the row), whose body yields `combine(g(inputs), out)` for each output:
`combine` an associative, commutative op (`arith.addf`, `arith.maximumf`, ...) that reads the
output once, `g` the per-element work fused into it (`exp(x - max)`, `(x - mean)^2`). The schedule
(`RowReductionSchedule`, codegen/gpu/schedules.py) annotates the op with the threads per row
(`codegen.row_threads`: 32, one warp, or 64-256, a block) and the rows per block
(`codegen.rows_per_block`); this pass builds the kernel through the bindings:

- thread `tx` of a row walks its elements `tx, tx + T, ...` (consecutive lanes, consecutive
  addresses: coalesced), combining `g` of each into a private accumulator that starts at the
  combiner's identity -- one pass over global memory;
- a butterfly of `gpu.shuffle xor` (offsets 16, 8, 4, 2, 1: `shfl.sync.bfly`) leaves the warp's
  result in every lane; with several warps per row their results meet in shared memory and warp 0
  reduces them the same way;
- lane 0 combines the result with the output's initial value and stores it.

The combination order differs from the naive mapping's (k order): a reassociation, as the CPU's
row-reduction schedule (docs/codegen_gpu.md gives the tolerance; `schedules={"row-reduction": None}`
keeps the exact order). Values narrower than 32 bits are shuffled widened (bit-exact), 64-bit ones
as two 32-bit halves.
"""

from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import affine, arith, gpu, memref, scf

from ...ir_utils import walk_ops
from ...passes.registry import Pass, PassFailure, register_pass
from ..bodies import backward_slice, clone_ops, result_owners
from ..kernels import KERNEL_ATTR, classify, indexing_maps_of

ROW_THREADS_ATTR = "codegen.row_threads"
ROWS_PER_BLOCK_ATTR = "codegen.rows_per_block"
WARP = 32

_FLOAT_COMBINERS = {
    # combiner: identity (a value c with combine(c, x) == x for every x)
    "arith.addf": -0.0, "arith.mulf": 1.0,
    "arith.maximumf": -math.inf, "arith.minimumf": math.inf,
    "arith.maxnumf": math.nan, "arith.minnumf": math.nan,
}
_INT_COMBINERS = {
    "arith.addi": lambda bits: 0, "arith.muli": lambda bits: 1,
    "arith.ori": lambda bits: 0, "arith.xori": lambda bits: 0, "arith.andi": lambda bits: -1,
    "arith.maxsi": lambda bits: -(1 << (bits - 1)), "arith.minsi": lambda bits: (1 << (bits - 1)) - 1,
    "arith.maxui": lambda bits: 0, "arith.minui": lambda bits: -1,
}


def row_combiners(op) -> list[ir.Operation] | str:
    """The combiner of each output of a row reduction (one innermost reduction loop, every output's
    body `combine(g(inputs), out)` with `out` read by `combine` only and `g` pure arith/math of the
    inputs), or a string saying why the op is not one."""
    op = op.operation
    if op.name != "linalg.generic":
        return f"'{op.name}' is not a linalg.generic"
    maps = indexing_maps_of(op)
    if maps is None or not maps:
        return "no indexing maps"
    block = op.regions[0].blocks[0]
    n_in = len(op.opview.inputs)
    outs = list(block.arguments)[n_in:]
    yielded = list(block.operations)[-1].operation.operands
    owners = result_owners(block)
    combiners = []
    for i, out in enumerate(outs):
        uses = list(out.uses)
        value = yielded[i]
        combine = owners.get(value)
        if len(uses) != 1 or combine is None or uses[0].owner != combine:
            return f"output #{i} is not read by exactly the op that yields it"
        if combine.name not in _FLOAT_COMBINERS and combine.name not in _INT_COMBINERS:
            return f"output #{i} is combined by '{combine.name}' (not an associative combiner)"
        if len(list(combine.results[0].uses)) != 1:
            return f"output #{i}'s partial result is used by more than its yield"
        other = [v for v in combine.operands if v != out]
        if len(other) != 1:
            return f"output #{i} is combined with itself"
        found = backward_slice(block, other, owners)
        if found is None:
            return f"output #{i}'s element work is not pure arith/math"
        if any(a >= n_in for a in found[1]):
            return f"output #{i}'s element work reads an output"
        combiners.append(combine)
    return combiners


def _identity(combine: ir.Operation) -> ir.Value:
    t = combine.results[0].type
    if combine.name in _FLOAT_COMBINERS:
        return arith.ConstantOp(t, ir.FloatAttr.get(t, _FLOAT_COMBINERS[combine.name])).result
    bits = ir.IntegerType(t).width
    return arith.ConstantOp(t, ir.IntegerAttr.get(t, _INT_COMBINERS[combine.name](bits))).result


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _i32(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(32), value).result


def _combine(combine: ir.Operation, out_arg: ir.Value, value: ir.Value, acc: ir.Value) -> ir.Value:
    """The combiner cloned with `out` -> `acc` and its element operand -> `value`."""
    clone = combine.clone()
    for i, operand in enumerate(clone.operands):
        clone.operands[i] = acc if operand == out_arg else value
    return clone.results[0]


def _bits(t: ir.Type) -> int:
    if isinstance(t, ir.IntegerType):
        return ir.IntegerType(t).width
    return ir.FloatType(t).width


def _shuffle_xor(value: ir.Value, offset: int) -> ir.Value:
    """`value` of the lane `lane ^ offset`: 32-bit values directly, narrower ones through an i32
    (bit-exact), 64-bit ones as two i32 halves."""
    i32 = ir.IntegerType.get_signless(32)
    t = value.type
    bits = _bits(t)

    def shuffle(v):
        return gpu.ShuffleOp(v, _i32(offset), _i32(WARP), gpu.ShuffleMode.XOR).results[0]

    if bits == 32 and (isinstance(t, ir.F32Type) or t == i32):
        return shuffle(value)
    as_int = value if isinstance(t, ir.IntegerType) else arith.BitcastOp(ir.IntegerType.get_signless(bits), value).result
    if bits < 32:
        moved = arith.TruncIOp(as_int.type, shuffle(arith.ExtUIOp(i32, as_int).result)).result
    elif bits == 64:
        i64 = as_int.type
        low = arith.TruncIOp(i32, as_int).result
        high = arith.TruncIOp(i32, arith.ShRUIOp(as_int, arith.ConstantOp(i64, 32).result).result).result
        low, high = shuffle(low), shuffle(high)
        moved = arith.OrIOp(arith.ShLIOp(arith.ExtUIOp(i64, high).result, arith.ConstantOp(i64, 32).result).result,
                            arith.ExtUIOp(i64, low).result).result
    else:
        raise PassFailure(f"cannot shuffle a {t} value")
    return moved if isinstance(t, ir.IntegerType) else arith.BitcastOp(t, moved).result


def _butterfly(combiners, out_args, values, width: int) -> list[ir.Value]:
    """Reduce `values` across groups of `width` lanes (xor butterfly): every lane ends with its
    group's result."""
    offset = width // 2
    while offset >= 1:
        values = [_combine(c, o, _shuffle_xor(v, offset), v) for c, o, v in zip(combiners, out_args, values)]
        offset //= 2
    return values


def _apply(amap: ir.AffineMap, dims: list[ir.Value]) -> list[ir.Value]:
    """The indices `amap` gives for the loop indices `dims` (one affine.apply per result)."""
    indices = []
    for expr in amap.results:
        single = ir.AffineMap.get(amap.n_dims, amap.n_symbols, [expr])
        indices.append(affine.AffineApplyOp(single, dims).result)
    return indices


def _if(condition: ir.Value, results=()) -> scf.IfOp:
    return scf.IfOp(condition, list(results), has_else=bool(results))


def reduce_rows(module_op) -> int:
    """Rewrite every linalg op annotated by the row-reduction schedule; returns how many."""
    with module_op.context:
        found = [op for op in walk_ops(module_op, "linalg.generic") if ROW_THREADS_ATTR in op.attributes]
        for op in found:
            kid = ir.IntegerAttr(op.attributes[KERNEL_ATTR]).value
            try:
                with op.location, ir.InsertionPoint(op):
                    _build_kernel(op)
            except PassFailure as err:
                # Named by its kernel id: the CUDA lowering then leaves this kernel to the naive mapping.
                raise PassFailure(f"kernel {kid}: codegen-gpu-reduce-rows: {err}", op.location) from None
            op.erase()
    return len(found)


def _build_kernel(op: ir.Operation) -> None:
    combiners = row_combiners(op)
    if isinstance(combiners, str):
        raise PassFailure(f"not a row reduction: {combiners}")
    maps = indexing_maps_of(op)
    threads = ir.IntegerAttr(op.attributes[ROW_THREADS_ATTR]).value
    rows_per_block = ir.IntegerAttr(op.attributes[ROWS_PER_BLOCK_ATTR]).value
    operands = list(op.operands)
    n_in = len(op.opview.inputs)
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    out_args = args[n_in:]
    body_ops = [o.operation for o in list(block.operations)[:-1]]
    ranges = classify(op).loop_ranges
    row_len = ranges[-1]
    rows = math.prod(ranges[:-1])
    warps = threads // WARP
    if warps > 1 and rows_per_block != 1:
        raise PassFailure("a block per row takes one row per block")

    grid = -(-rows // rows_per_block)
    launch = gpu.LaunchOp((_index(grid), _index(1), _index(1)), (_index(threads), _index(rows_per_block), _index(1)))
    launch.attributes[KERNEL_ATTR] = op.attributes[KERNEL_ATTR]
    body = launch.regions[0].blocks[0]
    bx, tx, ty = body.arguments[0], body.arguments[3], body.arguments[4]
    with ir.InsertionPoint(body):
        space = ir.Attribute.parse("#gpu.address_space<workgroup>")
        shared = []
        if warps > 1:
            # One slot per warp and output: the warps' results, reduced by warp 0.
            for c in combiners:
                shared.append(memref.AllocOp(ir.MemRefType.get([warps], c.results[0].type, memory_space=space),
                                             [], []).result)
        row = arith.AddIOp(arith.MulIOp(bx, _index(rows_per_block)).result, ty).result
        guard = None
        if rows % rows_per_block:
            guard = _if(arith.CmpIOp(arith.CmpIPredicate.ult, row, _index(rows)).result)
            ip = ir.InsertionPoint(guard.then_block)
        else:
            ip = ir.InsertionPoint(body)
        with ip:
            # The row's parallel indices, outermost first.
            parallel, rest = [], row
            for extent in reversed(ranges[:-1]):
                parallel.insert(0, arith.RemUIOp(rest, _index(extent)).result)
                rest = arith.DivUIOp(rest, _index(extent)).result
            identities = [_identity(c) for c in combiners]
            loop = scf.ForOp(tx, _index(row_len), _index(threads), identities)
            with ir.InsertionPoint(loop.body):
                dims = parallel + [loop.induction_variable]
                mapping = {}
                for i in range(n_in):
                    value = operands[i]
                    if isinstance(value.type, ir.MemRefType):
                        value = memref.LoadOp(value, _apply(maps[i], dims)).result
                    mapping[args[i]] = value
                for out, acc in zip(out_args, loop.inner_iter_args):
                    mapping[out] = acc
                clone_ops(body_ops, mapping)
                scf.YieldOp([mapping[c.results[0]] for c in combiners])
            values = _butterfly(combiners, out_args, list(loop.results), WARP)
            lane = tx
            if warps > 1:
                lane = arith.RemUIOp(tx, _index(WARP)).result
                warp = arith.DivUIOp(tx, _index(WARP)).result
                first = _if(arith.CmpIOp(arith.CmpIPredicate.eq, lane, _index(0)).result)
                with ir.InsertionPoint(first.then_block):
                    for v, buf in zip(values, shared):
                        memref.StoreOp(v, buf, [warp])
                    scf.YieldOp([])
                gpu.BarrierOp()
                # Lanes 0..warps-1 of every warp read the warps' results, the others the identity.
                has = arith.CmpIOp(arith.CmpIPredicate.ult, lane, _index(warps)).result
                pick = _if(has, [v.type for v in values])
                with ir.InsertionPoint(pick.then_block):
                    scf.YieldOp([memref.LoadOp(buf, [lane]).result for buf in shared])
                with ir.InsertionPoint(pick.else_block):
                    scf.YieldOp([_identity(c) for c in combiners])
                values = _butterfly(combiners, out_args, list(pick.results), warps)
            store = _if(arith.CmpIOp(arith.CmpIPredicate.eq, tx, _index(0)).result)
            with ir.InsertionPoint(store.then_block):
                zero = _index(0)
                for i, (c, out, v) in enumerate(zip(combiners, out_args, values)):
                    target = operands[n_in + i]
                    indices = _apply(maps[n_in + i], parallel + [zero])
                    initial = memref.LoadOp(target, indices).result
                    memref.StoreOp(_combine(c, out, v, initial), target, indices)
                scf.YieldOp([])
            if guard is not None:
                scf.YieldOp([])
        gpu.TerminatorOp()


@register_pass
class ReduceRows(Pass):
    name = "codegen-gpu-reduce-rows"
    summary = "Row reductions annotated by the GPU row-reduction schedule -> gpu.launch kernels with warp-shuffle reductions"

    def run(self, module):
        reduce_rows(module)
