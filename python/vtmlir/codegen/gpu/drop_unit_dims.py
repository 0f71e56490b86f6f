"""`codegen-gpu-drop-unit-dims`: the unit loops of a block's contraction tile dropped through
rank-reducing views, so a batch matmul's block works on 2-d tiles like a matmul's.

A batch contraction (attention's two products, `torch.bmm`) is tiled with its batch dimension by 1
onto the grid (`ContractionSchedule`, gpu-tile stage): each block's `linalg.generic` then reads
`memref<1x16x32xf16, strided<[2048, 32, 1], offset: ?>>` views. Upstream's fold-unit-extent-dims
patterns leave ops on non-identity layouts alone (both the slice and the reshape strategies), and the
shared-memory tiles, warp tiles and `vector.contract` built from a 4-loop op fail to vectorise. This
pass takes the ops the schedule annotated `codegen.drop_unit_dims` (between its tile and promote
phases): every loop of extent 1 leaves the indexing maps and the iterator types, and every operand
is replaced by a rank-reducing `memref.subview` without the unit dimensions those loops index
(strides and offset kept: the same elements). Only projected-permutation maps are handled (what a
contraction has); anything else is an error naming the op.

Then every block `scf.forall` of more than three dimensions (a contraction with more batch and
outer tiles of 1 than the grid holds next to its m and n tiles: `ContractionTiling.linearized`) is
rewritten into one of three: its leading dimensions become one over their row-major product, the
old indices recovered by `affine.apply` floordiv/mod at the top of the body (upstream's
`map_forall_to_blocks` launches linear dimensions 0-2 only).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import affine, memref, scf

from ...ir_utils import walk_ops
from ...passes.registry import Pass, PassFailure, register_pass
from ..kernels import indexing_maps_of

DROP_UNIT_DIMS_ATTR = "codegen.drop_unit_dims"


def _strides_and_offset(t: ir.MemRefType) -> tuple[list[int], int]:
    strides, offset = t.get_strides_and_offset()
    return list(strides), offset


def _rank_reduced(value: ir.Value, keep: list[int]) -> ir.Value:
    """A view of `value` without its dimensions not in `keep` (all of extent 1)."""
    t = ir.MemRefType(value.type)
    shape = list(t.shape)
    strides, offset = _strides_and_offset(t)
    layout = ir.StridedLayoutAttr.get(offset, [strides[i] for i in keep])
    result = ir.MemRefType.get([shape[i] for i in keep], t.element_type, layout, t.memory_space)
    return memref.SubViewOp(result, value, [], [], [], [0] * t.rank, shape, [1] * t.rank).result


def drop_unit_loops(op: ir.Operation) -> None:
    """Drop the unit loops of a memref `linalg.generic` in place (see the module docstring)."""
    maps = indexing_maps_of(op)
    if maps is None:
        raise PassFailure(f"codegen-gpu-drop-unit-dims: '{op.name}' has no indexing maps", op.location)
    operands = list(op.operands)
    ranges: list[int | None] = [None] * maps[0].n_dims
    for amap, value in zip(maps, operands):
        if not isinstance(value.type, ir.MemRefType):
            raise PassFailure("codegen-gpu-drop-unit-dims: a scalar operand", op.location)
        for expr, extent in zip(amap.results, ir.MemRefType(value.type).shape):
            if not isinstance(expr, ir.AffineDimExpr) or amap.n_symbols:
                raise PassFailure("codegen-gpu-drop-unit-dims: an indexing map that is not a projected "
                                  "permutation", op.location)
            ranges[expr.position] = extent
    unit = {d for d, extent in enumerate(ranges) if extent == 1}
    if not unit or len(unit) == len(ranges):
        return
    renumber = {}
    for d in range(len(ranges)):
        if d not in unit:
            renumber[d] = len(renumber)
    new_maps = []
    with ir.InsertionPoint(op):
        for i, (amap, value) in enumerate(zip(maps, operands)):
            keep = [j for j, e in enumerate(amap.results) if e.position not in unit]
            exprs = [ir.AffineDimExpr.get(renumber[amap.results[j].position]) for j in keep]
            new_maps.append(ir.AffineMapAttr.get(ir.AffineMap.get(len(renumber), 0, exprs)))
            if len(keep) != ir.MemRefType(value.type).rank:
                op.operands[i] = _rank_reduced(value, keep)
    iterators = list(ir.ArrayAttr(op.attributes["iterator_types"]))
    op.attributes["indexing_maps"] = ir.ArrayAttr.get(new_maps)
    op.attributes["iterator_types"] = ir.ArrayAttr.get([iterators[d] for d in renumber])
    del op.attributes[DROP_UNIT_DIMS_ATTR]


def drop_unit_dims(module_op) -> int:
    """Rewrite every op annotated `codegen.drop_unit_dims`; returns how many."""
    with module_op.context, ir.Location.unknown():
        found = [op for op in walk_ops(module_op) if DROP_UNIT_DIMS_ATTR in op.attributes]
        for op in found:
            if op.name != "linalg.generic":
                raise PassFailure(f"codegen-gpu-drop-unit-dims: '{op.name}' is not a linalg.generic", op.location)
            with op.location:
                drop_unit_loops(op)
    return len(found)


@register_pass
class DropUnitDims(Pass):
    name = "codegen-gpu-drop-unit-dims"
    summary = "Unit loops of annotated linalg.generic ops dropped through rank-reducing memref views (any layout)"

    def run(self, module):
        drop_unit_dims(module)
        linearize_block_foralls(module)


# --------------------------------------------------------------------------------------------------
# Block foralls with more dimensions than the grid: the leading (batch, outer) ones linearised.

def linearize_forall(forall: ir.Operation, count: int) -> ir.Operation:
    """Replace `forall` by one whose first dimension runs over the row-major product of its first
    `count` dimensions (tiles of 1 from 0), delinearised at the top of the body (`arith.divui` /
    `remui` by constants); the mapping keeps the last of the merged dimensions' entry. Returns the new
    forall (attributes copied)."""
    view = forall.opview
    lbs = list(ir.DenseI64ArrayAttr(forall.attributes["staticLowerBound"]))
    ubs = list(ir.DenseI64ArrayAttr(forall.attributes["staticUpperBound"]))
    steps = list(ir.DenseI64ArrayAttr(forall.attributes["staticStep"]))
    if len(list(view.results)) or any(x < 0 for x in lbs + ubs + steps) or \
            any(lbs[i] != 0 or steps[i] != 1 for i in range(count)):
        raise PassFailure("codegen-gpu-drop-unit-dims: a block forall to linearise with dynamic bounds, "
                          "results or non-unit leading steps", forall.location)
    sizes = ubs[:count]
    mapping = list(ir.ArrayAttr(forall.attributes["mapping"]))
    with ir.InsertionPoint(forall), forall.location:
        new = scf.ForallOp([0] + lbs[count:], [prod_of(sizes)] + ubs[count:], [1] + steps[count:],
                           mapping=ir.ArrayAttr.get(mapping[count - 1:]))
    for i in range(len(forall.attributes)):
        attr = forall.attributes[i]
        if attr.name not in ("staticLowerBound", "staticUpperBound", "staticStep", "mapping",
                             "operandSegmentSizes", "operand_segment_sizes"):
            new.operation.attributes[attr.name] = attr.attr
    old_body = forall.regions[0].blocks[0]
    body = new.body
    with ir.InsertionPoint(body), forall.location:
        linear = body.arguments[0]
        ivs = []
        stride = prod_of(sizes)
        d0 = ir.AffineDimExpr.get(0)
        for size in sizes:
            stride //= size
            expr = ir.AffineModExpr.get(ir.AffineFloorDivExpr.get(d0, ir.AffineConstantExpr.get(stride)),
                                        ir.AffineConstantExpr.get(size))
            ivs.append(affine.AffineApplyOp(ir.AffineMap.get(1, 0, [expr]), [linear]).result)
    for old_iv, value in zip(list(old_body.arguments)[:count], ivs):
        old_iv.replace_all_uses_with(value)
    for old_iv, new_iv in zip(list(old_body.arguments)[count:], list(body.arguments)[1:]):
        old_iv.replace_all_uses_with(new_iv)
    for op in list(old_body.operations):
        op.detach_from_parent()
        body.append(op)
    forall.erase()
    return new.operation


def prod_of(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _block_mapped(op) -> bool:
    if "mapping" not in op.attributes:
        return False
    return all(str(a).startswith("#gpu.block<") for a in ir.ArrayAttr(op.attributes["mapping"]))


def linearize_block_foralls(module_op) -> int:
    """Every block forall of more than three dimensions (a contraction's batch and outer tiles of 1
    next to its m and n tiles: `ContractionTiling.linearized`) with its leading dimensions merged
    into one, three left (`linearize_forall`); returns how many."""
    with module_op.context, ir.Location.unknown():
        found = [op for op in walk_ops(module_op) if op.name == "scf.forall" and _block_mapped(op)
                 and len(ir.ArrayAttr(op.attributes["mapping"])) > 3]
        for op in found:
            linearize_forall(op, len(ir.ArrayAttr(op.attributes["mapping"])) - 2)
    return len(found)
