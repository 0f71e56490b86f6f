"""`codegen-hoist-static-allocas`: move fixed-size stack buffers out of loops.

`transform.structured.promote {use_alloca}` puts the packed B panel's `memref.alloca` inside the
loop nest that uses it; each iteration would then grow the stack (a 1024x1024 matmul overflowed it).
A statically shaped alloca has no operands, so it moves to the top of the nearest enclosing
`scf.forall` body (one buffer per parallel tile: per thread once the forall runs on OpenMP, whose
loop body is an alloca scope) or of the function.
"""

from __future__ import annotations

from torch_mlir import ir

from ..passes.registry import Pass, register_pass

_SCOPES = ("func.func", "scf.forall", "memref.alloca_scope")


def hoist_static_allocas(module_op) -> int:
    """Hoist every operand-less `memref.alloca` nested in loops; returns how many moved."""
    allocas = []

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    visit(inner.operation)
        if op.name == "memref.alloca" and not list(op.operands) and op.parent.name not in _SCOPES:
            allocas.append(op)

    visit(module_op)
    for alloca in allocas:
        scope = alloca.parent
        while scope is not None and scope.name not in _SCOPES:
            scope = scope.parent
        if scope is None:
            continue
        entry = scope.regions[0].blocks[0]
        alloca.move_before(entry.operations[0])
    return len(allocas)


@register_pass
class HoistStaticAllocas(Pass):
    name = "codegen-hoist-static-allocas"
    summary = "Move statically shaped memref.alloca ops out of loops to the enclosing forall or function entry"

    def run(self, module):
        hoist_static_allocas(module)
