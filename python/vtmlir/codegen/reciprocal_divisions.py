"""`codegen-reciprocal-divisions`: a division by a loop-invariant divisor as a multiplication.

Softmax ends with `e / sum` for every element of a row, where `sum` is the row's: the vector schedule
runs its vectors along the row with the sum broadcast once before the loop, and each vector is then a
`vdivps` (AVX-512: one per ~10 cycles, ten times a multiply's cost). Softmax 64x1024, one thread: 48
-> 37 us with the division done once per row (eager 43). PyTorch's own softmax kernel multiplies by
the reciprocal the same way.

The vector schedule marks its kernel's divisions (`codegen.reciprocal`, `VectorSchedule.reciprocal`).
Here every marked f32/f64 `arith.divf x, d` whose divisor `d` is computed at run time outside the
innermost loop holding the division becomes `arith.mulf x, r` with `r = 1 / d` computed right after
`d` (once per entry into the loop); the marks are removed. A constant divisor keeps its division:
PyTorch divides by constants (an average pool's window size), and the pool stays bitwise eager's. The quotient gets one rounding more (`1 / d` is rounded,
then the product): within 2 ulp of the division instead of within 0.5. Low-precision floats (bf16,
f16) keep the division (their reciprocal would cost a bf16 rounding). `EXACT_SCHEDULES` sets
`reciprocal` off: bitwise the loops' values.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith

from ..ir_utils import within
from ..passes.registry import Pass, register_pass
from .kernels import RECIPROCAL_ATTR

_LOOPS = ("scf.for", "scf.forall", "scf.parallel")


def _element_type(value_type):
    return value_type.element_type if isinstance(value_type, (ir.VectorType, ir.ShapedType)) else value_type


def _innermost_loop(op):
    parent = op.parent
    while parent is not None and parent.name not in _LOOPS:
        if parent.name == "func.func":
            return None
        parent = parent.parent
    return parent


def _defined_outside(value, loop) -> bool:
    """Whether `value` is defined by an op (not a block argument) outside `loop`."""
    return isinstance(value, ir.OpResult) and not within(value.owner, loop)


def _is_constant(value) -> bool:
    """Whether `value` is an arith.constant, or a vector.broadcast of one."""
    if not isinstance(value, ir.OpResult):
        return False
    op = value.owner.operation
    if op.name == "vector.broadcast":
        return _is_constant(op.operands[0])
    return op.name == "arith.constant"


def _one(value_type):
    element = _element_type(value_type)
    if isinstance(value_type, ir.VectorType):
        return arith.constant(value_type, ir.DenseElementsAttr.get_splat(value_type, ir.FloatAttr.get(element, 1.0)))
    return arith.constant(element, 1.0)


def reciprocal_divisions(module_op: ir.Operation) -> int:
    """Rewrite every eligible marked division; returns how many were rewritten."""
    marked = []

    def visit(op):
        if op.name == "arith.divf" and RECIPROCAL_ATTR in op.attributes:
            marked.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    reciprocals = {}  # divisor -> its reciprocal (two divisions by one sum share it)
    rewritten = 0
    for op in marked:
        del op.attributes[RECIPROCAL_ATTR]
        numerator, divisor = op.operands[0], op.operands[1]
        if not isinstance(_element_type(divisor.type), (ir.F32Type, ir.F64Type)):
            continue
        loop = _innermost_loop(op)
        if loop is None or not _defined_outside(divisor, loop) or _is_constant(divisor):
            continue
        if divisor not in reciprocals:
            definition = divisor.owner.operation
            with definition.location, ir.InsertionPoint.after(definition):
                reciprocals[divisor] = arith.divf(_one(divisor.type), divisor)
        with op.location, ir.InsertionPoint(op):
            product = arith.mulf(numerator, reciprocals[divisor])
        op.results[0].replace_all_uses_with(product)
        op.erase()
        rewritten += 1
    return rewritten


@register_pass
class ReciprocalDivisions(Pass):
    name = "codegen-reciprocal-divisions"
    summary = "A marked division by a loop-invariant divisor becomes a multiplication by its reciprocal"
    description = (
        "Every f32/f64 arith.divf marked `codegen.reciprocal` (a vector kernel's division, "
        "VectorSchedule.reciprocal) whose divisor is computed at run time outside the innermost loop holding it becomes "
        "arith.mulf by 1/divisor, computed once after the divisor; marks are removed. One rounding more."
    )

    def run(self, module):
        reciprocal_divisions(module.operation)
