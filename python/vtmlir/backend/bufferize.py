"""Graph level → kernel level: fusion of elementwise ops and one-shot bufferization.

Results become out-parameters of the public functions (DESIGN.md §2 pitfall: otherwise outputs stay
zero); every intermediate buffer is freed (`buffer-deallocation-pipeline`: without it each call
leaks its intermediates), right after its last use (`memref-dealloc-at-last-use`: the upstream
pipeline frees at the end of the block, which makes the peak the sum of all intermediates); and
every `memref.copy` becomes a `linalg.copy` (`memref-copy-to-linalg`: the torch-mlir wheel has no
`libmlir_c_runner_utils` to provide `memrefCopy`, and on the GPU path a copy must become a kernel
anyway). `eliminate-empty-tensors` lets a producer whose result is inserted into a
destination (the KV-cache writes `vt-lower-views` makes of `vt.store_into`) compute straight into
that destination instead of a fresh buffer followed by a copy (VTC Fig. 2, frame 2);
`unshare-fill-inits` before it gives every op that writes into a constant fill its own fill, where
`cse` had merged them into one that bufferization would keep intact and copy from. The pipeline
is mirrored in `passes/bufferize.pipeline`.
"""

from __future__ import annotations

from torch_mlir import ir

from ..passes import run_pipeline

GRAPH_TO_KERNELS = (
    "builtin.module("
    "func.func(linalg-generalize-named-ops, linalg-fuse-elementwise-ops, canonicalize, cse), "
    "unshare-fill-inits, "
    "eliminate-empty-tensors, "
    "one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, "
    "memref-elide-temporary-copies, "
    "buffer-results-to-out-params{modify-public-functions}, "
    "buffer-deallocation-pipeline, "
    "canonicalize, cse, memref-copy-to-linalg, memref-dealloc-at-last-use)"
)


def bufferize(module: ir.Module) -> None:
    """Bufferize `module` in place (tensors → memrefs, results → trailing out-params)."""
    run_pipeline(module, GRAPH_TO_KERNELS, what="bufferizing (graph level → kernel level)")
