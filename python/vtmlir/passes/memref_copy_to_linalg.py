"""`memref-copy-to-linalg`: rewrite every `memref.copy` into an equivalent `linalg.copy`.

Bufferization leaves `memref.copy` ops behind (out-params, slices written in place). Upstream lowers
them to calls of `memrefCopy` from `libmlir_c_runner_utils`, which the torch-mlir wheel does not ship
(the JIT then fails with "Symbols not found"), and on the GPU path a copy has to become a kernel like
any other loop nest. As a `linalg.copy` it is lowered to loops with everything else.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg

from ..ir_utils import walk_ops
from .registry import Pass, register_pass


@register_pass
class MemrefCopyToLinalg(Pass):
    name = "memref-copy-to-linalg"
    summary = "Rewrite memref.copy into linalg.copy (no runtime-library call)"

    def run(self, module) -> None:
        for op in walk_ops(module, "memref.copy"):
            with ir.InsertionPoint(op), op.location:
                linalg.copy(op.operands[0], outs=[op.operands[1]])
            op.erase()
