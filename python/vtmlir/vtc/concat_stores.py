"""Concat in the input-of-output direction: producers write straight into the concat's buffer.

VTC §4.4 (Concat: "each input can be a virtual tensor of the output") and Fig. 11 (YOLOv11's C3K2:
the split halves and the bottleneck's output are never allocated apart from the concatenated
tensor). The output-of-input direction (the concat a view of its inputs) saves nothing when the
concat's reader cannot read through the view — a convolution reducing over the concatenated
channels must gather it (vt-lower-views). This direction makes the concat's result the physical
tensor and each input a virtual tensor of it:

    %a = <linalg producer>                  %d = tensor.empty                    (the concat buffer)
    %b = <linalg producer> (reads %a)       %a = <linalg producer>
    %c = tensor.concat dim(1) %a, %b        %d1:1 = vt.store_into %a into (%d)   (channels 0..A)
                                            %b = <linalg producer> (reads vt.view %d1, channels 0..A)
                                            %d2:1 = vt.store_into %b into (%d1)  (channels A..A+B)
                                            (readers of %c read %d2)

Each concat input (`tensor.concat`, or a chain of `tensor.insert_slice` into one `tensor.empty`, the
form a torch.cat lowering may take) is traced back through one-to-one data movement (stores.py
`trace_to_producer`: slices, reshapes, transposes, copies) to the linalg op computing it; the
chain's input-of-output mappings are composed with the concat's (catalogue `inverse`). Several
inputs from one producer (`chunk` then `cat`, C3K2) become one store with several pieces.

Conflicts (Fig. 7): another reader of a stored element no longer finds a tensor of its own — it
reads the concat buffer through a `vt.view` (the store's mapping, the rest of the producer's result
from a residual tensor where the concat takes only part of it), from the latest store into the
buffer that precedes it, so bufferization writes the buffer in place without copying it. An input
with no redirectable producer (a function argument, an op that is not linalg, a broadcast on the
way, a producer already stored elsewhere) is copied into its box (a gather at vt-lower-views, the
copy the concat did anyway); a concat none of whose inputs has a producer to redirect is left to
the greedy (output-of-input views).

Which direction: stores where the concat's result must exist as one buffer (`buffer_reader`), and
on CUDA also where a reader of the concat as a view would run once per piece, a kernel launch
each, and the stores launch nothing more (`split_reader`); elsewhere the views allocate nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor

from ..dialects import vt as vt_dialect
from ..dialects.vt_mapping import MappingFunction, Piece
from ..errors import format_location
from . import catalogue as cat
from .build_vtog import mapping_text
from .reindex import NotInvertible, dim_plus_const, invert_piece, iterators_of, maps_of, shape_of
from .stores import (
    NotRealisable,
    as_operation,
    erase_dead,
    full_boxes,
    insertion_after as after,
    overlap,
    producer_error,
    subtract,
    trace_to_producer,
)


@dataclass
class ConcatPart:
    value: ir.Value             # stored value: the producer's result (direct) or the concat input
    mapping: MappingFunction    # value index -> concat index
    direct: bool                # the producer writes the buffer itself (else a copy)
    text: str = ""
    inputs: list = field(default_factory=list)   # (concat input, its mapping) it stands for


@dataclass
class ConcatPlan:
    concat: ir.Operation        # tensor.concat, or the last insert_slice of a chain into an empty
    inputs: list                # the concat's input values (erased when dead afterwards)
    chain: list                 # ops replaced: the concat, or the insert_slices (last first)
    parts: list[ConcatPart] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)   # why an input is copied
    update: ir.Operation | None = None   # a slice update / pad the concat fans out into

    def replace_value(self, old: ir.Value, new: ir.Value) -> None:
        """A slice update this plan reads (`old`) became a store (`new`, stores.apply_store): the
        plan reads `new`. Such a part is copied (its producer is the update, not a computing op)."""
        self.inputs = [new if v == old else v for v in self.inputs]
        for part in self.parts:
            part.inputs = [(new if v == old else v, m) for v, m in part.inputs]
            if part.value == old:
                part.value, part.direct = new, False

    def report_lines(self) -> list[str]:
        """The decision, as printed by vt-eliminate-data-movement (call before apply_concat)."""
        direct = sum(p.direct for p in self.parts)
        lines = [f"concat-store {self.concat.name} -> {self.concat.results[0].get_name()}: "
                 f"{direct} producer(s) write into the concat buffer, "
                 f"{len(self.parts) - direct} input(s) copied"]
        for p in self.parts:
            how = f"written by {p.text}" if p.direct else "copied"
            lines.append(f"  {p.value.get_name()} {how}, map {mapping_text(p.mapping)}")
        return lines + [f"  {why}" for why in self.kept]


def concat_inputs(op) -> tuple[list, list, list] | None:
    """(input values, mappings input index -> result index, ops replaced) of a concat: a
    `tensor.concat`, or a chain of unit-stride `tensor.insert_slice`s whose first destination is a
    `tensor.empty` and whose intermediate results have no other reader (`op` its last insert)."""
    op = as_operation(op)
    entry = cat.entry_for(op)
    if op.name in ("tensor.insert_slice", "tensor.pad") and _fans_out(op):
        inner = concat_inputs(as_operation(op.operands[0].owner))
        if inner is None:
            return None
        try:
            cat._require_static(op)
            outer = entry.inverse(op, 0)
            if op.name == "tensor.pad":
                cat.pad_value(op)
        except cat.NotVirtualisable:
            return None
        if isinstance(outer, str):
            return None
        values, maps, chain = inner
        try:
            maps = [outer.compose(m, shape=shape_of(v)) for v, m in zip(values, maps)]
        except ValueError:
            return None
        return values, maps, [op] + chain
    if op.name == "tensor.concat":
        try:
            cat._require_static(op)
            return list(op.operands), [entry.inverse(op, j) for j in range(len(op.operands))], [op]
        except cat.NotVirtualisable:
            return None
    if op.name != "tensor.insert_slice":
        return None
    chain, cur = [], op
    while True:
        if cat.entry_for(cur) is None:
            return None
        try:
            cat._require_static(cur)
            m = cat.entry_for(cur).inverse(cur, 0)
        except cat.NotVirtualisable:
            return None
        if isinstance(m, str):
            return None
        chain.append((cur, m))
        dest = cur.operands[1]
        if isinstance(dest.owner, ir.Block):
            return None
        owner = as_operation(dest.owner)
        if owner.name == "tensor.empty":
            break
        if owner.name != "tensor.insert_slice" or len(list(dest.uses)) != 1:
            return None
        cur = owner
    if len(chain) < 2:   # a single insert into an empty is a plain slice update (stores.py)
        return None
    chain.reverse()
    return [c.operands[0] for c, _ in chain], [m for _, m in chain], [c for c, _ in reversed(chain)]


def _fans_out(op) -> bool:
    """A slice update or constant pad of a concat read by nothing else: the concat's inputs can
    be written straight into the update's destination (stores fanning out through a concat)."""
    src = op.operands[0]
    if isinstance(src.owner, ir.Block) or len(list(src.uses)) != 1:
        return False
    inner = as_operation(src.owner)
    return inner.name == "tensor.concat" or (
        inner.name == "tensor.insert_slice" and concat_inputs(inner) is not None)


def plan_concat(op, claimed: list, kernel_launches: bool = False) -> ConcatPlan:
    """The plan for one concat (`claimed`: producer results already stored elsewhere;
    `kernel_launches`: every kernel is a launch of its own, see `split_reader`)."""
    found = concat_inputs(op)
    if found is None:
        raise NotRealisable("not a static concat (tensor.concat, or insert_slices into an empty)")
    inputs, mappings, chain = found
    update = chain[0] if chain[0].name in ("tensor.insert_slice", "tensor.pad") and \
        len(chain) > 1 and as_operation(chain[0].operands[0].owner) == chain[1] else None
    split = None
    if update is None:
        reader = buffer_reader(as_operation(op), _concat_dim(as_operation(op), mappings))
        if reader is None and kernel_launches:
            reader = split = split_reader(as_operation(op))
        if reader is None:
            raise NotRealisable("every reader can read the concat as a view (output-of-input is "
                                "kept: no buffer at all)")
    plan = ConcatPlan(as_operation(op), inputs, chain, update=update)
    if update is None:
        plan.kept.append(f"the concat buffer is needed: {reader}")
    else:
        plan.kept.append(f"the concat fans out into the {update.name}'s destination")
    consumer = {id(v): c for v, c in zip(inputs, _consumers(inputs, chain))}
    groups: dict[int, ConcatPart] = {}
    for value, m in zip(inputs, mappings):
        try:
            x, mx, _, names, _ = trace_to_producer(value, consumer[id(value)], m, readers_may_share=True)
            producer = as_operation(x.owner)
            why = producer_error(producer)
            if why:
                raise NotRealisable(f"the producer {producer.name} of {x.get_name()}: {why}")
            if any(x == c for c in claimed):
                raise NotRealisable(f"{x.get_name()} is already stored elsewhere")
            shape = shape_of(x)
            for p in mx.pieces:
                try:
                    invert_piece(p.map, [p.extent(d, shape) for d in range(len(shape))],
                                 shape_of(plan.concat.results[0]))
                except NotInvertible as why:
                    raise NotRealisable(str(why)) from None
            key = next((k for k, part in groups.items() if part.value == x), None)
            if key is not None:   # another input from the same producer: one store, more pieces
                part = groups[key]
                mine, theirs = full_boxes(mx, shape), full_boxes(part.mapping, shape)
                if any(overlap(a, b) for a in mine for b in theirs):
                    raise NotRealisable(f"{x.get_name()} would be written to two places")
                part.mapping = MappingFunction(list(part.mapping.pieces) + list(mx.pieces)).simplified(shape)
                part.inputs.append((value, m))
                continue
            text = " -> ".join([producer.name] + names[::-1])
            groups[len(plan.parts)] = part = ConcatPart(x, mx, True, text, [(value, m)])
            plan.parts.append(part)
        except NotRealisable as why:
            plan.parts.append(ConcatPart(value, m, False))
            plan.kept.append(f"input {value.get_name()} copied: {why}")
    if update is None or update.name == "tensor.pad":
        _keep_buffer_births_late(plan)
    if update is None and split is not None:
        # The stores must not launch more kernels than the views: a copied input is a kernel (and
        # its traffic) the views do not have, and a store of several pieces runs its producer once
        # per piece (vt-lower-views re-indexes it per destination box). Only stores of one piece
        # by the producer itself split nothing.
        costly = [f"{p.value.get_name()} would be copied into the buffer" for p in plan.parts if not p.direct]
        costly += [f"{p.value.get_name()} would be written in {len(p.mapping.pieces)} pieces"
                   for p in plan.parts if p.direct and len(p.mapping.pieces) > 1]
        if costly:
            raise NotRealisable(f"its readers read it as views, each once per piece: {split}, but "
                                f"{'; '.join(costly)}, a kernel each too")
    if update is not None and update.name == "tensor.insert_slice":
        dest = update.operands[1]
        first = min((as_operation(p.value.owner) for p in plan.parts if p.direct),
                    key=lambda o: _position(o.results[0], o.block), default=None)
        if first is not None and not (isinstance(dest.owner, ir.Block)
                                      or as_operation(dest.owner).is_before_in_block(first)):
            raise NotRealisable("the destination is defined after a producer")
    if not any(p.direct for p in plan.parts):
        raise NotRealisable("no input has a producer that can write into the concat buffer; "
                            + "; ".join(plan.kept))
    return plan


def _volume(value) -> int:
    n = 1
    for e in shape_of(value):
        n *= e
    return n


def _keep_buffer_births_late(plan: ConcatPlan) -> None:
    """The buffer is born where its first producer writes it, so that producer's result no longer
    needs its own tensor, but the whole buffer now lives from there to the concat. Worth it when
    the producer's result is at least half the buffer (C3K2: cv1's output is 2/3 of the concat);
    not for a U-Net skip connection written into the padded decoder concat at the encoder stage,
    which would hold the bigger buffer through the whole lower half of the network. Producers
    before the first one that passes are copied instead (their result lives as it did)."""
    size = _volume(plan.concat.results[0])
    for part in sorted((p for p in plan.parts if p.direct), key=lambda p: _position(p.value, as_operation(p.value.owner).block)):
        if 2 * _volume(part.value) >= size:
            return
        i = plan.parts.index(part)
        plan.parts[i:i + 1] = [ConcatPart(v, m, False) for v, m in part.inputs]
        plan.kept.append(f"{part.value.get_name()} copied: it would make the buffer "
                         f"({size} elements) live from its producer on, and it is less than half of it")


def _concat_dim(op, mappings) -> int | None:
    """The dim along which the inputs are concatenated (where some input's map adds an offset)."""
    if op.name == "tensor.concat":
        return ir.IntegerAttr(op.attributes["dim"]).value
    for m in mappings:
        for d, e in enumerate(m.pieces[0].map.results):
            lc = dim_plus_const(e)
            if lc is not None and lc[1] != 0:
                return d
    return None


def insert_chain_ops(func) -> list:
    """The insert_slices (and pads) of `func` that form concats (chains into one tensor.empty)
    or that a concat fans out into: planned here, not as separate slice updates (stores.py)."""
    ops = []
    for op in func.regions[0].blocks[0].operations:
        op = op.operation
        if op.name in ("tensor.insert_slice", "tensor.pad") and not _continues_chain(op):
            found = concat_inputs(op)
            if found is not None:
                ops += found[2]
    return ops


def _continues_chain(op) -> bool:
    if op.name != "tensor.insert_slice":
        return False
    return any(as_operation(u.owner).name == "tensor.insert_slice" and u.operand_number == 1
               for u in op.results[0].uses)


def buffer_reader(op, dim: int | None) -> str | None:
    """Why the concat's result must exist as one buffer even when its inputs are virtual (the
    reader that would gather a view of it), or None: then the output-of-input direction (the
    concat a view of its inputs, read through split loops or folded maps) allocates nothing and
    is left to the greedy. A buffer is needed by a function result, a non-linalg reader (a
    pad), a named linalg op (a convolution or matmul reduces over its input's channels), and a
    generic reading the concat dim other than as a parallel loop; a reshape of it (zero-copy, so it
    reads what its own readers need: a reshaped concat returned needs the buffer too)."""
    for use in op.results[0].uses:
        owner = as_operation(use.owner)
        if owner.name in ("tensor.expand_shape", "tensor.collapse_shape"):
            why = buffer_reader(owner, None)
            if why is not None:
                return f"{why} (through {owner.name})"
            continue
        if cat.entry_for(owner) is not None:
            continue
        if not owner.name.startswith("linalg."):
            return f"{owner.name} reads it"
        if owner.name != "linalg.generic":
            return f"{owner.name} reads it (a named op: reduces over its input)"
        if dim is None:
            continue
        e = maps_of(owner)[use.operand_number].results[dim]
        e = e.maybe_downcast() if hasattr(e, "maybe_downcast") else e
        if not isinstance(e, ir.AffineDimExpr) or \
                iterators_of(owner)[ir.AffineDimExpr(e).position] != "parallel":
            return "a linalg.generic reads the concat dim other than as a parallel loop"
    return None


def split_reader(op) -> str | None:
    """On a target where every kernel is a launch of its own (CUDA), why the concat's buffer is
    needed although every reader could read it as a view: a reader whose view of the concat spans
    several of its inputs, directly or through reshapes, slices and other ops that become views
    too, runs once per piece (vt-lower-views splits its loop range at the piece boundaries, or
    gathers the view piece by piece for a reader that cannot split), a kernel launch per piece.
    Both directions save the concat's copy, the same traffic; stores into the buffer split
    nothing (EfficientViT's q, k and v slices of the multi-scale concat: three readers, each two
    kernels as views, one with the buffer). On the CPU a split is one more loop nest in the same
    function, and views allocate nothing, so the CPU keeps them (None there: not called)."""
    entry = cat.entry_for(op)
    try:
        mapping = entry.mapping(op)
    except (cat.NotVirtualisable, ValueError):
        return None
    return _split_reader_of(op.results[0], mapping)


def _split_reader_of(value, mapping: MappingFunction) -> str | None:
    """The first reader of `value` (a view of the concat's inputs through `mapping`) that would be
    split at its pieces, followed through catalogued one-input data movement (a view itself)."""
    if len({p.source for p in mapping.pieces}) < 2:
        return None   # one input only (a slice of one piece; `cat((f, f))` folds to one piece)
    for use in value.uses:
        owner = as_operation(use.owner)
        entry = cat.entry_for(owner)
        if entry is not None and len(entry.inputs(owner)) == 1 and use.operand_number == 0:
            try:
                outer = entry.mapping(owner)
                composed = mapping.compose(outer, shape=shape_of(owner.results[0]))
            except (cat.NotVirtualisable, ValueError):
                continue   # not a view of the concat: read from a tensor of its own
            why = _split_reader_of(owner.results[0], composed)
            if why is not None:
                return why
            continue
        if owner.name.startswith("linalg.") and use.operand_number < len(owner.operands) - len(owner.results):
            return (f"a {owner.name} reading it through a view of {len(mapping.pieces)} pieces "
                    f"would run (or gather it) once per piece")
    return None


def _consumers(inputs, chain) -> list:
    """The op reading each input: the tensor.concat, or its insert_slice (`chain` is the ops
    replaced, last first, possibly led by the update the concat fans out into)."""
    concat = [op for op in chain if op.name == "tensor.concat"]
    if concat:
        return concat * len(inputs)
    inserts = [op for op in chain if op.name == "tensor.insert_slice"
               and any(op.operands[0] == v for v in inputs)]
    return list(reversed(inserts))


def plan_concats(func, claimed: list, kernel_launches: bool = False) -> tuple[list[ConcatPlan], list[tuple[str, str]]]:
    """Plans for the concats of `func` (program order), and (op, reason) for those left alone
    (`kernel_launches`: see `split_reader`)."""
    plans, skipped = [], []
    claimed = list(claimed)
    ops = [o.operation for o in func.regions[0].blocks[0].operations]
    for op in ops:
        if op.name == "tensor.insert_slice" and _continues_chain(op):
            continue   # inside an insert chain: its last insert plans the chain
        if op.name not in ("tensor.concat", "tensor.insert_slice", "tensor.pad"):
            continue
        if op.name != "tensor.concat" and concat_inputs(op) is None:
            continue   # a plain slice update or pad (stores.py)
        if op.name != "tensor.pad" and any(as_operation(u.owner).name in ("tensor.insert_slice", "tensor.pad")
                                           and u.operand_number == 0 and _fans_out(as_operation(u.owner))
                                           for u in op.results[0].uses):
            continue   # fans out into the update that reads it: planned there
        try:
            plan = plan_concat(op, claimed, kernel_launches)
        except NotRealisable as why:
            skipped.append((f"{op.name}@{format_location(op.location)}", str(why)))
            continue
        plans.append(plan)
        claimed += [p.value for p in plan.parts if p.direct]
    return plans, skipped


def apply_concat(plan: ConcatPlan) -> ir.Value:
    """Replace the concat by stores of its parts into one buffer (see the module docstring)."""
    block = plan.concat.block
    result = plan.concat.results[0]
    rtype = ir.RankedTensorType(result.type)
    # The buffer is born right before the first stored value is computed (one-shot
    # bufferization allocates where the empty tensor is: earlier would lengthen its life).
    # Copied inputs computed earlier are copied in when it is born, not when they are computed.
    direct = sorted((p for p in plan.parts if p.direct), key=lambda p: _position(p.value, block))
    first = as_operation(direct[0].value.owner)
    birth = _position(direct[0].value, block)
    order = sorted(plan.parts, key=lambda p: (max(_position(p.value, block), birth),
                                              _position(p.value, block)))
    with plan.concat.location:
        if plan.update is not None and plan.update.name == "tensor.insert_slice":
            current = plan.update.operands[1]   # the slice update's destination (a KV cache)
        else:
            current = tensor.EmptyOp(list(rtype.shape), rtype.element_type,
                                     ip=ir.InsertionPoint(first)).result
            if plan.update is not None:   # a constant pad: its border value first
                with ir.InsertionPoint(first):
                    current = linalg.fill(cat.pad_value(plan.update), outs=[current])
    anchor = as_operation(current.owner) if not isinstance(current.owner, ir.Block) else None
    if anchor is None or not anchor.is_before_in_block(first):
        anchor = _before(first)
    stores = []   # (store op, updated buffer) in program order
    for part in order:
        early = isinstance(part.value.owner, ir.Block) or _position(part.value, block) < birth
        where = anchor if early else (
            as_operation(part.value.owner) if anchor is None else _later(as_operation(part.value.owner), anchor))
        current, others = _store(part, current, where, block, plan.concat.location)
        anchor = as_operation(current.owner)
        stores.append((anchor, current, part, others))
    final = current
    result.replace_all_uses_with(final)
    for op in plan.chain:
        op.erase()
    for v in plan.inputs:
        erase_dead(v)
    for store, updated, part, others in stores:   # the stored values' other readers
        if part.direct:
            _redirect_readers(part, store, others, [(s, u) for s, u, _, _ in stores], block)
    return final


def _store(part: ConcatPart, dest, after_op, block, location):
    """`vt.store_into` of the part into `dest` right after `after_op`; returns (updated buffer,
    residual tensor or None). A direct part's uncovered region goes to a residual tensor of its
    shape (the producer writes it there; its readers read it)."""
    x = part.value
    shape = shape_of(x)
    pieces = [Piece(0, p.map, p.ranges) for p in part.mapping.pieces]
    dests = [dest]
    rest = []
    if part.direct:
        rest = [[(0, e) for e in shape]]
        for box in full_boxes(part.mapping, shape):
            rest = [b for r in rest for b in subtract(r, box)]
    ip = insertion_after(after_op) if after_op is not None else ir.InsertionPoint.at_block_begin(block)
    with after_op.location if after_op is not None else location:
        if rest:
            dests.append(tensor.EmptyOp(shape, ir.RankedTensorType(x.type).element_type, ip=ip).result)
            ident = ir.AffineMap.get_identity(len(shape))
            pieces += [Piece(1, ident, tuple((d, lo, hi) for d, (lo, hi) in enumerate(b)
                                             if (lo, hi) != (0, shape[d]))) for b in rest]
        updated = vt_dialect.store_into(x, dests, MappingFunction(pieces), ip=ip)
    residual = updated[1] if len(updated) > 1 else None
    return updated[0], residual


def _redirect_readers(part: ConcatPart, store, rest, stores, block) -> None:
    """Readers of the producer's result other than its store read the concat buffer (the latest
    store into it before the reader) through a view, with the residual tensor for the rest."""
    x = part.value
    shape = shape_of(x)
    pieces = [Piece(0, p.map, p.ranges) for p in part.mapping.pieces]
    rest_mapping = MappingFunction.from_attr(store.attributes["mapping"]).pieces[len(pieces):]
    views: dict[int, ir.Value] = {}
    for use in list(x.uses):
        owner = as_operation(use.owner)
        if owner == store:
            continue
        k = max(i for i, (s, _) in enumerate(stores) if s == store or s.is_before_in_block(owner))
        if k not in views:
            s, buffer = stores[k]
            sources = [buffer] + ([rest] if rest is not None else [])
            with s.location:
                views[k] = vt_dialect.view(sources, MappingFunction(pieces + list(rest_mapping)),
                                           shape, ip=insertion_after(s))
        use.owner.operands[use.operand_number] = views[k]


def _position(value, block) -> int:
    if isinstance(value.owner, ir.Block):
        return -1
    for i, o in enumerate(block.operations):
        if o.operation == as_operation(value.owner):
            return i
    return -1


def _before(op):
    """The op right before `op` in its block (None when `op` is first)."""
    prev = None
    for o in op.block.operations:
        if o.operation == op:
            return prev
        prev = o.operation
    return prev


def _later(a, b):
    """The later of two ops of one block."""
    return b if a.is_before_in_block(b) else a


def insertion_after(op) -> ir.InsertionPoint:
    return after(op)
