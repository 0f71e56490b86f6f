"""`codegen-split-row-invariants`: what an elementwise kernel computes per row is computed once per row.

A LayerNorm's last kernel reads the row's variance and mean (broadcast along the row) and computes
`rsqrt(var / N + eps)` and `mean / N` in its body, for every element: the vector schedule runs its
vectors along the row, so each vector redoes a f64 division and a reciprocal square root on the
same broadcast value (LayerNorm 256x4096: most of the kernel's time). LLVM cannot hoist them: the
loads of the row's values might alias the stores of the output.

For an elementwise generic (all loops parallel, one output), a body value is *row-invariant* when it
is computed by arith/math ops from inputs whose maps do not read the output's contiguous dimension
(the one the vectors run along) and from values defined outside the body. Each row-invariant value
that the rest of the body uses, and whose computation includes a division or a math function, moves
into a kernel of its own over the shape of the input it reads (`bodies.make_prologue`), writing a
new buffer the kernel then reads in its place.

Where no value is the row's, the same is tried along each other loop, outer first: a value computed
from inputs that loop does not index is the same all along it. A BatchNorm in a channels-last (NHWC)
kernel computes `1 / sqrt(var + eps)` per channel, along the vectors, but identically for every
pixel: it moves into a kernel over the channels (ShuffleNet's BatchNorm + ReLU kernels at batch 8
redid a vector square root and division per 16 elements, 8 x 28 x 28 times per channel).

Every element is computed by the same ops on the same values as before: results are bitwise those
of the unsplit kernel.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg

from ..passes.registry import Pass, register_pass
from .bodies import PURE_DIALECTS, backward_slice, clone_ops, iterator_attr, free_after, make_prologue, static_shape
from .kernels import indexing_maps_of, loop_ranges_of, rewrite_generics

# Ops worth a kernel of their own when they are the row's: divisions and math functions (rsqrt,
# sqrt, exp, ...): a few cheap arith ops cost less per element than a buffer and a kernel.
_COSTLY = ("arith.divf", "arith.remf")


def _costly(op) -> bool:
    return op.name in _COSTLY or op.name.startswith("math.")


def split_row_invariants(op) -> bool:
    """Split the costly row-invariant values of `op` (a linalg.generic) into kernels of their own."""
    op = op.operation
    maps = indexing_maps_of(op)
    if maps is None or len(op.opview.outputs) != 1 or static_shape(op.operands[-1]) is None:
        return False
    parallel = iterator_attr(op.context, "parallel")
    if any(a != parallel for a in ir.ArrayAttr(op.attributes["iterator_types"])):
        return False
    out_inner = list(maps[-1].results)[-1] if maps[-1].results else None
    if not isinstance(out_inner, ir.AffineDimExpr):
        return False
    ranges = loop_ranges_of(op, maps)
    if ranges is None:
        return False
    # The row first (the loop the vectors run along); then the other loops, outer first: a
    # BatchNorm in a channels-last kernel computes `1 / sqrt(var + eps)` per channel, i.e. along
    # the vectors, but the same for every pixel (ShuffleNet b8: 8 x 28 x 28 times each).
    vector_dim = out_inner.position
    others = [d for d in range(len(ranges)) if d != vector_dim and ranges[d] > 1]
    return any(_split_along(op, maps, loop) for loop in [vector_dim] + others)


def _split_along(op, maps, loop: int) -> bool:
    """Split the costly values of `op` that are the same all along `loop` (they read no input that
    `loop` indexes) into kernels of their own; False, with `op` untouched, if there is none."""
    block = op.regions[0].blocks[0]
    n_inputs = len(op.opview.inputs)
    invariant_args = {i for i in range(n_inputs) if not any(_reads(e, loop) for e in maps[i].results)}
    body = list(block.operations)
    invariant: set = set()  # values of the body computed from invariant arguments only
    invariant_ops = []
    for inner in body[:-1]:
        if inner.name.split(".", 1)[0] not in PURE_DIALECTS:
            continue
        if all(_is_invariant(v, block, invariant, invariant_args) for v in inner.operands):
            invariant.update(inner.results)
            invariant_ops.append(inner.operation)
    # The invariant values the rest of the body reads (the yield included).
    roots = []
    for inner in body:
        if inner.operation in invariant_ops:
            continue
        for v in inner.operands:
            if v in invariant and v not in roots:
                roots.append(v)
    if not roots or any(v in invariant for v in body[-1].operands):
        return False  # nothing to split, or the whole result is the row's (a broadcast)
    worth = []
    for root in roots:
        found = backward_slice(block, [root])
        if found is not None and any(_costly(o) for o in found[0]):
            worth.append(root)
    if not worth:
        return False
    made, new_ops = [], []
    for root in worth:
        prologue = make_prologue(op, block, root, maps)
        if prologue is None:
            for new in reversed(new_ops):
                new.erase()
            return False
        buffer, buffer_map, ops = prologue
        made.append((root, buffer, buffer_map))
        new_ops += ops
    # Invariant ops the rest of the body still reads (cheap ones, not split) are copied too.
    needed = _still_read(body, invariant_ops, {root for root, _, _ in made}, invariant)
    keep = [o.operation for o in body[:-1] if o.operation not in invariant_ops or o.operation in needed]
    read = {v for o in keep + [body[-1].operation] for v in o.operands}
    old_args = list(block.arguments)
    # (value in the new body's mapping, operand, map, element type): the inputs still read, the
    # split values' buffers, the output.
    operands = [(old_args[i], op.operands[i], maps[i], old_args[i].type) for i in range(n_inputs) if old_args[i] in read]
    operands += [(root, buffer, buffer_map, root.type) for root, buffer, buffer_map in made]
    operands += [(old_args[n_inputs], op.operands[-1], maps[-1], old_args[n_inputs].type)]
    with op.location, ir.InsertionPoint(op):
        kernel = linalg.GenericOp([], [v for _, v, _, _ in operands[:-1]], [op.operands[-1]],
                                  ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for _, _, m, _ in operands]),
                                  op.attributes["iterator_types"])
        new_block = kernel.regions[0].blocks.append(*[t for _, _, _, t in operands])
        mapping = {old: new for (old, _, _, _), new in zip(operands, new_block.arguments)}
        with ir.InsertionPoint(new_block):
            clone_ops(keep, mapping)
            linalg.YieldOp([mapping.get(v, v) for v in body[-1].operands])
    free_after(op, new_ops)
    for name in list(op.attributes):  # discardable attributes (a fused group's marks) stay
        if name not in kernel.operation.attributes:
            kernel.operation.attributes[name] = op.attributes[name]
    op.erase()
    return True


def _reads(expr, loop: int) -> bool:
    """Whether the affine expression `expr` depends on the loop `loop`."""
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position == loop
    if isinstance(expr, ir.AffineBinaryExpr):
        return _reads(expr.lhs, loop) or _reads(expr.rhs, loop)
    return False


def _is_invariant(value, block, invariant, invariant_args) -> bool:
    if isinstance(value, ir.BlockArgument):
        return value.owner != block or value.arg_number in invariant_args
    if value in invariant:
        return True
    return value.owner.operation.parent != block.owner  # defined outside the body


def _still_read(body, invariant_ops, split, invariant) -> set:
    """The invariant ops that the other ops of the body read, directly or not, except through a split value."""
    work = [v for o in body if o.operation not in invariant_ops for v in o.operands if v in invariant and v not in split]
    needed = set()
    while work:
        owner = work.pop().owner.operation
        if owner not in needed:
            needed.add(owner)
            work.extend(v for v in owner.operands if v in invariant and v not in split)
    return needed


def split_all_row_invariants(module_op) -> int:
    """Split the row-invariant values of every elementwise kernel; returns how many kernels had some."""
    return rewrite_generics(module_op, split_row_invariants)


@register_pass
class SplitRowInvariants(Pass):
    name = "codegen-split-row-invariants"
    summary = "Compute an elementwise kernel's costly values that only depend on the row once per row, in a kernel of their own"

    def run(self, module):
        split_all_row_invariants(module)
