"""`codegen-erase-schedule`: remove the transform script and the kernel tags once it has run.

After `transform-interpreter` the module still holds the named sequences (the interpreter does not
erase its own script), the `codegen.kernel` (and `codegen.fused_into`) tags on whatever linalg ops
are left (kernels that kept their loops, read by `codegen.report` before this pass) and the `codegen.row_loop` marks of
`codegen-fuse-rows`' loops. Lowering to LLVM needs none of them.
"""

from __future__ import annotations

from torch_mlir import ir

from ..passes.registry import Pass, register_pass
from .kernels import FUSED_ATTR, KERNEL_ATTR, ROW_LOOP_ATTR, SCHEDULED_ATTR, UNFUSED_PREFIX, tagged_ops


def erase_schedule(module_op) -> None:
    body = module_op.regions[0].blocks[0]
    for op in list(body.operations):
        if op.operation.name.startswith("transform."):
            op.operation.erase()
    if "transform.with_named_sequence" in module_op.attributes:
        del module_op.attributes["transform.with_named_sequence"]
    for name in [n for n in module_op.attributes if n.startswith(UNFUSED_PREFIX)]:
        del module_op.attributes[name]

    def unmark(op):
        if ROW_LOOP_ATTR in op.attributes:
            del op.attributes[ROW_LOOP_ATTR]
        return ir.WalkResult.ADVANCE

    module_op.walk(unmark)
    for op in tagged_ops(module_op):
        for name in (KERNEL_ATTR, SCHEDULED_ATTR, FUSED_ATTR):
            if name in op.attributes:
                del op.attributes[name]


@register_pass
class EraseSchedule(Pass):
    name = "codegen-erase-schedule"
    summary = "Remove the transform script and the codegen.kernel tags after transform-interpreter"

    def run(self, module):
        erase_schedule(module)
