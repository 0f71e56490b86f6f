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
layout relative to its allocation. For each copy `memref.copy %src, %dst` (or `linalg.copy`) where

- `%src` is a `memref.alloc` `%tmp`, or `%tmp` reshaped (`expand_shape`/`collapse_shape`, then
  `%dst` must be contiguous), in the copy's block, and every use of `%tmp` or of a view of it is an
  op of that block before the copy (it is a temporary: nothing reads it afterwards); where `%dst`'s
  type differs from `%tmp`'s (a strided subview), `%tmp` is used by linalg ops only (they take any
  layout; a view of `%tmp` would change type),
- every access to `%dst`'s root buffer from the first use of `%tmp` up to the copy, other than
  through `%tmp`, is *provably disjoint* from the region `%dst` covers (boxes in the root's
  coordinates when both are boxes of it, else ranges of linear offsets; an access the analysis
  cannot bound covers the whole root; a linalg op accesses each operand where its indexing map
  sends the loop ranges),

`%tmp` is replaced by `%dst` (reshaped back to `%tmp`'s shape; `%dst`'s views move before the first
use), and the copy and the temporary disappear: every op that wrote or read the temporary writes or
reads the destination, which holds the same values at every point in between. Results are bitwise
identical. Distinct roots (allocations, function arguments) never alias here: compiled
functions receive distinct arrays (`CpuExecutable` copies a donated input that shares memory with
another one).

Run right after `one-shot-bufferize` it removes the temporaries of disjoint read/write conflicts;
run after `buffer-results-to-out-params` it makes a result returned through a reshape (which
`hoist-static-allocs` cannot hoist: the returned value is no allocation) be computed in the
caller's out-parameter instead of a temporary copied into it at the end.

(docs/vtc.md §5, backend/bufferize.py)
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir

from torch_mlir.dialects import memref

from ..dialects.affine_eval import bounds
from ..ir_utils import nested_ops, walk_ops
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


def _contiguous(value) -> bool:
    """A static memref laid out row-major from offset 0 (an allocation or an argument)."""
    t = ir.MemRefType(value.type)
    layout = _layout(value)
    if not t.has_static_shape or layout is None:
        return False
    expected, step = [], 1
    for n in reversed(t.shape):
        expected.insert(0, step)
        step *= n
    return layout[1] == 0 and all(s == e or n == 1 for s, e, n in zip(layout[0], expected, t.shape))


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


def accesses(op, nested: bool = True) -> list[tuple[int, Region]]:
    """(operand number, region) for every memref operand of `op` and (with `nested`) of the ops nested
    in it, numbered -1. A linalg op with indexing maps touches each operand where its map sends the
    loop ranges; anything else may touch its operands whole; a view touches no memory."""
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
    if nested:
        for inner in nested_ops(op, descend=lambda o: o.name not in VIEW_OPS):
            found.extend((-1, reg) for _, reg in accesses(inner, nested=False))
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


_RESHAPES = ("memref.expand_shape", "memref.collapse_shape")


@dataclass
class _Plan:
    alloc: object          # the temporary's memref.alloc
    chain: list            # reshapes from the temporary to the copy's source (temporary side first)
    first: object          # the first op of the block that uses the temporary (or a view of it)
    deallocs: list


def _top_level(op, block):
    """The op of `block` that is or holds `op` (None when `op` is outside `block`)."""
    while op is not None and op.block != block:
        op = op.parent.operation if op.parent is not None and op.parent.name != "func.func" else None
    return op


def _users(tmp, block, skip) -> list | None:
    """Ops of `block` using `tmp` or a view of it (views included), minus `skip`; None when a use is
    outside `block`."""
    users, pending = [], [tmp]
    while pending:
        value = pending.pop()
        for use in value.uses:
            op = use.owner.operation
            if any(op == s for s in skip):
                continue
            top = _top_level(op, block)
            if top is None:
                return None
            users.append(top)
            if op.name in VIEW_OPS and use.operand_number == 0:
                pending.extend(op.results)
    return users


def _reshaped_type(source: ir.MemRefType, shape, reassociation, collapse: bool) -> ir.MemRefType:
    """The type of `source` reshaped to `shape` as MLIR infers it (`computeExpandedType`,
    `computeCollapsedType`), which the reshape's verifier demands exactly: a layout whose map is the
    identity -- the default one, and also `strided<[1]>`, the head of a 1-d buffer, e.g. the first
    part of a concatenation's out-parameter -- gives the default layout; any other strided layout
    (a 0-d one included) gets, per collapsed group, the stride of its innermost non-unit dim (of its
    first dim when all are unit: [1, 1] of strides [2, 1] collapses to stride 2), and
    per expanded group the strides of a row-major split of the source dim's stride (all 1 from 0-d)."""
    elt = source.element_type
    if source.affine_map == ir.AffineMap.get_identity(source.rank):
        return ir.MemRefType.get(shape, elt)
    strides, offset = source.get_strides_and_offset()
    groups = [[ir.IntegerAttr(d).value for d in ir.ArrayAttr(g)] for g in ir.ArrayAttr(reassociation)]
    new = [1] * len(shape)
    for i, group in enumerate(groups):
        if collapse:
            inner = [d for d in group if source.shape[d] != 1] or group[:1]  # all unit: the first
            new[i] = strides[inner[-1]]
        else:
            step = strides[i]
            for d in reversed(group):
                new[d] = step
                step *= shape[d]
    return ir.MemRefType.get(shape, elt, ir.StridedLayoutAttr.get(offset, new))


def _plan(copy) -> _Plan | None:
    """How `copy`'s source can be elided, or None."""
    src, dst = copy.operands[0], copy.operands[1]
    chain, tmp = [], src
    while not isinstance(tmp.owner, ir.Block) and tmp.owner.name in _RESHAPES:
        if len(list(tmp.uses)) != 1:
            return None
        chain.insert(0, tmp.owner.operation)
        tmp = tmp.owner.operands[0]
    if isinstance(tmp.owner, ir.Block):
        return None
    alloc = tmp.owner.operation
    if alloc.name != "memref.alloc" or alloc.block != copy.block:
        return None
    src_t, dst_t = ir.MemRefType(src.type), ir.MemRefType(dst.type)
    if src_t.shape != dst_t.shape or src_t.element_type != dst_t.element_type:
        return None
    if chain and not _contiguous(dst):
        return None   # reshaping the destination back needs it contiguous
    deallocs = [u.owner.operation for u in tmp.uses if u.owner.operation.name == "memref.dealloc"]
    if not chain and tmp.type != dst.type:
        # `%dst` (strided) replaces `%tmp` as it is: fine for linalg operands, not for a view of
        # `%tmp` (its result type follows the source's layout) or any other op's typed operand
        if any(not u.owner.operation.name.startswith("linalg.") for u in tmp.uses
               if u.owner.operation != copy and u.owner.operation.name != "memref.dealloc"):
            return None
    block = copy.block
    users = _users(tmp, block, [copy] + chain + deallocs)
    if not users:
        return None
    block_ops = [o.operation for o in block.operations]
    index = {}
    for op in users:
        index[block_ops.index(op)] = op
    if max(index) >= block_ops.index(copy):
        return None   # a use after the copy would see the destination's later values
    first = block_ops[min(index)]
    root = root_of(dst)
    if root == tmp or not _defined_before(root, first):
        return None
    for view in _view_chain(dst):
        if any(not _defined_before(v, first) for v in list(view.operands)[1:]):
            return None
    target = region(dst)
    for op in block_ops[block_ops.index(first):block_ops.index(copy)]:
        for _, reg in accesses(op):
            if reg.root == tmp:
                continue   # the temporary (it becomes the destination)
            if not reg.disjoint(target):
                return None
    return _Plan(alloc, chain, first, deallocs)


def elide(copy) -> bool:
    """Elide `copy`'s temporary when `_plan` allows it; True when the IR changed."""
    plan = _plan(copy)
    if plan is None:
        return False
    dst = copy.operands[1]
    first = plan.first
    for view in _view_chain(dst):
        if view.block == first.block and first.is_before_in_block(view):
            view.move_before(first)
    # the destination seen with the temporary's shape: the copy's reshapes undone, last first
    target = dst
    tmp = plan.alloc.results[0]
    with copy.location, ir.InsertionPoint(first):
        for reshape in reversed(plan.chain):
            shape = ir.MemRefType(reshape.operands[0].type).shape
            reassociation = reshape.attributes["reassociation"]
            result_type = _reshaped_type(ir.MemRefType(target.type), shape, reassociation,
                                         collapse=reshape.name == "memref.expand_shape")
            if reshape.name == "memref.collapse_shape":
                target = memref.ExpandShapeOp(result_type, target, reassociation, [], shape).result
            else:
                target = memref.CollapseShapeOp(result_type, target, reassociation).result
        if plan.chain and target.type != tmp.type:
            # a contiguous destination (`_plan`) with a strided type, e.g. the first row of a
            # matrix, memref<1x11xi64, strided<[11, 1]>>: the same layout as the temporary's
            target = memref.CastOp(tmp.type, target).result
    copy.erase()
    for op in reversed(plan.chain):
        op.erase()
    for op in plan.deallocs:
        op.erase()
    tmp.replace_all_uses_with(target)
    plan.alloc.erase()
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
