"""`gpu-strip-runtime-asserts`: erase `cf.assert` before `convert-parallel-loops-to-gpu`.

torch-mlir emits them for checks such as "unimplemented: tensor with zero element" (batch norm's
`sqrt(var + eps) != 0`). An `scf.parallel` holding a `cf.assert` is not converted to a GPU launch (it
stays on the host), so the loop nest would run nowhere; a kernel has no way to report a failed assert
anyway. The CPU path keeps them.
"""

from __future__ import annotations

from ..ir_utils import walk_ops
from .registry import Pass, register_pass


@register_pass
class GpuStripRuntimeAsserts(Pass):
    name = "gpu-strip-runtime-asserts"
    summary = "Erase cf.assert so that every loop nest can become a GPU kernel"

    def run(self, module) -> None:
        for op in walk_ops(module, "cf.assert"):
            op.erase()
