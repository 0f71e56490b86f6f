"""`codegen-drop-transfer-unit-dims`: a vector transfer on a buffer with unit dimensions reads and
writes through a view without them.

A 1x1 convolution over 1x1 pixels (DenseNet's last block at 32x32 input, a classifier's conv head)
is an `N x C x 1 x 1` buffer. Its contraction reads and writes the rank-2 views the kernel passes
make (`memref.subview ... to memref<8x144xf32>`), but `fold-memref-alias-ops` (in the schedule's
clean-up and before the LLVM lowering) folds those views into the transfers: the register tile's
accumulator becomes `vector.transfer_read %c[0, j, 0, 0] {permutation_map = (d0, d1, d2, d3) ->
(d0, d1)} : memref<8x64x1x1xf32>, vector<8x32xf32>`, its write a `vector<8x32x1x1xf32>` on the
same buffer, the packed A rows a `vector<256xf32>` read through `(d0, d1, d2, d3) -> (d1)`. None of
these is a minor identity of the buffer (its innermost dimensions are the unit ones), so
`convert-vector-to-scf` unrolls each into one scalar load or store per element: 256 loads, inserts,
extracts and stores for an 8x32 tile, where the same kernel on a rank-2 buffer moves 8 vectors
(DenseNet-169 at batch 8: 8x64x752 took 612 us, 12x the rank-2 kernel's time).

This pass gives each such transfer a rank-reducing `memref.subview` without the buffer's unit
dimensions that the transfer does not span (extent 1, index 0), and drops the vector's unit
dimensions that ran along them (`vector.shape_cast` back to the original type, folded into a
shape cast of the original value where one exists). Only unit dimensions go: the same elements in
the same order, bitwise. It runs after the last `fold-memref-alias-ops`, which would fold the views
back.

Upstream's `rank_reducing_subview_patterns` does this only for minor-identity transfers at index 0
in every dimension, which none of the transfers above is.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import memref, vector

from ..passes.registry import Pass, register_pass
from .bodies import static_shape


def drop_transfer_unit_dims(module_op: ir.Operation) -> int:
    """Rewrite every eligible transfer of `module_op`; returns how many were rewritten."""
    transfers = []

    def collect(op):
        if op.name in ("vector.transfer_read", "vector.transfer_write"):
            transfers.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(collect)
    return sum(_rewrite(op.opview) for op in transfers)


def _constant_zero(value) -> bool:
    if isinstance(value, ir.BlockArgument) or value.owner.name != "arith.constant":
        return False
    attr = value.owner.attributes["value"]
    return isinstance(attr, ir.IntegerAttr) and ir.IntegerAttr(attr).value == 0


def _plan(op):
    """(buffer dimensions kept, vector dimensions kept, the map over the kept buffer dimensions) for
    `op`, or None when nothing can go or dropping would not help."""
    if op.mask is not None or not isinstance(op.base.type, ir.MemRefType):
        return None
    shape = static_shape(op.base)
    vtype = ir.VectorType(op.result.type if op.name == "vector.transfer_read" else op.valueToStore.type)
    if shape is None or vtype.scalable:
        return None
    vshape = list(vtype.shape)
    results = list(ir.AffineMapAttr(op.permutation_map).value.results)
    spanned = {}  # buffer dimension -> vector dimension that runs along it
    for v, expr in enumerate(results):
        if isinstance(expr, ir.AffineDimExpr):
            spanned[expr.position] = v
    dropped = [d for d, size in enumerate(shape)
               if size == 1 and (d not in spanned or vshape[spanned[d]] == 1) and _constant_zero(op.indices[d])]
    if not dropped:
        return None
    kept_dims = [d for d in range(len(shape)) if d not in dropped]
    kept_vector = [v for v in range(len(vshape)) if not (isinstance(results[v], ir.AffineDimExpr)
                                                         and results[v].position in dropped)]
    if not kept_vector:
        return None  # a 0-d transfer (of one element) has no LLVM lowering
    new_map = _reduced_map(results, kept_dims, kept_vector)
    old_map = ir.AffineMapAttr(op.permutation_map).value
    # Worth it only where the transfer then lowers better: a map that becomes a minor identity (with
    # broadcasts), or unit vector dimensions that go.
    if len(kept_vector) == len(vshape) and (_minor_identity(old_map) or not _minor_identity(new_map)):
        return None
    return kept_dims, kept_vector, new_map


def _minor_identity(amap: ir.AffineMap) -> bool:
    """Whether result i of `amap` is the i-th of its innermost dimensions or a broadcast (0): a
    transfer that LLVM's lowering moves a row at a time."""
    first = amap.n_dims - len(amap.results)
    return all((isinstance(e, ir.AffineDimExpr) and e.position == first + i)
               or (isinstance(e, ir.AffineConstantExpr) and e.value == 0) for i, e in enumerate(amap.results))


def _reduced_map(results, kept_dims, kept_vector) -> ir.AffineMap:
    renumber = {d: i for i, d in enumerate(kept_dims)}
    exprs = [ir.AffineDimExpr.get(renumber[results[v].position]) if isinstance(results[v], ir.AffineDimExpr)
             else results[v] for v in kept_vector]
    return ir.AffineMap.get(len(kept_dims), 0, exprs)


def _reduced_view(op, kept_dims):
    """A rank-reducing subview of `op`'s buffer with only `kept_dims`, before `op`."""
    base_type = ir.MemRefType(op.base.type)
    shape = list(base_type.shape)
    strides, offset = base_type.get_strides_and_offset()
    layout = ir.StridedLayoutAttr.get(offset, [strides[d] for d in kept_dims])
    view_type = ir.MemRefType.get([shape[d] for d in kept_dims], base_type.element_type, layout,
                                  base_type.memory_space)
    rank = len(shape)
    return memref.SubViewOp(view_type, op.base, [], [], [], [0] * rank, shape, [1] * rank).result


def _rewrite(op) -> bool:
    with op.location:
        plan = _plan(op)
        if plan is None:
            return False
        _apply(op, *plan)
    return True


def _apply(op, kept_dims, kept_vector, new_map) -> None:
    in_bounds = [ir.BoolAttr(a).value for a in op.in_bounds]
    new_in_bounds = [in_bounds[v] for v in kept_vector]
    indices = [op.indices[d] for d in kept_dims]
    if op.name == "vector.transfer_read":
        old_type = ir.VectorType(op.result.type)
    else:
        old_type = ir.VectorType(op.valueToStore.type)
    new_type = ir.VectorType.get([old_type.shape[v] for v in kept_vector], old_type.element_type)
    with ir.InsertionPoint(op):
        view = _reduced_view(op, kept_dims)
        if op.name == "vector.transfer_read":
            read = vector.TransferReadOp(new_type, view, indices, new_map, op.padding, new_in_bounds)
            _replace_read(op, read.result)
        else:
            stored, cast = op.valueToStore, None
            if new_type != old_type:
                source = stored.owner if not isinstance(stored, ir.BlockArgument) else None
                if source is not None and source.name == "vector.shape_cast" and source.operands[0].type == new_type:
                    stored, cast = source.operands[0], source  # the unit dimensions the tile got for this write
                else:
                    stored = vector.ShapeCastOp(new_type, stored).result
            vector.TransferWriteOp(None, stored, view, indices, new_map, new_in_bounds)
            op.operation.erase()
            if cast is not None and not list(cast.results[0].uses):
                cast.erase()


def _replace_read(op, reduced) -> None:
    """Replace `op`'s result by `reduced` (the read without unit dimensions), shape cast back to the
    result's type where it differs; a shape cast of the result to the reduced type is `reduced` itself."""
    for use in list(op.result.uses):
        user = use.owner
        if user.name == "vector.shape_cast" and user.results[0].type == reduced.type:
            user.results[0].replace_all_uses_with(reduced)
            user.erase()
    if list(op.result.uses):
        value = reduced if reduced.type == op.result.type else vector.ShapeCastOp(op.result.type, reduced).result
        op.result.replace_all_uses_with(value)
    op.operation.erase()


@register_pass
class DropTransferUnitDims(Pass):
    name = "codegen-drop-transfer-unit-dims"
    summary = "Vector transfers on buffers with unit dimensions (N x C x 1 x 1) through views without them"
    description = (
        "A transfer whose buffer has unit dimensions it does not span (extent 1, index 0), and whose map "
        "then becomes a minor identity or whose vector loses unit dimensions, reads or writes a rank-reducing "
        "subview instead: one vector load or store per row where convert-vector-to-scf unrolled it into "
        "scalar ones. Bitwise."
    )

    def run(self, module):
        drop_transfer_unit_dims(module.operation)
