"""`gpu-wrap-serial-code`: serial top-level code into one-thread kernels, before
`convert-parallel-loops-to-gpu`.

A linalg op with no parallel dimension (a full reduction, a 0-d op) lowers to plain `scf.for`s or
loads and stores at the top level of the host function. Each such run of ops is moved into a
one-iteration `scf.parallel`, so it becomes a one-thread kernel instead of host code. Do not
canonicalize right after it: that would inline the one-iteration loops again.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, scf

from ..ir_utils import walk_ops
from .registry import Pass, register_pass

# Ops that stay in the host function: buffers, views of buffers, constants, the loop nests that become
# kernels. Everything else at the top level of a function is device work.
HOST_OPS = frozenset({
    "arith.constant", "memref.alloc", "memref.alloca", "memref.dealloc", "memref.get_global",
    "memref.subview", "memref.expand_shape", "memref.collapse_shape", "memref.cast",
    "memref.reinterpret_cast", "scf.parallel", "func.return",
    "gpu.launch", "gpu.launch_func",  # kernels the GPU schedules made already (codegen/gpu)
})


@register_pass
class GpuWrapSerialCode(Pass):
    name = "gpu-wrap-serial-code"
    summary = "Move top-level loops with no parallel dimension into 1-iteration scf.parallel (1-thread kernels)"

    def run(self, module) -> None:
        for func_op in walk_ops(module, "func.func"):
            if not func_op.regions[0].blocks:
                continue
            runs, current = [], []
            for op in func_op.regions[0].blocks[0].operations:
                if op.operation.name in HOST_OPS:
                    if current:
                        runs.append(current)
                    current = []
                else:
                    current.append(op.operation)
            if current:
                runs.append(current)
            for run in runs:
                # A run whose results are used after it stays (the host program then names the op).
                if not _used_outside(run):
                    _wrap_in_parallel(run)


def _used_outside(run: list) -> bool:
    """Whether a result of an op in `run` is used by a top-level op outside `run`."""
    for op in run:
        for result in op.results:
            for use in result.uses:
                user = use.owner.operation
                while user.parent is not None and user.parent.operation.name != "func.func":
                    user = user.parent.operation
                if not any(user == r for r in run):
                    return True
    return False


def _wrap_in_parallel(run: list) -> None:
    with ir.InsertionPoint(run[0]), run[0].location:
        zero = arith.ConstantOp(ir.IndexType.get(), 0).result
        one = arith.ConstantOp(ir.IndexType.get(), 1).result
        loop = scf.ParallelOp([], [zero], [one], [one], [])
        body = loop.regions[0].blocks.append(ir.IndexType.get())
    with ir.InsertionPoint(body), run[0].location:
        terminator = scf.ReduceOp([], 0)
    for op in run:
        op.move_before(terminator)
