"""The rewrite that follows VTC Alg. 2: chosen points-to edges become `vt.view`s, chains composed.

Used by `vt-eliminate-data-movement` (eliminate.py) and by its memory check (memory_check.py, which
rewrites a copy of a function to measure it). A view of a view is folded into one view of the physical
tensors (VTC §4.1, F_new = F_outer ∘ F_base, `MappingFunction.compose`); where the composition has no
box-piece form the nested view is kept (vt-lower-views folds it in turn).
"""

from __future__ import annotations

from torch_mlir import ir

from ..dialects import vt as vt_dialect
from ..dialects.vt_mapping import MappingCompositionError, MappingFunction, Piece, composed_sources
from . import catalogue as cat
from .greedy import PointsToGraph


def rewrite_points_to(ptg: PointsToGraph) -> None:
    """Make every tensor the points-to graph chose virtual: its data-movement op becomes a `vt.view` of
    the tensors its chosen edges point to, composed through views already made (VTC §4.1)."""
    g = ptg.graph
    # Program order: a view's sources are rewritten (and composed) before the view itself.
    order = [n.id for n in g.nodes if ptg.chosen.get(n.id)]
    replaced: dict[int, ir.Value] = {}   # node id -> its view (the old value's op is erased)
    for nid in order:
        edges = ptg.chosen[nid]
        op = edges[0].candidate.op
        value = g.nodes[nid].value
        sources: list = []
        pieces: list[Piece] = []
        for e in edges:
            src = replaced.get(e.dst, e.candidate.physical)
            if src not in sources:
                sources.append(src)
            j = sources.index(src)
            pieces += [Piece(j, p.map, p.ranges) for p in e.candidate.mapping.pieces]
        shape = list(ir.RankedTensorType(value.type).shape)
        mapping = MappingFunction(pieces).simplified(shape)
        view = None
        # Composed first; the op's own mapping if the composed one has no encoding (more than 8
        # runs of differently typed sources); else the op stays (still correct, just not virtual).
        for m, srcs in (_compose_with_views(mapping, sources, shape), (mapping, sources)):
            try:
                with ir.InsertionPoint(op), op.location:
                    view = vt_dialect.view(srcs, m, shape)
                break
            except ValueError:
                continue
        if view is None:
            continue
        value.replace_all_uses_with(view)
        op.erase()
        replaced[nid] = view
    # Views composed into later views may be left unread: drop them (latest first).
    for nid in reversed(order):
        if nid not in replaced:
            continue
        view = replaced[nid]
        if not list(view.uses):
            view.owner.erase()


def compose_view_chains(func) -> None:
    """Fold views whose sources are views (a view of a concat buffer read through a virtual slice,
    concat_stores.py) into one view of the physical tensors where the composition has a box form."""
    for op in [o.operation for o in func.regions[0].blocks[0].operations]:
        if op.name == "tensor.extract_slice" and _slice_of_view(op):
            continue
        if op.name != "vt.view" or not any(
                not isinstance(s.owner, ir.Block) and s.owner.name == "vt.view" for s in op.operands):
            continue
        shape = list(ir.RankedTensorType(op.results[0].type).shape)
        mapping, sources = _compose_with_views(MappingFunction.from_attr(op.attributes["mapping"]),
                                               list(op.operands), shape)
        try:
            with ir.InsertionPoint(op), op.location:
                view = vt_dialect.view(sources, mapping, shape)
        except ValueError:
            continue
        inner = [s for s in op.operands]
        op.results[0].replace_all_uses_with(view)
        op.erase()
        for s in inner:
            if not isinstance(s.owner, ir.Block) and s.owner.name == "vt.view" and not list(s.uses):
                s.owner.erase()
    for op in reversed([o.operation for o in func.regions[0].blocks[0].operations]):
        if op.name == "vt.view" and not list(op.results[0].uses):
            op.erase()   # a view whose readers all became views of its source


def _slice_of_view(op) -> bool:
    """A static `tensor.extract_slice` of a `vt.view` becomes one view (its F composed with the
    view's): a slice of a concat buffer stays a subview of it (vt-lower-views), instead of a
    slice of a slice that canonicalization would fold back onto the stored producer's result."""
    source = op.operands[0]
    if isinstance(source.owner, ir.Block) or source.owner.name != "vt.view":
        return False
    entry = cat.entry_for(op)
    try:
        mapping = entry.mapping(op)
    except cat.NotVirtualisable:
        return False
    shape = list(ir.RankedTensorType(op.results[0].type).shape)
    view_op = source.owner
    try:
        base = MappingFunction.from_attr(view_op.attributes["mapping"])
        composed = base.compose(mapping, shape=shape)
        if _fragmented(composed, base, mapping):
            return False
        # The slice may read one source only (a concat buffer's element, not the residual).
        composed, kept = composed.drop_unused_sources()
        sources = [view_op.operands[i] for i in kept]
        with ir.InsertionPoint(op), op.location:
            view = vt_dialect.view(sources, composed, shape)
    except (MappingCompositionError, ValueError):
        return False
    op.results[0].replace_all_uses_with(view)
    op.erase()
    if not list(source.uses):
        view_op.erase()
    return True


def _compose_with_views(mapping: MappingFunction, sources: list, shape) -> tuple[MappingFunction, list]:
    """Fold sources that are themselves `vt.view`s into `mapping` (F_base ∘ F_outer per source)."""
    changed = True
    while changed:
        changed = False
        for j, s in enumerate(sources):
            owner = s.owner
            if isinstance(owner, ir.Block) or owner.name != "vt.view":
                continue
            base = MappingFunction.from_attr(owner.attributes["mapping"])
            try:
                m = base.compose(mapping, shape=shape, at=j)
            except (MappingCompositionError, ValueError):
                continue
            if _fragmented(m, base, mapping):
                continue
            srcs = composed_sources(sources, list(owner.operands), j)
            m, kept = m.drop_unused_sources()
            mapping, sources = _dedupe(m, [srcs[i] for i in kept])
            changed = True
            break
    return mapping, sources


#: A composed view may have at most this many pieces, unless one of its factors already had more.
#: Composing a reshape with a concat along an inner dim gives a piece per element (the 8 bit-field
#: columns of an unpacked 3-bit weight stacked and flattened: 256 pieces, one `insert_slice` each
#: when gathered, which upstream `eliminate-empty-tensors` then takes minutes over). The nested
#: view is kept instead: vt-lower-views reads it through the reshape's map, a piece per column.
MAX_COMPOSED_PIECES = 16


def _fragmented(composed: MappingFunction, base: MappingFunction, outer: MappingFunction) -> bool:
    return len(composed.pieces) > max(MAX_COMPOSED_PIECES, len(base.pieces), len(outer.pieces))


def _dedupe(mapping: MappingFunction, sources: list) -> tuple[MappingFunction, list]:
    """One operand per distinct source value."""
    unique: list = []
    index = []
    for s in sources:
        if s not in unique:
            unique.append(s)
        index.append(unique.index(s))
    return MappingFunction(Piece(index[p.source], p.map, p.ranges) for p in mapping.pieces), unique
