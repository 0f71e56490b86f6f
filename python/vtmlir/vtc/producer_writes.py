"""A view that must be materialised anyway is written by its producers (VTC §4.4 input-of-output).

`vt-eliminate-data-movement` makes a concat, a transpose or a channel shuffle a `vt.view` (the
output-of-input direction) whenever its readers can read through the mapping, so that no buffer is
needed at all. `vt-lower-views` finds out only when lowering that some reader cannot (a reshape, a
non-linalg op, a reduction over the split dimension, a fold that would leave a loop without a bare
occurrence) and then gathers the view: one copy kernel per piece, from physical sources that were
computed into buffers of their own. The buffer exists either way then, so the other direction is
strictly better: a piece whose source is the result of a redirectable linalg producer that nothing
else reads (possibly through reshapes that nothing else reads) is computed by that producer,
re-indexed (stores.py `reindexed_producer`), straight into its box of the buffer -- the source's
own buffer and the copy disappear; only pieces without such a producer (a function argument, a
value with other readers) are gathered. This is the concat store of concat_stores.py (Fig. 11)
decided at the point where the need for a buffer is known, and it also covers single-piece views (a
producer writing its result transposed for a reader that cannot read the transposed view).

Each element is computed by the same body with the same reduction order as before: results are
bitwise identical. The re-indexed producers run where the view stood (their operands dominate it).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import tensor

from ..dialects.affine_eval import compose_maps
from ..dialects.vt_mapping import MappingFunction
from ..errors import VtmlirError
from ..ir_utils import fill_value
from . import catalogue as cat
from .reindex import gather, shape_of
from .stores import producer_error, reindexed_producer

_RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")


def _single_use(value) -> bool:
    return len(list(value.uses)) == 1


def redirectable_producer(source, amap: ir.AffineMap):
    """(producer, chain of reshapes from its result to `source`, map from the piece's index to the
    producer's result index) when `source` is a redirectable `linalg.generic`'s result seen through
    reshapes and nothing but the view reads any of them; None otherwise."""
    value, chain = source, []
    while True:
        if not _single_use(value) or isinstance(value.owner, ir.Block):
            return None
        owner = value.owner.operation
        if owner.name in _RESHAPES:
            mapping = cat.entry_for(owner).mapping(owner)   # reshape result index -> input index
            amap = compose_maps(mapping.pieces[0].map, amap)
            chain.append(owner)
            value = owner.operands[0]
            continue
        if owner.name != "linalg.generic" or producer_error(owner) is not None:
            return None
        return owner, chain, amap


def write_by_producers(view) -> tuple[ir.Value, int] | None:
    """The buffer of `view` with every piece that has a redirectable producer written by it and the
    other pieces gathered; (value, pieces written by producers), or None when no piece has one (the
    caller gathers the view as before)."""
    mapping = MappingFunction.from_attr(view.attributes["mapping"])
    result = view.results[0]
    shape = shape_of(result)
    rank = len(shape)
    elt = ir.RankedTensorType(result.type).element_type
    sources = list(view.operands)
    pieces = []
    for p in mapping.pieces:
        box = [p.extent(d, shape) for d in range(rank)]
        shift = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(d) + lo if lo else ir.AffineDimExpr.get(d)
                                           for d, (lo, _) in enumerate(box)])
        found = None
        # one operand may feed several pieces (deduplicated sources): its single use is the view
        try:
            found = redirectable_producer(sources[p.source], compose_maps(p.map, shift))
        except cat.NotVirtualisable:
            found = None
        pieces.append((p, box, shift, found))
    if not any(found for *_, found in pieces):
        return None
    written = 0
    producers, chains = [], []
    with ir.InsertionPoint(view), view.location:
        ip = ir.InsertionPoint(view)
        current = tensor.EmptyOp(shape, elt).result
        for p, box, shift, found in pieces:
            lo = [a for a, _ in box]
            sizes = [b - a for a, b in box]
            part_type = ir.RankedTensorType.get(sizes, elt)
            part = None
            if found is not None:
                producer, chain, amap = found
                init = tensor.ExtractSliceOp(part_type, current, [], [], [], lo, sizes, [1] * rank).result
                try:
                    part = reindexed_producer(producer, amap, init, part_type, ip)
                    written += 1
                    if not any(producer == q for q in producers):
                        producers.append(producer)
                    chains.extend(c for c in chain if not any(c == q for q in chains))
                except VtmlirError:   # a parallel loop its output does not index: gather the piece
                    init.owner.operation.erase()
            if part is None:
                part = gather(sources[p.source], compose_maps(p.map, shift), sizes, elt)
            current = tensor.InsertSliceOp(part, current, [], [], [], lo, sizes, [1] * rank).result
    view.results[0].replace_all_uses_with(current)
    view.erase()
    for op in chains:   # reshapes first (their results fed the view only), then the producers
        if not list(op.results[0].uses):
            op.erase()
    for producer in producers:
        if not list(producer.results[0].uses):
            init = producer.operands[len(producer.operands) - 1]
            producer.erase()
            _erase_if_dead(init)
    return current, written


def _erase_if_dead(value) -> None:
    """Erase a dead `tensor.empty` or constant fill (and the empty under it) left by a producer."""
    owner = value.owner
    if isinstance(owner, ir.Block) or list(value.uses):
        return
    owner = owner.operation
    if owner.name == "tensor.empty":
        owner.erase()
    elif owner.name in ("linalg.fill", "linalg.generic") and len(owner.results) == 1:
        if fill_value(owner) is not None:
            init = owner.operands[len(owner.operands) - 1]
            owner.erase()
            _erase_if_dead(init)
