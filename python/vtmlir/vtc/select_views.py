"""Per-element select: a reader of a multi-piece view picks each element's piece inside one loop.

VTC §6 reads a multi-piece virtual tensor by splitting the reader's loop range at the piece
boundaries (vt-lower-views, `split_multi_piece_readers`): one loop nest per piece, each reading
its source through an affine map. Where the pieces are finer than a tile that gives many tiny
loop nests (a kernel launch each on a GPU), so the issue's rule is "per-element select only where
the pieces are finer than a tile": one loop nest whose body computes, for the element it reads,
every piece's predicate (the virtual index inside the piece's box) and physical index, loads each
source with `tensor.extract` at the index clamped into the source (so every load is in bounds),
and keeps the right value with `arith.select`. Same elements read, same arithmetic: bitwise
identical. It also works where splitting cannot (the split dim a reduction loop, more than
MAX_SPLIT_PIECES pieces), which would otherwise gather the view.

The view operand of the reader is replaced by the first source read at index 0 (its block argument
is no longer used; canonicalization drops the operand), keeping each loop's bound inferable.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import affine, arith, linalg, tensor

from ..dialects.affine_eval import compose_maps
from ..dialects.vt_mapping import MappingFunction
from .reindex import maps_of, shape_of


def _down(e):
    return e.maybe_downcast() if hasattr(e, "maybe_downcast") else e


def narrowest_piece(mapping: MappingFunction, shape) -> int:
    """The smallest extent, in elements along its split dims, of any piece of the view."""
    return min((hi - lo) for p in mapping.pieces for _, lo, hi in p.ranges) if any(
        p.ranges for p in mapping.pieces) else min(shape or [1])


def select_reader(op, k: int, view, mapping: MappingFunction) -> bool:
    """Rewrite `op` (a linalg.generic reading `view` as input k) to read the view's sources
    element by element with `arith.select`. Returns False (IR untouched) when it cannot."""
    n_in = len(op.operands) - len(op.results)
    if k >= n_in:
        return False
    maps = maps_of(op)
    in_map = maps[k]
    sources = list(view.operands)
    first = sources[mapping.pieces[0].source]
    zero_map = ir.AffineMap.get(in_map.n_dims, 0,
                                [ir.AffineConstantExpr.get(0)] * len(shape_of(first)))
    others = [m for i, m in enumerate(maps) if i != k]
    bare = {ir.AffineDimExpr(e).position for m in others for e in m.results
            if isinstance(_down(e), ir.AffineDimExpr)}
    if any(d not in bare for d in range(in_map.n_dims)):
        return False   # the view operand alone gives some loop its bound
    block = op.regions[0].blocks[0]
    arg = block.arguments[k]
    index = ir.IndexType.get()
    body_ops = list(block.operations)
    with op.location, ir.InsertionPoint(body_ops[0]):
        loops = [linalg.IndexOp(d).result for d in range(in_map.n_dims)]

        def apply(expr):
            return affine.AffineApplyOp(ir.AffineMap.get(in_map.n_dims, 0, [expr]), loops).result

        def const(c):
            return arith.ConstantOp(index, c).result

        value = None
        for p in reversed(mapping.pieces):
            src = sources[p.source]
            src_shape = shape_of(src)
            phys = compose_maps(p.map, in_map)
            idx = []
            for r, e in enumerate(phys.results):
                i = apply(e)
                i = arith.MaxSIOp(i, const(0)).result
                idx.append(arith.MinSIOp(i, const(src_shape[r] - 1)).result)
            loaded = tensor.ExtractOp(src, idx).result
            if value is None:   # the last piece: taken where no other piece is
                value = loaded
                continue
            pred = None
            for d, lo, hi in p.ranges:
                v = apply(in_map.results[d])
                inside = arith.AndIOp(
                    arith.CmpIOp(arith.CmpIPredicate.sge, v, const(lo)).result,
                    arith.CmpIOp(arith.CmpIPredicate.slt, v, const(hi)).result).result
                pred = inside if pred is None else arith.AndIOp(pred, inside).result
            value = loaded if pred is None else arith.SelectOp(pred, loaded, value).result
    arg.replace_all_uses_with(value)
    op.operands[k] = first
    maps[k] = zero_map
    op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
    return True
