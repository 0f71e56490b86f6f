"""Kernel level → GPU target level: bufferized `func.func`s to outlined NVVM kernels plus a host function.

The lowering is a list of named stages (`GpuStage`), each a textual pipeline of upstream and vtmlir
passes (mirrored in `passes/cuda.pipeline`, so `vt-opt` can replay it); the IR after every stage is
recorded so users (and tests) can see what each step did. New stages — tiling the parallel loops onto thread blocks, vectorisation, shared
memory promotion — slot in between `parallel-loops` and `map-to-gpu` without touching the rest.

The default stages (docs/design.md §6, verified on conv and attention blocks):

1. `strip-runtime-asserts` — `gpu-strip-runtime-asserts` erases `cf.assert` (see
   `vtmlir.passes.gpu_strip_runtime_asserts` for why); the CPU path keeps them.
   `expand-fpowi` — `math-expand-ops{ops=fpowi}`: `x.pow(2)` becomes `x * x` (NVVM would call
   libdevice's `__nv_powif` with an i64 exponent where it takes i32: wrong results on the device).
2. `parallel-loops` — `convert-linalg-to-parallel-loops`: every linalg op becomes an `scf.parallel`
   over its parallel dimensions with sequential `scf.for` reductions inside. A linalg op with no
   parallel dimension (a full reduction, a 0-d op) becomes plain `scf.for`s or loads and stores in the
   host function; `gpu-wrap-serial-code` puts each such run of ops in a one-iteration `scf.parallel`,
   so it becomes a one-thread kernel instead of host code. The trip counts of every top-level
   `scf.parallel` are recorded here (`GpuLowering.iteration_spaces`, in launch order).
   Before them, the `schedule` stage's GPU schedules (codegen/gpu, docs/codegen_gpu.md) take the
   kernels they can; its first pass, `subbyte-cuda-kernels`, replaces each quantised
   contraction (`lowbit.fused`) by a launch of a Tilus kernel (its plan: `launch_plans`).
3. `map-to-gpu` — `gpu-map-parallel-loops` + `convert-parallel-loops-to-gpu`: the outer (up to three)
   parallel dimensions become the grid; the rest are loops in the kernel. One thread per block for now:
   correct, not fast (tiling is the stage to add here).
4. `outline` — `lower-affine`, `gpu-kernel-outlining`, `canonicalize`: each `gpu.launch` becomes a
   `gpu.module` with one `gpu.func` and a `gpu.launch_func` in the host function; launch sizes fold to
   constants for static shapes.
5. `to-nvvm` — `nvvm-attach-target{chip=...}` and inside each `gpu.module`: `convert-scf-to-cf`,
   `convert-gpu-to-nvvm`, `convert-math-to-llvm` (the integer math ops NVVM's patterns leave, e.g.
   `math.absi` of T5's relative-position buckets, become LLVM intrinsics NVPTX lowers; the float ones
   are libdevice calls by then), `canonicalize`, `reconcile-unrealized-casts`. Afterwards each kernel is an
   `llvm.func` whose memref parameters are expanded into (allocated ptr, aligned ptr, offset,
   sizes..., strides...).
"""

from __future__ import annotations

from dataclasses import dataclass
from torch_mlir import ir

from ...codegen.gpu.attach_schedule import attach_gpu_schedules, failing_kernel, kernel_of_failure
from ...codegen.gpu.launch_plans import launch_plans
from ...codegen.kernels import KERNEL_ATTR
from ...errors import VtmlirError
from ...ir_utils import walk_ops
from ...passes import run_pipeline


@dataclass(frozen=True)
class GpuStage:
    """One named step of the GPU lowering: a textual pipeline (vtmlir and upstream passes) nested
    under `builtin.module(...)`; it may contain `{chip}`, filled in with the target chip."""

    name: str
    summary: str
    pipeline: str
    carries_script: bool = False  # the transform script is in the module (verified once: `run`)

    def text(self, chip: str, options: str = "") -> str:
        return f"builtin.module({self.pipeline.format(chip=chip, options=options)})"

    def run(self, module: ir.Module, chip: str, options: str = "") -> None:
        what = f"GPU lowering stage '{self.name}'"
        if not self.carries_script:
            run_pipeline(module, self.text(chip, options), what=what)
            return
        # The module carries the schedules' transform script (every kernel's ops in the four entry
        # points); these stages verify once, at their end, not after every pass. Since the script
        # has no `transform.include`s (a scan of the module's symbols each) that saves little:
        # temco_resnet50 f16 15.4 -> 14.6 s CPU, temco_densenet121 f16 within the host's noise.
        run_pipeline(module, self.text(chip, options), what=what, verify_each=False)
        try:
            module.operation.verify()
        except ir.MLIRError as err:
            raise VtmlirError(f"error: the IR after {what} does not verify: {err}") from None


def _constant_index(value) -> int | None:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value


def record_iteration_spaces(module: ir.Module, into: list) -> None:
    """Append the trip counts of every top-level scf.parallel (None for a non-constant one)."""
    for func_op in walk_ops(module, "func.func"):
        if not func_op.regions[0].blocks:
            continue
        for op in func_op.regions[0].blocks[0].operations:
            if op.operation.name != "scf.parallel":
                continue
            n = (len(op.operands)) // 3
            lbs, ubs, steps = op.operands[:n], op.operands[n:2 * n], op.operands[2 * n:3 * n]
            space = []
            for lb, ub, step in zip(lbs, ubs, steps):
                lo, hi, st = _constant_index(lb), _constant_index(ub), _constant_index(step)
                space.append(None if None in (lo, hi, st) else max(0, -(-(hi - lo) // st)))
            into.append(tuple(space))


DEFAULT_STAGES: tuple[GpuStage, ...] = (
    GpuStage("strip-runtime-asserts", "drop cf.assert so every loop nest can become a kernel",
             pipeline="gpu-strip-runtime-asserts, func.func(canonicalize)"),
    # NVVM lowers math.fpowi to libdevice's __nv_powif(float, i32) but keeps torch-mlir's i64 exponent,
    # a call through the wrong prototype (wrong results on the device): expand it first, into
    # multiplications for a constant exponent, else into math.powf (exact for integral exponents).
    GpuStage("expand-fpowi", "math.fpowi → multiplications or math.powf",
             pipeline="func.func(math-expand-ops{{ops=fpowi}})"),
    # temco-fuse-activation's tiled loops: one thread per tile, tile buffers thread-local (passes/gpu_sequentialize_forall.py).
    GpuStage("sequentialize-forall", "scf.forall tiles → scf.parallel over sequential tile bodies",
             pipeline="gpu-sequentialize-forall"),
    # The GPU schedules of the codegen layer (codegen/gpu, docs/codegen_gpu.md). `codegen-trim-window-inputs`
    # before folding unit loops: a window's unread input rows made the fold's `2 * oh + kh` -> `kh` invalid.
    GpuStage("schedule", "quantised contractions to Tilus kernel launches, convolutions as im2col copies and "
             "batch matmuls, contractions' operand prologues split off, on sm_90a contractions to wgmma kernel launches, "
             "tensor-core operands padded to multiples of 16, unit loops dropped, long reductions "
             "over few outputs split into chunks; every kernel classified and its GPU schedule attached",
             pipeline="subbyte-cuda-kernels{{chip={chip}{options}}}, codegen-delinearize-loops, "
                      "codegen-gpu-split-prologues, codegen-gpu-im2col-convolutions, codegen-gpu-collapse-contraction-loops, "
                      "codegen-gpu-wgmma-contractions{{chip={chip}{options}}}, codegen-gpu-pad-contractions{{chip={chip}{options}}}, "
                      "func.func(linalg-generalize-named-ops), codegen-trim-window-inputs, "
                      "func.func(linalg-fold-unit-extent-dims, linalg-fold-unit-extent-dims{{use-rank-reducing-slices=true}}), "
                      "canonicalize, cse, codegen-gpu-collapse-sums, codegen-gpu-split-reductions{{chip={chip}{options}}}, "
                      "codegen-gpu-attach-schedule{{chip={chip}{options}}}"),
    GpuStage("gpu-tile", "block tiles, k loops; the unit loops of batch contractions' tiles dropped",
             pipeline="transform-interpreter{{entry-point=__gpu_tile}}, codegen-gpu-drop-unit-dims", carries_script=True),
    GpuStage("gpu-promote", "contraction tiles promoted to shared memory",
             pipeline="transform-interpreter{{entry-point=__gpu_promote}}, memref-copy-to-linalg", carries_script=True),
    # The scheduled kernels are outlined here, before the naive mapping makes the other launches;
    # convert-vector-to-gpu then runs on the tensor-core kernels' gpu.modules only (codegen/gpu/convert_mma.py).
    GpuStage("gpu-map", "threads and warps, vectors, gpu.launch, outlined; f16 and bf16 contractions to nvgpu.mma.sync",
             pipeline="transform-interpreter{{entry-point=__gpu_map}}, codegen-gpu-sync-epilogues, codegen-gpu-reduce-rows, fold-memref-alias-ops, canonicalize, cse, "
                      "codegen-gpu-sink-workgroup-buffers, codegen-gpu-sink-constants, codegen-gpu-outline-kernels, "
                      "codegen-gpu-convert-mma, codegen-gpu-eliminate-barriers", carries_script=True),
    GpuStage("gpu-pipeline", "cp.async copies, multi-buffered shared memory, software pipelining; "
             "shared memory as globals",
             pipeline="transform-interpreter{{entry-point=__gpu_pipeline}}, "
                      "gpu.module(fold-memref-alias-ops, canonicalize, cse), codegen-gpu-eliminate-barriers, codegen-gpu-workgroup-globals", carries_script=True),
    GpuStage("parallel-loops", "the kernels left: linalg ops → scf.parallel loop nests (naive mapping)",
             pipeline="codegen-erase-schedule, func.func(convert-linalg-to-parallel-loops, canonicalize)"),
    GpuStage("wrap-serial-code", "loops with no parallel dimension → 1-iteration scf.parallel",
             pipeline="gpu-wrap-serial-code"),  # no canonicalize: it would inline 1-iteration loops again
    GpuStage("map-to-gpu", "outer parallel dimensions → grid, gpu.launch regions",
             pipeline="func.func(gpu-map-parallel-loops), convert-parallel-loops-to-gpu"),
    GpuStage("outline", "gpu.launch → gpu.module kernels + gpu.launch_func on the host",
             pipeline="lower-affine, gpu-kernel-outlining, canonicalize"),
    # Inside each kernel: views to pointer arithmetic, nvgpu (ldmatrix, mma.sync, cp.async) to NVVM,
    # vectors to LLVM with their natural alignment (the schedules prove it: codegen/gpu/layouts.py),
    # so 128-bit accesses become ld.global.v4 / st.global.v4.
    GpuStage("to-nvvm", "kernels → llvm/nvvm dialects",
             pipeline="nvvm-attach-target{{chip={chip}}}, "
                      "gpu.module(convert-vector-to-scf{{full-unroll=true}}, expand-strided-metadata, lower-affine, "
                      "convert-scf-to-cf, convert-nvgpu-to-nvvm, convert-vector-to-llvm{{use-vector-alignment=true}}, "
                      "convert-gpu-to-nvvm, convert-nvvm-to-llvm, convert-math-to-llvm, "
                      "canonicalize, reconcile-unrealized-casts)"),
)


@dataclass(frozen=True)
class LaunchOrigin:
    """Where a kernel launch came from: the codegen kernel id (None when the naive mapping cannot be
    traced back to one kernel), whether a GPU schedule made it, and for the naive mapping the trip
    counts of its parallel loops."""

    kernel: int | None
    scheduled: bool
    iteration_space: tuple = ()


@dataclass
class GpuLowering:
    """What `lower_to_nvvm` learnt: IR after each stage, the plan of every kernel (codegen/gpu), and
    per launch (in launch order) where it came from."""

    stages: dict[str, str]
    plans: list
    launches: list[LaunchOrigin]

    @property
    def iteration_spaces(self) -> list[tuple]:
        return [launch.iteration_space for launch in self.launches]


class ScheduleFailure(VtmlirError):
    """A kernel's GPU schedule did not apply (the transform interpreter failed inside its sequence)."""

    def __init__(self, kernel: int, message: str, fused: bool = False):
        super().__init__(message)
        self.kernel = kernel
        self.fused = fused   # the kernel ran other kernels in its tiles (codegen/gpu/fusion.py)


_GPU_PHASES = ("gpu-tile", "gpu-promote", "gpu-map", "gpu-pipeline")


def lower_to_nvvm(module: ir.Module, chip: str = "sm_80", stages: tuple[GpuStage, ...] = DEFAULT_STAGES,
                  schedules=(), exclude=(), unfused=()) -> GpuLowering:
    """Lower a bufferized module in place to host functions + NVVM `gpu.module`s.

    The module must be at kernel level (after `vtmlir.backend.bufferize.bufferize`). `schedules`:
    overrides of the GPU schedules (`codegen-gpu-attach-schedule`'s items); `exclude`: kernel ids to
    leave to the naive mapping; `unfused`: contraction ids scheduled without their fill and epilogue. A schedule that fails raises `ScheduleFailure` naming the kernel
    (`compile_cuda` then compiles again without it).
    """
    if walk_ops(module, "bufferization.to_tensor") or _has_tensor_args(module):
        raise VtmlirError("error: the CUDA lowering expects a bufferized module (memrefs, not tensors); "
                          "run vtmlir.backend.bufferize.bufferize first")
    recorded: dict[str, str] = {}
    plans, naive, spaces, launches = [], [], [], []
    for stage in stages:
        if stage.name == "schedule":
            # The attach pass as a function: its plans (a return value) feed the report.
            options = f" schedules={','.join(schedules)}" if schedules else ""
            head, _, _ = stage.text(chip, options).rpartition(", codegen-gpu-attach-schedule")
            run_pipeline(module, head + ")", what=f"GPU lowering stage '{stage.name}'")
            plans = attach_gpu_schedules(module.operation, chip=chip, overrides=list(schedules), exclude=exclude,
                                         unfused=unfused)
            plans = launch_plans(module.operation, plans)
        elif stage.name in _GPU_PHASES:
            snapshot = module.operation.clone()
            try:
                stage.run(module, chip)
            except VtmlirError as err:
                kernel = kernel_of_failure(str(err))
                if kernel is None:
                    kernel = failing_kernel(snapshot, stage.name.removeprefix("gpu-"), plans)
                if kernel is None or kernel in exclude:
                    raise
                fused = any(p.id == kernel and p.fused for p in plans)
                raise ScheduleFailure(kernel, str(err), fused) from None
            finally:
                snapshot.erase()
        else:
            if stage.name == "parallel-loops":
                naive = _naive_kernel_ids(module)
            if stage.name == "map-to-gpu":
                record_iteration_spaces(module, spaces)
            stage.run(module, chip)
            if stage.name == "outline":
                launches = _launch_origins(module, naive, spaces)
        recorded[stage.name] = _print_without_resources(module)
    leftovers = [op.name for op in walk_ops(module) if op.name in ("scf.parallel", "gpu.launch")]
    if leftovers:
        raise VtmlirError(f"error: '{leftovers[0]}' was not turned into a GPU kernel by the CUDA lowering")
    return GpuLowering(recorded, plans, launches)


def _top_level(module: ir.Module, name: str) -> list:
    found = []
    for func_op in walk_ops(module, "func.func"):
        if func_op.regions[0].blocks:
            found += [op.operation for op in func_op.regions[0].blocks[0].operations if op.operation.name == name]
    return found


def _naive_kernel_ids(module: ir.Module) -> list[int | None]:
    """The kernels left to the naive mapping, in program order (their `codegen.kernel` tags)."""
    ids = []
    for func_op in walk_ops(module, "func.func"):
        if not func_op.regions[0].blocks:
            continue
        for op in func_op.regions[0].blocks[0].operations:
            op = op.operation
            if op.name.startswith("linalg.") and KERNEL_ATTR in op.attributes:
                ids.append(ir.IntegerAttr(op.attributes[KERNEL_ATTR]).value)
    return ids


def _launch_origins(module: ir.Module, naive: list, spaces: list) -> list[LaunchOrigin]:
    """Per top-level gpu.launch_func in order: the scheduled kernel it carries (`codegen.kernel`,
    codegen-gpu-outline-kernels), or the next naive loop nest; a naive launch is traced to its kernel
    when the naive loop nests and the naive kernels correspond one to one."""
    calls = _top_level(module, "gpu.launch_func")
    naive_calls = sum(1 for op in calls if KERNEL_ATTR not in op.attributes)
    traced = naive if len(naive) == naive_calls else [None] * naive_calls
    naive_iter, space_iter = iter(traced), iter(spaces)
    origins = []
    for op in calls:
        if KERNEL_ATTR in op.attributes:
            origins.append(LaunchOrigin(ir.IntegerAttr(op.attributes[KERNEL_ATTR]).value, True))
        else:
            origins.append(LaunchOrigin(next(naive_iter, None), False, tuple(next(space_iter, ()))))
    return origins


def _has_tensor_args(module: ir.Module) -> bool:
    for op in walk_ops(module, "func.func"):
        ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        if any(isinstance(t, (ir.RankedTensorType, ir.UnrankedTensorType))
               for t in list(ftype.inputs) + list(ftype.results)):
            return True
    return False


def _print_without_resources(module: ir.Module) -> str:
    """The module's IR; weights (dialect resources) elided so stage dumps stay small."""
    return module.operation.get_asm(large_elements_limit=16, large_resource_limit=64)
