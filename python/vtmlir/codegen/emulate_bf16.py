"""`codegen-emulate-bf16`: bf16 arithmetic computed in f32 and rounded back after every op.

LLVM legalises a bf16 `fadd`/`fmul`/... (or a math intrinsic) by promoting it to f32 and rounding
the result with a call to compiler-rt's `__truncsfbf2`, unless the CPU has AVX512-BF16. The JIT's
process has no compiler-rt, so on such a CPU the compile failed ("Symbols not found:
[ __truncsfbf2 ]"). This pass does the promotion itself: every `arith`/`math` op with a bf16 operand
or result (scalars and vectors; not the conversions `extf`/`truncf`, `bitcast`, `constant`,
`select`) gets its bf16 operands extended to f32, runs in f32, and has each bf16 result truncated
back to bf16; `arith-expand{include-bf16=true}` then turns those extensions and truncations into
integer operations. One rounding per op, as LLVM's promotion and PyTorch's eager kernels do, so the
results are those of torch's bf16 ops, bit for bit.

(Upstream `arith-emulate-unsupported-floats` converts types instead: a chain of bf16 ops then runs in
f32 with one rounding at the end -- more accurate, but not what torch computes.)
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith

from ..passes.registry import Pass, register_pass

_EXEMPT = {"arith.extf", "arith.truncf", "arith.bitcast", "arith.constant", "arith.select"}


def _is_bf16(t: ir.Type) -> bool:
    element = t.element_type if isinstance(t, ir.VectorType) else t
    return isinstance(element, ir.BF16Type)


def _as_f32(t: ir.Type) -> ir.Type:
    if isinstance(t, ir.VectorType):
        return ir.VectorType.get(t.shape, ir.F32Type.get())
    return ir.F32Type.get()


def emulate_bf16(module_op: ir.Operation) -> int:
    """Promote every bf16 arith/math op; returns how many were rewritten."""
    ops = []

    def visit(op):
        dialect = op.name.split(".")[0]
        if dialect in ("arith", "math") and op.name not in _EXEMPT and not op.regions and (
                any(_is_bf16(v.type) for v in op.operands) or any(_is_bf16(r.type) for r in op.results)):
            ops.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    for op in ops:
        with op.location, ir.InsertionPoint(op):
            operands = [arith.extf(_as_f32(v.type), v) if _is_bf16(v.type) else v for v in op.operands]
            attributes = {named.name: named.attr for named in (op.attributes[i] for i in range(len(op.attributes)))}
            wide = ir.Operation.create(op.name, results=[_as_f32(r.type) if _is_bf16(r.type) else r.type
                                                         for r in op.results],
                                       operands=operands, attributes=attributes)
            for old, new in zip(op.results, wide.results):
                old.replace_all_uses_with(arith.truncf(old.type, new) if _is_bf16(old.type) else new)
        op.erase()
    return len(ops)


@register_pass
class EmulateBf16(Pass):
    name = "codegen-emulate-bf16"
    summary = "Compute bf16 arith/math ops in f32, rounding each result back to bf16"
    description = (
        "Each arith/math op with a bf16 operand or result (not extf, truncf, bitcast, constant, select) "
        "becomes arith.extf of its bf16 operands, the op in f32, arith.truncf of its bf16 results: LLVM "
        "would otherwise call compiler-rt's __truncsfbf2 on CPUs without AVX512-BF16. One rounding per "
        "op, as torch's eager bf16 kernels."
    )

    def run(self, module):
        emulate_bf16(module.operation)
