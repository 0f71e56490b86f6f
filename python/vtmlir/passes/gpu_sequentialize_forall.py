"""`gpu-sequentialize-forall`: each tile of a bufferized `scf.forall` becomes one GPU thread.

`temco-fuse-activation` (TeMCO §3.2) produces an `scf.forall` whose body computes one tile of a
fused lconv–activation–fconv group with several linalg ops and tile-sized buffers. The default GPU
lowering would turn every linalg op inside into a nested `scf.parallel` mapped to threads, which
`convert-parallel-loops-to-gpu` cannot handle for sibling loops (and there would be no barrier
between producer and consumer). Instead, per Listing 1's kernel (one kernel, the tiles spread over
the grid), this pass, on bufferized IR, via the transform dialect:

1. turns the linalg ops inside each `scf.forall` into sequential `scf.for` nests
   (`transform.structured.convert_to_loops`): a tile is computed by one thread;
2. turns the tile buffers (`memref.alloc` + `memref.dealloc` in the loop body) into `memref.alloca`,
   i.e. thread-local memory (`alloc_to_alloca`), so the kernel allocates nothing globally, and
   expands the tile views (`memref.subview` with offsets that depend on the tile index) into
   `reinterpret_cast`s (`expand_strided_metadata`), which `convert-gpu-to-nvvm` can lower;
3. turns the `scf.forall` into an `scf.parallel` (`transform.loop.forall_to_parallel`), which the
   next stages map onto the grid like any other parallel loop: the whole group is one kernel.

Modules without `scf.forall` are left unchanged.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import transform
from torch_mlir.dialects.transform import loop as transform_loop
from torch_mlir.dialects.transform import structured
from torch_mlir.dialects.transform import memref as transform_memref

from ..ir_utils import apply_transform_script, walk_ops
from ..passes.registry import Pass, PassFailure, register_pass

# Tile buffers up to this many bytes become thread-local; larger ones stay global allocations.
MAX_LOCAL_BYTES = 1 << 20


def _sequentialize(root: ir.Value) -> None:
    """The script's body: inside every scf.forall, linalg ops to loops, tile buffers up to
    MAX_LOCAL_BYTES to allocas, strided metadata expanded; then each forall to an scf.parallel."""
    any_op = transform.AnyOpType.get()
    loops = structured.MatchOp.match_op_names(root, ["scf.forall"]).result
    # one forall at a time: forall_to_parallel takes a handle of exactly one op
    each = transform.ForeachOp([], [loops])
    with ir.InsertionPoint(each.body):
        loop = each.bodyTargets[0]
        inner = structured.MatchOp(any_op, loop, interface=structured.MatchInterfaceEnum.LinalgOp).result
        structured.ConvertToLoopsOp(any_op, inner)
        patterns = transform.ApplyPatternsOp(loop)
        with ir.InsertionPoint(patterns.patterns):
            transform_memref.ApplyAllocToAllocaOp(size_limit=MAX_LOCAL_BYTES)
            transform_memref.ApplyExpandStridedMetadataPatternsOp()
        transform_loop.ForallToParallelOp([any_op], loop)
        transform.YieldOp([])


def sequentialize_forall_bodies(module) -> int:
    """Apply the pass to `module`; returns the number of `scf.forall` loops rewritten."""
    root = module.operation if hasattr(module, "operation") else module
    loops = walk_ops(root, "scf.forall")
    for loop in loops:
        if len(loop.results):
            raise PassFailure("gpu-sequentialize-forall: expects bufferized IR (an scf.forall on memrefs), "
                              "this one still has tensor results; run it after bufferization", loop.location)
    if loops:
        try:
            apply_transform_script(root, _sequentialize)
        except ValueError as err:
            raise PassFailure(f"gpu-sequentialize-forall: could not lower the tiled loops: {err}",
                              loops[0].location) from None
    return len(loops)


@register_pass
class GpuSequentializeForall(Pass):
    name = "gpu-sequentialize-forall"
    summary = "Bufferized scf.forall -> scf.parallel whose body is sequential loops over thread-local tiles"

    def run(self, module) -> None:
        sequentialize_forall_bodies(module)
