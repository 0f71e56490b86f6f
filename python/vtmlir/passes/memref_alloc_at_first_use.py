"""`memref-alloc-at-first-use`: move each static `memref.alloc` right before the first use of its buffer.

The mirror of `memref-dealloc-at-last-use` (passes/memref_dealloc_at_last_use.py). One-shot
bufferization allocates a tensor's buffer where the `tensor.empty` it was written into stood, and the
graph-level `cse` merges all `tensor.empty`s of one shape into a single one at the top of the function:
every buffer of that shape is then allocated at the function's start and lives from there, although
the op that writes it runs much later. TeMCO's analysis (§2.2) counts a tensor from the layer that
produces it to its last use; with frees at last use and allocations at first use, the runtime's
measured internal peak follows it (`test_temco_fuse.py` checks the agreement on the evaluation
models). Allocations with operands (dynamic sizes) stay where they are, so their operands still
dominate them.

Shared constant fills. The importer gives all convs of one output shape a single zero (or bias-free)
`linalg.fill` as init, and `cse` merges the rest; one-shot bufferization then materialises the fill
once and copies it into each conv's buffer (`linalg.copy` after `memref-copy-to-linalg`), so a
full-size buffer of zeros lives from the first conv of that shape to the last — a tensor the model
does not have (TeMCO §2.2 counts none). Before sinking, each copy out of a buffer whose only writer
is such a constant fill becomes a fill of the copy's target (bitwise the same values), and the fill
of the shared buffer moves down to the buffer's first remaining reader, so the zeros are allocated
only where a conv accumulates into them.
"""

from __future__ import annotations

from functools import cmp_to_key

from torch_mlir import ir

from ..ir_utils import all_parallel, fill_value, walk_ops
from ..passes.memref_dealloc_at_last_use import VIEW_OPS, users_in_block
from ..passes.memref_elide_temporary_copies import accesses, region, root_of
from ..passes.registry import Pass, register_pass


def _constant_fill_of(op) -> bool:
    """A bufferized fill: `linalg.fill`, or a generalised one (`ir_utils.fill_value`) with all loops
    parallel."""
    if op.name == "linalg.fill":
        return True
    return op.name == "linalg.generic" and not len(op.results) and fill_value(op) is not None and all_parallel(op)


def rematerialize_fill_copies(root) -> int:
    """Replace `linalg.copy(fill_buffer → target)` by a clone of the fill on `target`, where the
    fill buffer is a static `memref.alloc` written only by that one fill; then move the fill down to
    the buffer's next user. Returns the number of copies replaced."""
    replaced = 0
    for alloc in walk_ops(root, "memref.alloc"):
        if len(alloc.operands):
            continue
        buffer = alloc.results[0]
        direct = [use.owner.operation for use in buffer.uses]
        fills = [op for op in direct if _constant_fill_of(op) and op.operands[len(op.operands) - 1] == buffer]
        if len(fills) != 1 or fills[0].parent != alloc.parent:
            continue
        fill = fills[0]
        # only the copies made while the buffer still holds the fill (before any other user)
        copies = []
        for user in sorted(dict.fromkeys(users_in_block(buffer, alloc.parent)),
                           key=cmp_to_key(_order)):
            if user == alloc or user == fill or not fill.is_before_in_block(user):
                continue
            if user.name != "linalg.copy" or user.operands[0] != buffer:
                break
            copies.append(user)
        for copy in copies:
            clone = fill.clone(ir.InsertionPoint(copy))
            clone.operands[len(clone.operands) - 1] = copy.operands[1]
            copy.erase()
            replaced += 1
        if copies:
            users = [u for u in users_in_block(buffer, alloc.parent) if u != fill and u != alloc
                     and u.name != "memref.dealloc"]
            first = None
            for user in users:
                if first is None or user.is_before_in_block(first):
                    first = user
            if first is not None and fill.is_before_in_block(first):
                fill.move_before(first)
    return replaced


def _top_level(op, block_owner):
    while op.parent is not None and op.parent != block_owner:
        op = op.parent.operation
    return op if op.parent is not None else None


def _overwrites_whole_buffer(op, buffer) -> bool:
    """`op` writes every element of `buffer` (its init, not a view of it) without reading it first:
    a `linalg.copy` into it, a fill, or an elementwise `linalg.generic`/`linalg.map` with it as the
    only init whose payload ignores the init's old value and that does not read it as an input."""
    if op.name == "linalg.copy":
        return op.operands[1] == buffer and op.operands[0] != buffer
    if _constant_fill_of(op):
        return op.operands[len(op.operands) - 1] == buffer
    if op.name not in ("linalg.generic", "linalg.map") or len(op.results):
        return False
    operands = list(op.operands)
    if "operandSegmentSizes" in op.attributes:
        inputs, outputs = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[:2]
        if outputs != 1 or inputs + 1 != len(operands):
            return False
    if operands[-1] != buffer or buffer in operands[:-1]:
        return False
    if op.name == "linalg.generic" and not all_parallel(op):
        return False
    init_arg = op.regions[0].blocks[0].arguments[len(operands) - 1]
    return not any(True for _ in init_arg.uses)


def _writes_view_whole(op, buffer):
    """The box of `buffer` (root coordinates) that `op` overwrites without reading: `op` writes
    every element of one view of `buffer` -- a `linalg.copy` into it, a constant fill, or an
    all-parallel `linalg.generic`/`linalg.map` whose one init is the view, written through a
    permutation map, with a payload that ignores the init's old value -- and reads nothing of
    `buffer`. None otherwise (also when the view is no box of the buffer)."""
    operands = list(op.operands)
    if not operands or root_of(operands[-1]) != buffer:
        return None
    target = operands[-1]
    if any(r.root == buffer and i != len(operands) - 1 for i, r in accesses(op)):
        return None   # reads the buffer (another operand, or an op nested in it)
    if op.name == "linalg.copy" or _constant_fill_of(op):
        pass
    elif op.name in ("linalg.generic", "linalg.map") and not len(op.results):
        if "operandSegmentSizes" in op.attributes and \
                list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[1] != 1:
            return None
        if op.name == "linalg.generic":
            if any(True for _ in op.regions[0].blocks[0].arguments[len(operands) - 1].uses):
                return None   # the payload reads the old value
            if not all_parallel(op):
                return None
            out_map = ir.AffineMapAttr(ir.ArrayAttr(op.attributes["indexing_maps"])[len(operands) - 1]).value
            if not out_map.is_permutation:
                return None
    else:
        return None
    return region(target).box


def _covering_writes(ops, buffer) -> bool:
    """`ops` (top-level users of `buffer` in order) start with writes of disjoint boxes of `buffer`
    that together cover all of it, before anything reads it or touches it otherwise (view ops touch
    no memory): from the first of them on, the buffer holds a new value."""
    shape = ir.MemRefType(buffer.type).shape
    total = 1
    for n in shape:
        total *= n
    boxes: list = []
    for op in ops:
        if op.name in VIEW_OPS:
            continue
        box = _writes_view_whole(op, buffer)
        if box is None or any(not any(a_hi < b_lo or b_hi < a_lo for (a_lo, a_hi), (b_lo, b_hi) in zip(box, b))
                              for b in boxes):
            return False
        boxes.append(box)
        covered = 0
        for b in boxes:
            volume = 1
            for lo, hi in b:
                volume *= hi - lo + 1
            covered += volume
        if covered == total:
            return True
    return False


def split_reused_buffers(root) -> int:
    """Give each value written into a reused buffer an allocation of its own.

    One-shot bufferization may write a later tensor into the buffer of an earlier one that is dead by
    then (all `tensor.empty`s of a shape are one value after `cse`, so several ops bufferize into its
    one allocation). The buffer then stays allocated through the gap between the two values, which
    no tensor of the model needs. Where a top-level op overwrites the whole buffer without reading
    it -- or a run of ops writes disjoint boxes of it that together cover it, before anything reads
    it (a concat materialised piece by piece into subviews: vt-lower-views' producer writes) -- the
    uses from that op on move to a fresh allocation; views of the buffer made before that op and
    used after it are made again on the fresh one (`cse` merges equal subviews of the two values).
    The old buffer is freed after its last earlier use (`memref-dealloc-at-last-use`'s placement
    below). Returns how many buffers were split."""
    splits = 0
    work = list(walk_ops(root, "memref.alloc"))
    while work:
        alloc = work.pop()
        if len(alloc.operands) or not ir.MemRefType(alloc.results[0].type).has_static_shape:
            continue
        owner = alloc.parent
        buffer = alloc.results[0]
        users = sorted(dict.fromkeys(u for u in users_in_block(buffer, owner) if u != alloc),
                       key=cmp_to_key(_order))
        deallocs = [u for u in users if u.name == "memref.dealloc"]
        if len(deallocs) != 1:
            continue
        body = [u for u in users if u.name != "memref.dealloc"]
        cut = next((i for i, u in enumerate(body)
                    if u.name not in VIEW_OPS and any(b.name not in VIEW_OPS for b in body[:i])
                    and (_overwrites_whole_buffer(u, buffer) or _covering_writes(body[i:], buffer))), None)
        if cut is None:
            continue
        start = body[cut]
        # Views made before the cut whose value is read after it -- directly, or through views of
        # them made before the cut too (`cse` shares one collapse/subview chain between layers):
        # the same views of the fresh buffer. A chain is remade whole, from the buffer down, so a
        # view with no late use of its own is remade where a view of it has one; otherwise the
        # late reader would keep reading the old buffer, freed below (use after free).
        early_views = [u for u in body[:cut] if u.name in VIEW_OPS]
        remade_views = set()
        for view in reversed(early_views):
            if any(not _top_level(use.owner.operation, owner).is_before_in_block(start)
                   or use.owner.operation in remade_views for r in view.results for use in r.uses):
                remade_views.add(view)
        reachable = {buffer}
        for view in early_views:
            if view in remade_views and view.operands[0] in reachable:
                reachable.add(view.results[0])
        if any(v in remade_views and v.results[0] not in reachable for v in early_views):
            continue  # a view chain not rooted in the buffer: keep the buffer whole
        fresh = alloc.clone(ip=ir.InsertionPoint(start))
        remade = {buffer: fresh.results[0]}
        for view in early_views:
            if view not in remade_views:
                continue
            late = [use for r in view.results for use in r.uses
                    if not _top_level(use.owner.operation, owner).is_before_in_block(start)]
            clone = view.clone(ip=ir.InsertionPoint(start))
            clone.operands[0] = remade[view.operands[0]]
            remade[view.results[0]] = clone.results[0]
            for use in late:
                use.owner.operands[use.operand_number] = clone.results[0]
        for use in list(buffer.uses):
            top = _top_level(use.owner.operation, owner)
            if top is not None and top != fresh and not top.is_before_in_block(start):
                use.owner.operands[use.operand_number] = fresh.results[0]
        # free the old buffer right after its last use before the cut
        dealloc = deallocs[0].clone(ip=ir.InsertionPoint(start))
        dealloc.operands[0] = buffer
        dealloc.move_after([b for b in body[:cut] if b.name not in VIEW_OPS][-1])
        splits += 1
        work.append(fresh)
    return splits


_VIEWS = {"memref.subview", "memref.expand_shape", "memref.collapse_shape", "memref.cast",
          "memref.reinterpret_cast", "memref.view", "memref.transpose"}


def _order(a, b) -> int:
    return 0 if a == b else (-1 if a.is_before_in_block(b) else 1)


def _alloc_of(value, block_owner):
    """The top-level static `memref.alloc` in `block_owner` that defines `value`, else None."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    if op.name != "memref.alloc" or len(op.operands) or op.parent != block_owner:
        return None
    return op


def reuse_dead_inputs(root) -> int:
    """Let an elementwise op write into an input buffer that dies at it instead of a fresh buffer.

    A top-level all-parallel `linalg.generic` whose one init is a fresh static allocation (this op is
    its first user; the payload ignores the init's old value) and whose input `x` is another static
    allocation of the same type, read with the same (permutation) indexing map as the init, read nowhere
    else by the op (no other operand, no load of a view of it in the payload -- a flip or a gather of
    `x`'s own elements would read elements already overwritten) and used by nothing after this op but
    its `memref.dealloc`, writes each element of `x` after reading it: the result goes into
    `x`'s buffer and the fresh allocation disappears (ReLU, BatchNorm and residual adds in place, what
    one-shot bufferization already does when both come from one `tensor.empty`).
    `temco-analyze-peak-memory` models the same rule. Returns how many allocations were removed."""
    removed = 0
    for op in list(walk_ops(root, "linalg.generic")):
        owner = op.parent
        if owner is None or owner.name != "func.func" or len(op.results) or "operandSegmentSizes" not in op.attributes:
            continue
        n_in, n_out = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[:2]
        if n_out != 1 or not all_parallel(op):
            continue
        operands = list(op.operands)
        out = operands[n_in]
        out_alloc = _alloc_of(out, owner)
        body = op.regions[0].blocks[0]
        if out_alloc is None or any(True for _ in body.arguments[n_in].uses):
            continue
        out_users = [u for u in users_in_block(out, owner) if u != out_alloc]
        if any(u.is_before_in_block(op) for u in out_users):
            continue
        maps = list(ir.ArrayAttr(op.attributes["indexing_maps"]))
        for i in range(n_in):
            x = operands[i]
            x_alloc = _alloc_of(x, owner)
            if (x_alloc is None or x.type != out.type or maps[i] != maps[n_in]
                    or not ir.AffineMapAttr(maps[n_in]).value.is_permutation
                    or sum(1 for _, r in accesses(op) if r.root == x) != 1):
                continue  # in place only if each element is read once, by this operand, before it is written
            later = [u for u in users_in_block(x, owner) if u != op and op.is_before_in_block(u)]
            if any(u.name != "memref.dealloc" for u in later) or len(later) != 1:
                continue
            later[0].erase()  # x now lives as long as the result did
            for use in list(out.uses):
                if use.owner.operation != out_alloc:
                    use.owner.operands[use.operand_number] = x
            out_alloc.erase()
            removed += 1
            break
    return removed


def sink_allocations(module) -> int:
    """Move static allocations to their first user in their block; returns how many moved."""
    root = module.operation if hasattr(module, "operation") else module
    rematerialize_fill_copies(root)
    split_reused_buffers(root)
    reuse_dead_inputs(root)
    moved = 0
    for alloc in walk_ops(root, "memref.alloc"):
        if len(alloc.operands):
            continue
        block_owner = alloc.parent
        first = None
        for user in users_in_block(alloc.results[0], block_owner):
            if user == alloc:
                continue
            if first is None or user.is_before_in_block(first):
                first = user
        if first is not None and alloc.is_before_in_block(first):
            alloc.move_before(first)
            moved += 1
    return moved


@register_pass
class MemrefAllocAtFirstUse(Pass):
    name = "memref-alloc-at-first-use"
    summary = "Move each static memref.alloc right before the first use of its buffer or of a view of it"
    description = ("Copies out of a buffer holding only a constant fill become fills of their targets "
                   "first, so a shared zero-init is not kept alive between the convs that start from it.")

    def run(self, module) -> None:
        sink_allocations(module)
