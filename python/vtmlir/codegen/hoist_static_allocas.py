"""`codegen-hoist-static-allocas`: move fixed-size stack buffers out of loops.

`transform.structured.promote {use_alloca}` puts the packed B panel's `memref.alloca` inside the
loop nest that uses it; each iteration would then grow the stack (a 1024x1024 matmul overflowed it).
A statically shaped alloca has no operands, so it moves to the top of the nearest enclosing
`scf.forall` body (one buffer per parallel tile, so per thread on OpenMP) or `memref.alloca_scope`,
else of the kernel: the op directly in the function body that holds it, wrapped in an
`memref.alloca_scope` of its own (so the stack holds one kernel's buffers at a time, not every
kernel's at once: stack colouring needs lifetime markers MLIR does not emit). A forall body that
receives one is wrapped in a scope too (OpenMP's loop body: its stack is released after each tile).
With `sequential` (threads=1: the foralls become plain loops, whose single-block bodies cannot hold
a lowered scope) the foralls are skipped: their buffers go to the kernel's scope.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import memref

from ..passes.registry import Option, Pass, register_pass

_SCOPES = ("func.func", "scf.forall", "memref.alloca_scope")


def hoist_static_allocas(module_op, sequential: bool = False) -> int:
    """Hoist every operand-less `memref.alloca` nested in loops; returns how many moved.
    `sequential`: the foralls will run as plain loops (one thread), so one buffer at the function
    entry serves every tile."""
    allocas = []

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    visit(inner.operation)
        if op.name == "memref.alloca" and not list(op.operands) and op.parent.name not in _SCOPES[::2]:
            allocas.append(op)  # (directly in a forall body too: it needs the forall's alloca scope)

    visit(module_op)
    scopes = _SCOPES[::2] if sequential else _SCOPES
    for alloca in allocas:
        scope, kernel = alloca.parent, alloca
        while scope is not None and scope.name not in scopes:
            scope, kernel = scope.parent, scope
        if scope is None:
            continue
        if scope.name == "scf.forall":
            scope = _alloca_scope(scope)
        elif scope.name == "func.func":
            scope = _kernel_scope(kernel)
        entry = scope.regions[0].blocks[0]
        alloca.move_before(entry.operations[0])
    return len(allocas)


def _kernel_scope(kernel):
    """The `memref.alloca_scope` around `kernel`, an op directly in a function body (made on first use).

    The scope takes the kernel and every later op of the block up to the last reader of what they
    define (a contraction whose accumulator was hoisted out of its k loop: the loop yields a
    `vector<8x16xf32>` that a transfer_write after it stores). A scope returning an n-D vector
    would lower to an `llvm.br` carrying it, which LLVM does not take (Linear(512, 16) at batch 8)."""
    parent = kernel.parent
    if parent.name == "memref.alloca_scope":
        return parent
    ops = [o.operation for o in kernel.block.operations]
    first = last = next(i for i, o in enumerate(ops) if o == kernel)
    i = first
    while i <= last:   # grow the range to the last in-block reader of any value it defines
        for result in ops[i].results:
            for use in result.uses:
                user = _in_block(use.owner, kernel.block)
                if user is not None:
                    last = max(last, next(j for j, o in enumerate(ops) if o == user))
        i += 1
    last = min(last, len(ops) - 2)   # never the block's terminator
    inside = ops[first:last + 1]
    escaping = [r for op in inside for r in op.results
                if any(_in_block(u.owner, kernel.block) not in inside for u in r.uses)]
    with kernel.location, ir.InsertionPoint(kernel):
        scope = memref.AllocaScopeOp([r.type for r in escaping])
        block = scope.bodyRegion.blocks.append()
        with ir.InsertionPoint(block):
            end = memref.AllocaScopeReturnOp(escaping)
    for old, new in zip(escaping, scope.results):
        old.replace_all_uses_except(new, end.operation)
    for op in inside:
        op.move_before(end.operation)
    return scope.operation


def _in_block(op, block):
    """The ancestor of `op` (itself included) directly in `block`, or None."""
    op = op.operation if hasattr(op, "operation") else op
    while op is not None and op.block != block:
        parent = op.parent
        op = parent.operation if parent is not None and hasattr(parent, "operation") else parent
    return op


def _alloca_scope(forall):
    """The `memref.alloca_scope` holding the forall's body (made on first use)."""
    body = forall.regions[0].blocks[0]
    ops = list(body.operations)
    if len(ops) == 2 and ops[0].operation.name == "memref.alloca_scope":
        return ops[0].operation
    with forall.location, ir.InsertionPoint.at_block_begin(body):
        scope = memref.AllocaScopeOp([])
        block = scope.bodyRegion.blocks.append()
        with ir.InsertionPoint(block):
            end = memref.AllocaScopeReturnOp([])
    for op in ops[:-1]:  # all but the forall's terminator
        op.operation.move_before(end.operation)
    return scope.operation


@register_pass
class HoistStaticAllocas(Pass):
    name = "codegen-hoist-static-allocas"
    summary = "Move statically shaped memref.alloca ops out of loops to the enclosing forall or function entry"
    options = (Option("sequential", bool, False, "foralls run as loops (threads=1): hoist to the function entry"),)

    def run(self, module):
        hoist_static_allocas(module, sequential=self.sequential)
