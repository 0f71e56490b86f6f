"""`codegen-transpose-b-operands`: a contraction's B operand laid out with its vector dimension innermost.

The contraction schedule runs its vectors along C's contiguous dimension n, reading B's rows. A
Linear layer's weight is `W[n, k]` (`x @ W^T`): its contiguous dimension is k, so every vector of B
would be a strided gather, in the packed panel too (the packing copy keeps the layout). This pass
gives such a contraction a B whose innermost dimension is n, the other dimensions in their order:

- a constant B (a weight: `memref.get_global` of a constant global, possibly reshaped, or a static
  subview of one: the Q and V rows of a fused QKV weight) is transposed once, at compile time, into
  a new constant global (oneDNN and IREE pre-pack weights the same way);
- any other B (attention's K in `Q @ K^T`) is copied, transposed, one panel at a time: a parallel
  loop over B's other dimensions (batch, heads) and its N tiles of `PANEL_N` columns, each iteration
  transposing its tile of B (K x PANEL_N) into a stack buffer and running the contraction on that
  tile of C (`_transposed_panels`). The panel is laid out as the contraction schedule packs B, so it
  is read in place (`schedules._rows_packed_already`): B is moved once, into L1, instead of into a
  whole transposed buffer (written to memory and read back) and then packed again per tile. Where
  the panels do not fit (any map that is no projected permutation, N without a divisor of whole
  vectors, a panel over `PANEL_BYTES`, fewer than `MIN_PANELS` iterations, a contraction inside a
  parallel loop already), the whole B is copied,
  transposed, by a data-movement kernel before the contraction.

The contraction reads the same values and sums them in the same order: results are bitwise those of
the untransposed kernel.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, memref, scf

from ..passes.registry import Pass, register_pass
from .bodies import iterator_attr
from .kernels import KernelKind, classify, rewrite_generics
from .schedules import chunk
from .weights import Globals

# Columns of C (and of the transposed B panel) per iteration of the panel loop: the contraction
# schedule's N tile (`ContractionSchedule.cache_n`), a multiple of the widest vector (16 f32 lanes).
PANEL_N, PANEL_MULTIPLE = 256, 16
# The largest panel (K x PANEL_N elements) on a thread's stack: attention's head dimension (32-128)
# fits many times over; a long K (a product over a sequence) keeps the whole transposed copy.
PANEL_BYTES = 256 << 10
# Iterations the panel loop needs to give the threads work (it replaces the contraction's own split).
MIN_PANELS = 8

def transpose_b_operand(op, globals_: Globals) -> bool:
    """Give one contraction (`op`, a linalg.generic on memrefs) a B with n innermost."""
    kernel = classify(op)
    if kernel.kind is not KernelKind.CONTRACTION or not kernel.b_transposed:
        return False
    op = op.operation
    b = kernel.b_operand
    value, bmap = op.operands[b], kernel.maps[b]
    results = list(bmap.results)
    position = next(i for i, e in enumerate(results) if isinstance(e, ir.AffineDimExpr) and e.position == kernel.n[-1])
    perm = [i for i in range(len(results)) if i != position] + [position]
    new_map = ir.AffineMap.get(bmap.n_dims, bmap.n_symbols, [results[i] for i in perm])
    source_type = ir.MemRefType(value.type)
    shape = [source_type.shape[i] for i in perm]
    with op.location:
        data = globals_.constant_value(value, slices=True)
        if data is not None:
            with ir.InsertionPoint(op):
                new_value = globals_.read_relaid(value, data.transpose(perm), "transposed")
        elif _transposed_panels(op, kernel, perm, new_map):
            return True
        else:
            new_value = _transposed_copy(op, value, perm, shape, source_type.element_type)
    op.operands[b] = new_value
    maps = list(kernel.maps)
    maps[b] = new_map
    op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
    return True


def _transposed_panels(op, kernel, perm: list[int], panel_map: ir.AffineMap) -> bool:
    """Replace `op` by a parallel loop over its tiles of C that each transpose their panel of B into a
    stack buffer and run the contraction on it (module docstring); False where it does not apply."""
    maps, ranges = kernel.maps, kernel.loop_ranges
    b, ni = kernel.b_operand, kernel.n[-1]
    if kernel.in_parallel_loop or not all(isinstance(e, ir.AffineDimExpr) for m in maps for e in m.results):
        return False  # (inside a parallel loop the panel loop would fork a nested team per call)
    b_dims = [e.position for e in maps[b].results]
    # B's dimensions other than k and n are looped one at a time (GQA's KV heads; a batch).
    looped = [d for d in b_dims if d not in kernel.k and d != ni]
    nc = chunk(ranges[ni], 1, multiple=PANEL_MULTIPLE, largest=PANEL_N)
    if nc % PANEL_MULTIPLE:
        return False
    b_type = ir.MemRefType(op.operands[b].type)
    element = b_type.element_type
    sizes = {d: 1 for d in looped}
    sizes[ni] = nc
    panel_shape = [sizes.get(d, ranges[d]) for d in (b_dims[i] for i in perm)]
    panel_elements = 1
    for extent in panel_shape:
        panel_elements *= extent
    if panel_elements * b_type.element_type.width // 8 > PANEL_BYTES:
        return False
    extents = [ranges[d] for d in looped] + [ranges[ni] // nc]
    iterations = 1
    for extent in extents:
        iterations *= extent
    if iterations < MIN_PANELS:
        return False
    index = ir.IndexType.get()
    with ir.InsertionPoint(op):
        forall = scf.ForallOp([0] * len(extents), extents, [1] * len(extents))
        with ir.InsertionPoint(forall.body):
            scf.InParallelOp()
    # Each iteration (each thread) transposes into a panel of its own, allocated in the loop's body
    # (`codegen-hoist-static-allocas` never hoists it out of a parallel loop: shared, it would be a
    # data race), and runs its contraction alone (`Kernel.in_parallel_loop`).
    with ir.InsertionPoint(forall.body.operations[0]):
        ivs = dict(zip(looped, forall.induction_variables))
        ivs[ni] = arith.MulIOp(forall.induction_variables[-1], arith.ConstantOp(index, nc).result).result

        def tile_of(value, amap):
            dims = [e.position for e in amap.results]
            return memref.subview(value, [ivs.get(d, 0) for d in dims], [sizes.get(d, ranges[d]) for d in dims],
                                  [1] * len(dims))

        panel = memref.AllocaOp(ir.MemRefType.get(panel_shape, element), [], [],
                                alignment=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)).result
        _copy_transposed(op, tile_of(op.operands[b], maps[b]), panel, perm, element)
        operands = [panel if i == b else tile_of(value, maps[i]) for i, value in enumerate(op.operands)]
        tiled = op.clone(ip=ir.InsertionPoint(forall.body.operations[len(forall.body.operations) - 1]))
        for i, value in enumerate(operands):
            tiled.operands[i] = value
        new_maps = list(maps)
        new_maps[b] = panel_map
        tiled.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in new_maps])
    op.erase()
    return True


def _copy_transposed(op, source, buffer, perm: list[int], element_type) -> None:
    """A data-movement kernel writing `source` into `buffer` with its dimensions in the order `perm`
    (at the insertion point)."""
    rank = len(perm)
    # The copy iterates over the new buffer: its dimension j is the source's dimension perm[j].
    source_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(perm.index(p)) for p in range(rank)])
    copy = linalg.GenericOp([], [source], [buffer],
                            ir.ArrayAttr.get([ir.AffineMapAttr.get(source_map),
                                              ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
                            ir.ArrayAttr.get([iterator_attr(op.context, "parallel")] * rank))
    body = copy.regions[0].blocks.append(element_type, element_type)
    with ir.InsertionPoint(body):
        linalg.YieldOp([body.arguments[0]])


def _transposed_copy(op, value, perm: list[int], shape: list[int], element_type) -> ir.Value:
    """A buffer holding `value` with its dimensions in the order `perm`, written by a copy kernel
    before `op` and freed after it."""
    with ir.InsertionPoint(op):
        buffer = memref.AllocOp(ir.MemRefType.get(shape, element_type), [], [], alignment=64).result
        _copy_transposed(op, value, buffer, perm, element_type)
    with ir.InsertionPoint.after(op):
        memref.DeallocOp(buffer)
    return buffer


def transpose_b_operands(module_op) -> int:
    """Transpose the B operand of every contraction that reads it along k; returns how many. A
    weight global that nothing reads untransposed any more is erased (the JIT would keep it)."""
    globals_ = Globals(module_op)
    count = rewrite_generics(module_op, lambda op: transpose_b_operand(op, globals_))
    globals_.erase_unread()
    return count


@register_pass
class TransposeBOperands(Pass):
    name = "codegen-transpose-b-operands"
    summary = "Give contractions a B operand whose innermost dimension is n (weights transposed at compile time)"

    def run(self, module):
        transpose_b_operands(module)
