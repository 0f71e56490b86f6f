"""Kernel level → LLVM dialect for the host CPU.

The lowering is a list of named stages, each a textual pipeline, so later work (tiling,
vectorisation, the VM of DVM) inserts a stage instead of rewriting the lowering. Each stage's IR is
recorded for inspection. The stages are mirrored in `passes/cpu.pipeline`.
"""

from __future__ import annotations

from torch_mlir import ir

from ...passes import run_pipeline

# (stage name, pipeline). Loops are naive scf loops for now: correct, structured for later tiling.
CPU_STAGES: tuple[tuple[str, str], ...] = (
    # `memref-alloc-at-first-use`: buffers are allocated where they are first written, not where the
    # shared `tensor.empty` stood (the measured peak then follows TeMCO's analysis, temco/alloc_at_first_use.py).
    # `scf-forall-to-for`: tiled loops (temco-fuse-activation's fused groups) run sequentially here.
    ("loops", "builtin.module(memref-alloc-at-first-use, func.func(convert-linalg-to-loops, scf-forall-to-for), "
              "canonicalize)"),
    (
        "llvm",
        # `llvm-request-c-wrappers`: the JIT exposes `_mlir_ciface_<name>` taking memref descriptors.
        # math ops with an LLVM intrinsic become intrinsics; the rest (erf, tanh, ...) libm calls,
        # which the JIT resolves in the host process. bf16 conversions are expanded to integer ops:
        # LLVM would call compiler-rt's __truncsfbf2, which the process does not have.
        "builtin.module(func.func(llvm-request-c-wrappers), expand-strided-metadata, lower-affine, "
        "convert-scf-to-cf, func.func(arith-expand{include-bf16=true}, convert-math-to-llvm), convert-math-to-libm, "
        "convert-to-llvm, reconcile-unrealized-casts)",
    ),
)


def lower_to_llvm(module: ir.Module, record=None, track_memory: bool = False) -> None:
    """Lower a bufferized module to the LLVM dialect in place; `record(stage, module)` after each stage.

    `track_memory`: allocations call MLIR's generic `_mlir_memref_to_llvm_alloc`/`_free` (bound to a
    counting allocator by the executable, see `memory_tracking`) instead of `malloc`/`free`.
    """
    for stage, pipeline in CPU_STAGES:
        if track_memory and stage == "llvm":
            from .memory_tracking import generic_allocation_stage

            pipeline = generic_allocation_stage(pipeline)
        run_pipeline(module, pipeline, what=f"lowering for the CPU (stage '{stage}')")
        if record is not None:
            record(stage, module)
