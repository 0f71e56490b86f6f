"""`codegen-hoist-accumulators`: keep a loop's read-modify-write of one vector in registers.

A contraction's register tile reads its accumulator `C[i, j]` from memory, adds one k step's products
and writes it back, in every iteration of the k loop. Upstream `hoist_redundant_vector_transfers`
(run by the schedule script) turns that pair into a loop-carried vector, but it refuses any buffer
that has a view among its users anywhere in the function: the fused QKV projection's output, which
attention reads through three subviews, or an output that is sliced later. LLVM then keeps the tile
in registers only where it can prove that the loop's other loads do not alias C's stores, which it
can for packed stack copies and cannot for a weight read in place (a transformer block's Linears were
1.2x slower with their B operand read in place).

This pass does the hoisting with an alias check local to the loop, on the buffers behind the views:
a `vector.transfer_read` / `vector.transfer_write` pair directly in an `scf.for` body, on the same
memref at the same loop-invariant indices, with the same vector type and map (or a write of the read's
vector with unit dimensions added by a `vector.shape_cast`, transferring the same elements: a 1x1
convolution's N x F x 1 x 1 output after canonicalisation), in bounds and unmasked, becomes an
`iter_args` vector: read once before the loop, written once after it. It applies only if
no other op in the loop (nested ones included) can touch the pair's buffer:

- every other memref operand of an op in the loop has another root buffer (`bodies.buffer_root`,
  through views), and the two roots are distinct storage: an allocation (`memref.alloc`/`alloca`) is
  distinct from everything else; two `memref.get_global`s are distinct when they name different
  globals; two function arguments are distinct buffers (the calling code gives every result a fresh
  buffer and writes inputs only when donated; upstream hoisting assumes the same of any two values);
- the loop holds no call (its effects are unknown).

Each iteration then reads what the previous one wrote, from a register instead of memory: the values
are those of the loops, bitwise. A loop that runs zero times reads and writes back the same vector.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import scf

from ..ir_utils import within
from ..passes.memref_dealloc_at_last_use import VIEW_OPS
from ..passes.registry import Pass, register_pass
from .bodies import buffer_root

_ALLOCATIONS = ("memref.alloc", "memref.alloca")
_CALLS = ("func.call", "func.call_indirect", "llvm.call")


def hoist_accumulators(module_op) -> int:
    """Hoist every eligible transfer pair out of the `scf.for` loops of `module_op`, innermost loops
    first; returns how many pairs were hoisted."""
    loops = []

    def collect(op):
        if op.name == "scf.for":
            loops.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(collect)  # (post-order)
    hoisted = 0
    for loop in loops:  # post-order: an inner loop is rebuilt before its parent is looked at
        pairs = _hoistable_pairs(loop)
        if pairs:
            _carry(loop, pairs)
            hoisted += len(pairs)
    return hoisted


def _invariant(value, loop) -> bool:
    if isinstance(value, ir.BlockArgument):
        return not within(value.owner.owner, loop)
    return not within(value.owner, loop)


def _hoistable_pairs(loop) -> list:
    """The (read, write) pairs of `loop`'s body that can become loop-carried vectors."""
    body = loop.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    pairs = []
    for i, read in enumerate(ops):
        if read.name != "vector.transfer_read" or not _plain_transfer(read.opview, loop):
            continue
        r = read.opview
        write = next((w for w in ops[i + 1:] if w.name == "vector.transfer_write" and w.opview.base == r.base), None)
        if write is None or not _plain_transfer(write.opview, loop):
            continue
        w = write.opview
        if list(w.indices) != list(r.indices):
            continue
        if w.valueToStore.type == r.result.type and w.permutation_map == r.permutation_map:
            cast = None
        else:
            cast = _unit_dims_cast(r, w, loop)
            if cast is None:
                continue
        if _buffer_touched_elsewhere(loop, buffer_root(r.base), (read, write)):
            continue
        pairs.append((read, write, cast))
    return pairs


def _unit_dims_cast(read, write, loop):
    """The `vector.shape_cast` that gives `write` the `read`'s vector with unit dimensions added,
    where both transfer the same elements of the buffer in the same order; else None.

    Canonicalisation writes a register tile of a rank-4 output (a 1x1 convolution's C, N x F x 1 x 1)
    as `shape_cast` to vector<8x32x1x1> and an identity write, where the read stays a vector<8x32>
    through the map (d0, d1, d2, d3) -> (d0, d1): the same 8x32 elements, in the same order."""
    stored = write.valueToStore
    if isinstance(stored, ir.BlockArgument) or stored.owner.name != "vector.shape_cast":
        return None
    cast = stored.owner
    if cast.operands[0].type != read.result.type or len(list(stored.uses)) != 1 or not within(cast, loop):
        return None
    spans = [_span(read.permutation_map, ir.VectorType(read.result.type).shape),
             _span(write.permutation_map, ir.VectorType(stored.type).shape)]
    return cast if spans[0] is not None and spans[0] == spans[1] else None


def _span(permutation_map, shape) -> list | None:
    """The (buffer dimension, extent) of each vector dimension of a transfer larger than one, in
    order; None where such a dimension is broadcast (no buffer dimension)."""
    span = []
    for expr, size in zip(ir.AffineMapAttr(permutation_map).value.results, shape):
        if size == 1:
            continue
        if not isinstance(expr, ir.AffineDimExpr):
            return None
        span.append((expr.position, size))
    return span


def _plain_transfer(op, loop) -> bool:
    """An unmasked, in-bounds transfer on a memref whose base, indices (and padding) are defined
    outside `loop`. (Out of bounds, a read's padding lanes would be carried as computed values.)"""
    if op.mask is not None or not isinstance(op.base.type, ir.MemRefType):
        return False
    if not all(ir.BoolAttr(a).value for a in op.in_bounds):
        return False
    operands = [op.base, *op.indices] + ([op.padding] if hasattr(op, "padding") else [])
    return all(_invariant(v, loop) for v in operands)


def _buffer_touched_elsewhere(loop, root, pair) -> bool:
    """Whether an op of `loop` other than `pair` may read or write `root`'s storage."""
    touched = False

    def check(op):
        nonlocal touched
        if op.name in _CALLS or (op not in pair and op.name not in VIEW_OPS and any(
                isinstance(v.type, ir.MemRefType) and _may_alias(buffer_root(v), root) for v in op.operands)):
            touched = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    for op in loop.regions[0].blocks[0].operations:
        op.operation.walk(check)
        if touched:
            return True
    return False


def _storage(root):
    """What tells `root`'s storage apart: ("alloc", value), ("global", name), ("argument", value),
    or None when unknown."""
    if isinstance(root, ir.BlockArgument):
        owner = root.owner.owner
        return ("argument", root) if owner is not None and owner.operation.name == "func.func" else None
    op = root.owner.operation
    if op.name in _ALLOCATIONS:
        return ("alloc", root)
    if op.name == "memref.get_global":
        return ("global", ir.FlatSymbolRefAttr(op.attributes["name"]).value)
    return None


def _may_alias(a, b) -> bool:
    if a == b:
        return True
    sa, sb = _storage(a), _storage(b)
    if sa is None or sb is None:
        return True
    if sa[0] == "alloc" or sb[0] == "alloc":
        return False  # distinct values: distinct allocations
    return sa == sb if sa[0] == sb[0] else False


def _carry(loop, pairs) -> None:
    """Rebuild `loop` with one more iter_arg per (read, write) pair: the read before it, the write after."""
    for read, _, _ in pairs:
        read.move_before(loop)
    inits = list(loop.operands[3:]) + [read.results[0] for read, _, _ in pairs]
    old_body = loop.regions[0].blocks[0]
    old_yield = old_body.operations[len(old_body.operations) - 1].operation
    with loop.location, ir.InsertionPoint(loop):
        new = scf.ForOp(loop.operands[0], loop.operands[1], loop.operands[2], inits)
    new_body = new.body
    with loop.location, ir.InsertionPoint(new_body):
        new_yield = scf.YieldOp(list(old_yield.operands) + [cast.operands[0] if cast is not None else write.opview.valueToStore
                                                             for _, write, cast in pairs])
    for old_arg, new_arg in zip(old_body.arguments, new_body.arguments):
        old_arg.replace_all_uses_with(new_arg)
    carried = list(new_body.arguments)[len(old_body.arguments):]
    for (read, _, _), arg in zip(pairs, carried):
        for use in list(read.results[0].uses):
            if use.owner != new.operation:
                use.owner.operands[use.operand_number] = arg
    for op in [o.operation for o in old_body.operations][:-1]:
        op.move_before(new_yield.operation)
    count = len(loop.results)
    for old_result, new_result in zip(loop.results, list(new.results)[:count]):
        old_result.replace_all_uses_with(new_result)
    for (_, write, cast), result in zip(pairs, list(new.results)[count:]):
        write.move_after(new.operation)
        if cast is None:
            write.operands[0] = result
        else:  # the carried vector gets its unit dimensions after the loop, for the write
            cast.move_before(write)
            cast.operands[0] = result
    loop.erase()


@register_pass
class HoistAccumulators(Pass):
    name = "codegen-hoist-accumulators"
    summary = "Keep a loop's read-modify-write of one vector (a register tile's accumulator) in registers"
    description = (
        "A vector.transfer_read/transfer_write pair in an scf.for body, on the same memref at the same "
        "loop-invariant indices, becomes an iter_args vector when no other op of the loop can touch "
        "that buffer (alias check through views to the root allocations). Bitwise."
    )

    def run(self, module):
        hoist_accumulators(module)
