"""`codegen-gpu-workgroup-globals`: shared-memory allocations become `memref.global`s of the kernel.

After the pipeline phase, a kernel's shared-memory tiles are `memref.alloc`s in workgroup memory at
the start of its outlined `gpu.func` (`codegen-gpu-sink-workgroup-buffers`, then multi-buffered). A
kernel cannot call an allocator; statically sized shared memory is a global in address space 3. Each
allocation becomes a private, 16-byte aligned `memref.global` of the kernel's `gpu.module`, read
with `memref.get_global` where it stood.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import memref

from ...passes.registry import Pass, register_pass
from .sink_workgroup_buffers import is_workgroup


def workgroup_globals(module_op) -> int:
    """Turn every workgroup `memref.alloc` of a `gpu.func` into a global; returns how many."""
    count = 0
    with module_op.context:
        allocs = []

        def visit(op):
            if op.name == "memref.alloc" and op.parent is not None and op.parent.name == "gpu.func" \
                    and is_workgroup(op.results[0].type):
                allocs.append(op)
            return ir.WalkResult.ADVANCE

        module_op.walk(visit)
        for alloc in allocs:
            mtype = alloc.results[0].type
            name = f"__shared_{count}"
            count += 1
            gpu_module = alloc.parent.parent
            with alloc.location:
                with ir.InsertionPoint.at_block_begin(gpu_module.regions[0].blocks[0]):
                    memref.GlobalOp(name, ir.TypeAttr.get(mtype), sym_visibility="private", alignment=16)
                with ir.InsertionPoint(alloc):
                    value = memref.GetGlobalOp(mtype, name).result
            alloc.results[0].replace_all_uses_with(value)
            alloc.erase()
    return count


@register_pass
class WorkgroupGlobals(Pass):
    name = "codegen-gpu-workgroup-globals"
    summary = "Shared-memory allocations in gpu.func bodies -> workgroup memref.globals of their gpu.module"

    def run(self, module):
        workgroup_globals(module)
