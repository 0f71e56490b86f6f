"""Kernel level → LLVM dialect for the host CPU.

The lowering is a list of named stages, each a textual pipeline whose IR is recorded for
inspection; they are mirrored in `passes/cpu.pipeline` (with the default, all-cores threading).

1. "schedule": `codegen-attach-schedule` classifies every kernel and appends its schedule as
   transform IR (`vtmlir.codegen`); replay the stage with `vt-opt --transform-interpreter`.
2. "vectors": the upstream `transform-interpreter` applies it (tiles, packed panels, vectors; the
   parallel tiles are `scf.forall`s). `codegen.report` reads which kernels kept their loops here.
3. "loops": the script is erased, stack buffers hoisted out of loops, every linalg op no schedule
   vectorised becomes loops (`convert-linalg-to-loops`), and the entry function's intermediate
   buffers get static offsets in a workspace argument (`codegen-plan-workspace`).
4. "llvm": `scf.forall` → OpenMP (`threads` ≠ 1) or sequential loops, vectors and the rest → LLVM.
"""

from __future__ import annotations

from dataclasses import replace

from torch_mlir import ir

from ...codegen import attach_schedules, kernel_report, override_items
from ...codegen.insert_profile_marks import insert_profile_marks
from ...codegen.split_row_reductions import split_all_row_reductions
from ...passes import run_pipeline
from .memory_tracking import GENERIC_ALLOCATION_PASS

# `memref-alloc-at-first-use`: buffers are allocated where they are first written, not where the
# shared `tensor.empty` stood (the measured peak then follows TeMCO's analysis, passes/memref_alloc_at_first_use.py).
# `scf-forall-to-for` first: the tiles of temco-fuse-activation's fused groups share scratch buffers,
# so they run in order; only the foralls made after it (the schedules', the im2col loops) are parallel. `codegen-order-window-taps`:
# a window kernel's taps become its outer reductions before any pass picks its route, so every route sums
# a convolution taps outer, channels inner (a folded view must not change the sum). `codegen-delinearize-loops`:
# a kernel reading a VTC view through floordiv/mod (attention's heads split out of a fused QKV
# projection) gets a loop per view dimension, so it is a contraction or a vector kernel again (before
# the splits, which take plain dimensions). `codegen-split-checks`: the
# importer's per-element asserts leave the kernels (which the vectoriser then takes) for small check
# kernels over the dimensions they read. `codegen-split-prologues`: an elementwise op fused into a
# contraction (LayerNorm into the next Linear) is computed once, in a kernel of its own, again.
# `codegen-inline-casts`: a kernel that only casts a buffer (LayerNorm's f64 copy of x) folded into its readers.
# `codegen-split-row-invariants`: a division or math function of a row's values, once per row.
# `codegen-fuse-rows`: a row reduction and the row kernels around it (LayerNorm, RMSNorm, softmax) in one
# loop over blocks of rows, each block read from memory once (after the row invariants: their kernels join).
# `codegen-transpose-b-operands`: a Linear's weight (read along k) transposed once at compile time, so
# that the contraction's vectors read rows of B. `codegen-decompose-convolutions`:
# a convolution becomes im2col panels and a contraction, or contractions per filter tap; a depthwise
# convolution or a pooling one elementwise kernel reading every tap (the vectoriser takes no
# sliding-window maps); it takes the thread count: an im2col convolution's loop over images and panels is
# the parallel loop where it gives the threads enough work (else its contractions are split).


def kernel_preparation(threads: int = 0) -> str:
    """The kernel preparation passes for code on `threads` threads (0: all cores)."""
    return ("memref-alloc-at-first-use, func.func(scf-forall-to-for), codegen-inline-casts, codegen-order-window-taps, "
            "codegen-delinearize-loops, codegen-split-checks, codegen-split-prologues, codegen-split-row-invariants, "
            f"codegen-erase-dead-kernels, codegen-split-piece-gathers, codegen-fuse-rows, codegen-decompose-convolutions{{threads={max(threads, 0)}}}, codegen-transpose-b-operands, "
            "canonicalize")


KERNEL_PREPARATION = kernel_preparation()
# `codegen-split-row-reductions` reassociates as the row-reduction schedule does: it reads the same overrides.
SCHEDULE_STAGE = "builtin.module(%s, codegen-split-row-reductions%s, codegen-attach-schedule{threads=%d%s})"
VECTORS_STAGE = "builtin.module(transform-interpreter)"
# `codegen-streaming-stores`: a large transposing copy's rows past the caches (before anything rebuilds the
# marked loop). `codegen-fuse-multiply-add`: a contraction's marked multiplies and their adds as math.fma.
# `codegen-reciprocal-divisions`: a vector kernel's marked divisions by a loop-invariant divisor (softmax's
# row sum) as multiplications by its reciprocal.
# `codegen-fold-row-broadcasts`: a register tile's A column is one broadcast, not the flattened shuffle the
# vectoriser's broadcast + transpose became (LLVM's time, not the code: it simplified the shuffle back).
# `codegen-hoist-accumulators`: the register tiles' accumulators that upstream hoisting refused (a buffer with
# views). `codegen-hoist-static-allocas` after the canonicalisation, which would dissolve its alloca scopes.
# `codegen-plan-workspace`: the entry function's intermediate buffers at static offsets of one workspace argument
# the executable keeps per calling thread (malloc'd and freed per call, they faulted pages in again on every
# call); last of the buffer work, after every pass that adds, moves or frees a buffer, and before the kernels
# are outlined (`codegen-outline-kernels` passes the workspace to them). Not with `track_memory` (the counting
# allocator measures every buffer) nor for DVM's VM functions (their own calling convention).
# `math-expand-ops`: LLVM's powi takes a scalar exponent, a vectorised fpowi has a vector (a constant
# exponent becomes multiplications, as LLVM expands powi; any other becomes powf); rsqrt of a vector
# becomes 1/sqrt, as the scalar lowering does (else it would become calls to a libm rsqrtf that does not exist).
# `codegen-approximate-math`: f32 exp, erf, tanh, sin and cos as polynomials (LLVM would scalarise them into libm
# calls, and fold a call on a constant to another value than the call's).
LOOPS_STAGE = ("builtin.module(codegen-erase-schedule, codegen-streaming-stores, codegen-fold-row-broadcasts, codegen-fuse-multiply-add, codegen-reciprocal-divisions, func.func(convert-linalg-to-loops), "
               "canonicalize, cse, codegen-hoist-accumulators, codegen-hoist-static-allocas%s%s, "
               "func.func(math-expand-ops{ops=fpowi,rsqrt}), codegen-approximate-math)")
# `llvm-request-c-wrappers`: the JIT exposes `_mlir_ciface_<name>` taking memref descriptors.
# `lower-vector-mask`: the masked vectors of partial tiles become masked loads and stores.
# `codegen-outline-kernels`: a very large function's kernels as functions of their own (LLVM's time grows
# faster than the function); after the C wrappers are requested, which the kernels do not need.
# `codegen-keep-strided-transfer-views` before it: a transfer whose vector runs along a strided subview dimension
# keeps the view (the fold would drop the stride: vt-fuzz seed 4242 case 1053, wrong at every opt level).
# `fold-memref-alias-ops`: a transfer through a unit subview reads its source directly; a 0-d read
# of a strided subview (a scalar broadcast across a vector, e.g. a stride-2 convolution's input with
# its ReLU fused, in NHWC) has no LLVM lowering, one of a unit-stride memref has (seed 2611 case 5002).
# `codegen-drop-transfer-unit-dims` after it: a transfer on an N x C x 1 x 1 buffer (a 1x1 convolution over
# one pixel), which the folding left with a map that is no minor identity, through a view without the
# unit dimensions (else one scalar load or store per element).
# `finalize-memref-to-llvm` before `convert-scf-to-cf`: OpenMP's loop bodies are `memref.alloca_scope`s.
# math ops are lowered before `convert-openmp-to-llvm`, which refuses a math op inside a parallel region.
# math ops with an LLVM intrinsic become intrinsics; the rest (erf, tanh, ...) libm calls, which the JIT
# resolves in the host process. bf16 arithmetic is done in f32 and rounded to bf16 after each op
# (`codegen-emulate-bf16`: what LLVM's own promotion and torch do), and bf16 conversions are expanded to
# integer ops: on a CPU without AVX512-BF16, LLVM would call compiler-rt's __truncsfbf2 for both, which
# the process does not have. Both before `convert-openmp-to-llvm`,
# which makes every func.func an llvm.func that `func.func(...)` passes no longer visit (a scalar
# math.absi then failed `convert-math-to-libm`). `reassociate-fp-reductions`: a row reduction's
# vector is summed as a tree (the row-reduction schedule's documented reassociation).
LLVM_STAGE = (
    "builtin.module(func.func(llvm-request-c-wrappers, lower-vector-mask), codegen-outline-kernels, codegen-keep-strided-transfer-views, fold-memref-alias-ops, codegen-drop-transfer-unit-dims, %s, convert-vector-to-scf{full-unroll=true}, "
    "expand-strided-metadata, lower-affine, "
    "codegen-emulate-bf16, func.func(arith-expand{include-bf16=true}, convert-math-to-llvm), convert-math-to-libm, %s, "
    "convert-vector-to-llvm{reassociate-fp-reductions=true}, convert-to-llvm, reconcile-unrealized-casts)"
)
FINALIZE_MEMREF = "finalize-memref-to-llvm"


def _threads_passes(threads: int) -> str:
    if threads == 1:
        return "func.func(scf-forall-to-for)"
    options = f"{{num-threads={threads}}}" if threads > 1 else ""
    return f"func.func(scf-forall-to-parallel), convert-scf-to-openmp{options}, convert-openmp-to-llvm"


def cpu_stages(threads: int = 0, schedules=(), track_memory: bool = False,
               workspace: str | None = "") -> tuple[tuple[str, str], ...]:
    """(stage name, pipeline) for `threads` (0: OpenMP's default, all cores; 1: no OpenMP) and schedule
    overrides (`codegen-attach-schedule`'s `schedules` items). `workspace`: the function whose
    intermediate buffers `codegen-plan-workspace` places in a workspace argument ("": every public
    function no call refers to; None: no workspace, every buffer malloc'd, as with `track_memory`)."""
    overrides = f" schedules={','.join(schedules)}" if schedules else ""
    finalize = FINALIZE_MEMREF
    if track_memory:
        finalize = GENERIC_ALLOCATION_PASS
    threads_text = _threads_passes(threads)
    plan = ""
    if workspace is not None and not track_memory:
        plan = ", codegen-plan-workspace" + (f"{{function={workspace}}}" if workspace else "")
    finalize = f"{finalize}, convert-scf-to-cf"
    if threads != 1:  # after the memref and scf lowerings (else it lowers cf.assert inside scf.for bodies)
        threads_text = threads_text.replace(", convert-openmp-to-llvm", "")
        finalize = f"{finalize}, convert-openmp-to-llvm"
    return (
        ("schedule", SCHEDULE_STAGE % (kernel_preparation(threads), f"{{{overrides.strip()}}}" if overrides else "",
                                       max(threads, 0), overrides)),
        ("vectors", VECTORS_STAGE),
        ("loops", LOOPS_STAGE % ("{sequential=true}" if threads == 1 else "", plan)),
        ("llvm", LLVM_STAGE % (threads_text, finalize)),
    )


CPU_STAGES = cpu_stages()


def lower_to_llvm(module: ir.Module, record=None, track_memory: bool = False, threads: int = 0,
                  schedules=None, profile: bool = False, workspace: str | None = None):
    """Lower a bufferized module to the LLVM dialect in place; `record(stage, module)` after each stage.
    Returns the `codegen.KernelReport` (which kernels were vectorised, which kept loops and why).

    `track_memory`: allocations call MLIR's generic `_mlir_memref_to_llvm_alloc`/`_free` (bound to a
    counting allocator by the executable, see `memory_tracking`) instead of `malloc`/`free`.
    `threads`: 0 (all cores), 1 (single-threaded code, no OpenMP), or N. `schedules`: overrides of the
    per-kind schedules (`codegen.schedules.resolve_schedules`). `profile`: a profiling build, every
    kernel bracketed with timing marks once it is tagged (`codegen-insert-profile-marks`; recorded in
    stage "schedule"). `workspace`: the entry function whose intermediate buffers go to a workspace
    argument (`codegen-plan-workspace`; the report's `workspace` is its plan); None (default): none,
    the signature stays the bufferized one. Ignored with `track_memory`.
    """
    items = override_items(schedules)
    plans = None
    workspace_plan = None
    for stage, pipeline in cpu_stages(threads, items, track_memory, workspace):
        if stage == "schedule":
            # The attach pass as a function: its plan (a return value) feeds the report.
            run_pipeline(module, f"builtin.module({kernel_preparation(threads)})",
                         what="lowering for the CPU (stage 'schedule')")
            with module.context:
                split_all_row_reductions(module.operation, items)
            plans = attach_schedules(module.operation, threads=max(threads, 0), overrides=items)
            if profile:
                insert_profile_marks(module.operation)
        else:
            results = run_pipeline(module, pipeline, what=f"lowering for the CPU (stage '{stage}')")
            for planned in results.reports("codegen-plan-workspace"):
                workspace_plan = planned.get(workspace, workspace_plan)
        if stage == "vectors":
            report = kernel_report(plans, module.operation)
        if record is not None:
            record(stage, module)
    if workspace_plan is not None and workspace_plan.buffers:
        report = replace(report, workspace=workspace_plan)
    return report
