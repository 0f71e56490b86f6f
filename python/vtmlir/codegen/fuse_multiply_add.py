"""`codegen-fuse-multiply-add`: a contraction's multiply and add in one rounding.

A register tile's k step is a multiply and an add per accumulator (`arith.mulf` then `arith.addf`),
two instructions for two flops. A core with two FMA pipes issues at most two vector ops a cycle, so
that is half its peak: on this project's AVX-512 host torch.mm reached 160 GFLOP/s on one thread
and the multiply-add tiles 80. oneDNN, MKL, IREE and Inductor use fused multiply-adds.

The contraction schedule marks its vectorised multiplies (`codegen.fma`, `ContractionSchedule.fma`).
Here every `arith.addf` with a marked multiply as an operand, the multiply's only use, becomes
`math.fma` (LLVM's `llvm.fma`: always fused, whatever the optimisation level), and the marks are
removed. The product is no longer rounded before the add: the result differs from the loops'
within one rounding per k step (more accurate), and is the same for every thread count and LLVM
level. `EXACT_SCHEDULES` sets `fma` off: bitwise the loops' values.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import math

from ..passes.registry import Pass, register_pass
from .kernels import FMA_ATTR


def _defining(value: ir.Value):
    owner = value.owner
    return owner.operation if isinstance(owner, ir.OpView) else None


def fuse_multiply_add(module_op: ir.Operation) -> int:
    """Fuse every add of a marked, single-use product; returns how many were fused."""
    marked, adds = [], []

    def visit(op):
        if op.name == "arith.mulf" and FMA_ATTR in op.attributes:
            marked.append(op)
        elif op.name == "arith.addf":
            adds.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    plan = []
    for add in adds:
        for i, operand in enumerate(add.operands):
            product = _defining(operand)
            if (product is not None and product.name == "arith.mulf" and FMA_ATTR in product.attributes
                    and len(list(operand.uses)) == 1):
                plan.append((add, product, 1 - i))
                break
    for op in marked:  # (before any is erased)
        del op.attributes[FMA_ATTR]
    for add, product, other in plan:
        # (the addend read now: an earlier rewrite may have replaced it, a fused add of the same chain)
        with add.location, ir.InsertionPoint(add):
            fused = math.fma(product.operands[0], product.operands[1], add.operands[other])
        add.results[0].replace_all_uses_with(fused)
        add.erase()
        product.erase()
    return len(plan)


@register_pass
class FuseMultiplyAdd(Pass):
    name = "codegen-fuse-multiply-add"
    summary = "A contraction's marked product and the add of it become one math.fma"
    description = (
        "Every arith.addf whose operand is an arith.mulf marked `codegen.fma` (a contraction's vectorised "
        "multiply, ContractionSchedule.fma), the product's only use, becomes math.fma (llvm.fma); marks "
        "are removed. One rounding per k step instead of two."
    )

    def run(self, module):
        fuse_multiply_add(module.operation)
