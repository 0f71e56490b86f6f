"""`codegen-gpu-convert-mma`: the tensor-core kernels' vector contractions become `nvgpu.mma.sync`.

Upstream `convert-vector-to-gpu{use-nvgpu=true}` turns the 16x8x16 `vector.contract`s of a kernel
and the transfers feeding them into `nvgpu.ldmatrix`, `nvgpu.mma.sync` and the accumulator's loads
and stores (docs/design.md §10). It also fails on any scalar f16 or f64 arithmetic in the IR it is
given ("unhandled vector to mma type"), which the elementwise kernels' bodies hold. This pass runs
it, with the alias folding and clean-ups that follow, on each outlined `gpu.module` that holds a
`vector.contract` -- the tensor-core kernels (SIMT contractions are FMAs by then) -- and nowhere else.
A fused epilogue (`fusion.py`) brings its body's scalar ops along: those left after canonicalisation
compute on constants only, and the one canonicalisation keeps is a narrowing `arith.truncf` of a
constant (inexact: GELU's f64 1/sqrt(2) to f32). It is folded here to the constant the device's
`cvt.rn` would compute at run time (round to nearest even, numpy's conversion): bitwise the same.

bf16 contractions (bf16 x bf16 into f32, `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`):
the conversion has no bf16 fragments, though bf16's are f16's (PTX ISA, the m16n8k16 fragment
layouts) and everything after it takes bf16. So the module's bf16 payload is renamed f16 for the
conversion alone and back afterwards (`retype_payload.py`): the `ldmatrix` loads and `mma.sync`s it
builds are then bf16 ones; the ops computing with bf16 (an epilogue's casts) keep their types
behind bit-preserving casts, and the clean-ups run on the real types again.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith
from torch_mlir.passmanager import PassManager

from ...errors import format_diagnostic
from ...ir_utils import walk_ops
from ...passes.registry import Pass, PassFailure, register_pass
from ..kernels import KERNEL_ATTR
from .retype_payload import RetypeRefused, retype_payload

CONVERSION = "gpu.module(convert-vector-to-gpu{use-nvgpu=true})"
CLEANUP = "gpu.module(fold-memref-alias-ops, canonicalize, cse)"


def _operand_element(op, type_class) -> bool:
    """Whether `op`'s first operand is a vector of `type_class` elements."""
    return isinstance(ir.VectorType(op.operands[0].type).element_type, type_class)


def _has_contraction(op) -> bool:
    return bool(walk_ops(op, "vector.contract"))


def _has_bf16_contraction(op) -> bool:
    """A `vector.contract` with bf16 operands: the tensor-core schedule's bf16 x bf16 -> f32."""
    return any(_operand_element(contract, ir.BF16Type) for contract in walk_ops(op, "vector.contract"))


def _kernel_id(gpu_module) -> int | None:
    for op in gpu_module.regions[0].blocks[0].operations:
        if KERNEL_ATTR in op.attributes:
            return ir.IntegerAttr(op.attributes[KERNEL_ATTR]).value
    return None


def convert_mma(module_op) -> int:
    """Convert the contractions of every gpu.module holding some; returns how many modules."""
    converted = 0
    with module_op.context:
        for op in module_op.regions[0].blocks[0].operations:
            op = op.operation
            if op.name != "gpu.module" or not _has_contraction(op):
                continue
            _fold_constant_truncations(op)
            bf16 = _has_bf16_contraction(op)
            try:
                if bf16:
                    retype_payload(op, ir.BF16Type.get(), ir.F16Type.get(), frozenset({"vector.contract"}),
                                   require_absent=True)
                PassManager.parse(CONVERSION).run(op)
                if bf16:
                    # The contractions it replaced are left dead (canonicalisation erases them; one
                    # still used fails the check below).
                    retype_payload(op, ir.F16Type.get(), ir.BF16Type.get(),
                                   frozenset({"nvgpu.mma.sync", "vector.contract"}), require_absent=False)
                PassManager.parse(CLEANUP).run(op)
            except RetypeRefused as err:
                raise PassFailure(f"kernel {_kernel_id(op)}: codegen-gpu-convert-mma: bf16 as f16 payload: {err}",
                                  op.location) from None
            except ir.MLIRError as err:
                detail = "\n".join(format_diagnostic(d) for d in err.error_diagnostics) or err.message
                raise PassFailure(f"kernel {_kernel_id(op)}: codegen-gpu-convert-mma: {detail}", op.location) from None
            if _has_contraction(op):
                # Operands the conversion could not put in mma.sync fragments: the kernel would
                # reach LLVM with a 2-d vector.contract it cannot lower. Its schedule failed.
                raise PassFailure(f"kernel {_kernel_id(op)}: codegen-gpu-convert-mma: a vector.contract is "
                                  "left that convert-vector-to-gpu did not make mma.sync", op.location)
            _enable_tf32(op)
            converted += 1
    return converted


_NUMPY_FLOATS = {ir.F32Type: np.float32, ir.F16Type: np.float16}


def _fold_constant_truncations(gpu_module) -> None:
    """`arith.truncf` (round to nearest even, the default) of a float constant → the constant."""
    for truncf in walk_ops(gpu_module, "arith.truncf"):
        source = truncf.operands[0].owner
        if "roundingmode" in truncf.attributes or isinstance(source, ir.Block) \
                or source.operation.name != "arith.constant":
            continue
        target = truncf.results[0].type
        convert = next((f for t, f in _NUMPY_FLOATS.items() if isinstance(target, t)), None)
        value = truncf.operands[0].owner.operation.attributes["value"]
        if convert is None or not isinstance(value, ir.FloatAttr):
            continue
        with ir.InsertionPoint(truncf), truncf.location:
            folded = arith.ConstantOp(target, ir.FloatAttr.get(target, float(convert(ir.FloatAttr(value).value))))
        truncf.results[0].replace_all_uses_with(folded.result)
        truncf.erase()


def _enable_tf32(gpu_module) -> None:
    """f32 operands of `nvgpu.mma.sync` are TF32 (`mma.sync...tf32`), which the op states with its
    `tf32Enabled` attribute; the conversion does not set it (NVVM lowering refuses f32 without it).
    An f32 contraction reaches this pass only when the schedule allowed TF32 (`allow_tf32`): SIMT
    contractions are FMAs by now."""
    for mma in walk_ops(gpu_module, "nvgpu.mma.sync"):
        if _operand_element(mma, ir.F32Type):
            mma.attributes["tf32Enabled"] = ir.UnitAttr.get()


@register_pass
class ConvertMma(Pass):
    name = "codegen-gpu-convert-mma"
    summary = "convert-vector-to-gpu{use-nvgpu} on the gpu.modules holding vector.contract (tensor-core kernels)"

    def run(self, module):
        convert_mma(module)
