"""`codegen-keep-strided-transfer-views`: a vector transfer whose vector runs along a strided
dimension of a `memref.subview` reads and writes through an explicit `memref.reinterpret_cast`.

Upstream's `fold-memref-alias-ops` (bundled MLIR) folds a subview with non-unit strides into a
vector transfer as long as the strides are not on the transfer's minor dimensions; a transfer
with a permutation map reads its vector along other dimensions, and the fold then drops their
stride. A transposing copy of `t[0, 0:5:2]` (a padded image's even rows, `vt-fuzz torch` seed
4242 case 1053) read `vector.transfer_read %v[0, i, 0] {permutation_map = (d0, d1, d2) -> (d2, d0)}`
of `memref.subview %x[0, 0, 0] [3, 5, 3] [2, 1, 1]`; folded into a read of `%x`, its vector took
rows 0, 1, 2 instead of 0, 2, 4 -- at every opt level.

This pass, run before each `fold-memref-alias-ops` of the CPU lowering, gives such a transfer the
subview's own layout through `memref.extract_strided_metadata` + `memref.reinterpret_cast`, which
the fold leaves alone and `expand-strided-metadata` lowers: the same addresses as the subview.
Transfers whose vector runs only along unit-stride dimensions (every transfer the schedules make
on purpose: rows and register tiles) are untouched, and so are loads and stores, which the fold
handles.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import memref

from ..ir_utils import walk_ops
from ..passes.registry import Pass, register_pass

TRANSFERS = ("vector.transfer_read", "vector.transfer_write")


def _source_dims(view: ir.Operation) -> list[int] | None:
    """For each result dimension of a (possibly rank-reducing) subview, the source dimension it is
    (unit dimensions dropped from the left first, as MLIR matches them); None when sizes do not match."""
    sizes = list(ir.DenseI64ArrayAttr(view.attributes["static_sizes"]))
    result = ir.MemRefType(view.results[0].type).shape
    dims = []
    for d, size in enumerate(sizes):
        if len(dims) < len(result) and size == result[len(dims)] and \
                (size != 1 or len(sizes) - d == len(result) - len(dims)):
            dims.append(d)
        elif size != 1:
            return None
    return dims if len(dims) == len(result) else None


def _runs_along_a_stride(op: ir.Operation, source: ir.Value) -> bool:
    """Whether the transfer `op` on `source` (a subview) has a vector dimension along a subview
    dimension of stride other than 1."""
    view = source.owner.operation
    strides = list(ir.DenseI64ArrayAttr(view.attributes["static_strides"]))
    if all(s == 1 for s in strides):
        return False
    dims = _source_dims(view)
    permutation = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    read = [e.position for e in permutation.results if isinstance(e, ir.AffineDimExpr)]
    if dims is None:
        return True  # (unmatched: keep the view, always correct)
    return any(strides[dims[i]] != 1 for i in read)


def keep_strided_transfer_views(module_op: ir.Operation) -> int:
    """Rewrite the source of every such transfer under `module_op`; returns how many."""
    count = 0
    for op in [o for o in walk_ops(module_op) if o.name in TRANSFERS]:
        index = 0 if op.name == "vector.transfer_read" else 1
        source = op.operands[index]
        if isinstance(source, ir.BlockArgument) or source.owner.operation.name != "memref.subview":
            continue
        if not _runs_along_a_stride(op, source):
            continue
        t = ir.MemRefType(source.type)
        strides, offset = t.get_strides_and_offset()
        with op.location, ir.InsertionPoint(op):
            metadata = memref.ExtractStridedMetadataOp(source)
            dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
            offsets = [metadata.offset] if offset == dynamic else []
            dyn_strides = [v for v, s in zip(metadata.strides, strides) if s == dynamic]
            dyn_sizes = [v for v, n in zip(metadata.sizes, t.shape) if ir.ShapedType.is_dynamic_size(n)]
            op.operands[index] = memref.ReinterpretCastOp(
                t, metadata.base_buffer, offsets, dyn_sizes, dyn_strides, [offset], list(t.shape), strides).result
        count += 1
    return count


@register_pass
class KeepStridedTransferViews(Pass):
    name = "codegen-keep-strided-transfer-views"
    summary = ("Give a vector transfer that runs along a strided subview dimension an explicit "
               "reinterpret_cast, which fold-memref-alias-ops cannot fold wrongly")

    def run(self, module):
        keep_strided_transfer_views(module)
