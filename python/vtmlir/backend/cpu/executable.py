"""The compiled CPU function: JIT-compiled once, called with torch tensors or numpy arrays."""

from __future__ import annotations

import ctypes

import numpy as np
from torch_mlir import ir
from torch_mlir.execution_engine import ExecutionEngine
from torch_mlir.runtime import get_ranked_memref_descriptor

from ...errors import VtmlirError, capture_native_stderr, format_diagnostic
from ...frontend.torch_calls import call_compiled
from ...signature import Signature, to_numpy
from ..bufferize import bufferize
from .lower import lower_to_llvm


class CpuExecutable:
    """A function compiled for the host CPU.

    `stages` maps stage name → IR text (graph, kernels, loops, llvm); `signature` is the calling
    convention. Calling it returns what the module returns (`Signature.deliver`): a torch tensor or
    a Python number (one result), or a tuple of them.
    """

    target = "cpu"

    def __init__(self, engine: ExecutionEngine, signature: Signature, stages: dict[str, str], allocator=None,
                 weight_bytes: int = 0, result_arguments: list[int] | None = None, donate: tuple[int, ...] = (),
                 kernel_report=None, threads: int = 0):
        self._engine = engine
        self._kernel_report = kernel_report
        self.threads = threads
        self.signature = signature
        self.stages = stages
        # Per result, the donated argument that holds it (updated in place), or -1 (an out-parameter).
        self.result_arguments = list(result_arguments) if result_arguments else [-1] * len(signature.results)
        self.donate = tuple(donate)
        # Only with track_memory: the CountingAllocator whose callbacks the JIT calls (kept alive here).
        self._allocator = allocator
        self._weight_bytes = weight_bytes
        self._last_stats = None
        # Set by `vtmlir.compile` for a module compiled from an nn.Module: its Python calling
        # convention (frontend/torch_calls.py); None for MLIR input (flat tensors in and out).
        self.call_spec = None

    @property
    def aliases(self) -> dict[int, int]:
        """{result index: donated argument index} for the results returned in a donated input's
        memory (updated in place, `compile(..., donate=...)`)."""
        return {r: a for r, a in enumerate(self.result_arguments) if a >= 0}

    def __call__(self, *args, **kwargs):
        """Call with torch tensors or numpy arrays. Compiled from an `nn.Module` (`call_spec`), take
        and return what the module does; otherwise return a torch tensor (one result) or a tuple."""
        return call_compiled(self, args, kwargs)

    def run(self, *args) -> tuple:
        """Run the compiled function on its flat tensor arguments; what it returns as a tuple (tensors,
        Python numbers for scalar results; inputs it writes are written, `Signature.deliver`)."""
        arrays = [to_numpy(a, i) for i, a in enumerate(args)]
        self.signature.check_inputs(arrays)
        for i in self.donate:
            # A donated buffer is written; it must not be (a view of) another input's memory.
            if any(j != i and np.may_share_memory(arrays[i], a) for j, a in enumerate(arrays)):
                arrays[i] = arrays[i].copy()
        out_params = [np.zeros(spec.shape, spec.numpy_dtype)
                      for spec, a in zip(self.signature.results, self.result_arguments) if a < 0]
        pointers = [_memref_pointer(a) for a in arrays + out_params]
        if self._allocator is not None:
            self._allocator.reset()
        self._engine.invoke(self.signature.name, *pointers)
        if self._allocator is not None:
            self._last_stats = self._stats(arrays, out_params)
        fresh = iter(out_params)
        return self.signature.deliver([arrays[a] if a >= 0 else next(fresh) for a in self.result_arguments], args)

    def report(self):
        """The `codegen.KernelReport`: each kernel's class and schedule, and the kernels that kept
        scalar loops with the reason (`print(compiled.report())`)."""
        return self._kernel_report

    def memory_stats(self):
        """`MemoryStats` of the last call (needs `compile_cpu(..., track_memory=True)`)."""
        if self._allocator is None:
            raise VtmlirError("error: memory is not tracked; compile with track_memory=True")
        if self._last_stats is None:
            raise VtmlirError("error: no call has been measured yet; call the compiled function first")
        return self._last_stats

    def _stats(self, arrays, outputs):
        from .memory_tracking import MemoryStats

        a = self._allocator
        return MemoryStats(
            peak_internal_bytes=a.peak, live_internal_bytes=a.live, allocations=a.allocations, frees=a.frees,
            weight_bytes=self._weight_bytes, input_bytes=sum(x.nbytes for x in arrays),
            output_bytes=sum(o.nbytes for o in outputs), timeline=list(a.timeline),
        )

    def ir(self, stage: str) -> str:
        if stage not in self.stages:
            raise VtmlirError(f"error: no stage '{stage}'; stages: {', '.join(self.stages)}")
        return self.stages[stage]


def compile_cpu(module: ir.Module, signature: Signature, stages: dict[str, str], opt_level: int = 2,
                track_memory: bool = False, donate: tuple[int, ...] = (), threads: int = 0,
                schedules=None) -> CpuExecutable:
    """Bufferize, lower and JIT `module` (graph level, modified in place).

    `track_memory` (opt-in, slower allocations): count the bytes the function allocates per call;
    `CpuExecutable.memory_stats()` then reports them (`memory_tracking`). `donate`: argument indices
    the function may overwrite; a result that is such an argument updated is returned in its memory
    (`passes/argument_updates.py`). `threads`: 0 (all cores), 1 (no OpenMP) or N; `schedules`: overrides
    of the code generation schedules per kernel kind (`vtmlir.codegen.resolve_schedules`).
    """
    for i, spec in enumerate(signature.results):
        if not spec.is_static:
            raise VtmlirError(
                f"error: result {i} of @{signature.name} has dynamic shape {spec}; the CPU backend needs "
                "static result shapes (dynamic shapes are the DVM runtime's job)"
            )

    def record(stage, mod):
        stages[stage] = print_ir(mod)

    result_arguments = bufferize(module, donate=donate, function=signature.name)
    record("kernels", module)
    allocator, weight_bytes = None, 0
    if track_memory:
        from .memory_tracking import CountingAllocator, weight_bytes_of

        weight_bytes = weight_bytes_of(module)
    report = lower_to_llvm(module, record, track_memory=track_memory, threads=threads, schedules=schedules)
    engine = _create_engine(module, opt_level)
    if track_memory:
        allocator = CountingAllocator()
        allocator.bind(engine)  # before the first lookup materialises the code
    # The JIT materialises code at the first lookup; unresolved symbols are reported then, on fd 2.
    with capture_native_stderr() as jit_messages:
        found = engine.raw_lookup("_mlir_ciface_" + signature.name)
    if not found:
        detail = " ".join(m for m in jit_messages if m) or "no symbol was produced"
        raise VtmlirError(f"error: the LLVM JIT could not materialise @{signature.name}: {detail}")
    return CpuExecutable(engine, signature, stages, allocator=allocator, weight_bytes=weight_bytes,
                         result_arguments=result_arguments, donate=tuple(donate), kernel_report=report,
                         threads=threads)


def _create_engine(module: ir.Module, opt_level: int) -> ExecutionEngine:
    """The JIT for `module`; its diagnostics become the VtmlirError's message instead of stderr.
    A module with parallel loops gets LLVM's OpenMP runtime (`codegen.openmp`)."""
    from ...codegen.openmp import calls_openmp, openmp_library

    shared_libs = [openmp_library()] if calls_openmp(module) else []
    diagnostics: list[str] = []

    def handler(diag):
        diagnostics.append(format_diagnostic(diag))
        return True

    handle = module.context.attach_diagnostic_handler(handler)
    try:
        return ExecutionEngine(module, opt_level=opt_level, shared_libs=shared_libs)
    except Exception as err:  # the engine reports LLVM errors as RuntimeError
        detail = "\n".join(diagnostics) or str(err)
        raise VtmlirError(f"{detail}\nnote: while creating the LLVM JIT for the CPU") from None
    finally:
        handle.detach()


def print_ir(module: ir.Module) -> str:
    """IR text for inspection, with large constants elided so stages stay small."""
    return module.operation.get_asm(large_elements_limit=16, large_resource_limit=64)


def _memref_pointer(array: np.ndarray):
    if array.ndim == 0:
        # get_ranked_memref_descriptor wants rank ≥ 1; a 0-d memref is {allocated, aligned, offset}.
        class _ZeroD(ctypes.Structure):
            _fields_ = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_longlong)]

        desc = _ZeroD(array.ctypes.data, array.ctypes.data, 0)
        desc._keepalive = array
    else:
        desc = get_ranked_memref_descriptor(array)
    return ctypes.pointer(ctypes.pointer(desc))
