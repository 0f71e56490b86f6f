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

from ..ir_utils import walk_ops
from ..passes.registry import Pass, PassFailure, register_pass

# Tile buffers up to this many bytes become thread-local; larger ones stay global allocations.
MAX_LOCAL_BYTES = 1 << 20

_SCRIPT = """module attributes {transform.with_named_sequence} {
transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
  %loops = transform.structured.match ops{["scf.forall"]} in %root : (!transform.any_op) -> !transform.any_op
  %inner = transform.structured.match interface{LinalgOp} in %loops : (!transform.any_op) -> !transform.any_op
  %lowered = transform.structured.convert_to_loops %inner : (!transform.any_op) -> !transform.any_op
  transform.apply_patterns to %loops {
    transform.apply_patterns.memref.alloc_to_alloca size_limit(LIMIT)
    transform.apply_patterns.memref.expand_strided_metadata
  } : !transform.any_op
  %parallel = transform.loop.forall_to_parallel %loops : (!transform.any_op) -> !transform.any_op
  transform.yield
}
}"""


def sequentialize_forall_bodies(module) -> int:
    """Apply the pass to `module`; returns the number of `scf.forall` loops rewritten."""
    from torch_mlir.dialects.transform import interpreter

    root = module.operation if hasattr(module, "operation") else module
    loops = walk_ops(root, "scf.forall")
    for loop in loops:
        if len(loop.results):
            raise PassFailure("gpu-sequentialize-forall: expects bufferized IR (an scf.forall on memrefs), "
                              "this one still has tensor results; run it after bufferization", loop.location)
    if loops:
        with root.context:
            script = ir.Module.parse(_SCRIPT.replace("LIMIT", str(MAX_LOCAL_BYTES)))
            try:
                interpreter.apply_named_sequence(root, script.body.operations[0], script.operation)
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
