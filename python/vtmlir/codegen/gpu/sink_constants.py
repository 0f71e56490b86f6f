"""`codegen-gpu-sink-constants`: constants used by a scheduled kernel are rematerialised inside it.

Vectorisation and mapping create constants (`arith.constant` indices and vectors, the `ub.poison`
padding of transfers) that canonicalisation hoists to the function entry, on the host side of the
`gpu.launch`. Outlining would make each of them a kernel parameter -- a vector constant or a poison
value cannot even be passed -- and the kernel would compute with unknown values where LLVM could
fold known ones. This pass clones every such constant used in a launch made by a GPU schedule
(annotated `codegen.kernel`) into the launch body. The naive mapping's launches keep their
constants as parameters, as before.
"""

from __future__ import annotations

from torch_mlir import ir

from ...ir_utils import within
from ...passes.registry import Pass, register_pass
from ..kernels import KERNEL_ATTR

_CONSTANTS = ("arith.constant", "ub.poison")


def sink_constants(module_op) -> int:
    """Clone the constants used inside scheduled launches into them; returns how many were cloned."""
    cloned = 0
    with module_op.context:
        launches = []

        def visit(op):
            if op.name == "gpu.launch" and KERNEL_ATTR in op.attributes:
                launches.append(op)
            return ir.WalkResult.ADVANCE

        module_op.walk(visit)
        for launch in launches:
            block = launch.parent.regions[0].blocks[0] if launch.parent is not None else None
            if block is None:
                continue
            body = launch.regions[0].blocks[0]
            for op in list(block.operations):
                op = op.operation
                if op.name not in _CONSTANTS:
                    continue
                inner_uses = [(u.owner, u.operand_number) for u in op.results[0].uses if within(u.owner.parent, launch)]
                if not inner_uses:
                    continue
                with ir.InsertionPoint.at_block_begin(body):
                    clone = op.clone()
                for owner, number in inner_uses:
                    owner.operands[number] = clone.results[0]
                cloned += 1
    return cloned


@register_pass
class SinkConstants(Pass):
    name = "codegen-gpu-sink-constants"
    summary = "Clone host-side constants used by GPU-scheduled gpu.launch ops into the launch bodies"

    def run(self, module):
        sink_constants(module)
