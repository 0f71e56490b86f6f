"""`memref-elide-temporary-copies`: write a temporary's value straight into the buffer it is copied to.

One-shot bufferization decides in place / out of place per tensor use, and its conflict rule treats a
buffer as one object: an op that reads one part of a buffer and writes another (disjoint) part of
it is a read-after-write conflict, so it gets a fresh buffer and a `memref.copy` into the target
(one-shot's subset rule only pairs an `extract_slice` with the `insert_slice` of the *same*
subset). C3K2 hits exactly that after `vt-eliminate-data-movement` (VTC Fig. 11): the bottleneck's
residual add reads the chunk half stored in channels 4..8 of the concat buffer and writes its result
into channels 8..12 of it (VTC §4.4: the producer writes into the concat buffer), so bufferization
makes a temporary and a copy kernel, and the temporary raises the peak.

After bufferization the question is decidable on memrefs, where every view has a static strided
layout relative to its allocation. For each copy `memref.copy %tmp, %dst` (or `linalg.copy`) where

- `%tmp` is a `memref.alloc` whose only other users are the linalg ops that write it (as an init;
  none reads it as an input) and precede the copy in its block,
- every access to `%dst`'s root buffer from the first writer up to the copy -- the writers' inputs
  and anything any op in between touches -- is *provably disjoint* from the region `%dst` covers
  (boxes in the root's coordinates when both are boxes of it, else ranges of linear offsets; an
  access the analysis cannot bound covers the whole root),

the writers write `%dst` instead (its views are moved before the first writer), and the copy and
the temporary disappear. Each element is computed by the same op from the same inputs: results are
bitwise identical. Distinct roots (allocations, function arguments) never alias here: compiled
functions receive distinct arrays (`CpuExecutable` copies a donated input that shares memory with
another one).

Runs right after `one-shot-bufferize` (docs/vtc.md §5, backend/bufferize.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir

from ..dialects.affine_eval import bounds
from ..ir_utils import destination_indices, walk_ops
from .memref_dealloc_at_last_use import VIEW_OPS
from .registry import Pass, register_pass

_COPIES = ("memref.copy", "linalg.copy")


@dataclass(frozen=True)
class Region:
    """The memory one access may touch, relative to its root buffer: a box per root dim (inclusive
    bounds) when the access is a box of the root, and always a range of linear element offsets."""

    root: ir.Value
    linear: tuple[int, int] | None          # None: unknown (the whole root)
    box: tuple[tuple[int, int], ...] | None

    def disjoint(self, other: "Region") -> bool:
        if self.root != other.root:
            return True
        if self.box is not None and other.box is not None:
            if any(a_hi < b_lo or b_hi < a_lo for (a_lo, a_hi), (b_lo, b_hi) in zip(self.box, other.box)):
                return True
        if self.linear is None or other.linear is None:
            return False
        return self.linear[1] < other.linear[0] or other.linear[1] < self.linear[0]


def root_of(value) -> ir.Value:
    """The buffer `value` is a view of: follow view-like ops (subview, reshapes, casts) to their
    source."""
    while not isinstance(value.owner, ir.Block) and value.owner.name in VIEW_OPS:
        value = value.owner.operands[0]
    return value


def _layout(value) -> tuple[list[int], int] | None:
    """(strides, offset) of a memref value, or None when any is dynamic."""
    t = ir.MemRefType(value.type)
    strides, offset = t.get_strides_and_offset()
    if any(t.is_dynamic_stride_or_offset(s) for s in [*strides, offset]):
        return None
    return list(strides), offset


def region(value, index_bounds: list[tuple[int, int]] | None = None) -> Region:
    """What an access to memref `value` at indices within `index_bounds` (inclusive per dim; None:
    all of `value`) may touch in its root buffer."""
    root = root_of(value)
    t = ir.MemRefType(value.type)
    if index_bounds is None:
        if not t.has_static_shape:
            return Region(root, None, None)
        index_bounds = [(0, n - 1) for n in t.shape]
    layout, root_layout = _layout(value), _layout(root)
    if layout is None or root_layout is None or any(s < 0 for s in layout[0]):
        return Region(root, None, None)
    strides, offset = layout
    linear = (offset + sum(s * lo for s, (lo, _) in zip(strides, index_bounds)),
              offset + sum(s * hi for s, (_, hi) in zip(strides, index_bounds)))
    box = None
    root_type = ir.MemRefType(root.type)
    if strides == root_layout[0] and root_type.has_static_shape and offset >= root_layout[1]:
        # A rank-preserving unit-stride view of the root: its offset is a corner of the root.
        corner, rest = [], offset - root_layout[1]
        for s in root_layout[0]:
            corner.append(rest // s if s else 0)
            rest -= corner[-1] * s
        if rest == 0 and all(0 <= c + lo and c + hi < n
                             for c, (lo, hi), n in zip(corner, index_bounds, root_type.shape)):
            box = tuple((c + lo, c + hi) for c, (lo, hi) in zip(corner, index_bounds))
    return Region(root, linear, box)


def _loop_bounds(op, maps) -> list[tuple[int, int]] | None:
    """Inclusive loop ranges of a linalg op from the bare dims of its operands' maps."""
    extents: dict[int, int] = {}
    for v, m in zip(op.operands, maps):
        if not isinstance(v.type, ir.MemRefType):
            continue
        shape = ir.MemRefType(v.type).shape
        for r, e in enumerate(m.results):
            e = e.maybe_downcast() if hasattr(e, "maybe_downcast") else e
            if isinstance(e, ir.AffineDimExpr) and shape[r] >= 0:
                extents.setdefault(e.position, shape[r])
    if not maps or any(k not in extents for k in range(maps[0].n_dims)):
        return None
    return [(0, extents[k] - 1) for k in range(maps[0].n_dims)]


def accesses(op) -> list[tuple[int, Region]]:
    """(operand number, region) for every memref operand of `op` and of the ops nested in it. A linalg
    op with indexing maps touches each operand where its map sends the loop ranges; anything else
    may touch its operands whole; a view touches no memory."""
    if op.name in VIEW_OPS:
        return []
    found = []
    maps = None
    if op.name.startswith("linalg.") and "indexing_maps" in op.attributes:
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        loops = _loop_bounds(op, maps)
        if loops is None or len(maps) != len(op.operands):
            maps = None
    for i, v in enumerate(op.operands):
        if not isinstance(v.type, ir.MemRefType):
            continue
        index_bounds = None
        if maps is not None:
            try:
                index_bounds = [bounds(e, [(lo, hi + 1) for lo, hi in loops]) for e in maps[i].results]
            except (ValueError, TypeError):
                index_bounds = None
        found.append((i, region(v, index_bounds)))
    for r in op.regions:
        for block in r.blocks:
            for inner in block.operations:
                found.extend((-1, reg) for _, reg in accesses(inner.operation))
    return found


def _defined_before(value, op) -> bool:
    """`value` is available at `op`: a block argument of an enclosing block, or the result of an op
    earlier in `op`'s block or in an enclosing one."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return True
    owner = owner.operation
    cursor = op
    while cursor is not None and cursor.name != "func.func":
        if owner.block == cursor.block:
            return owner.is_before_in_block(cursor)
        cursor = cursor.parent.operation if cursor.parent is not None else None
    return False


def _view_chain(value) -> list:
    """The view ops from `value`'s root to `value`, root side first."""
    chain = []
    while not isinstance(value.owner, ir.Block) and value.owner.name in VIEW_OPS:
        chain.append(value.owner.operation)
        value = value.owner.operands[0]
    return chain[::-1]


def _plan(copy) -> tuple[list, object] | None:
    """(writers of the temporary, its alloc) when `copy`'s source can be elided, else None."""
    tmp, dst = copy.operands[0], copy.operands[1]
    alloc = tmp.owner
    if isinstance(alloc, ir.Block):
        return None
    alloc = alloc.operation
    if alloc.name != "memref.alloc" or alloc.block != copy.block:
        return None
    if ir.MemRefType(tmp.type).shape != ir.MemRefType(dst.type).shape or \
            ir.MemRefType(tmp.type).element_type != ir.MemRefType(dst.type).element_type:
        return None
    writers = []
    for use in tmp.uses:
        user = use.owner.operation
        if user == copy and use.operand_number == 0:
            continue
        if user.name == "memref.dealloc":
            continue
        if not user.name.startswith("linalg.") or use.operand_number not in destination_indices(user) \
                or user.block != copy.block or not user.is_before_in_block(copy):
            return None
        writers.append(user)
    if not writers:
        return None
    block_ops = [o.operation for o in copy.block.operations]
    writers.sort(key=block_ops.index)
    first = writers[0]
    root = root_of(dst)
    if root == tmp or not _defined_before(root, first):
        return None
    for view in _view_chain(dst):
        if any(not _defined_before(v, first) for v in list(view.operands)[1:]):
            return None
    target = region(dst)
    between = block_ops[block_ops.index(first):block_ops.index(copy)]
    for op in between:
        for number, reg in accesses(op):
            if number >= 0 and op.operands[number] == tmp:
                continue   # the temporary itself (only its writers use it)
            if not reg.disjoint(target):
                return None
    return writers, alloc


def elide(copy) -> bool:
    """Elide `copy`'s temporary when `_plan` allows it; True when the IR changed."""
    plan = _plan(copy)
    if plan is None:
        return False
    writers, alloc = plan
    tmp, dst = copy.operands[0], copy.operands[1]
    first = writers[0]
    for view in _view_chain(dst):
        if view.block == first.block and first.is_before_in_block(view):
            view.move_before(first)
    for w in writers:
        for i in destination_indices(w):
            if w.operands[i] == tmp:
                w.operands[i] = dst
    copy.erase()
    for use in list(tmp.uses):
        use.owner.operation.erase()   # deallocs of the temporary
    alloc.erase()
    return True


@register_pass
class MemrefElideTemporaryCopies(Pass):
    name = "memref-elide-temporary-copies"
    summary = "Let the ops writing a temporary write the buffer it is copied into, when no access overlaps"
    description = __doc__

    def run(self, module) -> None:
        copies = [op for name in _COPIES for op in walk_ops(module, name)]
        for copy in copies:
            if len(copy.operands) == 2 and not copy.results:
                elide(copy)
