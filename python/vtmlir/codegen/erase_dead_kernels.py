"""`codegen-erase-dead-kernels`: kernels whose results nothing reads are removed with their buffers.

After bufferization some kernels write a buffer that is allocated, written and freed without ever
being read: a BatchNorm's intermediate steps whose consumer (a 1x1 convolution) recomputes the whole
BatchNorm + ReLU in a prologue of its own (temco_densenet121: 40 of its 50 gathering kernels at batch
1). They cost run time, and every one of them is scheduled and compiled.

A buffer (`memref.alloc` or `memref.alloca`) is dead when every use of it, through views
(`memref.subview`, `expand_shape`, ...), is its `memref.dealloc`, a view, or the output of a kernel
(a linalg op with one output and no other effect than writing it: no `cf.assert`, no store, no call)
or of a `memref.copy`. Such kernels, copies, views, the free and the allocation are erased, and the
search repeats: a kernel erased may have been the last reader of another buffer. Nothing a remaining
op reads changes, so results are bitwise those of the unreduced program.
"""

from __future__ import annotations

from torch_mlir import ir

from ..ir_utils import walk_ops
from ..passes.memref_dealloc_at_last_use import VIEW_OPS
from ..passes.registry import Pass, register_pass

# Body ops with an effect beyond computing the yielded values: a kernel holding one is kept.
_EFFECTS = ("cf.assert", "memref.store", "memref.alloc", "memref.alloca", "func.call", "vector.print")


def _only_writes(op, buffer_views: set) -> bool:
    """`op` writes one of `buffer_views` as its only output, reads none of them, and does nothing else."""
    if op.name == "memref.copy":
        return op.operands[1] in buffer_views and op.operands[0] not in buffer_views
    if not op.name.startswith("linalg.") or not hasattr(op.opview, "outputs"):
        return False
    outputs, inputs = list(op.opview.outputs), list(op.opview.inputs)
    if len(outputs) != 1 or outputs[0] not in buffer_views or any(v in buffer_views for v in inputs):
        return False
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                if inner.operation.name.startswith("llvm.") or inner.operation.name in _EFFECTS:
                    return False
                if any(len(r.blocks) for r in inner.operation.regions):
                    return False  # (a nested region could hold anything)
    return True


def _dead_uses(alloc) -> list | None:
    """The ops to erase with `alloc` (users first, views innermost first), or None if it is read."""
    views = {alloc.result}
    view_ops, users = [], []
    pending = [alloc.result]
    while pending:
        value = pending.pop()
        for use in value.uses:
            user = use.owner
            if user.name in VIEW_OPS and user.operands[0] == value:
                view_ops.append(user)
                views.add(user.results[0])
                pending.append(user.results[0])
            elif user.name == "memref.dealloc" or _only_writes(user, views):
                users.append(user)
            else:
                return None
    # A view may be reached from several uses; erase each op once, users before views (reverse order).
    unique = []
    for op in users + list(reversed(view_ops)):
        if not any(op == seen for seen in unique):
            unique.append(op)
    return unique


def erase_dead_kernels(module_op) -> int:
    """Erase the kernels of `module_op` that write only dead buffers; returns how many kernels."""
    erased = 0
    changed = True
    while changed:
        changed = False
        for alloc in walk_ops(module_op, "memref.alloc") + walk_ops(module_op, "memref.alloca"):
            ops = _dead_uses(alloc)
            if ops is None:
                continue
            erased += sum(1 for op in ops if op.name not in VIEW_OPS and op.name != "memref.dealloc")
            for op in ops:
                op.erase()
            alloc.erase()
            changed = True
            break  # the walk's list holds erased ops now
    return erased


@register_pass
class CodegenEraseDeadKernels(Pass):
    name = "codegen-erase-dead-kernels"
    summary = "Erase kernels (and their buffers) whose results nothing reads"
    description = __doc__

    def run(self, module) -> None:
        erase_dead_kernels(module.operation if hasattr(module, "operation") else module)
