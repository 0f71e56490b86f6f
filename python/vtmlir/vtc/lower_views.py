"""`vt-lower-views`: lower virtual tensors (`vt.view`, `vt.store_into`) so the backends compile them.

A virtual tensor never allocates where its readers can index the physical tensors through the
mapping (VTC §4.1, §6: loads through the mapping function), and a producer whose result is stored
into a physical destination writes there itself. At graph level:

* named linalg ops are generalized first (`linalg-generalize-named-ops`), so every linalg op is a
  `linalg.generic`;
* `vt.store_into` (stores.py `lower_store`): per piece, the producer is re-indexed over the
  destination box (reindex.py) and writes an `extract_slice` of the destination, put back with
  `insert_slice` at the same place — one-shot bufferization makes the pair a subview (with
  `eliminate-empty-tensors` before it, see docs/vtc.md §5). A value that is not a redirectable
  producer's result is copied into the box (a gather, data movement);
* a single-piece `vt.view` read as an *input* of a `linalg.generic` is folded: the operand becomes
  the view's source and its indexing map `view.map ∘ operand_map` (reader loops → virtual index →
  physical index). Views of views were composed by the rewrite; any left are folded in turn.
  linalg infers loop bounds from the first operand dimension each loop appears in as a bare `dK`;
  a folded bare `dK` over a *larger* physical dimension is written `dK mod extent` (same values in
  range), as is a sum that is such a bare loop once loops of extent 1 read 0 (elementwise fusion
  would turn the `d0 + d1` of an unfold of size 1, read with its unit dim broadcast at `(d0, 0)`,
  into a bare `d0` over the larger dimension, which linalg's verifier rejects). If a loop is left
  with no bare occurrence at all, the fold is not done;
* a multi-piece view that repeats one source periodically (`cat((f, f))`) becomes one piece
  reading `dK mod L` and is folded; any other multi-piece view read by a generic whose split dims
  are parallel loops (`dK + c`) that index its output splits that generic's loop range at the
  piece boundaries (VTC §6): one clone per piece reading its source, writing a slice of the output.

Everything else is materialised: a view returned, read by a non-linalg op, used as an init, read
along a reduction loop, or with more than MAX_SPLIT_PIECES pieces. Its buffer is then needed, so the
pieces whose source is a redirectable producer nothing else reads are written by that producer
into the buffer (producer_writes.py, the input-of-output direction); the others are gathered,
correctly but as data movement again (vt-stats counts the gather as a data-movement
`linalg.generic`). Single piece: one gather
`linalg.generic` whose input map is the mapping. Several pieces: one gather per piece over its
box, inserted into a `tensor.empty` with `tensor.insert_slice`. With `min-piece=N`, a view whose
narrowest piece is under N elements along its split dim is read with a per-element `arith.select`
in one loop instead of split loops (select_views.py), as is a view with more than MAX_SPLIT_PIECES
pieces.
"""

from __future__ import annotations

import itertools

from torch_mlir import ir
from torch_mlir.dialects import tensor

from ..dialects.affine_eval import compose_maps
from ..dialects import vt as vt_dialect
from ..dialects.vt_mapping import MappingFunction, Piece
from ..ir_utils import walk_ops
from ..passes import run_pipeline
from ..passes.registry import Option, Pass, PassFailure, register_pass
from .producer_writes import write_by_producers
from .reindex import (
    clone_generic,
    dim_plus_const,
    gather,
    guard_bare_dims,
    iterators_of,
    loop_extents,
    uses_linalg_index,
)
from .select_views import narrowest_piece, select_reader
from .stores import lower_stores

#: Readers of a view with more pieces than this are not split (the view is gathered instead).
MAX_SPLIT_PIECES = 16
#: Largest multi-piece view checked element by element for a periodic (one-piece `mod`) form.
MAX_PERIODIC_CHECK = 1 << 14


def _require_static_shapes(module) -> None:
    """Virtual tensors are lowered for static shapes only (their pieces' boxes are constants): a
    view or store with a dynamic dimension fails the pass at that op."""
    for op in walk_ops(module, "vt.view") + walk_ops(module, "vt.store_into"):
        for value in [*op.operands, *op.results]:
            t = value.type
            if isinstance(t, ir.ShapedType) and (not t.has_rank or not t.has_static_shape):
                raise PassFailure(f"cannot lower '{op.name}': it has the dynamic type {t}; virtual "
                                  "tensors are lowered for static shapes only", op.location)


def _views(module) -> list:
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
    # In an elementwise reader (elementwise fusion may fuse it into its consumers), a sum that is a
    # bare loop over a smaller extent once loops of extent 1 read 0 (`d0 + d1` over [2, 1], an unfold
    # of size 1, of 4 elements) is guarded like a bare loop: fused into a consumer that broadcasts the
    # unit dim at `(d0, 0)` it became a bare `d0` over the larger dimension, which linalg's verifier
    # rejects (vt-fuzz torch seed 6161 case 1959). Other readers keep their sums (`h + kh`: windows).
    elementwise = "reduction" not in iterators_of(op)
    unit = ir.AffineMap.get(composed.n_dims, 0, [
        ir.AffineConstantExpr.get(0) if extents.get(d) == 1 else ir.AffineDimExpr.get(d) for d in range(composed.n_dims)])
    results = []
    for r, e in enumerate(composed.results):
        if elementwise and not isinstance(_down(e), ir.AffineDimExpr):
            reduced = compose_maps(ir.AffineMap.get(composed.n_dims, 0, [e]), unit).results[0]
            if isinstance(_down(reduced), ir.AffineDimExpr) and \
                    extents.get(ir.AffineDimExpr(reduced).position) != src_shape[r]:
                e = reduced   # (where the extents match, a bare loop is valid: the sum stays)
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
            return gather(view.operands[p.source], p.map, shape, elt)
        acc = tensor.EmptyOp(shape, elt).result
        for p in mapping.pieces:
            box = [p.extent(d, shape) for d in range(rank)]
            sizes = [hi - lo for lo, hi in box]
            shift = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(d) + lo if lo else ir.AffineDimExpr.get(d)
                                               for d, (lo, _) in enumerate(box)])
            part = gather(view.operands[p.source], compose_maps(p.map, shift), sizes, elt)
            acc = tensor.InsertSliceOp(part, acc, [], [], [], [lo for lo, _ in box], sizes,
                                       [1] * rank).result
        return acc


def slice_of_source(view) -> bool:
    """Replace a single-piece view whose map is a unit-stride box of its source (`dI + cI` per
    dim, same rank: a channel range of a concat buffer read by a pad, concat_stores.py) by
    `tensor.extract_slice`, which bufferizes to a subview: no gather. Returns whether it did."""
    mapping = MappingFunction.from_attr(view.attributes["mapping"])
    if not mapping.is_single_piece:
        return False
    p = mapping.pieces[0]
    source = view.operands[p.source]
    shape, src_shape = _shape(view.results[0]), _shape(source)
    if len(p.map.results) != len(shape) or len(src_shape) != len(shape):
        return False
    offsets = []
    for d, e in enumerate(p.map.results):
        lc = dim_plus_const(e)
        if lc is None or lc[0] != d or lc[1] < 0 or lc[1] + shape[d] > src_shape[d]:
            return False
        offsets.append(lc[1])
    with view.location, ir.InsertionPoint(view):
        sliced = tensor.ExtractSliceOp(view.results[0].type, source, [], [], [], offsets, shape,
                                       [1] * len(shape)).result
    view.results[0].replace_all_uses_with(sliced)
    view.erase()
    return True


def as_periodic(mapping: MappingFunction, shape, sources=None) -> MappingFunction | None:
    """One piece reading `source` at `dK mod L` when the pieces repeat one source along one split
    dim in runs of L (a tensor concatenated with itself, `torch.cat((f, f))` in RoPE): then no
    split is needed. Checked on every index (views of at most MAX_PERIODIC_CHECK elements)."""
    if sources is not None:   # the same value given twice is one source
        first_of = [next(i for i, v in enumerate(sources) if v == s) for s in sources]
        mapping = MappingFunction(Piece(first_of[p.source], p.map, p.ranges) for p in mapping.pieces)
    dims = {d for p in mapping.pieces for d, _, _ in p.ranges}
    if len(dims) != 1 or len({p.source for p in mapping.pieces}) != 1:
        return None
    (d,) = dims
    first = min(mapping.pieces, key=lambda p: p.extent(d, shape)[0])
    lo, hi = first.extent(d, shape)
    n = 1
    for e in shape:
        n *= e
    if lo != 0 or n > MAX_PERIODIC_CHECK:
        return None
    rank = len(shape)
    wrap = ir.AffineMap.get(rank, 0, [ir.AffineExpr.get_mod(ir.AffineDimExpr.get(i), ir.AffineConstantExpr.get(hi))
                                      if i == d else ir.AffineDimExpr.get(i) for i in range(rank)])
    candidate = MappingFunction.single(compose_maps(first.map, wrap), first.source)
    for index in itertools.product(*[range(e) for e in shape]):
        if candidate.apply(index) != mapping.apply(index):
            return None
    return candidate


def split_multi_piece_readers(module, max_pieces: int = MAX_SPLIT_PIECES, min_piece: int = 0) -> int:
    """Split the loop range of every `linalg.generic` reading a multi-piece view at the pieces'
    boundaries (VTC §6): one clone per piece reading that piece's source through its map, writing
    the matching slice of the output. Where the view's narrowest piece is under `min_piece`
    elements along its split dim (finer than a tile), or it has more than `max_pieces` pieces,
    the reader selects each element's piece in one loop instead (select_views.py). Returns the
    readers rewritten."""
    for view in _views(module):   # periodic views first: one piece, folded later
        mapping = MappingFunction.from_attr(view.attributes["mapping"])
        if mapping.is_single_piece:
            continue
        periodic = as_periodic(mapping, _shape(view.results[0]), list(view.operands))
        if periodic is not None:
            source = view.operands[periodic.pieces[0].source]
            with view.location, ir.InsertionPoint(view):
                single = vt_dialect.view([source], MappingFunction.single(periodic.pieces[0].map),
                                         _shape(view.results[0]))
            view.results[0].replace_all_uses_with(single)
            view.erase()
    splits = 0
    changed = True
    while changed:
        changed = False
        for view in _views(module):
            mapping = MappingFunction.from_attr(view.attributes["mapping"])
            if mapping.is_single_piece:
                continue
            select = len(mapping.pieces) > max_pieces or \
                narrowest_piece(mapping, _shape(view.results[0])) < min_piece
            for use in list(view.results[0].uses):
                owner = use.owner
                owner = owner.operation if hasattr(owner, "operation") else owner
                if owner.name != "linalg.generic":
                    continue
                rewrite = select_reader if select else _split_reader
                if rewrite(owner, use.operand_number, view, mapping):
                    splits += 1
                    changed = True
                    break
            if not list(view.results[0].uses):
                view.erase()
                changed = True
            if changed:
                break
    return splits


def _split_reader(op, k: int, view, mapping: MappingFunction) -> bool:
    """Split `op` (reading `view` as input k) at the view's piece boundaries; False if it cannot be."""
    n_in = len(op.operands) - 1
    if len(op.results) != 1 or k >= n_in or uses_linalg_index(op):
        return False
    maps = _maps(op)
    iters = iterators_of(op)
    try:
        extents = loop_extents(op)
    except ValueError:
        return False
    vshape = _shape(view.results[0])
    in_map, out_map = maps[k], maps[-1]
    split_loops: dict[int, tuple[int, int]] = {}   # view split dim -> (loop, constant offset)
    out_pos = {}
    for r, e in enumerate(out_map.results):
        if isinstance(_down(e), ir.AffineDimExpr):
            out_pos[ir.AffineDimExpr(e).position] = r
    for d in {d for p in mapping.pieces for d, _, _ in p.ranges}:
        lc = dim_plus_const(in_map.results[d])
        if lc is None or iters[lc[0]] != "parallel" or lc[0] not in out_pos:
            return False
        split_loops[d] = lc
    init = op.operands[n_in]
    out_shape = _shape(op.results[0])
    elt = ir.RankedTensorType(op.results[0].type).element_type
    if not isinstance(init.owner, ir.Block) and init.owner.name == "tensor.empty":
        # Its own empty tensor: the importer shares one between ops, and two chains of in-place
        # slice writes into one tensor would make bufferization copy one of them.
        with op.location:
            init = tensor.EmptyOp(out_shape, elt, ip=ir.InsertionPoint(op)).result
    current = init
    rank_out = len(out_shape)
    with op.location:
        for p in mapping.pieces:
            box = [(0, e) for e in extents]
            for d, (lp, c) in split_loops.items():
                lo, hi = p.extent(d, vshape)
                blo, bhi = box[lp]
                box[lp] = (max(blo, lo - c), min(bhi, hi - c))
            if any(hi <= lo for lo, hi in box):
                continue
            shift = ir.AffineMap.get(len(extents), 0, [
                ir.AffineDimExpr.get(i) + lo if lo else ir.AffineDimExpr.get(i)
                for i, (lo, _) in enumerate(box)])
            new_maps = [compose_maps(m, shift) for m in maps[:n_in]]
            operands = list(op.operands[:n_in])
            operands[k] = view.operands[p.source]
            new_maps[k] = compose_maps(p.map, new_maps[k])
            offsets, sizes = [0] * rank_out, list(out_shape)
            for lp, r in out_pos.items():
                offsets[r], sizes[r] = box[lp][0], box[lp][1] - box[lp][0]
            ip = ir.InsertionPoint(op)
            slice_type = ir.RankedTensorType.get(sizes, elt)
            part_init = tensor.ExtractSliceOp(slice_type, current, [], [], [], offsets, sizes,
                                              [1] * rank_out, ip=ip).result
            operands.append(part_init)
            guarded = guard_bare_dims(new_maps + [out_map], operands,
                                      [hi - lo for lo, hi in box], keep_bare=n_in)
            part = clone_generic(op, operands, guarded, iters, slice_type, ip)
            current = tensor.InsertSliceOp(part, current, [], [], [], offsets, sizes,
                                           [1] * rank_out, ip=ip).result
    old_init = op.operands[n_in]
    op.results[0].replace_all_uses_with(current)
    op.erase()
    if not isinstance(old_init.owner, ir.Block) and old_init.owner.name == "tensor.empty" \
            and not list(old_init.uses):
        old_init.owner.erase()
    return True


def lower_views(module, min_piece: int = 0) -> tuple[int, int, int, int]:
    """Generalize, redirect producers of `vt.store_into`, fold single-piece views, split readers of
    multi-piece views (or select per element where a piece is narrower than `min_piece`),
    materialise the rest. Returns (folds, materialised views, store pieces written by their
    producer, readers split or selecting)."""
    if not _views(module) and not walk_ops(module, "vt.store_into"):
        return 0, 0, 0, 0
    _require_static_shapes(module)
    run_pipeline(module, "func.func(linalg-generalize-named-ops)")
    with module.context:
        written, _copied = lower_stores(module)
        folds = fold_views(module)
        splits = split_multi_piece_readers(module, min_piece=min_piece)
        folds += fold_views(module)
        gathered = 0
        for view in _views(module):
            if slice_of_source(view):
                continue
            by_producers = write_by_producers(view)   # the buffer is needed: producers write it
            if by_producers is not None:
                written += by_producers[1]
                continue
            value = materialise(view)
            view.results[0].replace_all_uses_with(value)
            view.erase()
            gathered += 1
    return folds, gathered, written, splits


@register_pass
class LowerViews(Pass):
    name = "vt-lower-views"
    summary = "Lower virtual tensors: stores into producers, views into indexing maps / split loops"
    description = (
        "Generalizes named linalg ops; lowers every vt.store_into by re-indexing its producer over "
        "the destination boxes (extract_slice/insert_slice pairs that bufferize in place); folds "
        "every single-piece vt.view read as a linalg.generic input into that operand's indexing "
        "map; splits the loop range of generics reading a multi-piece view at the piece "
        "boundaries; materialises the views left (returned, read by other ops) with gather "
        "linalg.generic ops (data movement again).")

    options = (
        Option("min-piece", int, 0, "read multi-piece views with a per-element select instead of "
                                    "split loops where a piece is narrower than this many elements "
                                    "along its split dim (finer than a tile; 0: always split)"),
    )

    def run(self, module):
        if self.min_piece < 0:
            self.emit_error(module, "vt-lower-views: min-piece must not be negative")
            return
        return lower_views(module, self.min_piece)
