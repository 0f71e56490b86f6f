"""`vt-lower-views`: lower virtual tensors (`vt.view`) so the backends can compile the module.

A virtual tensor never allocates where its readers can index the physical tensors through the
mapping (VTC §4.1, §6: loads through the mapping function). At graph level that is a fold into the
reader's indexing map:

* named linalg ops are generalized first (`linalg-generalize-named-ops`), so every linalg reader
  is a `linalg.generic`;
* a single-piece `vt.view` read as an *input* of a `linalg.generic` is folded: the operand becomes
  the view's source and its indexing map `view.map ∘ operand_map` (reader loops → virtual index →
  physical index). Views of views were composed by the rewrite; any left are folded in turn.
* linalg infers loop bounds from the first operand dimension each loop appears in as a bare `dK`.
  A folded map can bring a bare `dK` over a *larger* physical dimension (a slice at offset 0); such
  a result is written `dK mod extent(physical dim)` — the same value for every index in range, and
  no longer a bare dim, so loop bounds still come from the other operands. If a loop is left with
  no bare occurrence at all, the fold is not done.

Everything else is materialised, correctly but as data movement again (vt-stats counts the gather
as a data-movement `linalg.generic`): a view returned, read by a non-linalg op, used as an init, or
with several pieces (a concat read by a compute op; splitting the reader's loop ranges at piece
boundaries is not implemented). Single piece: one gather `linalg.generic` whose input map is the
mapping. Several pieces: one gather per piece over its box, inserted into a `tensor.empty` with
`tensor.insert_slice`.

`vt.store_into` is not lowered (vt-eliminate-data-movement does not create it yet); the CPU
compiler still refuses it by name.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor

from ..dialects.affine_eval import compose_maps
from ..dialects.vt_mapping import MappingFunction
from ..passes.registry import Pass, register_pass


def _views(module) -> list:
    from ..ir_utils import walk_ops

    return walk_ops(module, "vt.view")


def _maps(op) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _shape(value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _loop_extents(op, maps) -> dict[int, int]:
    """Static loop extents of a linalg.generic from the bare dims of its operands' maps."""
    ext: dict[int, int] = {}
    for operand, m in zip(op.operands, maps):
        shape = _shape(operand)
        for r, e in enumerate(m.results):
            if isinstance(_down(e), ir.AffineDimExpr):
                ext.setdefault(ir.AffineDimExpr(e).position, shape[r])
    return ext


def _down(e):
    return e.maybe_downcast() if hasattr(e, "maybe_downcast") else e


def _fold_map(op, operand_number: int, view_map: ir.AffineMap, source) -> ir.AffineMap | None:
    """The reader's new map for `operand_number` reading `source` through `view_map`, or None."""
    maps = _maps(op)
    extents = _loop_extents(op, maps)
    composed = compose_maps(view_map, maps[operand_number])
    src_shape = _shape(source)
    results = []
    for r, e in enumerate(composed.results):
        if isinstance(_down(e), ir.AffineDimExpr):
            k = ir.AffineDimExpr(e).position
            if extents.get(k) != src_shape[r]:
                e = ir.AffineExpr.get_mod(e, ir.AffineConstantExpr.get(src_shape[r]))
        results.append(e)
    new = ir.AffineMap.get(composed.n_dims, composed.n_symbols, results)
    # Every loop must keep a bare occurrence somewhere (linalg's shapes-to-loops inference).
    others = [m for i, m in enumerate(maps) if i != operand_number] + [new]
    bare = {ir.AffineDimExpr(e).position for m in others for e in m.results
            if isinstance(_down(e), ir.AffineDimExpr)}
    if any(k not in bare for k in range(new.n_dims)):
        return None
    return new


def fold_views(module) -> int:
    """Fold single-piece views into generic readers until nothing changes; returns folds done."""
    folds = 0
    changed = True
    while changed:
        changed = False
        for view in _views(module):
            mapping = MappingFunction.from_attr(view.attributes["mapping"])
            if not mapping.is_single_piece:
                continue
            piece = mapping.pieces[0]
            source = view.operands[piece.source]
            result = view.results[0]
            for use in list(result.uses):
                owner = use.owner
                owner = owner.operation if hasattr(owner, "operation") else owner
                if owner.name != "linalg.generic":
                    continue
                n_inputs = len(owner.operands) - len(owner.results)
                k = use.operand_number
                if k >= n_inputs:
                    continue
                new = _fold_map(owner, k, piece.map, source)
                if new is None:
                    continue
                maps = _maps(owner)
                maps[k] = new
                owner.operands[k] = source
                owner.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
                folds += 1
                changed = True
            if not list(result.uses):
                view.erase()
                changed = True
    return folds


def _gather(source, amap: ir.AffineMap, shape: list[int], elt) -> ir.Value:
    """linalg.generic: out[x] = source[amap(x)] over `shape` (bare dims guarded as in folds)."""
    src_shape = _shape(source)
    results = []
    for r, e in enumerate(amap.results):
        if isinstance(_down(e), ir.AffineDimExpr) and shape[ir.AffineDimExpr(e).position] != src_shape[r]:
            e = ir.AffineExpr.get_mod(e, ir.AffineConstantExpr.get(src_shape[r]))
        results.append(e)
    in_map = ir.AffineMap.get(amap.n_dims, 0, results)
    rank = len(shape)
    empty = tensor.EmptyOp(shape, elt).result
    par = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    op = linalg.GenericOp([ir.RankedTensorType.get(shape, elt)], [source], [empty],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(in_map),
                                            ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
                          ir.ArrayAttr.get([par] * rank))
    block = op.regions[0].blocks.append(elt, elt)
    with ir.InsertionPoint(block):
        linalg.YieldOp([block.arguments[0]])
    return op.results[0]


def materialise(view) -> ir.Value:
    """The view as a physical tensor (gathers, one per piece)."""
    mapping = MappingFunction.from_attr(view.attributes["mapping"])
    result = view.results[0]
    shape = _shape(result)
    elt = ir.RankedTensorType(result.type).element_type
    rank = len(shape)
    with ir.InsertionPoint(view), view.location:
        if mapping.is_single_piece:
            p = mapping.pieces[0]
            return _gather(view.operands[p.source], p.map, shape, elt)
        acc = tensor.EmptyOp(shape, elt).result
        for p in mapping.pieces:
            box = [p.extent(d, shape) for d in range(rank)]
            sizes = [hi - lo for lo, hi in box]
            shift = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(d) + lo if lo else ir.AffineDimExpr.get(d)
                                               for d, (lo, _) in enumerate(box)])
            part = _gather(view.operands[p.source], compose_maps(p.map, shift), sizes, elt)
            acc = tensor.InsertSliceOp(part, acc, [], [], [], [lo for lo, _ in box], sizes,
                                       [1] * rank).result
        return acc


def lower_views(module) -> tuple[int, int]:
    """Generalize, fold, materialise the rest. Returns (folds, materialised views)."""
    from ..passes import run_pipeline

    if not _views(module):
        return 0, 0
    run_pipeline(module, "func.func(linalg-generalize-named-ops)")
    with module.context:
        folds = fold_views(module)
        gathered = 0
        for view in _views(module):
            value = materialise(view)
            view.results[0].replace_all_uses_with(value)
            view.erase()
            gathered += 1
    return folds, gathered


@register_pass
class LowerViews(Pass):
    name = "vt-lower-views"
    summary = "Fold vt.view into linalg.generic indexing maps; materialise the rest"
    description = (
        "Generalizes named linalg ops, folds every single-piece vt.view read as a linalg.generic "
        "input into that operand's indexing map (view map composed with the operand map), and "
        "materialises the views left (returned, read by other ops, multi-piece) with gather "
        "linalg.generic ops (data movement again).")

    def run(self, module) -> None:
        self.last_counts = lower_views(module)
