"""`codegen-inline-casts`: a kernel that only widens or narrows a buffer is folded into its readers.

torch's decomposition of LayerNorm computes the variance in f64: the importer's graph casts x to an
f64 tensor, read by the mean and by the variance reductions. `linalg-fuse-elementwise-ops` does not
fuse a producer with two consumers, so the kernel level writes x as f64 (twice x's bytes) and reads
it back twice: LayerNorm 256x4096 spent most of its time on that buffer.

For a kernel whose body is one cast (`arith.extf`, `truncf`, `extsi`, `extui`, `trunci`, `sitofp`,
`uitofp`, `fptosi`, `fptoui`) of its one input, with identity maps, writing a buffer allocated for
it that only `linalg.generic` kernels read (and a dealloc frees): each reader reads the cast's
source instead, with the same map, and casts the element in its body. The cast kernel and its
buffer go. The source must not be written between the cast and its last reader: every op in
between, and every reader, is a view, a constant, an alloc or dealloc, or a structured op writing
only buffers allocated after the cast.

A cast is exact and computed from the same element as before: results are bitwise unchanged.
"""

from __future__ import annotations

from torch_mlir import ir

from ..passes.registry import Pass, register_pass
from .kernels import indexing_maps_of, rewrite_generics

_CASTS = ("arith.extf", "arith.truncf", "arith.extsi", "arith.extui", "arith.trunci", "arith.sitofp",
          "arith.uitofp", "arith.fptosi", "arith.fptoui")
# Ops that write no memory (or only what they allocate).
_HARMLESS = ("memref.alloc", "memref.dealloc", "memref.subview", "memref.expand_shape", "memref.collapse_shape",
             "memref.cast", "memref.get_global", "arith.constant")
_VIEWS = ("memref.subview", "memref.expand_shape", "memref.collapse_shape", "memref.cast")


def _cast_of_input(op):
    """The cast op of `op`'s body if `op` is `out = cast(in)` with identity maps, else None."""
    if len(op.opview.inputs) != 1 or len(op.opview.outputs) != 1:
        return None
    maps = indexing_maps_of(op)
    if maps is None or any(m != ir.AffineMap.get_identity(m.n_dims) for m in maps):
        return None
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    if len(body) != 2 or body[0].name not in _CASTS:
        return None
    cast, terminator = body[0].operation, body[1].operation
    if cast.operands[0] != block.arguments[0] or terminator.operands[0] != cast.results[0]:
        return None
    return cast


def _root_alloc(value):
    """The memref.alloc a buffer is a view of, or None."""
    while not isinstance(value, ir.BlockArgument):
        owner = value.owner.operation
        if owner.name == "memref.alloc":
            return owner
        if owner.name not in _VIEWS:
            return None
        value = owner.operands[0]
    return None


def _writes_only_new_buffers(op, cast_kernel) -> bool:
    """`op` writes no memory, or only buffers allocated after `cast_kernel` (which cannot alias its source)."""
    if op.name in _HARMLESS:
        return True
    if op.name.startswith("linalg.") and hasattr(op.opview, "outputs"):
        for out in op.opview.outputs:
            alloc = _root_alloc(out)
            if alloc is None or alloc.block != cast_kernel.block or alloc.is_before_in_block(cast_kernel):
                return False
        return True
    return False


def inline_cast(op) -> bool:
    """Fold the cast kernel `op` into its readers; False if it does not qualify."""
    op = op.operation
    cast = _cast_of_input(op)
    if cast is None:
        return False
    buffer = op.operands[1]
    if isinstance(buffer, ir.BlockArgument) or buffer.owner.operation.name != "memref.alloc":
        return False
    readers, dealloc = [], None
    for use in buffer.uses:
        user = use.owner.operation
        if user.name == "memref.dealloc":
            dealloc = user
        elif user == op:
            continue
        elif (user.name == "linalg.generic" and use.operand_number < len(user.opview.inputs)
              and user.block == op.block and op.is_before_in_block(user)):
            readers.append((user, use.operand_number))
        else:
            return False
    if not readers:
        return False
    pending, between, seen = {r for r, _ in readers}, [], False
    for inner in op.block.operations:  # the ops from the cast to its last reader
        inner = inner.operation
        if inner in pending:
            pending.discard(inner)
            if not pending:
                break
        elif seen:
            between.append(inner)
        seen = seen or inner == op
    # The readers themselves too: one writing the source would now read what it wrote.
    if not all(_writes_only_new_buffers(inner, op) for inner in between + [r for r, _ in readers]):
        return False
    source = op.operands[0]
    for reader, number in readers:
        reader.operands[number] = source
        arg = reader.regions[0].blocks[0].arguments[number]
        arg.set_type(cast.operands[0].type)
        with reader.location, ir.InsertionPoint.at_block_begin(reader.regions[0].blocks[0]):
            converted = cast.clone()
        converted.operands[0] = arg
        arg.replace_all_uses_except(converted.results[0], converted.operation)
    op.erase()
    if dealloc is not None:
        dealloc.erase()
    buffer.owner.operation.erase()
    return True


def inline_casts(module_op) -> int:
    """Fold every qualifying cast kernel into its readers; returns how many."""
    return rewrite_generics(module_op, inline_cast)


@register_pass
class InlineCasts(Pass):
    name = "codegen-inline-casts"
    summary = "Fold a kernel that only casts a buffer (LayerNorm's f64 copy of x) into the kernels reading it"

    def run(self, module):
        inline_casts(module)
