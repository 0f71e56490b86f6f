"""`unshare-fill-inits`: give every op that writes into a constant fill its own copy of that fill.

The importer gives many ops a constant-filled destination: the zero accumulator of a matmul or
conv, the zero (or -inf) tensor a pad or a concat inserts into. Graph-level `cse` merges all fills
of one shape and value into a single tensor. One-shot bufferization must then keep that tensor
intact for its later readers, so every op that writes into it gets a fresh buffer plus a copy of
the fill -- the shared zeros live from the first writer to the last, and the copies sit in the
middle of chains VTC has made copy-free (Gemma-2's frame 2, C3K2's split/concat).

Run between `cse` and `eliminate-empty-tensors`, this pass clones the fill -- with its
`tensor.empty` and the `tensor.expand_shape` / `tensor.collapse_shape` chain between it and the
writer -- right before each writer (before the producer of the inserted value, for an
insert_slice): a destination-passing init of a linalg op, a shared output of an `scf.forall` or
the destination of a `tensor.insert_slice` -- in the fill's own block (not into a loop body, where the clone would
run every iteration). Each writer then writes in place into its own fill, which bufferization
allocates where the clone stands. A fill with a single use, or only readers, is left alone. The
values are the same constant, so results are bitwise identical.
"""

from __future__ import annotations

from torch_mlir import ir

from ..ir_utils import all_parallel, destination_indices, fill_value, nested_operands, walk_ops
from .registry import Pass, register_pass

_RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")


def _is_constant_fill(op) -> bool:
    """`linalg.fill`, or a generalised fill with one tensor result and all loops parallel."""
    if op.name == "linalg.fill":
        return True
    return op.name == "linalg.generic" and len(op.results) == 1 and fill_value(op) is not None and all_parallel(op)


def _fill_chain(value):
    """(fill op, reshapes from the fill to `value`, outermost last) if `value` is a constant fill
    seen through reshapes, else None."""
    chain = []
    while not isinstance(value.owner, ir.Block) and value.owner.name in _RESHAPES:
        chain.append(value.owner)
        value = value.owner.operands[0]
    owner = value.owner
    if isinstance(owner, ir.Block) or not _is_constant_fill(owner):
        return None
    return owner, chain


def _shared(fill, chain) -> bool:
    """True when the fill (or a reshape of it on the way) has another use."""
    return len(list(fill.results[0].uses)) > 1 or any(len(list(c.results[0].uses)) > 1 for c in chain)


def _insertion_point(op, cloned):
    """Where a writer's own fill goes: right before it, or for an insert_slice of a linalg op's
    result computed into a `tensor.empty`, right before that op -- `eliminate-empty-tensors` can
    make the op compute straight into the destination only if the destination dominates it (the
    padded tensors of `temco-pad-in-place`) -- when every value the `cloned` ops use (fill value,
    dynamic sizes, captured constants) is already defined there."""
    if op.name == "tensor.insert_slice":
        source = op.operands[0].owner
        if not isinstance(source, ir.Block) and source.parent == op.parent and source.name.startswith("linalg.") \
                and any(_is_empty(source.operands[k]) for k in destination_indices(source)) \
                and all(_defined_before(v, source) for c in cloned for v in nested_operands(c)):
            return source
    return op  # elsewhere the destination would only be allocated earlier


def _defined_before(value, op) -> bool:
    """`value` is available right before `op`: a block argument, or the result of an op of an
    enclosing block, or of an op before `op` in its block."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return True
    if owner.parent != op.parent:
        return True  # defined outside the block (the writer's block is the fill's, see above)
    return owner.is_before_in_block(op)


def _is_empty(value) -> bool:
    return not isinstance(value.owner, ir.Block) and value.owner.name == "tensor.empty"


def unshare_fill_inits(module) -> int:
    """Clone shared constant fills before each op that writes into them. Returns the number of
    writes given their own fill."""
    # decided before any rewrite: the last writer of a shared fill gets a clone too, so that no
    # writer keeps the original where `cse` put it (often the top of the function)
    writes = []
    for op in walk_ops(module):
        for k in destination_indices(op):
            found = _fill_chain(op.operands[k])
            # a writer in a loop body keeps the shared fill: a clone there would fill (and
            # allocate) once per iteration
            if found is not None and _shared(*found) and op.parent == found[0].parent:
                writes.append((op, k, *found))
    count = 0
    for op, k, fill, chain in writes:
        init = fill.operands[len(fill.operands) - 1]
        cloned = [fill, *chain] + ([init.owner] if _is_empty(init) else [])
        with ir.InsertionPoint(_insertion_point(op, cloned)), op.location:
            clone = fill.clone()
            if _is_empty(init):
                # its own empty too: bufferization allocates where the tensor.empty stands,
                # and `cse` left one per shape at the top of the function
                clone.operands[len(fill.operands) - 1] = init.owner.clone().results[0]
                clone.move_after(clone.operands[len(fill.operands) - 1].owner)
            value = clone.results[0]
            for reshape in reversed(chain):
                copy = reshape.clone()
                copy.operands[0] = value
                value = copy.results[0]
        op.operands[k] = value
        count += 1
    # fills (and reshapes of them) left without uses
    for op in reversed(walk_ops(module)):
        if (op.name in _RESHAPES or op.name == "tensor.empty" or _is_constant_fill(op)) and len(op.results) == 1 \
                and not list(op.results[0].uses) and isinstance(op.results[0].type.maybe_downcast(), ir.RankedTensorType):
            op.erase()
    return count


@register_pass
class UnshareFillInits(Pass):
    name = "unshare-fill-inits"
    summary = "Clone shared constant fills before each op that writes into them (in-place bufferization)"

    def run(self, module) -> None:
        unshare_fill_inits(module)
