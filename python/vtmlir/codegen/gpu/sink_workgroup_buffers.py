"""`codegen-gpu-sink-workgroup-buffers`: shared-memory buffers move into the kernel that uses them,
their rows padded against bank conflicts.

`transform.structured.promote` with workgroup memory allocates the tile buffers at the entry of the
function (`memref.alloc` in `#gpu.address_space<workgroup>`), i.e. on the host side of the
`gpu.launch` that `map_forall_to_blocks` makes later (docs/design.md §10). This pass moves each such
allocation to the start of the body of the one launch all its uses are in, drops its deallocations
(shared memory lives as long as the block), so that `memref.multibuffer` sees the allocation just
outside the pipelined loop and `codegen-gpu-workgroup-globals` can make it a shared-memory global of
that kernel. A buffer used by several launches or outside any is an error: promotion never makes one.

Padding (`schedules.padded_row_elements`): a tile row of 64 bytes (32 f16) read by `ldmatrix`
eight rows at a time puts rows 0, 2, 4 and 6 in the same banks; 16 more bytes per row make the
eight 16-byte row reads conflict-free. The allocation gets the longer rows in place when all its
users are accesses by index (`ldmatrix`, in-bounds vector transfers, loads, stores): they keep
their indices, which stay inside the original columns.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import memref

from ...passes.registry import Pass, PassFailure, register_pass
from .layouts import element_bytes
from .schedules import padded_row_elements
from .transform_gpu import workgroup_memory_space

# Users that address a buffer by index only (their result types do not depend on its layout).
_INDEXED_ACCESSES = ("vector.transfer_read", "vector.transfer_write", "vector.load", "vector.store",
                     "memref.load", "memref.store", "nvgpu.ldmatrix", "nvgpu.device_async_copy")


def is_workgroup(memref_type) -> bool:
    """Whether a memref type lives in `#gpu.address_space<workgroup>` (compared with the attribute
    the bindings' builder makes)."""
    space = ir.MemRefType(memref_type).memory_space
    return space is not None and space == workgroup_memory_space()


def _enclosing_launch(op):
    while op is not None and op.name != "gpu.launch":
        op = op.parent
    return op


def sink_workgroup_buffers(module_op) -> int:
    """Move every workgroup `memref.alloc` of a function body into its launch; returns how many."""
    moved = 0
    with module_op.context:
        for func in module_op.regions[0].blocks[0].operations:
            if func.operation.name != "func.func" or not func.regions[0].blocks:
                continue
            # Collected first: the loop erases deallocations that come later in the block.
            allocs = [op.operation for op in func.regions[0].blocks[0].operations
                      if op.operation.name == "memref.alloc" and is_workgroup(op.operation.results[0].type)]
            for op in allocs:
                launches, deallocs = [], []
                for use in op.results[0].uses:
                    user = use.owner
                    if user.name == "memref.dealloc":
                        deallocs.append(user)
                        continue
                    launch = _enclosing_launch(user)
                    if launch is None:
                        raise PassFailure("codegen-gpu-sink-workgroup-buffers: a shared-memory buffer is used "
                                          "outside any gpu.launch", op.location)
                    if not any(launch == known for known in launches):
                        launches.append(launch)
                if len(launches) != 1:
                    raise PassFailure("codegen-gpu-sink-workgroup-buffers: a shared-memory buffer is used by "
                                      f"{len(launches)} kernels; expected one", op.location)
                for dealloc in deallocs:
                    dealloc.erase()
                body = launches[0].regions[0].blocks[0]
                op.move_before(body.operations[0])
                _pad_rows(op)
                moved += 1
    return moved


def _pad_rows(alloc) -> None:
    """Give `alloc` padded rows when every user is an indexed access (in-bounds transfers)."""
    mtype = ir.MemRefType(alloc.results[0].type)
    shape = list(mtype.shape)
    if not shape:
        return
    row = padded_row_elements(shape[-1], element_bytes(mtype.element_type))
    if row == shape[-1] or mtype.layout != ir.AffineMapAttr.get(ir.AffineMap.get_identity(len(shape))):
        return
    for use in alloc.results[0].uses:
        user = use.owner
        if user.name not in _INDEXED_ACCESSES:
            return
        if user.name.startswith("vector.transfer") and not all(
                ir.BoolAttr(b).value for b in ir.ArrayAttr(user.attributes["in_bounds"])):
            return
    with alloc.location, ir.InsertionPoint(alloc):
        padded = memref.AllocOp(ir.MemRefType.get(shape[:-1] + [row], mtype.element_type, None, mtype.memory_space),
                                [], []).result
    alloc.results[0].replace_all_uses_with(padded)
    alloc.erase()


@register_pass
class SinkWorkgroupBuffers(Pass):
    name = "codegen-gpu-sink-workgroup-buffers"
    summary = "Move shared-memory (workgroup) allocations from the host function into the gpu.launch using them"

    def run(self, module):
        sink_workgroup_buffers(module)
