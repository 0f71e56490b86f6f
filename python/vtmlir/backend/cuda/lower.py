"""Kernel level → GPU target level: bufferized `func.func`s to outlined NVVM kernels plus a host function.

The lowering is a list of named stages (`GpuStage`). Each stage is either an upstream textual pipeline
or a Python rewrite over the IR; the IR after every stage is recorded so users (and tests) can see
what each step did. New stages — tiling the parallel loops onto thread blocks, vectorisation, shared
memory promotion — slot in between `parallel-loops` and `map-to-gpu` without touching the rest.

The default stages (DESIGN.md §9, verified on conv and attention blocks):

1. `strip-runtime-asserts` — erase `cf.assert`. torch-mlir emits them for checks such as
   "unimplemented: tensor with zero element" (batch norm's `sqrt(var + eps) != 0`). An `scf.parallel`
   holding a `cf.assert` is not converted by `convert-parallel-loops-to-gpu` (it stays on the host), so
   the whole loop nest would run nowhere. The GPU path has no way to report a device-side assert
   anyway; the CPU path keeps them.
2. `parallel-loops` — `convert-linalg-to-parallel-loops`: every linalg op becomes an `scf.parallel`
   over its parallel dimensions with sequential `scf.for` reductions inside. A linalg op with no
   parallel dimension (a full reduction, a 0-d op) becomes plain `scf.for`s or loads and stores in the
   host function; `wrap_serial_code` puts each such run of ops in a one-iteration `scf.parallel`, so
   it becomes a one-thread kernel instead of host code. The trip counts of every top-level
   `scf.parallel` are recorded here (`GpuLowering.iteration_spaces`, in launch order).
3. `map-to-gpu` — `gpu-map-parallel-loops` + `convert-parallel-loops-to-gpu`: the outer (up to three)
   parallel dimensions become the grid; the rest are loops in the kernel. One thread per block for now:
   correct, not fast (tiling is the stage to add here).
4. `outline` — `lower-affine`, `gpu-kernel-outlining`, `canonicalize`: each `gpu.launch` becomes a
   `gpu.module` with one `gpu.func` and a `gpu.launch_func` in the host function; launch sizes fold to
   constants for static shapes.
5. `to-nvvm` — `nvvm-attach-target{chip=...}` and inside each `gpu.module`: `convert-scf-to-cf`,
   `convert-gpu-to-nvvm`, `canonicalize`, `reconcile-unrealized-casts`. Afterwards each kernel is an
   `llvm.func` whose memref parameters are expanded into (allocated ptr, aligned ptr, offset,
   sizes..., strides...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch_mlir import ir
from torch_mlir.dialects import arith, scf

from ...errors import VtmlirError
from ...ir_utils import walk_ops
from ...passes import run_pipeline


@dataclass(frozen=True)
class GpuStage:
    """One named step of the GPU lowering.

    `pipeline` is a textual pass pipeline nested under `builtin.module(...)`; it may contain `{chip}`,
    filled in with the target chip. `rewrite` is a Python function over the module instead.
    """

    name: str
    summary: str
    pipeline: str | None = None
    rewrite: Callable[[ir.Module], None] | None = None

    def run(self, module: ir.Module, chip: str) -> None:
        if self.rewrite is not None:
            self.rewrite(module)
        if self.pipeline is not None:
            text = f"builtin.module({self.pipeline.format(chip=chip)})"
            run_pipeline(module, text, what=f"GPU lowering stage '{self.name}'")


def strip_runtime_asserts(module: ir.Module) -> None:
    """Erase every `cf.assert` (see the module docstring for why the GPU path drops them)."""
    for op in walk_ops(module, "cf.assert"):
        op.erase()


# Ops that stay in the host function: buffers, views of buffers, constants, the loop nests that become
# kernels. Everything else at the top level of a function is device work.
HOST_OPS = frozenset({
    "arith.constant", "memref.alloc", "memref.alloca", "memref.dealloc", "memref.get_global",
    "memref.subview", "memref.expand_shape", "memref.collapse_shape", "memref.cast",
    "memref.reinterpret_cast", "scf.parallel", "func.return",
})


def wrap_serial_code(module: ir.Module) -> None:
    """Move each run of top-level device ops (scf.for, loads, stores, ...) into a 1-iteration scf.parallel.

    A run whose results are used after it stays where it is (the host program then names the op).
    """
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
             pipeline="func.func(canonicalize)", rewrite=strip_runtime_asserts),
    GpuStage("parallel-loops", "linalg ops → scf.parallel loop nests",
             pipeline="func.func(convert-linalg-to-parallel-loops, canonicalize)"),
    GpuStage("wrap-serial-code", "loops with no parallel dimension → 1-iteration scf.parallel",
             rewrite=wrap_serial_code),  # no canonicalize: it would inline 1-iteration loops again
    GpuStage("map-to-gpu", "outer parallel dimensions → grid, gpu.launch regions",
             pipeline="func.func(gpu-map-parallel-loops), convert-parallel-loops-to-gpu"),
    GpuStage("outline", "gpu.launch → gpu.module kernels + gpu.launch_func on the host",
             pipeline="lower-affine, gpu-kernel-outlining, canonicalize"),
    GpuStage("to-nvvm", "kernels → llvm/nvvm dialects",
             pipeline="nvvm-attach-target{{chip={chip}}}, "
                      "gpu.module(convert-scf-to-cf, convert-gpu-to-nvvm, canonicalize, reconcile-unrealized-casts)"),
)


@dataclass
class GpuLowering:
    """What `lower_to_nvvm` learnt: IR after each stage, loop trip counts per kernel in launch order."""

    stages: dict[str, str]
    iteration_spaces: list[tuple]


def lower_to_nvvm(module: ir.Module, chip: str = "sm_80",
                  stages: tuple[GpuStage, ...] = DEFAULT_STAGES) -> GpuLowering:
    """Lower a bufferized module in place to host functions + NVVM `gpu.module`s.

    The module must be at kernel level (after `vtmlir.backend.bufferize.bufferize`).
    """
    if walk_ops(module, "bufferization.to_tensor") or _has_tensor_args(module):
        raise VtmlirError("error: the CUDA lowering expects a bufferized module (memrefs, not tensors); "
                          "run vtmlir.backend.bufferize.bufferize first")
    recorded: dict[str, str] = {}
    spaces: list[tuple] = []
    for stage in stages:
        if stage.name == "map-to-gpu":
            record_iteration_spaces(module, spaces)
        stage.run(module, chip)
        recorded[stage.name] = _print_without_resources(module)
    leftovers = [op.name for op in walk_ops(module) if op.name in ("scf.parallel", "gpu.launch")]
    if leftovers:
        raise VtmlirError(f"error: '{leftovers[0]}' was not turned into a GPU kernel by the CUDA lowering")
    return GpuLowering(recorded, spaces)


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
