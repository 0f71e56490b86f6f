"""`codegen-outline-kernels`: a very large function's kernels become functions of their own.

The JIT hands LLVM one module in which every kernel is inlined into the model's function. LLVM's
optimisation and code generation grow faster than linearly with the size of one function: at two
levels of the same scheduled code, ResNet-50's `main` (46k LLVM dialect ops) took 3.4 s of the
JIT's CPU time and DenseNet-169's (247k ops, its 900 concat pieces each a kernel) 157 s, 8.6x the
time per op. Split into functions of one kernel each, the work is per function again.

Where the function holds more than `min-ops` operations, each op directly in its body that holds
regions and defines no value (a kernel's loop nest, its `memref.alloca_scope`) moves into a new
private function, called at its place with the buffers and values it uses from outside. Constants (and
`ub.poison`), `memref.get_global`s and memref views (view, subview, expand/collapse_shape,
reinterpret_cast, cast) it uses are cloned into the new function rather than passed, down to the buffers they view: the
kernel keeps its static offsets, strides and constant bounds, so LLVM sees the same kernel as
before. The functions are `noinline` (LLVM would inline a function called once straight back).

The kernels compute the same operations on the same values: results are bitwise unchanged. Below
`min-ops` nothing changes: a model whose function is small compiles to the code it always did.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import func

from ..ir_utils import walk_ops, within
from ..passes.registry import Option, Pass, register_pass

#: Outline where a function holds more operations than this when the pass runs: ResNet-50's holds
#: 6.1k (its JIT time still grows linearly), Inception's 7.6k, DenseNet-169's 43k.
DEFAULT_MIN_OPS = 20_000

#: Ops cloned into an outlined kernel instead of passed to it (pure, and cheap to repeat).
_CLONED = ("arith.constant", "ub.poison", "memref.get_global", "memref.view", "memref.subview",
           "memref.expand_shape", "memref.collapse_shape", "memref.reinterpret_cast", "memref.cast")


def _used_from_outside(kernel) -> list[ir.Value]:
    """The values `kernel`'s ops use that are defined outside it, in first-use order."""
    seen: set = set()
    used: list[ir.Value] = []
    for op in walk_ops(kernel):
        for value in op.operands:
            if value in seen:
                continue
            owner = value.owner
            if isinstance(owner, ir.Block):
                owner = owner.owner  # (a block argument: the op holding the block)
            if not within(owner, kernel):
                seen.add(value)
                used.append(value)
    return used


def _plan(values: list[ir.Value]) -> tuple[list[ir.Operation], list[ir.Value]]:
    """The defining ops to clone (`_CLONED`, in dependency order) and the values to pass."""
    cloned: list[ir.Operation] = []
    cloned_set: set = set()
    passed: list[ir.Value] = []
    passed_set: set = set()

    def take(value):
        owner = value.owner
        if not isinstance(owner, ir.Block):
            op = owner.operation if hasattr(owner, "operation") else owner
            if op.name in _CLONED and len(op.results) == 1:
                if op in cloned_set:
                    return
                for operand in op.operands:
                    take(operand)
                cloned_set.add(op)
                cloned.append(op)
                return
        if value not in passed_set:
            passed_set.add(value)
            passed.append(value)

    for value in values:
        take(value)
    return cloned, passed


def _outline(kernel, owner, name: str, module_body) -> None:
    used = _used_from_outside(kernel)
    cloned, passed = _plan(used)
    with ir.InsertionPoint(module_body), kernel.location:
        fn = func.FuncOp(name, ([v.type for v in passed], []), visibility="private")
    fn.operation.attributes["passthrough"] = ir.ArrayAttr.get([ir.StringAttr.get("noinline")])
    fn.operation.move_after(owner)
    with kernel.location:
        block = fn.add_entry_block()
    mapping = {v: a for v, a in zip(passed, block.arguments)}
    with ir.InsertionPoint(block), kernel.location:
        for op in cloned:
            copy = op.clone()
            for i, operand in enumerate(op.operands):
                copy.operands[i] = mapping[operand]
            mapping[op.results[0]] = copy.results[0]
        ret = func.ReturnOp([])
    with ir.InsertionPoint(kernel), kernel.location:
        func.CallOp([], ir.FlatSymbolRefAttr.get(name), passed)
    kernel.move_before(ret.operation)
    for op in walk_ops(kernel):
        for i, operand in enumerate(op.operands):
            new = mapping.get(operand)
            if new is not None:
                op.operands[i] = new


def outline_kernels(module_op, min_ops: int = -1) -> int:
    """Outline the kernels of every function of `module_op` with more than `min_ops` ops (-1:
    `DEFAULT_MIN_OPS`, read when it runs); returns how many kernels were outlined."""
    if min_ops < 0:
        min_ops = DEFAULT_MIN_OPS
    module_body = module_op.regions[0].blocks[0]
    outlined = 0
    for fn in list(walk_ops(module_op, "func.func")):
        if not len(fn.regions[0].blocks) or len(walk_ops(fn)) - 1 <= min_ops:
            continue
        base = ir.StringAttr(fn.attributes["sym_name"]).value
        kernels = [op.operation for op in fn.regions[0].blocks[0].operations
                   if len(op.operation.regions) and not len(op.operation.results)]
        for kernel in kernels:
            _outline(kernel, fn.operation, f"{base}_kernel_{outlined}", module_body)
            outlined += 1
    return outlined


@register_pass
class OutlineKernels(Pass):
    name = "codegen-outline-kernels"
    summary = "Move each kernel of a very large function into a noinline function of its own"
    description = (
        "Loops stage. In a func.func with more than `min-ops` operations, every op directly in its body "
        "that holds regions and defines no value (a kernel's loop nest or alloca scope) becomes a private "
        "noinline function called in its place; the constants, globals and memref views it uses are cloned "
        "into it. LLVM's time grows faster than linearly with one function's size (DenseNet-169)."
    )
    options = (Option("min-ops", int, -1, "outline only in functions with more operations than this "
                      f"(-1: {DEFAULT_MIN_OPS})"),)

    def run(self, module):
        outline_kernels(module, self.min_ops)
