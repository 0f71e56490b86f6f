"""Input-of-output virtual tensors realised: a producer writes straight into its physical destination.

VTC §4.1 / §4.4 (ScatterND rule 2) and Fig. 3: when a computed tensor only reaches a physical tensor
through data movement ending in a slice update (`tensor.insert_slice`, the KV-cache write of a decode
layer), the computed tensor can be a *virtual tensor of the destination*: its producer writes each
element where the data movement would have put it, and the movement disappears.

At graph level (vt-eliminate-data-movement, `plan_stores` + `apply_store`):

    %x = <linalg producer>                      %x = <linalg producer>
    %t = (transpose/reshape/slice chain of %x)  %u:2 = vt.store_into %x into (%rest, %cache) mapping
    %c = tensor.insert_slice %t into %cache     (readers of %x's other elements read %u#1)

The mapping is the composition of the chain's input-of-output rules (the catalogue's `inverse`,
F_new = F_outer ∘ F_base), from %x's index to %cache's index, over the region of %x that reaches the
cache; the rest of %x (if another reader needs it: Q and K beside V in a fused QKV projection) is
stored identically into a fresh tensor of %x's shape. Conditions, checked: every op of the chain is
a one-to-one data-movement op with one data input (transpose, reshape, slice, copy, permutation
generic; not a broadcast: one element would have to be written to several places); other readers of
any tensor on the chain read none of the region the chain carries (bounding boxes of their reads,
sound); the producer is a single-result linalg op without `linalg.index`, whose init is an empty
tensor or a fill when its body reads it; the destination is defined before the producer; every piece
of the mapping maps onto a unit-stride box of its destination (`reindex.invert_piece`).

At kernel level (vt-lower-views, `lower_store`): per piece, the producer is cloned with its loops
re-indexed over the destination box (the old loops are the inverse image of the new ones) and its
init an `extract_slice` of the destination, and the result is put back with `insert_slice` at the
same place: one-shot bufferization turns the pair into a subview, so the producer's stores land in
the destination buffer and no copy is left. Each element is computed by the same body with the same
reduction order: results are bitwise identical.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor

from ..dialects import vt as vt_dialect
from ..dialects.affine_eval import bounds, compose_maps
from ..dialects.vt_mapping import MappingCompositionError, MappingFunction, Piece
from ..errors import VtmlirError, format_location
from ..ir_utils import fill_value, iterator_type, walk_ops
from ..passes.registry import PassFailure
from . import catalogue as cat
from .catalogue import generic_parts
from .reindex import (
    NotInvertible,
    body_reads_init,
    clone_generic,
    guard_bare_dims,
    invert_piece,
    iterators_of,
    loop_extents,
    maps_of,
    shape_of,
    uses_linalg_index,
)

#: Data-movement kinds a store is written back through (F one-to-one on the region it carries).
_ONE_TO_ONE = {"transpose", "reshape", "slice", "copy", "permute/broadcast"}


class NotRealisable(Exception):
    """Why one insert_slice is not turned into a producer's direct store."""


@dataclass
class StorePlan:
    insert: ir.Operation        # the tensor.insert_slice the store replaces
    value: ir.Value             # the producer's result (the virtual tensor)
    mapping: MappingFunction    # value index -> destination index, over the region reaching it
    exclusive_ops: list         # chain ops whose results only feed the chain (erased afterwards)
    text: str = ""


def as_operation(owner):
    return owner.operation if hasattr(owner, "operation") else owner


def full_boxes(mapping: MappingFunction, shape) -> list[list[tuple[int, int]]]:
    return [[p.extent(d, shape) for d in range(len(shape))] for p in mapping.pieces]


def overlap(a, b) -> bool:
    return all(max(x[0], y[0]) < min(x[1], y[1]) for x, y in zip(a, b))


def _read_boxes(owner, operand_number: int, value) -> list | None:
    """Boxes of `value` an op reads through operand `operand_number` (None: possibly all of it)."""
    shape = shape_of(value)
    if owner.name == "vt.view":
        m = MappingFunction.from_attr(owner.attributes["mapping"])
        vshape = shape_of(owner.results[0])
        pieces = [p for p in m.pieces if p.source == operand_number]
    else:
        entry = cat.entry_for(owner)
        if entry is None:
            return None
        try:
            m = entry.mapping(owner)
        except cat.NotVirtualisable:
            return None
        inputs = entry.inputs(owner)
        idx = [j for j, v in enumerate(inputs) if v == value]
        if not idx:
            return None
        vshape = shape_of(owner.results[0])
        pieces = [p for p in m.pieces if p.source in idx]
    boxes = []
    for p in pieces:
        vbox = [p.extent(d, vshape) for d in range(len(vshape))]
        box = []
        for r, e in enumerate(p.map.results):
            lo, hi = bounds(e, vbox)
            box.append((max(0, lo), min(shape[r], hi + 1)))
        boxes.append(box)
    return boxes


def _check_other_readers(value, chain_op, mapping: MappingFunction) -> bool:
    """No reader of `value` but `chain_op` reads the region `mapping` carries. Returns whether
    `value` has other readers at all."""
    region = full_boxes(mapping, shape_of(value))
    others = False
    for use in value.uses:
        owner = as_operation(use.owner)
        if owner == chain_op:
            continue
        others = True
        boxes = _read_boxes(owner, use.operand_number, value)
        if boxes is None:
            raise NotRealisable(f"{owner.name} reads {value.get_name()} whole, including the "
                                f"elements the store would move")
        if any(overlap(b, r) for b in boxes for r in region):
            raise NotRealisable(f"{owner.name} reads elements of {value.get_name()} the store "
                                f"would move")
    return others


def producer_error(op) -> str | None:
    """Why `op` cannot be re-indexed to write through a mapping (None: it can)."""
    if not op.name.startswith("linalg.") or len(op.regions) != 1 or len(op.results) != 1:
        return f"{op.name} is not a single-result linalg op"
    if cat.entry_for(op) is not None:
        return f"{op.name} is itself data movement"
    if op.name == "linalg.generic":
        if uses_linalg_index(op):
            return "its body uses linalg.index (re-indexed loops would change it)"
        if not maps_of(op)[-1].is_projected_permutation:
            return "its output map is not a projected permutation"
        if body_reads_init(op) and not _init_is_fill_or_empty(op.operands[len(op.operands) - 1]):
            return "its body reads an init that is neither a fill nor empty"
    elif not _init_is_fill_or_empty(op.operands[len(op.operands) - 1]):
        return "its init is neither a fill nor empty"
    return None


def _init_is_fill_or_empty(init) -> bool:
    owner = init.owner
    if isinstance(owner, ir.Block):
        return False
    return as_operation(owner).name == "tensor.empty" or fill_value(as_operation(owner)) is not None


def trace_to_producer(cur, nxt, m: MappingFunction, *, readers_may_share: bool = False):
    """Walk from `cur` (read by `nxt`; `m` maps cur's index to the destination's) back through
    one-to-one, single-input data movement to the op computing the value. Returns (value, mapping
    from its index to the destination's, chain ops only the chain reads, op names in chain order,
    whether any tensor on the chain has other readers). Other readers of the region the chain
    carries make it NotRealisable unless `readers_may_share` (then they will read the destination
    through a view: concat stores, concat_stores.py). Stops at a non-catalogued op (the producer,
    checked by the caller) and raises at a function argument or a move that is not one-to-one."""
    exclusive, chain_text = [], []
    shared = False
    while True:
        if readers_may_share:
            shared = any(as_operation(u.owner) != nxt for u in cur.uses) or shared
        else:
            shared = _check_other_readers(cur, nxt, m) or shared
        owner = cur.owner
        if isinstance(owner, ir.Block):
            raise NotRealisable("the stored value is a function argument (no producer to redirect)")
        owner = as_operation(owner)
        entry = cat.entry_for(owner)
        if entry is None:
            return cur, m, exclusive, chain_text, shared
        if entry.kind not in _ONE_TO_ONE or len(entry.inputs(owner)) != 1:
            raise NotRealisable(f"{owner.name} ({entry.kind}) is not a one-to-one single-input move")
        if entry.kind == "permute/broadcast" and not _reads_every_loop(owner):
            raise NotRealisable(f"{owner.name} broadcasts: an element would go to several places")
        try:
            inv = entry.inverse(owner, 0)
        except cat.NotVirtualisable as why:
            raise NotRealisable(str(why)) from None
        if isinstance(inv, str):
            raise NotRealisable(inv)
        src = entry.inputs(owner)[0]
        try:
            m = m.compose(inv, shape=shape_of(src))
        except (MappingCompositionError, ValueError) as why:
            raise NotRealisable(f"composing through {owner.name}: {why}") from None
        if not shared:
            exclusive.append(owner)
        chain_text.append(owner.name)
        cur, nxt = src, owner


def plan_store(insert) -> StorePlan:
    """The store realising one `tensor.insert_slice` or constant `tensor.pad` (its destination: a
    buffer filled with the padding value), NotRealisable with the reason otherwise."""
    insert = as_operation(insert)
    entry = cat.entry_for(insert)
    if entry is None:
        raise NotRealisable(f"{insert.name} is not a catalogued data-movement op")
    try:
        cat._require_static(insert)
        m = entry.inverse(insert, 0)
        pad = cat.pad_value(insert) if insert.name == "tensor.pad" else None
    except cat.NotVirtualisable as why:
        raise NotRealisable(str(why)) from None
    if isinstance(m, str):
        raise NotRealisable(m)
    dest = pad if pad is not None else insert.operands[1]
    cur, m, exclusive, chain_text, _ = trace_to_producer(insert.operands[0], insert, m)
    owner = as_operation(cur.owner)
    why = producer_error(owner)
    if why:
        raise NotRealisable(f"the producer {owner.name} of {cur.get_name()}: {why}")
    if not (isinstance(dest.owner, ir.Block) or as_operation(dest.owner).is_before_in_block(owner)):
        raise NotRealisable("the destination (or padding value) is defined after the producer")
    shape = shape_of(cur)
    for p in m.pieces:
        try:
            invert_piece(p.map, [p.extent(d, shape) for d in range(len(shape))],
                         shape_of(insert.results[0]))
        except NotInvertible as why:
            raise NotRealisable(str(why)) from None
    text = " -> ".join([owner.name] + chain_text[::-1] + [insert.name])
    return StorePlan(insert, cur, m, exclusive, text)


def _reads_every_loop(op) -> bool:
    _, in_map, _ = generic_parts(op)
    used = {ir.AffineDimExpr(e).position for e in in_map.results
            if isinstance(e.maybe_downcast() if hasattr(e, "maybe_downcast") else e, ir.AffineDimExpr)}
    return len(used) == in_map.n_dims


def plan_stores(func, skip=()) -> tuple[list[StorePlan], list[tuple[str, str]]]:
    """Plans for every insert_slice of `func` that can be realised, and (op, reason) for the rest
    (`skip`: insert_slices that build a concat, planned by concat_stores.py)."""
    plans, skipped = [], []
    for op in func.regions[0].blocks[0].operations:
        op = op.operation
        if op.name not in ("tensor.insert_slice", "tensor.pad") or any(op == s for s in skip):
            continue
        try:
            plans.append(plan_store(op))
        except NotRealisable as why:
            skipped.append((f"{op.name}@{format_location(op.location)}", str(why)))
    return plans, skipped


def subtract(box, cut) -> list:
    """`box` minus `cut` as disjoint boxes (both lists of (lo, hi) per dim)."""
    if not overlap(box, cut):
        return [box]
    out, cur = [], list(box)
    for d, ((lo, hi), (clo, chi)) in enumerate(zip(box, cut)):
        if lo < clo:
            out.append(cur[:d] + [(lo, clo)] + cur[d + 1:])
        if chi < hi:
            out.append(cur[:d] + [(chi, hi)] + cur[d + 1:])
        cur[d] = (max(lo, clo), min(hi, chi))
    return out


def apply_store(plan: StorePlan, on_replace=None) -> ir.Value:
    """Replace the plan's insert_slice by `vt.store_into` of the producer's result; returns it.
    `on_replace(old, new)` is called with the insert_slice's result and its replacement before the
    insert_slice is erased (plans made before this one that read it must follow)."""
    x, insert = plan.value, plan.insert
    shape = shape_of(x)
    rest = [[(0, e) for e in shape]]
    for box in full_boxes(plan.mapping, shape):
        rest = [b for r in rest for b in subtract(r, box)]
    producer = as_operation(x.owner)
    pieces = [Piece(0, p.map, p.ranges) for p in plan.mapping.pieces]
    ip = insertion_after(producer)
    with producer.location:
        if insert.name == "tensor.pad":   # the destination: a buffer holding the padding value
            out = ir.RankedTensorType(insert.results[0].type)
            empty = tensor.EmptyOp(list(out.shape), out.element_type, ip=ip).result
            with ip:
                dest = linalg.fill(cat.pad_value(insert), outs=[empty])
        else:
            dest = insert.operands[1]
        dests = [dest]
        if rest:   # kept for the value's other readers (same indices, so they just read it)
            elt = ir.RankedTensorType(x.type).element_type
            rest_init = tensor.EmptyOp(shape, elt, ip=ip).result
            dests.append(rest_init)
            ident = ir.AffineMap.get_identity(len(shape))
            pieces += [Piece(1, ident, tuple((d, lo, hi) for d, (lo, hi) in enumerate(b)
                                             if (lo, hi) != (0, shape[d]))) for b in rest]
        mapping = MappingFunction(pieces)
        updated = vt_dialect.store_into(x, dests, mapping, ip=ip)
    store_op = as_operation(updated[0].owner)
    source = insert.operands[0]
    insert.results[0].replace_all_uses_with(updated[0])
    if on_replace is not None:
        on_replace(insert.results[0], updated[0])
    if len(updated) > 1:
        x.replace_all_uses_except(updated[1], store_op)
    insert.erase()
    erase_dead(source)
    return updated[0]


def insertion_after(op) -> ir.InsertionPoint:
    block = op.block
    ops = list(block.operations)
    for i, o in enumerate(ops):
        if o.operation == op:
            return ir.InsertionPoint(ops[i + 1]) if i + 1 < len(ops) else ir.InsertionPoint(block)
    return ir.InsertionPoint(block)


def erase_dead(value) -> None:
    """Erase the pure data-movement ops / views left without readers, walking up from `value`."""
    work = [value]
    while work:
        v = work.pop()
        owner = v.owner
        if isinstance(owner, ir.Block) or list(v.uses):
            continue
        owner = as_operation(owner)
        if owner.name != "vt.view" and cat.entry_for(owner) is None:
            continue
        if any(list(r.uses) for r in owner.results):
            continue
        operands = list(owner.operands)
        owner.erase()
        work += operands


# -- kernel level: vt-lower-views -------------------------------------------------------------------


def lower_store(store) -> tuple[int, int]:
    """Lower one `vt.store_into`: the producer (a generalized linalg.generic whose only reader is
    the store) re-indexed per piece into its destination; any other value is copied per piece (a
    gather generic, data movement). Returns (pieces written by the producer, pieces copied)."""
    store = as_operation(store)
    x = store.operands[0]
    dests = list(store.operands)[1:]
    mapping = MappingFunction.from_attr(store.attributes["mapping"])
    shape = shape_of(x)
    producer = None if isinstance(x.owner, ir.Block) else as_operation(x.owner)
    direct = (producer is not None and producer.name == "linalg.generic"
              and len(list(x.uses)) == 1 and producer_error(producer) is None)
    current = list(dests)
    written = copied = 0
    elt = ir.RankedTensorType(x.type).element_type
    inverses = []
    for i, p in enumerate(mapping.pieces):   # all checked before the IR changes
        try:
            inverses.append(invert_piece(p.map, [p.extent(d, shape) for d in range(len(shape))],
                                         shape_of(dests[p.source])))
        except NotInvertible as why:
            raise PassFailure(f"cannot lower vt.store_into: piece #{i}: {why}", store.location) from None
    with store.location:
        for p, (lo, sizes, inv) in zip(mapping.pieces, inverses):
            dshape = shape_of(dests[p.source])
            ip = ir.InsertionPoint(store)
            rank = len(dshape)
            slice_type = ir.RankedTensorType.get(sizes, elt)
            init = tensor.ExtractSliceOp(slice_type, current[p.source], [], [], [], lo, sizes,
                                         [1] * rank, ip=ip).result
            if direct:
                part = reindexed_producer(producer, inv, init, slice_type, ip)
                written += 1
            else:
                part = _gather_into(x, inv, init, slice_type, ip)
                copied += 1
            current[p.source] = tensor.InsertSliceOp(part, current[p.source], [], [], [], lo, sizes,
                                                     [1] * rank, ip=ip).result
    for old, new in zip(store.results, current):
        old.replace_all_uses_with(new)
    store.erase()
    if producer is not None and not list(x.uses):
        init = producer.operands[len(producer.operands) - 1]
        producer.erase()
        if not isinstance(init.owner, ir.Block) and not list(init.uses) and \
                (as_operation(init.owner).name == "tensor.empty" or fill_value(as_operation(init.owner)) is not None):
            as_operation(init.owner).erase()
    return written, copied


def reindexed_producer(producer, inv: ir.AffineMap, init, result_type, ip) -> ir.Value:
    """The producer computing only the elements `inv` selects, written into `init` (loops: the
    destination box's dims, then the producer's reduction loops in order)."""
    maps = maps_of(producer)
    iters = iterators_of(producer)
    n_in = len(producer.operands) - 1
    out_map = maps[-1]
    r = inv.n_dims
    red = [lp for lp, t in enumerate(iters) if t == "reduction"]
    subst: list = [None] * len(iters)
    for pos, e in enumerate(out_map.results):
        subst[ir.AffineDimExpr(e).position] = inv.results[pos]
    for i, lp in enumerate(red):
        subst[lp] = ir.AffineDimExpr.get(r + i)
    if any(s is None for s in subst):
        raise VtmlirError(f"cannot lower vt.store_into: the producer {producer.name} has a parallel "
                          f"loop its output does not index")
    n_loops = r + len(red)
    s_map = ir.AffineMap.get(n_loops, 0, subst)
    in_maps = [compose_maps(m, s_map) for m in maps[:n_in]]
    out = ir.AffineMap.get(n_loops, 0, [ir.AffineDimExpr.get(i) for i in range(r)])
    piece_init = init
    old_init = producer.operands[n_in]
    fill = None if isinstance(old_init.owner, ir.Block) else fill_value(as_operation(old_init.owner))
    if body_reads_init(producer) and fill is not None:
        with ip:
            piece_init = linalg.fill(fill, outs=[init])
    operands = list(producer.operands[:n_in]) + [piece_init]
    extents = list(ir.RankedTensorType(result_type).shape) + [loop_extents(producer)[lp] for lp in red]
    in_maps = guard_bare_dims(in_maps + [out], operands, extents, keep_bare=n_in)
    return clone_generic(producer, operands, in_maps,
                         ["parallel"] * r + ["reduction"] * len(red), result_type, ip)


def _gather_into(x, inv: ir.AffineMap, init, result_type, ip) -> ir.Value:
    """init[y] = x[inv(y)]: the piece copied (when the producer cannot be redirected)."""
    rank = inv.n_dims
    elt = ir.RankedTensorType(x.type).element_type
    inv = guard_bare_dims([inv], [x], list(ir.RankedTensorType(result_type).shape), keep_bare=-1)[0]
    par = iterator_type("parallel")
    op = linalg.GenericOp([result_type], [x], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(inv),
                                            ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
                          ir.ArrayAttr.get([par] * rank), ip=ip)
    block = op.regions[0].blocks.append(elt, elt)
    with ir.InsertionPoint(block):
        linalg.YieldOp([block.arguments[0]])
    return op.results[0]


def lower_stores(module) -> tuple[int, int]:
    """Lower every `vt.store_into` in `module` (named ops must be generalized first)."""
    written = copied = 0
    for store in walk_ops(module, "vt.store_into"):
        w, c = lower_store(store)
        written += w
        copied += c
    return written, copied
