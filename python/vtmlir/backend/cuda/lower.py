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
   over its parallel dimensions with sequential `scf.for` reductions inside.
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

from ...errors import VtmlirError
from ..pipeline import run_pipeline, walk_ops


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
            run_pipeline(module, text, f"GPU lowering stage '{self.name}'")


def strip_runtime_asserts(module: ir.Module) -> None:
    """Erase every `cf.assert` (see the module docstring for why the GPU path drops them)."""
    for op in walk_ops(module, "cf.assert"):
        op.erase()


DEFAULT_STAGES: tuple[GpuStage, ...] = (
    GpuStage("strip-runtime-asserts", "drop cf.assert so every loop nest can become a kernel",
             pipeline="func.func(canonicalize)", rewrite=strip_runtime_asserts),
    GpuStage("parallel-loops", "linalg ops → scf.parallel loop nests",
             pipeline="func.func(convert-linalg-to-parallel-loops, canonicalize)"),
    GpuStage("map-to-gpu", "outer parallel dimensions → grid, gpu.launch regions",
             pipeline="func.func(gpu-map-parallel-loops), convert-parallel-loops-to-gpu"),
    GpuStage("outline", "gpu.launch → gpu.module kernels + gpu.launch_func on the host",
             pipeline="lower-affine, gpu-kernel-outlining, canonicalize"),
    GpuStage("to-nvvm", "kernels → llvm/nvvm dialects",
             pipeline="nvvm-attach-target{{chip={chip}}}, "
                      "gpu.module(convert-scf-to-cf, convert-gpu-to-nvvm, canonicalize, reconcile-unrealized-casts)"),
)


def lower_to_nvvm(module: ir.Module, chip: str = "sm_80",
                  stages: tuple[GpuStage, ...] = DEFAULT_STAGES) -> dict[str, str]:
    """Lower a bufferized module in place; returns {stage name: IR text after that stage}.

    The module must be at kernel level (after `vtmlir.backend.bufferize.bufferize`).
    """
    if walk_ops(module, "bufferization.to_tensor") or _has_tensor_args(module):
        raise VtmlirError("error: the CUDA lowering expects a bufferized module (memrefs, not tensors); "
                          "run vtmlir.backend.bufferize.bufferize first")
    recorded: dict[str, str] = {}
    for stage in stages:
        stage.run(module, chip)
        recorded[stage.name] = _print_without_resources(module)
    leftovers = [op.name for op in walk_ops(module) if op.name in ("scf.parallel", "gpu.launch")]
    if leftovers:
        raise VtmlirError(f"error: '{leftovers[0]}' was not turned into a GPU kernel by the CUDA lowering")
    return recorded


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
