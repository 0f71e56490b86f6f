"""`codegen-gpu-eliminate-barriers`: barriers that order no conflicting accesses are removed.

`map_nested_forall_to_threads` puts a barrier after every distributed forall. In a contraction's k
loop that is one after the copy of the A tile into shared memory, one after the copy of the B tile
and one after the product. The one between the two copies orders nothing (each copy reads global
memory and writes its own shared buffer), but it splits them into two `cp.async` groups per k step
(`create_async_groups` groups consecutive copies only), while the software pipeliner
(`pipeline_shared_memory_copies`) waits until at most `stages - 1` *groups* are in flight, counting
one group per stage. With two groups a stage, a two-stage kernel waited, before multiplying tile i,
for the A copy of tile i + 1 as well: the next stage's loads barely overlapped the product. Without
that barrier both tiles' copies form one group per stage and the waits mean what the pipeliner
meant.

The rule, per barrier with a barrier before and after it in the same block (the accesses beyond those
are ordered by them): the barrier goes if no buffer written between the previous barrier and it may
be accessed between it and the next one, nor the other way round, and neither span holds an op with
regions or calls. Buffers are compared behind their views; a workgroup buffer (a `memref.alloc` or
global in `#gpu.address_space<workgroup>`) aliases only itself, every other memref (the kernel's
global arguments) may alias every other one. Two barriers with nothing that touches memory between
them: the second goes.

Upstream's `transform.apply_patterns.gpu.eliminate_barriers` keeps the barrier between the two
copies (checked with the bundled MLIR on a k loop of two tile copies and a product), hence this pass.
Removing a barrier that orders nothing changes no value.
"""

from __future__ import annotations

from torch_mlir import ir

from ...ir_utils import walk_ops
from ...passes.registry import Pass, register_pass
from .sink_workgroup_buffers import is_workgroup
from .sync_epilogues import accesses


def _may_alias(a: ir.Value, b: ir.Value) -> bool:
    if a == b:
        return True
    return not is_workgroup(a.type) and not is_workgroup(b.type)


#: ops without memref operands that touch no memory (or only this thread's registers): anything else
#: without memref operands (an async copy's wait, which completes writes to shared memory; calls;
#: intrinsics) leaves its span unanalysed
_NO_MEMORY = ("arith.", "math.", "index.", "affine.apply", "affine.min", "affine.max", "vector.", "ub.",
              "gpu.thread_id", "gpu.block_id", "gpu.block_dim", "gpu.grid_dim", "gpu.lane_id", "gpu.shuffle",
              "nvgpu.mma.sync", "nvgpu.device_async_create_group", "memref.alloc", "memref.get_global")


def _span_accesses(ops) -> tuple[list[ir.Value], list[ir.Value]] | None:
    """(buffers read, buffers written) by `ops` (behind views); None where an op is not analysed (it
    has regions, or no memref operand and is not known to touch no memory)."""
    reads, writes = [], []
    for op in ops:
        if op.regions:
            return None
        if not any(isinstance(v.type, ir.MemRefType) for v in op.operands):
            if not op.name.startswith(_NO_MEMORY):
                return None
            continue
        op_reads, op_writes = accesses(op)
        reads += op_reads
        writes += op_writes
    return reads, writes


def _conflict(first, second) -> bool:
    (reads_1, writes_1), (reads_2, writes_2) = first, second
    return any(_may_alias(w, x) for w in writes_1 for x in reads_2 + writes_2) or \
        any(_may_alias(w, x) for w in writes_2 for x in reads_1)


def eliminate_barriers_in_block(block: ir.Block) -> int:
    """Remove the barriers of `block` that order nothing (module docstring); returns how many."""
    removed = 0
    while True:
        ops = [op.operation for op in block.operations]
        barriers = [i for i, op in enumerate(ops) if op.name == "gpu.barrier"]
        spans = [_span_accesses(ops[a + 1:b]) for a, b in zip(barriers, barriers[1:])]
        redundant = None
        for i, span in enumerate(spans):
            if span == ([], []):  # nothing touches memory since the barrier before it
                redundant = barriers[i + 1]
                break
        else:
            for i, (first, second) in enumerate(zip(spans, spans[1:])):
                if first is not None and second is not None and not _conflict(first, second):
                    redundant = barriers[i + 1]
                    break
        if redundant is None:
            return removed
        ops[redundant].erase()
        removed += 1


def eliminate_barriers(module_op) -> int:
    """Remove the barriers that order nothing in every block holding one; returns how many."""
    with module_op.context:
        blocks = []
        for barrier in walk_ops(module_op, "gpu.barrier"):
            block = barrier.operation.block
            if not any(block == b for b in blocks):
                blocks.append(block)
        return sum(eliminate_barriers_in_block(block) for block in blocks)


@register_pass
class EliminateBarriers(Pass):
    name = "codegen-gpu-eliminate-barriers"
    summary = "Remove barriers that order no conflicting memory accesses (a contraction's two tile copies)"
    description = ("GPU kernels. A gpu.barrier between two barriers of its block goes where no buffer "
                   "written on one side of it may be accessed on the other; a barrier following another "
                   "with no memory access between them goes. The A and B tiles' copies of a k step then "
                   "form one cp.async group, which the software pipeliner's waits assume.")

    def run(self, module):
        eliminate_barriers(module)
