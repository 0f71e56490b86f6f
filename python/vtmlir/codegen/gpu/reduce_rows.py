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
  combiner's identity -- one pass over global memory; the loop is unrolled (`UNROLL` elements a
  trip where they divide the row: that many loads in flight), the order of the elements unchanged;
  with `codegen.row_vector = V` (`row_vector_width`: every access along the row contiguous and
  aligned, V dividing the row) it walks chunks of V consecutive elements instead, `V*tx .. V*tx +
  V-1`, then `V*(tx + T)` ..., each access one 128-bit `vector.load` / `vector.store` (4 f32, 8
  f16; wider element types in several), combining the elements in that order
  (`codegen.row_chunks` chunks a trip at most);
- a butterfly of `gpu.shuffle xor` (offsets 16, 8, 4, 2, 1: `shfl.sync.bfly`) leaves the warp's
  result in every lane; with several warps per row their results meet in shared memory and warp 0
  reduces them the same way;
- lane 0 combines the result with the output's initial value and stores it.

A matrix-vector product (`gemv` schedule, codegen/gpu/matvec.py) is such a reduction too, read
in vectors as above (8 chunks a trip), and with fewer than 32 threads per row (several rows per
warp: the butterfly only spans the row's lanes).

The members of a row group that walk the row (`_emit_elementwise`) take the same chunks of their
own `codegen.row_vector`, loading every chunk of a trip before computing and storing any (the loads
in flight do not wait behind the trip's stores); each element is computed as before.

The combination order differs from the naive mapping's (k order; with vectors, another partition of
the row among the threads than the scalar loop's): a reassociation, as the CPU's
row-reduction schedule (docs/codegen_gpu.md gives the tolerance; `schedules={"row-reduction": None}`
keeps the exact order). Values narrower than 32 bits are shuffled widened (bit-exact), 64-bit ones
as two 32-bit halves.
"""

from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import affine, arith, gpu, memref, scf, vector

from ...ir_utils import walk_ops
from ...passes.registry import Pass, PassFailure, register_pass
from ..bodies import backward_slice, buffer_root, clone_ops, result_owners
from ..kernels import KERNEL_ATTR, classify, indexing_maps_of
from .layouts import MAX_VECTOR_BYTES, aligned_elements, element_bytes
from .transform_gpu import workgroup_memory_space

ROW_THREADS_ATTR = "codegen.row_threads"
ROWS_PER_BLOCK_ATTR = "codegen.rows_per_block"
#: Elements per thread and access along the row (`MatvecSchedule`: a matvec's 128-bit loads;
#: `RowReductionSchedule`: `row_vector_width`, per member of a row group); absent: 1.
ROW_VECTOR_ATTR = "codegen.row_vector"
#: Chunks of `ROW_VECTOR_ATTR` elements per thread and loop trip, at most (`RowReductionSchedule`:
#: 4, 64 bytes of f32 in flight per input); absent: `UNROLL`.
ROW_CHUNKS_ATTR = "codegen.row_chunks"
#: On each member of a row group: the id of the kernel (its last member) that runs the group.
ROW_GROUP_ATTR = "codegen.row_group"
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


def combiner_identity(combine: ir.Operation) -> ir.Value:
    t = combine.results[0].type
    if combine.name in _FLOAT_COMBINERS:
        return arith.ConstantOp(t, ir.FloatAttr.get(t, _FLOAT_COMBINERS[combine.name])).result
    bits = ir.IntegerType(t).width
    return arith.ConstantOp(t, ir.IntegerAttr.get(t, _INT_COMBINERS[combine.name](bits))).result


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _i32(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(32), value).result


def combine_like(combine: ir.Operation, out_arg: ir.Value, value: ir.Value, acc: ir.Value) -> ir.Value:
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
        values = [combine_like(c, o, _shuffle_xor(v, offset), v) for c, o, v in zip(combiners, out_args, values)]
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


def row_member_problem(op) -> str:
    """Why a kernel cannot be a member of a row group this pass builds ('' if it can): a row
    reduction needs `row_combiners`; any other member a body of arith/math (and `linalg.index`)."""
    op = op.operation
    if op.name != "linalg.generic":
        return f"'{op.name}' is not a linalg.generic"
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    if any("reduction" in a for a in iterators[:-1]):
        return "a reduction outside the innermost loop"
    if "reduction" in iterators[-1]:
        combiners = row_combiners(op)
        return f"not a row reduction: {combiners}" if isinstance(combiners, str) else ""
    for inner in list(op.regions[0].blocks[0].operations)[:-1]:
        name = inner.operation.name
        if name.split(".", 1)[0] not in ("arith", "math") and name != "linalg.index":
            return f"its body holds '{name}'"
    return ""


def reduce_rows(module_op) -> int:
    """Rewrite every linalg op annotated by the row-reduction schedule (with the members of its row
    group, `ROW_GROUP_ATTR`); returns how many kernels it built."""
    with module_op.context:
        found = [op for op in walk_ops(module_op, "linalg.generic") if ROW_THREADS_ATTR in op.attributes]
        for op in found:
            kid = ir.IntegerAttr(op.attributes[KERNEL_ATTR]).value
            members = [op]
            if ROW_GROUP_ATTR in op.attributes:
                members = [o.operation for o in op.operation.block.operations
                           if ROW_GROUP_ATTR in o.operation.attributes
                           and ir.IntegerAttr(o.operation.attributes[ROW_GROUP_ATTR]).value == kid]
            try:
                with op.location, ir.InsertionPoint(op):
                    _build_kernel(op, members)
            except PassFailure as err:
                # Named by its kernel id: the CUDA lowering then leaves this kernel to the naive mapping.
                raise PassFailure(f"kernel {kid}: codegen-gpu-reduce-rows: {err}", op.location) from None
            for member in members:
                member.erase()
    return len(found)


def _row_extents(op) -> list[int]:
    """The extents of a row kernel's row loops of more than one element (all loops but the innermost)."""
    return [n for n in classify(op).loop_ranges[:-1] if n > 1]


def _is_per_row(op, extents: list[int]) -> bool:
    """Whether a member of a group over rows `extents` is a per-row kernel (one element per row,
    every loop a row loop: the fills of the row buffers); raises if it is neither that nor a row
    kernel over those rows. (A member whose innermost loop has one element reads both ways alike.)"""
    kernel = classify(op)
    ranges = kernel.loop_ranges
    if not kernel.reduction_dims and [n for n in ranges if n > 1] == extents:
        return True
    if [n for n in ranges[:-1] if n > 1] != extents:
        raise PassFailure("the members of a row group have different rows")
    return False


def _loop_indices(ranges: tuple[int, ...], row: list[ir.Value], inner: ir.Value) -> list[ir.Value]:
    """The loop indices of a kernel with loop extents `ranges` for the row with indices `row` (its
    row loops of more than one element, in order; the unit ones 0) and the element `inner` of the
    innermost loop."""
    it = iter(row)
    return [next(it) if n > 1 else _index(0) for n in ranges[:-1]] + [inner]


def _per_row_indices(ranges: tuple[int, ...], row: list[ir.Value]) -> list[ir.Value]:
    """The loop indices of a per-row kernel (every loop a row loop) for the row with indices `row`."""
    it = iter(row)
    return [next(it) if n > 1 else _index(0) for n in ranges]


class _RowCache:
    """The rows of a group's buffers that several members access, kept in shared memory.

    Every member of a row group reads its row again, and on an H100 those reads came from DRAM, not
    the caches (ncu: the LayerNorm group moved 600 MB for a 64 MB input at 77 % of DRAM bandwidth:
    the rows of 2000 resident blocks outgrow L1 and L2). Here a buffer that two or more members
    access along whole rows (each access the row's indices and the innermost loop's element) gets a
    shared buffer [rows per block, row length]: the first member that touches it reads the global
    row once and keeps it (or writes it there), later members read and write the shared copy; a
    written buffer is stored to global memory too unless it is private to the group (allocated for
    it: a buffer only the members and its free use). Values are unchanged: a shared copy holds what
    global memory would."""

    def __init__(self, entries: dict, local_row: ir.Value):
        self.entries = entries   # value -> (shared buffer, private)
        self.touched: set = set()
        self.local_row = local_row

    def load(self, value: ir.Value, amap: ir.AffineMap, dims: list[ir.Value]) -> ir.Value:
        entry = self.entries.get(value)
        if entry is None:
            return memref.LoadOp(value, _apply(amap, dims)).result
        buffer, _ = entry
        if value in self.touched:
            return memref.LoadOp(buffer, [self.local_row, dims[-1]]).result
        loaded = memref.LoadOp(value, _apply(amap, dims)).result
        memref.StoreOp(loaded, buffer, [self.local_row, dims[-1]])
        return loaded

    def store(self, element: ir.Value, value: ir.Value, amap: ir.AffineMap, dims: list[ir.Value]) -> None:
        entry = self.entries.get(value)
        if entry is not None:
            memref.StoreOp(element, entry[0], [self.local_row, dims[-1]])
            if entry[1]:
                return
        memref.StoreOp(element, value, _apply(amap, dims))

    def load_row(self, value: ir.Value, amap: ir.AffineMap, dims: list[ir.Value], width: int) -> list[ir.Value]:
        """`load` for `width` consecutive elements of the row from `dims` (a multiple of `width`
        along it, aligned: `row_vector_width`): the vectors of `_load_pieces`."""
        entry = self.entries.get(value)
        if entry is None:
            return _load_pieces(value, _apply(amap, dims), width)
        buffer, _ = entry
        local = [self.local_row, dims[-1]]
        if value in self.touched:
            return _load_pieces(buffer, local, width)
        pieces = _load_pieces(value, _apply(amap, dims), width)
        _store_pieces(pieces, buffer, local)
        return pieces

    def store_row(self, pieces: list[ir.Value], value: ir.Value, amap: ir.AffineMap, dims: list[ir.Value]) -> None:
        """`store` of the vectors `pieces` (`_load_pieces`' form) at `dims`."""
        entry = self.entries.get(value)
        if entry is not None:
            _store_pieces(pieces, entry[0], [self.local_row, dims[-1]])
            if entry[1]:
                return
        _store_pieces(pieces, value, _apply(amap, dims))

    def done(self, member) -> None:
        """After `member`: its cached buffers hold their rows in shared memory."""
        self.touched |= {v for v in member.operands if v in self.entries}


def _piece_width(element_type: ir.Type, width: int) -> int:
    """Elements per vector access of `width` elements of `element_type` split into accesses of at
    most 16 bytes (a row of f64 read 4 elements a thread: two `vector<2xf64>`)."""
    return min(width, max(1, MAX_VECTOR_BYTES // element_bytes(element_type)))


def _load_pieces(buffer: ir.Value, indices: list[ir.Value], width: int) -> list[ir.Value]:
    """`width` consecutive elements of `buffer` from `indices` along its innermost dimension, as
    `vector.load`s of at most 16 bytes (each aligned to its size: `row_vector_width` proved it, and
    `convert-vector-to-llvm{use-vector-alignment}` makes them `ld.global.v4` / `ld.shared.v4`)."""
    t = ir.MemRefType(buffer.type)
    per = _piece_width(t.element_type, width)
    vtype = ir.VectorType.get([per], t.element_type)
    pieces = []
    for k in range(0, width, per):
        at = indices if k == 0 else indices[:-1] + [arith.AddIOp(indices[-1], _index(k)).result]
        pieces.append(vector.LoadOp(vtype, buffer, at).result)
    return pieces


def _store_pieces(pieces: list[ir.Value], buffer: ir.Value, indices: list[ir.Value]) -> None:
    """The vectors `pieces` (`_load_pieces`' form) stored at `indices` onwards."""
    at, k = indices, 0
    for piece in pieces:
        if k:
            at = indices[:-1] + [arith.AddIOp(indices[-1], _index(k)).result]
        vector.StoreOp(piece, buffer, at)
        k += ir.VectorType(piece.type).shape[0]


def _piece_element(pieces: list[ir.Value], lane: int) -> ir.Value:
    """Element `lane` of the row chunk held in `pieces`."""
    per = ir.VectorType(pieces[0].type).shape[0]
    return vector.ExtractOp(pieces[lane // per], [], [lane % per]).result


def _pieces_of(elements: list[ir.Value]) -> list[ir.Value]:
    """The row chunk `elements` as vectors of at most 16 bytes (`_load_pieces`' form)."""
    t = elements[0].type
    per = _piece_width(t, len(elements))
    return [vector.FromElementsOp(ir.VectorType.get([per], t), elements[k:k + per]).result
            for k in range(0, len(elements), per)]


#: Shared memory for cached rows per block, at most (48 KiB of static shared memory per block, less
#: the reductions' slots; 16 KiB caches a row of 4096 f32).
ROW_CACHE_BYTES = 40 * 1024


def _row_access(ranges: tuple[int, ...], amap: ir.AffineMap, value: ir.Value) -> bool:
    """Whether a kernel with loop extents `ranges` accesses `value` along whole rows: `amap` gives its
    row loops (extent > 1) in order, unit loops or constant 0 elsewhere, and the innermost loop last;
    the buffer's last dimension the row's length."""
    inner = len(ranges) - 1
    results = list(amap.results)
    if not results or not isinstance(results[-1], ir.AffineDimExpr) or results[-1].position != inner:
        return False
    if ir.MemRefType(value.type).shape[-1] != ranges[inner]:
        return False
    row_dims = []
    for e in results[:-1]:
        if isinstance(e, ir.AffineDimExpr):
            if ranges[e.position] > 1:
                row_dims.append(e.position)
        elif not (isinstance(e, ir.AffineConstantExpr) and e.value == 0):
            return False
    return row_dims == [d for d in range(inner) if ranges[d] > 1]


def _uses_dim(expr: ir.AffineExpr, dim: int) -> bool:
    """Whether the affine expression `expr` depends on loop `dim`."""
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position == dim
    if isinstance(expr, ir.AffineBinaryExpr):
        return _uses_dim(expr.lhs, dim) or _uses_dim(expr.rhs, dim)
    return False


def row_vector_width(op) -> int:
    """Elements a thread takes per access along the row (`ROW_VECTOR_ATTR`) in a row reduction or a
    member of a row group that walks the row: 16 bytes of the narrowest element type it accesses
    along the row (4 f32, 8 f16/bf16, 2 f64), halved until every such access is legal, else 1
    (scalar). Legal: each buffer read or written along the row indexes it by the innermost loop in
    its last dimension alone (`d1`, not `d1 + 1` or `2 * d1`) with unit stride, the row length is a
    multiple of the width, and each access of `_piece_width` elements starts aligned to its size
    (`aligned_elements`: the offset and the other strides); its elements are whole bytes of 8-64
    bits; a member that walks the row but writes elsewhere stays scalar. Shared-memory row copies
    (`_RowCache`: [rows, row length], 16-byte aligned) are then aligned too. A function of the op
    alone: a reduction run in a row group takes the width it has as a kernel of its own, so both
    combine their elements in the same order."""
    op = op.operation
    ranges = classify(op).loop_ranges
    inner = len(ranges) - 1
    row_len = ranges[-1]
    reduces = "reduction" in str(list(ir.ArrayAttr(op.attributes["iterator_types"]))[-1])
    n_in = len(op.opview.inputs)
    types = []
    for i, (value, amap) in enumerate(zip(op.operands, indexing_maps_of(op))):
        if not isinstance(value.type, ir.MemRefType):
            continue
        results = list(amap.results)
        along = [k for k, e in enumerate(results) if _uses_dim(e, inner)]
        if not along:
            if i >= n_in and not reduces:
                return 1
            continue
        last = results[-1]
        if along != [len(results) - 1] or not (isinstance(last, ir.AffineDimExpr) and last.position == inner):
            return 1
        t = ir.MemRefType(value.type)
        element = t.element_type
        if not isinstance(element, (ir.FloatType, ir.IntegerType)) or _bits(element) not in (8, 16, 32, 64):
            return 1
        types.append(t)
    if not types or row_len < 2:
        return 1
    width = max(MAX_VECTOR_BYTES // element_bytes(t.element_type) for t in types)
    while width > 1 and (row_len % width or any(
            aligned_elements(t) < _piece_width(t.element_type, width) for t in types)):
        width //= 2
    return width


def _private(value: ir.Value, members: list[ir.Operation]) -> bool:
    """Whether `value` is a buffer allocated for the group alone: a memref.alloc whose uses are the
    members and its free."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "memref.alloc":
        return False
    return all(use.owner.name == "memref.dealloc" or any(use.owner == m for m in members) for use in value.uses)


def _cache_entries(members: list[ir.Operation], rows_per_block: int, budget: int, per_row=()) -> dict:
    """value -> (None, private) for the buffers worth caching (see `_RowCache`) within `budget`
    bytes, those that save the most global traffic first: a private buffer all its accesses (it is
    never written to global memory), another all its accesses but the first. (A LayerNorm's f64
    copy of x, 32 KiB a row of 4096, is written once and read twice: it goes before x, read three
    times; both do not fit.)"""
    accesses: dict = {}
    for member in members:
        ranges = classify(member).loop_ranges
        for value, amap in zip(member.operands, indexing_maps_of(member)):
            if not isinstance(value.type, ir.MemRefType):
                continue
            found = accesses.setdefault(value, [set(), True])
            found[0].add(member)
            found[1] = found[1] and member not in per_row and _row_access(ranges, amap, value)
    candidates = []
    for value, (users, whole_rows) in accesses.items():
        if len(users) < 2 or not whole_rows:
            continue
        t = ir.MemRefType(value.type)
        size = rows_per_block * t.shape[-1] * max(1, _bits(t.element_type) // 8)
        private = _private(value, members)
        candidates.append(((len(users) - (0 if private else 1)) * size, size, value, private))
    chosen, used = {}, 0
    for _, size, value, private in sorted(candidates, key=lambda c: -c[0]):
        if used + size <= budget:
            used += size
            chosen[value] = (None, private)
    return chosen


def _load_inputs(op, maps, dims, mapping, cache: _RowCache) -> None:
    """The body's input arguments: each input loaded at `dims` (scalars as they are)."""
    args = list(op.regions[0].blocks[0].arguments)
    for i in range(len(op.opview.inputs)):
        value = op.operands[i]
        if isinstance(value.type, ir.MemRefType):
            value = cache.load(value, maps[i], dims)
        mapping[args[i]] = value


#: Elements per thread and loop trip, at most: the loads of one trip are independent, so a thread
#: has this many in flight instead of one (a row of 4096 f32 took one global-memory latency per
#: element and thread: 1.5-3x eager's time on an H100).
UNROLL = 8


def _unroll(length: int, threads: int, limit: int = UNROLL) -> int:
    """Elements (or chunks) per thread and trip: the largest power of two up to `limit` whose trips
    cover the row exactly (no remainder), else 1."""
    unroll = limit
    while unroll > 1 and length % (threads * unroll):
        unroll //= 2
    return unroll


def _trip_elements(loop: scf.ForOp, unroll: int, threads: int) -> list[ir.Value]:
    """The row elements of one trip of a row loop: its index, then `threads` apart (`_unroll`)."""
    iv = loop.induction_variable
    return [iv] + [arith.AddIOp(iv, _index(u * threads)).result for u in range(1, unroll)]


def _member_parts(op) -> tuple[list, int, ir.Block, list, tuple[int, ...]]:
    """A row member's indexing maps, number of inputs, body block, its arguments and loop ranges."""
    block = op.regions[0].blocks[0]
    return indexing_maps_of(op), len(op.opview.inputs), block, list(block.arguments), classify(op).loop_ranges


def _emit_elementwise(op, row: list[ir.Value], tx: ir.Value, threads: int, cache: _RowCache) -> None:
    """A member that is no reduction: thread `tx` computes the row's elements tx, tx + T, ..."""
    maps, n_in, block, args, ranges = _member_parts(op)
    length = ranges[-1]
    unroll = _unroll(length, threads)
    loop = scf.ForOp(tx, _index(length), _index(threads * unroll))
    with ir.InsertionPoint(loop.body):
        for element in _trip_elements(loop, unroll, threads):
            dims = _loop_indices(ranges, row, element)
            mapping = {}
            _load_inputs(op, maps, dims, mapping, cache)
            for i, arg in enumerate(args[n_in:]):
                if list(arg.uses):
                    mapping[arg] = cache.load(op.operands[n_in + i], maps[n_in + i], dims)
            for i, value in enumerate(_clone_body(block, mapping, dims)):
                cache.store(value, op.operands[n_in + i], maps[n_in + i], dims)
        scf.YieldOp([])


def _row_vector(op) -> int:
    """The member's elements per thread and access along the row (`ROW_VECTOR_ATTR`; absent: 1)."""
    return ir.IntegerAttr(op.attributes[ROW_VECTOR_ATTR]).value if ROW_VECTOR_ATTR in op.attributes else 1


def _row_chunks(op) -> int:
    """The member's chunks per thread and trip, at most (`ROW_CHUNKS_ATTR`; absent: `UNROLL`)."""
    return ir.IntegerAttr(op.attributes[ROW_CHUNKS_ATTR]).value if ROW_CHUNKS_ATTR in op.attributes else UNROLL


def _emit_per_row(op, row: list[ir.Value], tx: ir.Value) -> None:
    """A per-row member (a fill of a row buffer): thread 0 of the row computes and stores the row's
    element, as a later reduction's thread 0 reads it (`_needs_barrier`)."""
    maps = indexing_maps_of(op)
    n_in = len(op.opview.inputs)
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    dims = _per_row_indices(classify(op).loop_ranges, row)
    first = _if(arith.CmpIOp(arith.CmpIPredicate.eq, tx, _index(0)).result)
    with ir.InsertionPoint(first.then_block):
        mapping = {}
        for i, arg in enumerate(args):
            value = op.operands[i]
            if isinstance(value.type, ir.MemRefType) and (i < n_in or list(arg.uses)):
                value = memref.LoadOp(value, _apply(maps[i], dims)).result
            if i < n_in or list(arg.uses):
                mapping[arg] = value
        for i, value in enumerate(_clone_body(block, mapping, dims)):
            memref.StoreOp(value, op.operands[n_in + i], _apply(maps[n_in + i], dims))
        scf.YieldOp([])


def _clone_body(block, mapping: dict, dims: list[ir.Value]) -> list[ir.Value]:
    """The generic's body cloned for one element at loop indices `dims` (`linalg.index` is its
    index), its block arguments bound in `mapping`; the values it yields."""
    body_ops = [o.operation for o in list(block.operations)[:-1]]
    for inner in body_ops:
        if inner.name == "linalg.index":
            mapping[inner.results[0]] = dims[ir.IntegerAttr(inner.attributes["dim"]).value]
    clone_ops([o for o in body_ops if o.name != "linalg.index"], mapping)
    return [mapping.get(v, v) for v in list(block.operations)[-1].operation.operands]


def _thread_accesses(op, per_row: bool) -> tuple[set, set]:
    """(buffers thread 0 of a row alone accesses, buffers any thread may access) of a member: a
    per-row member's all by thread 0, a reduction's outputs by thread 0 (its final combine and
    store), everything else (with the shared copies of cached rows) by any thread."""
    n_in = len(op.opview.inputs)
    roots = [buffer_root(v) for v in op.operands]
    if per_row:
        return set(roots), set()
    if "reduction" in str(list(ir.ArrayAttr(op.attributes["iterator_types"]))[-1]):
        return set(roots[n_in:]), set(roots[:n_in])
    return set(), set(roots)


def _needs_barrier(since: list[tuple[set, set, bool]], accesses: tuple[set, set, bool]) -> bool:
    """Whether a member must wait at a barrier for the members run since the last one (`since`:
    their `_thread_accesses` and whether each is a per-row member). Between two members that are
    not per-row, always (as before: they exchange rows through shared memory and global memory).
    Otherwise where some buffer is accessed by different threads: one side's any-thread accesses
    meet the other's accesses. Thread 0's accesses of both sides are the same thread's, in program
    order (a fill of the row's maximum, then the maximum's reduction reading it by thread 0: no
    barrier). Reads of the same buffer on both sides count too (conservative: per-row members
    hardly ever read)."""
    mine_zero, mine_any, mine_per_row = accesses
    for zero, any_thread, per_row in since:
        if not (per_row or mine_per_row):
            return True
        if any_thread & (mine_zero | mine_any) or zero & mine_any:
            return True
    return False


def _emit_reduction(op, row: list[ir.Value], tx: ir.Value, threads: int, cache: _RowCache) -> None:
    """A row reduction: thread `tx` combines the row's elements tx, tx + T, ... from the identity, a
    butterfly per warp, with several warps their results through shared memory and a second
    butterfly; thread 0 combines with the output's value and stores it."""
    combiners = row_combiners(op)
    if isinstance(combiners, str):
        raise PassFailure(f"not a row reduction: {combiners}")
    maps = indexing_maps_of(op)
    n_in = len(op.opview.inputs)
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    out_args = args[n_in:]
    body_ops = [o.operation for o in list(block.operations)[:-1]]
    ranges = classify(op).loop_ranges
    row_len = ranges[-1]
    warps = threads // WARP
    shared = []
    if warps > 1:
        # One slot per warp and output: the warps' results, reduced by warp 0.
        space = workgroup_memory_space()
        for c in combiners:
            shared.append(memref.AllocOp(ir.MemRefType.get([warps], c.results[0].type, memory_space=space),
                                         [], []).result)
    identities = [combiner_identity(c) for c in combiners]
    width = _row_vector(op)
    if width > 1:
        loop = _vector_row_loop(op, maps, ranges, row, tx, threads, width, identities, combiners, cache)
    else:
        unroll = _unroll(row_len, threads)
        loop = scf.ForOp(tx, _index(row_len), _index(threads * unroll), identities)
        with ir.InsertionPoint(loop.body):
            accs = list(loop.inner_iter_args)
            for element in _trip_elements(loop, unroll, threads):
                dims = _loop_indices(ranges, row, element)
                mapping = {}
                _load_inputs(op, maps, dims, mapping, cache)
                for out, acc in zip(out_args, accs):
                    mapping[out] = acc
                clone_ops(body_ops, mapping)
                accs = [mapping[c.results[0]] for c in combiners]
            scf.YieldOp(accs)
    # Fewer lanes than a warp per row (a matvec's short rows): the butterfly stays within the row's
    # lanes (consecutive lanes of one warp: the offsets below their count).
    values = _butterfly(combiners, out_args, list(loop.results), min(threads, WARP))
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
            scf.YieldOp([combiner_identity(c) for c in combiners])
        values = _butterfly(combiners, out_args, list(pick.results), warps)
    store = _if(arith.CmpIOp(arith.CmpIPredicate.eq, tx, _index(0)).result)
    with ir.InsertionPoint(store.then_block):
        indices_of = _loop_indices(ranges, row, _index(0))
        for i, (c, out, v) in enumerate(zip(combiners, out_args, values)):
            target = op.operands[n_in + i]
            indices = _apply(maps[n_in + i], indices_of)
            initial = memref.LoadOp(target, indices).result
            memref.StoreOp(combine_like(c, out, v, initial), target, indices)
        scf.YieldOp([])


def _row_inputs(op, maps, ranges) -> list[int]:
    """The inputs of a member read in vectors along the row (`ROW_VECTOR_ATTR`): those whose map
    uses the innermost loop, which must be their last index alone (`row_vector_width` chose the
    width; this only refuses what it would not have allowed)."""
    n_in = len(op.opview.inputs)
    inner = len(ranges) - 1
    along = [i for i in range(len(op.operands)) if isinstance(op.operands[i].type, ir.MemRefType)
             and any(_uses_dim(e, inner) for e in maps[i].results)]
    for i in along:
        results = list(maps[i].results)
        last = results[-1]
        if not (isinstance(last, ir.AffineDimExpr) and last.position == inner) or \
                any(_uses_dim(e, inner) for e in results[:-1]):
            raise PassFailure(f"operand #{i} accesses the row along a non-contiguous dimension")
    return [i for i in along if i < n_in]


def _chunk_inputs(op, maps, ranges, row, base, width: int, cache: _RowCache) -> list:
    """Per input of a member, the row chunk of `width` elements from `base`: vectors
    (`_load_pieces`' form, through the row cache) for the inputs read along the row, one value for
    the others (the same element for every element of the chunk: one load), scalars as they are."""
    n_in = len(op.opview.inputs)
    along = _row_inputs(op, maps, ranges)
    base_dims = _loop_indices(ranges, row, base)
    chunk = []
    for i in range(n_in):
        value = op.operands[i]
        if i in along:
            chunk.append(cache.load_row(value, maps[i], base_dims, width))
        elif isinstance(value.type, ir.MemRefType):
            chunk.append(cache.load(value, maps[i], base_dims))
        else:
            chunk.append(value)
    return chunk


def _chunk_element(chunk, lane: int) -> ir.Value:
    """Element `lane` of one input's row chunk (`_chunk_inputs`)."""
    return _piece_element(chunk, lane) if isinstance(chunk, list) else chunk


def _lane_dims(ranges, row, base: ir.Value, lane: int) -> list[ir.Value]:
    element = base if lane == 0 else arith.AddIOp(base, _index(lane)).result
    return _loop_indices(ranges, row, element)


def _vector_row_loop(op, maps, ranges, row, tx, threads: int, width: int, identities, combiners,
                     cache: _RowCache) -> scf.ForOp:
    """The row loop of a reduction read in vectors (`ROW_VECTOR_ATTR`: a matvec, or a row
    reduction whose accesses along the row allow it, `row_vector_width`): thread `tx` takes the
    chunks tx, tx + T, ... of `width` consecutive elements (128-bit `vector.load`s of each input
    that reads the row, through the row cache), combining their elements in order from the
    identity (elements width*tx .. width*tx + width-1, then width*(tx + T) ..., `_unroll` chunks a
    trip, at most `ROW_CHUNKS_ATTR`); inputs that do not read the row are loaded once per chunk."""
    n_in = len(op.opview.inputs)
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    out_args = args[n_in:]
    body_ops = [o.operation for o in list(block.operations)[:-1]]
    row_len = ranges[-1]
    if row_len % width:
        raise PassFailure(f"a row of {row_len} elements read in vectors of {width}")
    unroll = _unroll(row_len // width, threads, _row_chunks(op))
    step = threads * width
    start = arith.MulIOp(tx, _index(width)).result
    loop = scf.ForOp(start, _index(row_len), _index(step * unroll), identities)
    with ir.InsertionPoint(loop.body):
        accs = list(loop.inner_iter_args)
        iv = loop.induction_variable
        for u in range(unroll):
            base = iv if u == 0 else arith.AddIOp(iv, _index(u * step)).result
            chunk = _chunk_inputs(op, maps, ranges, row, base, width, cache)
            for lane in range(width):
                dims = _lane_dims(ranges, row, base, lane)
                mapping = {args[i]: _chunk_element(chunk[i], lane) for i in range(n_in)}
                for out, acc in zip(out_args, accs):
                    mapping[out] = acc
                clone_ops([o for o in body_ops if o.name != "linalg.index"], _with_indices(body_ops, mapping, dims))
                accs = [mapping[c.results[0]] for c in combiners]
        scf.YieldOp(accs)
    return loop


def _with_indices(body_ops, mapping: dict, dims: list[ir.Value]) -> dict:
    """`mapping` with the body's `linalg.index` results bound to the loop indices `dims`."""
    for inner_op in body_ops:
        if inner_op.name == "linalg.index":
            mapping[inner_op.results[0]] = dims[ir.IntegerAttr(inner_op.attributes["dim"]).value]
    return mapping


def _emit_vector_elementwise(op, row: list[ir.Value], tx: ir.Value, threads: int, width: int,
                             cache: _RowCache) -> None:
    """`_emit_elementwise` in chunks of `width` consecutive elements (`ROW_VECTOR_ATTR`): thread
    `tx` takes the chunks tx, tx + T, ... of the row; per trip every chunk's inputs are loaded first
    (vectors: `_unroll` of them in flight, none waiting behind the trip's stores), then each
    chunk's elements computed and stored as vectors. Each element computed as before: values
    unchanged."""
    maps, n_in, block, args, ranges = _member_parts(op)
    row_len = ranges[-1]
    if row_len % width:
        raise PassFailure(f"a row of {row_len} elements read in vectors of {width}")
    _row_inputs(op, maps, ranges)
    unroll = _unroll(row_len // width, threads, _row_chunks(op))
    step = threads * width
    start = arith.MulIOp(tx, _index(width)).result
    loop = scf.ForOp(start, _index(row_len), _index(step * unroll))
    with ir.InsertionPoint(loop.body):
        iv = loop.induction_variable
        trips = []
        for u in range(unroll):
            base = iv if u == 0 else arith.AddIOp(iv, _index(u * step)).result
            base_dims = _loop_indices(ranges, row, base)
            chunk = _chunk_inputs(op, maps, ranges, row, base, width, cache)
            for i, arg in enumerate(args[n_in:]):
                if list(arg.uses):
                    chunk.append(cache.load_row(op.operands[n_in + i], maps[n_in + i], base_dims, width))
                else:
                    chunk.append(None)
            trips.append((base, base_dims, chunk))
        for base, base_dims, chunk in trips:
            results = [[] for _ in args[n_in:]]
            for lane in range(width):
                dims = _lane_dims(ranges, row, base, lane)
                mapping = {arg: _chunk_element(c, lane) for arg, c in zip(args, chunk) if c is not None}
                for i, value in enumerate(_clone_body(block, mapping, dims)):
                    results[i].append(value)
            for i, elements in enumerate(results):
                cache.store_row(_pieces_of(elements), op.operands[n_in + i], maps[n_in + i], base_dims)
        scf.YieldOp([])


def _build_kernel(leader: ir.Operation, members: list[ir.Operation]) -> None:
    """One `gpu.launch` at the leader's place: a row per `threads` threads, `rows_per_block` rows per
    block; each member in program order over the row (a per-row member, the fill of a row buffer,
    by thread 0 of the row), a barrier between members (a later member may read what other threads
    of the block stored: the row's reduction results) but where `_needs_barrier` shows that no
    buffer is shared between different threads of the two sides (a fill and the reduction after it)."""
    threads = ir.IntegerAttr(leader.attributes[ROW_THREADS_ATTR]).value
    rows_per_block = ir.IntegerAttr(leader.attributes[ROWS_PER_BLOCK_ATTR]).value
    reduces = [m for m in members if "reduction" in str(list(ir.ArrayAttr(m.attributes["iterator_types"]))[-1])]
    extents = _row_extents(reduces[0] if reduces else members[0])
    per_row = {m for m in members if _is_per_row(m, extents)} if len(members) > 1 else set()
    for member in members:
        if problem := row_member_problem(member):
            raise PassFailure(problem)
    rows = math.prod(extents)
    warps = threads // WARP
    if warps > 1 and rows_per_block != 1:
        raise PassFailure("a block per row takes one row per block")
    if threads < WARP and (rows % rows_per_block or threads * rows_per_block % WARP):
        raise PassFailure("rows sharing a warp must fill whole warps and divide the rows (full-warp shuffles)")
    if len(members) > 1 and rows % rows_per_block:
        raise PassFailure("the rows per block of a row group must divide its rows (barriers)")

    grid = -(-rows // rows_per_block)
    launch = gpu.LaunchOp((_index(grid), _index(1), _index(1)), (_index(threads), _index(rows_per_block), _index(1)))
    launch.attributes[KERNEL_ATTR] = leader.attributes[KERNEL_ATTR]
    body = launch.regions[0].blocks[0]
    bx, tx, ty = body.arguments[0], body.arguments[3], body.arguments[4]
    with ir.InsertionPoint(body):
        row_id = arith.AddIOp(arith.MulIOp(bx, _index(rows_per_block)).result, ty).result
        guard = None
        if rows % rows_per_block:
            guard = _if(arith.CmpIOp(arith.CmpIPredicate.ult, row_id, _index(rows)).result)
            ip = ir.InsertionPoint(guard.then_block)
        else:
            ip = ir.InsertionPoint(body)
        with ip:
            # The row's indices, outermost first.
            row, rest = [], row_id
            for extent in reversed(extents):
                row.insert(0, arith.RemUIOp(rest, _index(extent)).result)
                rest = arith.DivUIOp(rest, _index(extent)).result
            entries = _cache_entries(members, rows_per_block, ROW_CACHE_BYTES, per_row) if len(members) > 1 else {}
            space = workgroup_memory_space()
            for value, (_, private) in list(entries.items()):
                t = ir.MemRefType(value.type)
                shared = memref.AllocOp(ir.MemRefType.get([rows_per_block, t.shape[-1]], t.element_type,
                                                          memory_space=space), [], []).result
                entries[value] = (shared, private)
            cache = _RowCache(entries, ty if rows_per_block > 1 else _index(0))
            since: list = []
            for member in members:
                accesses = (*_thread_accesses(member, member in per_row), member in per_row)
                if _needs_barrier(since, accesses):
                    gpu.BarrierOp()
                    since = []
                since.append(accesses)
                if member in per_row:
                    _emit_per_row(member, row, tx)
                elif "reduction" in str(list(ir.ArrayAttr(member.attributes["iterator_types"]))[-1]):
                    _emit_reduction(member, row, tx, threads, cache)
                elif (width := _row_vector(member)) > 1:
                    _emit_vector_elementwise(member, row, tx, threads, width, cache)
                else:
                    _emit_elementwise(member, row, tx, threads, cache)
                cache.done(member)
            if guard is not None:
                scf.YieldOp([])
        gpu.TerminatorOp()


@register_pass
class ReduceRows(Pass):
    name = "codegen-gpu-reduce-rows"
    summary = "Row reductions annotated by the GPU row-reduction schedule -> gpu.launch kernels with warp-shuffle reductions"

    def run(self, module):
        reduce_rows(module)
