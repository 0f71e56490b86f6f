"""`codegen-gpu-sync-epilogues`: a barrier between the stores of a contraction's C tile and the
epilogue that reads them back, in kernels whose schedule fused an epilogue (`fusion.py`).

The contraction schedule maps the fused epilogue to threads after the contraction's warps, and
`map_nested_forall_to_threads` puts a barrier after every distributed forall. But the accumulators
are hoisted out of the k loop only after the mapping (`hoist_redundant_vector_transfers`), so C's
stores end up after the k loop's last barrier, right before the epilogue's loads -- of elements
other threads (other warps, other lanes of an `mma.sync` fragment) stored. This pass walks the top-
level ops of each such `gpu.launch` (annotated `codegen.epilogue`) and puts a `gpu.barrier` before
the first op that reads a buffer an earlier op wrote since the last barrier (a read-after-write
between threads of the block; global memory writes are visible to the block after `bar.sync`).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import gpu

from ...ir_utils import walk_ops
from ...passes.memref_dealloc_at_last_use import VIEW_OPS
from ...passes.registry import Pass, register_pass
from ..bodies import buffer_root

# `codegen.epilogue = <kernel id>` on a gpu.launch whose schedule runs that kernel as its epilogue.
EPILOGUE_ATTR = "codegen.epilogue"

# Ops that write their memref operand at this position (every other memref use reads).
WRITTEN_OPERAND = {"vector.transfer_write": 1, "vector.store": 1, "memref.store": 1, "memref.copy": 1,
                   "linalg.copy": 1, "nvgpu.device_async_copy": 0}


def accesses(op) -> tuple[list[ir.Value], list[ir.Value]]:
    """(buffers read, buffers written) by `op` and the ops nested in it, as the buffers behind views."""
    reads, writes = [], []
    for inner in walk_ops(op):
        written_at = WRITTEN_OPERAND.get(inner.name)
        for number, value in enumerate(inner.operands):
            if isinstance(value.type, ir.MemRefType) and inner.name not in VIEW_OPS:
                (writes if number == written_at else reads).append(buffer_root(value))
    return reads, writes


def sync_epilogues(module_op) -> int:
    """Insert the barriers; returns how many."""
    inserted = 0
    with module_op.context, ir.Location.unknown():
        for launch in walk_ops(module_op, "gpu.launch"):
            if EPILOGUE_ATTR not in launch.attributes:
                continue
            written: list[ir.Value] = []
            for op in list(launch.regions[0].blocks[0].operations):
                op = op.operation
                if op.name == "gpu.barrier":
                    written.clear()
                    continue
                reads, writes = accesses(op)
                if any(r == w for r in reads for w in written):
                    with ir.InsertionPoint(op):
                        gpu.BarrierOp()
                    inserted += 1
                    written.clear()
                written += writes
    return inserted


@register_pass
class SyncEpilogues(Pass):
    name = "codegen-gpu-sync-epilogues"
    summary = "Put a barrier between a contraction's C stores and its fused epilogue's loads"

    def run(self, module):
        sync_epilogues(module)
