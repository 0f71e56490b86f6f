"""The compiled CPU function: JIT-compiled once, called with torch tensors or numpy arrays."""

from __future__ import annotations

import ctypes

import numpy as np
from torch_mlir import ir
from torch_mlir.execution_engine import ExecutionEngine

from ...codegen.openmp import calls_openmp, openmp_library
from ...errors import VtmlirError, capture_native_stderr, format_diagnostic
from ...frontend.torch_calls import call_compiled
from ...signature import Signature, to_numpy, to_torch
from ..bufferize import bufferize
from ..report import CompileReport
from .calling import DescriptorTable, ResultBuffers, descriptor_type
from .lower import lower_to_llvm
from .memory_tracking import CountingAllocator, MemoryStats, weight_bytes_of
from .profile import CpuProfile, ProfileBuffer, profile_calls


class CpuExecutable:
    """A function compiled for the host CPU.

    `stages` maps stage name → IR text (graph, kernels, loops, llvm); `signature` is the calling
    convention. Calling it returns what the module returns (`Signature.deliver`): a torch tensor or
    a Python number (one result), or a tuple of them.

    `workspace_bytes`: the size of the workspace that holds the intermediate buffers planned at compile
    time (`codegen-plan-workspace`; 0: none planned, every buffer malloc'd per call). Each thread that
    calls the executable gets its own at its first call and keeps it until the thread ends or the
    executable is freed; the JIT'd function takes it as its last argument.
    """

    target = "cpu"

    def __init__(self, engine: ExecutionEngine, signature: Signature, stages: dict[str, str], allocator=None,
                 weight_bytes: int = 0, result_arguments: list[int] | None = None, donate: tuple[int, ...] = (),
                 kernel_report=None, threads: int = 0, profile_slots: int | None = None):
        self._engine = engine
        self._kernel_report = kernel_report
        plan = getattr(kernel_report, "workspace", None)
        self._workspace = (plan.bytes, plan.alignment) if plan is not None and plan.bytes else None
        self.workspace_bytes = self._workspace[0] if self._workspace else 0
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
        self._descriptors: DescriptorTable | None = None
        self._out_buffers: ResultBuffers | None = None  # built with `_descriptors`
        self._dynamic_inputs = {i for i, spec in enumerate(signature.inputs) if not spec.is_static}
        self._fast: _FastCall | None = None  # built at the first call (imports torch)
        # Set by `vtmlir.compile`: what the default pipeline did (`optimize.OptimizationReport`).
        self.optimization = None
        # A profiling build (`compile(..., profile=True)`): the JIT'd module's timing slots.
        self._profile = ProfileBuffer(engine, profile_slots + 1) if profile_slots is not None else None

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
        fast = self._fast
        if fast is None:
            fast = self._fast = _FastCall(self)
        if fast.enabled:
            results = fast(args)
            if results is not None:
                return results
        return self._run_general(args)

    def _run_general(self, args) -> tuple:
        """Every case: inputs converted to C-contiguous numpy arrays and checked (`check_inputs`'s
        errors), donated inputs, memory tracking, dynamic input dimensions."""
        arrays = [to_numpy(a, i) for i, a in enumerate(args)]
        self.signature.check_inputs(arrays)
        for i in self.donate:
            # A donated buffer is written; it must not be (a view of) another input's memory.
            if any(j != i and np.may_share_memory(arrays[i], a) for j, a in enumerate(arrays)):
                arrays[i] = arrays[i].copy()
        table = self._table()
        out_params = self._out_buffers.arrays()
        words = table.words()
        for i, (a, o) in enumerate(zip(arrays + out_params, table.offsets)):
            words[o] = words[o + 1] = a.__array_interface__["data"][0]
            if i in self._dynamic_inputs:
                table.set_shape(words, i, a.shape)
        if self._allocator is not None:
            self._allocator.reset()
        table.call()
        if self._allocator is not None:
            self._last_stats = self._stats(arrays, out_params)
        fresh = iter(out_params)
        return self.signature.deliver([arrays[a] if a >= 0 else next(fresh) for a in self.result_arguments], args)

    def _table(self) -> DescriptorTable:
        """The descriptors of every call (inputs, then the results' out-parameters), built once;
        with them `_out_buffers`, where each call's out-parameters come from."""
        if self._descriptors is None:
            sig = self.signature
            outs = [s for s, a in zip(sig.results, self.result_arguments) if a < 0]
            shapes = [s.shape for s in sig.inputs] + [s.shape for s in outs]
            # the packed wrapper; `compile_cpu` looked it up once already (the JIT materialised it)
            address = self._engine.raw_lookup("_mlir_ciface_" + sig.name)
            self._out_buffers = ResultBuffers([(s.shape, s.numpy_dtype) for s in outs])
            self._descriptors = DescriptorTable(address, shapes, workspace=self._workspace)
        return self._descriptors

    def report(self):
        """`backend.report.CompileReport`: per step of the default pipeline what changed and its time, then
        each kernel's class and schedule and the kernels that kept scalar loops with the reason
        (`print(compiled.report())`; the `codegen.KernelReport`'s attributes read through it)."""
        return CompileReport(self.optimization, self._kernel_report)

    def profile(self, *args, repeat: int = 10, warmup: int = 1, clock: str = "wall", **kwargs) -> CpuProfile:
        """Per-kernel time of calls on these arguments (taken as `__call__` takes them): a `CpuProfile`
        with, per kernel of the report (`report().kernels`, same ids), the median over `repeat` calls
        (after `warmup` calls) of its time in ns, and the function's and the Python call's time;
        `print(p)` or `p.to_text()` is a table sorted by time. `clock`: "wall" (default) or "cpu"
        (the calling thread's CPU time: for a busy machine; its reads cost ~1 µs each). Needs a profiling build:
        `vtmlir.compile(..., profile=True)` (`backend.cpu.profile`, docs/codegen.md "Profiling")."""
        if self._profile is None:
            raise VtmlirError("error: this executable has no timing marks; compile with profile=True "
                              "(vtmlir.compile(..., profile=True)) to profile its kernels")
        return profile_calls(self, lambda: self(*args, **kwargs), self._kernel_report, self._profile,
                             repeat, warmup, clock)

    def memory_stats(self):
        """`MemoryStats` of the last call (needs `compile_cpu(..., track_memory=True)`)."""
        if self._allocator is None:
            raise VtmlirError("error: memory is not tracked; compile with track_memory=True")
        if self._last_stats is None:
            raise VtmlirError("error: no call has been measured yet; call the compiled function first")
        return self._last_stats

    def _stats(self, arrays, outputs):
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
                schedules=None, profile: bool = False, workspace: bool = True) -> CpuExecutable:
    """Bufferize, lower and JIT `module` (graph level, modified in place).

    `track_memory` (opt-in, slower allocations): count the bytes the function allocates per call;
    `CpuExecutable.memory_stats()` then reports them (`memory_tracking`). `donate`: argument indices
    the function may overwrite; a result that is such an argument updated is returned in its memory
    (`passes/argument_updates.py`). `threads`: 0 (all cores), 1 (no OpenMP) or N; `schedules`: overrides
    of the code generation schedules per kernel kind (`vtmlir.codegen.resolve_schedules`). `profile`:
    time every kernel (`CpuExecutable.profile`; the same code between the marks, see docs/codegen.md).
    `workspace`: the intermediate buffers of the function's body at static offsets of a per-thread
    workspace (`codegen-plan-workspace`, `CpuExecutable.workspace_bytes`); False: each malloc'd and
    freed per call. Never with `track_memory`, whose counting allocator sees every buffer.
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
        weight_bytes = weight_bytes_of(module)
    report = lower_to_llvm(module, record, track_memory=track_memory, threads=threads, schedules=schedules,
                           profile=profile, workspace=signature.name if workspace else None)
    engine = create_engine(module, opt_level)
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
                         threads=threads, profile_slots=len(report.kernels) if profile else None)


def create_engine(module: ir.Module, opt_level: int) -> ExecutionEngine:
    """The JIT for `module`; its diagnostics become the VtmlirError's message instead of stderr.
    A module with parallel loops gets LLVM's OpenMP runtime (`codegen.openmp`)."""
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


def memref_pointer(array: np.ndarray):
    """`ExecutionEngine.invoke`'s argument for a C-contiguous `array`: a pointer to a pointer to its
    descriptor (of the cached type for its rank; the descriptor keeps `array` alive)."""
    desc = descriptor_type(array.ndim)()
    desc.allocated = desc.aligned = array.__array_interface__["data"][0]
    if array.ndim:
        desc.shape[:] = list(array.shape)
        desc.strides[:] = [s // array.itemsize for s in array.strides]
    desc._keepalive = array
    return ctypes.pointer(ctypes.pointer(desc))


class _FastCall:
    """The common call, checked and run without conversions: CPU torch tensors (or numpy arrays)
    that are contiguous and of exactly the signature's dtypes and static shapes, no memory
    tracking. Results come from the executable's `ResultBuffers` (numpy arrays: torch wraps a
    small one faster than `torch.empty(shape, dtype=...)` makes one; a large one's memory is
    recycled once the caller has dropped it) and are returned as torch tensors; scalar results
    become Python numbers. A donated input (`compile(..., donate=...)`) must be a torch tensor of
    exactly its dtype that shares no memory with another input; the function updates it in place
    and a result it holds is returned as a new tensor on its memory (`detach()`), as the general
    path returns it. Anything else (a strided or conjugated view, another dtype or shape, a Python
    number, a wrong count, a donated input overlapping another, a written input whose result
    bufferization could not compute in place) returns None or is not enabled, and takes
    `CpuExecutable._run_general`, which converts, copies or raises the usual errors."""

    def __init__(self, exe: CpuExecutable):
        import torch  # deferred: torch is heavy; loaded on first use

        sig = exe.signature
        held = exe.result_arguments  # per result: the donated input that holds it, or -1
        # a written input whose new value is not in its own memory needs `Signature.deliver`'s copy
        self.enabled = (exe._allocator is None and not exe._dynamic_inputs
                        and all(w < 0 or a == w for w, a in zip(sig.writes, held)))
        self._table = table = exe._table()
        self._tensor = torch.Tensor
        self._function = table.function
        donated = set(exe.donate)
        # per input: descriptor offset, torch dtype, the other torch dtype it takes (signless i8
        # takes uint8; a donated input only its own), shape, spec, complex (only a complex tensor
        # can be a conjugated view), donated
        self._inputs = []
        for i, (spec, o) in enumerate(zip(sig.inputs, table.offsets)):
            dt = to_torch(np.zeros(0, spec.numpy_dtype)).dtype
            alt = torch.uint8 if spec.element_type == "i8" and i not in donated else dt
            self._inputs.append((o, dt, alt, spec.shape, spec, dt.is_complex, i in donated))
        self._count = len(sig.inputs)
        self._donated = sorted(donated)
        # per out-parameter (the results no donated input holds, in result order): descriptor
        # offset, how torch wraps its array (bf16 through its bits)
        outs = [r for r, a in enumerate(held) if a < 0]
        self._outputs = [(o, to_torch if sig.results[r].element_type == "bf16" else torch.from_numpy,
                          sig.results[r].shape, sig.results[r].numpy_dtype)
                         for o, r in zip(table.offsets[self._count:], outs)]
        # where each call's result arrays come from; None: all small, `np.empty` here (the call on
        # a tiny function is a few µs, a method call a tenth of that)
        self._buffers = exe._out_buffers.arrays if exe._out_buffers.recycles else None
        # per returned result (`Signature.deliver`): its out-parameter's index, or -1 - the index
        # of the donated input that holds it; whether it is a scalar
        slot = {r: k for k, r in enumerate(outs)}
        self._returned = [(slot[r] if held[r] < 0 else -1 - held[r], spec.scalar)
                          for r, (spec, w) in enumerate(zip(sig.results, sig.writes)) if w == -1]
        only = self._returned[0] if len(self._returned) == 1 else None
        self._single = only[0] if only is not None and only[0] >= 0 and not only[1] else None

    def __call__(self, args):
        if len(args) != self._count:
            return None
        words, packed = self._table.state()
        tensor = self._tensor
        for a, (o, dt, alt, shape, spec, cplx, donated) in zip(args, self._inputs):
            if isinstance(a, tensor):
                d = a.dtype
                if not ((d is dt or d is alt) and a.shape == shape and a.is_cpu and a.is_contiguous()
                        and not a.is_neg() and not (cplx and a.is_conj())):
                    return None
                words[o] = words[o + 1] = a.data_ptr()
            elif type(a) is np.ndarray and not donated:
                if not (a.shape == shape and spec.accepts(a.dtype) and a.flags.c_contiguous):
                    return None
                words[o] = words[o + 1] = a.__array_interface__["data"][0]
            else:
                return None
        if self._donated and self._overlapping(args, words):
            return None  # the general path copies the donated input first
        tensors = []
        if self._buffers is None:
            arrays = []
            for o, wrap, shape, dt in self._outputs:
                a = np.empty(shape, dt)
                t = wrap(a)
                words[o] = words[o + 1] = t.data_ptr()
                arrays.append(a)
                tensors.append(t)
        else:
            arrays = self._buffers()
            for (o, wrap, _, _), a in zip(self._outputs, arrays):
                t = wrap(a)
                words[o] = words[o + 1] = t.data_ptr()
                tensors.append(t)
        self._function(packed)
        # the arguments stay referenced by the caller for the whole call, the results here
        if self._single is not None:
            return (tensors[self._single],)
        return tuple([(arrays[k].item() if scalar else tensors[k]) if k >= 0 else
                      (args[-1 - k].item() if scalar else args[-1 - k].detach())
                      for k, scalar in self._returned])

    def _overlapping(self, args, words) -> bool:
        """Whether a donated input's bytes overlap another input's (`np.may_share_memory`'s bounds
        test on the pointers just written): the function would write memory the other one reads."""
        spans = [(words[o], words[o] + a.nbytes) for a, (o, *_) in zip(args, self._inputs)]
        for i in self._donated:
            start, end = spans[i]
            if end > start and any(j != i and s < end and start < e and e > s for j, (s, e) in enumerate(spans)):
                return True
        return False
