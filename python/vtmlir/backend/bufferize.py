"""Graph level → kernel level: fusion of elementwise ops and one-shot bufferization.

torch-mlir's TMTensor ops (sort, scan, scatter, topk, attention) first become scf/tensor/linalg ops
(`convert-tm-tensor-to-scf`), which bufferize like the rest. Elementwise `arith`/`math` ops on whole
tensors (hand-written linalg-on-tensors IR has them; one-shot bufferization has no bufferization for
them) become `linalg.generic`s (`convert-elementwise-to-linalg`).

Results become out-parameters of the public functions (docs/design.md §6: otherwise outputs stay
zero); every intermediate buffer is freed (`buffer-deallocation-pipeline`: without it each call
leaks its intermediates), right after its last use (`memref-dealloc-at-last-use`: the upstream
pipeline frees at the end of the block, which makes the peak the sum of all intermediates); and
every `memref.copy` becomes a `linalg.copy` (`memref-copy-to-linalg`: the torch-mlir wheel has no
`libmlir_c_runner_utils` to provide `memrefCopy`, and on the GPU path a copy must become a kernel
anyway). `eliminate-empty-tensors` lets a producer whose result is inserted into a
destination (the KV-cache writes `vt-lower-views` makes of `vt.store_into`) compute straight into
that destination instead of a fresh buffer followed by a copy (VTC Fig. 2, frame 2);
`unshare-fill-inits` before it gives every op that writes into a constant fill its own fill, where
`cse` had merged them into one that bufferization would keep intact and copy from.
`memref-elide-temporary-copies` lets an op that reads one region of a buffer and writes another
write it directly (one-shot bufferization copies it: C3K2's residual add into the concat buffer);
run again after `buffer-results-to-out-params`, it makes a result returned through a reshape
(which `hoist-static-allocs` cannot hoist) be computed in the out-parameter.
Arguments are read-only unless donated (`passes/argument_updates.py`: `copy-updated-arguments`
copies a returned update's argument once at the entry, `drop-donated-results` returns a donated
argument updated in place in place); `memref-distinct-returned-buffers` gives a buffer returned twice a
copy per repetition (hoisting crashes MLIR otherwise); `hoist-static-allocs` makes a result's buffer the caller's
out-parameter itself instead of a buffer copied into it at the end. The pipeline is mirrored in
`passes/bufferize.pipeline`.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch_mlir import ir

from ..passes import run_pipeline
from ..passes.argument_updates import donate_arguments, result_arguments
from ..signature import find_entry

GRAPH_TO_KERNELS = (
    "builtin.module("
    "convert-tm-tensor-to-scf, "
    "func.func(convert-elementwise-to-linalg, linalg-generalize-named-ops, linalg-fuse-elementwise-ops, "
    "canonicalize, cse), "
    "unshare-fill-inits, "
    "copy-updated-arguments, "
    "eliminate-empty-tensors, "
    "one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, "
    "memref-elide-temporary-copies, "
    "drop-donated-results, "
    "memref-distinct-returned-buffers, "
    "buffer-results-to-out-params{modify-public-functions hoist-static-allocs}, "
    "memref-elide-temporary-copies, "
    "buffer-deallocation-pipeline, "
    "canonicalize, cse, memref-copy-to-linalg, memref-dealloc-at-last-use)"
)


def bufferize(module: ir.Module, donate: Sequence[int] = (), function: str | None = None) -> list[int] | None:
    """Bufferize `module` in place (tensors → memrefs, results → trailing out-params).

    The arguments of public functions are read-only (the caller's tensors stay as they were), except
    the `donate`d arguments of the entry `function` (default: the module's entry), which may be
    overwritten; a result that is such an argument updated in place is returned in it (no
    out-parameter; `passes/argument_updates.py`). Returns, per result of the entry, the index of the
    donated argument that holds it or -1 (an out-parameter); None when nothing is donated.
    """
    if donate:
        donate_arguments(find_entry(module, function), donate)
    run_pipeline(module, GRAPH_TO_KERNELS, what="bufferizing (graph level → kernel level)")
    return result_arguments(find_entry(module, function)) if donate else None
