"""CUDA backend: graph-level module → NVVM kernels → PTX (+ launch configurations and a host program).

    exe = compile_cuda(module, chip="sm_80")
    exe.kernels            # [CudaKernel(name, function, ptx, grid, block, iteration_space, llvm_ir)]
    exe.ptx                # {kernel name: PTX text}
    exe.stages             # {stage name: IR text after it}: "bufferize", then the GPU lowering stages
    exe.host_program       # HostProgram: allocate / upload constant / launch steps, printable
    exe.assemble("sm_90")  # {kernel name: cubin bytes}; raises VtmlirError with ptxas's message
    exe.save(path); load(path)   # compile here, run on a GPU machine
    exe.profile(*tensors)  # device time of the kernels (CUDA events), whole sequence and per kernel
    exe.report()           # per kernel: schedule, launch, ptxas -v resources, occupancy, roofline estimate
    exe(*tensors)          # runs on GPU 0 (cuda-python driver API; cubins assembled for that GPU's
                           # arch); VtmlirError("no CUDA device available ...") without one
    exe.cuda_graph         # True: a call replays its launches as one CUDA graph (runtime.py)

Pipeline (see `lower.py`, `ptx.py`, `host.py`, `runtime.py`): bufferize (a copy of the input module:
the caller's module is never modified) → `lower_to_nvvm` (named stages) → per `gpu.module` LLVM IR and
PTX in a subprocess (a crash of the LLVM translation cannot kill the caller) → `build_host_program`.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field

import numpy as np

from ...codegen import override_items
from ...codegen.gpu.schedules import resolve_gpu_schedules
from ...errors import VtmlirError
from ...frontend import as_module
from ...frontend.torch_calls import call_compiled
from ...signature import Signature, box_scalars, find_entry, signature_of, to_numpy
from ..bufferize import bufferize
from ..report import CompileReport
from .host import HostProgram, Launch, build_host_program
from .lower import DEFAULT_STAGES, GpuLowering, GpuStage, ScheduleFailure, lower_to_nvvm
from .ptx import check_chip, kernel_sources, translate_kernels
from .ptxas import assemble, find_ptxas
from .report import GpuReport, gpu_report
from .runtime import CudaRuntime, cuda_available, device_arch

__all__ = [
    "CudaExecutable", "CudaKernel", "DEFAULT_STAGES", "GpuStage", "HostProgram", "assemble",
    "compile_cuda", "cuda_available", "find_ptxas", "load", "lower_to_nvvm",
]

#: Version of `CudaExecutable.save`'s file; `load` refuses others (the classes inside may differ).
_SAVED_FORMAT = "vtmlir-cuda-executable/1"


@dataclass
class CudaKernel:
    """One kernel: `name` is its gpu.module symbol (unique), `function` the entry inside the PTX.

    `iteration_space` holds the trip counts of the parallel loop nest it came from; the first three
    dimensions are spread over grid × block, the rest are loops inside each thread.
    """

    name: str
    function: str
    ptx: str = field(repr=False)
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    iteration_space: tuple = ()
    llvm_ir: str = field(default="", repr=False)
    plan: object = field(default=None, repr=False)   # codegen.gpu GpuKernelPlan (None: not traced)
    scheduled: bool = False                          # made by a GPU schedule (else the naive mapping)

    @property
    def schedule(self) -> str:
        """The GPU schedule that made this kernel ("mma-sync", "simt", "vector", "warp-reduction"),
        or "naive" (one thread per element of the parallel loops)."""
        if self.scheduled and self.plan is not None:
            return self.plan.schedule
        return "naive"

    @property
    def threads(self) -> int:
        return int(np.prod(self.grid)) * int(np.prod(self.block))


class CudaExecutable:
    """A module compiled for CUDA: kernels with PTX and launch configurations, the host program."""

    target = "cuda"

    def __init__(self, kernels: list[CudaKernel], host_program: HostProgram, stages: dict[str, str],
                 chip: str, signature: Signature, cuda_graph: bool = True):
        self.signature = signature
        # Whether the runtime (made on the first call) replays the launches as one CUDA graph;
        # set before that call to take effect (`runtime().use_graph` switches a made runtime).
        self.cuda_graph = cuda_graph
        self.kernels = kernels
        self.host_program = host_program
        self.stages = stages
        self.chip = chip
        self._cubins: dict[str, dict[str, bytes]] = {}
        self._runtime = None
        self._report = None
        self.call_spec = None  # as CpuExecutable.call_spec
        self.optimization = None  # as CpuExecutable.optimization

    @property
    def ptx(self) -> dict[str, str]:
        return {k.name: k.ptx for k in self.kernels}

    def assemble(self, arch: str | None = None) -> dict[str, bytes]:
        """Assemble every kernel with ptxas for `arch` (default: the chip compiled for) → cubins."""
        arch = arch or self.chip
        if arch not in self._cubins:
            self._cubins[arch] = {k.name: assemble(k.ptx, arch, k.name) for k in self.kernels}
        return self._cubins[arch]

    def report(self):
        """`backend.report.CompileReport`: what the default pipeline did, then the kernel report
        (`report.GpuReport`, whose attributes read through it): per kernel its schedule, launch shape,
        registers, shared memory and spills from `ptxas -v` on sm_80 and sm_90, occupancy, bytes,
        flops and an H100 roofline estimate (`print(compiled.report())`)."""
        if self._report is None:
            self._report = gpu_report(self)
        return CompileReport(self.optimization, GpuReport(self._report.chip, self._report.kernels,
                                                          self.launch_mode()))

    def launch_mode(self) -> str:
        """How a call launches the kernels: one CUDA graph (`cuda_graph`, the default), or one
        cuLaunchKernel each and why (turned off, or the graph call that failed on this driver)."""
        runtime = self._runtime
        if runtime is not None:
            return runtime.launch_mode
        if not self.host_program.launches():
            return "no kernels to launch"
        if getattr(self, "cuda_graph", True):
            return (f"one CUDA graph of {len(self.host_program.launches())} kernel nodes per call, built when "
                    "the executable first runs (per-kernel launches where the driver cannot make it)")
        return f"{len(self.host_program.launches())} cuLaunchKernel per call (cuda_graph=False)"

    def __call__(self, *args, **kwargs):
        """Run on GPU 0 with torch tensors or numpy arrays. Compiled from an `nn.Module` (`call_spec`),
        take and return what the module does; otherwise return a torch tensor (or a Python number
        for a scalar result) or a tuple of them."""
        return call_compiled(self, args, kwargs)

    def run(self, *inputs) -> tuple:
        """Run the compiled function on its flat tensor arguments; what it returns as a tuple
        (`Signature.deliver`)."""
        arrays = [to_numpy(x, i) for i, x in enumerate(inputs)]
        self.signature.check_inputs(arrays)
        return self.signature.deliver(self.runtime().run(arrays), inputs)

    def profile(self, *inputs, repeat: int = 20) -> dict:
        """Device time of the compiled kernels on these flat tensor arguments (CUDA events; the inputs
        are uploaded once and not timed): `total_s` for the whole launch sequence as a call runs it
        (one CUDA graph where there is one), `graph_total_s` and `launches_total_s` for the graph and
        the per-kernel launches, `kernels` as (kernel name, seconds) per launch in order. See
        `runtime.CudaRuntime.profile`."""
        arrays = [to_numpy(x, i) for i, x in enumerate(inputs)]
        self.signature.check_inputs(arrays)
        return self.runtime().profile(arrays, repeat)

    def save(self, path) -> None:
        """Write this executable (PTX, launch configurations, host program with its constants, calling
        convention, kernel plans) to `path`, to run it with `vtmlir.backend.cuda.load` on a machine
        with a GPU, where the compiler's own dependencies (llvmlite, the nvcc wheel) are not needed.
        The file is a pickle: load only files you wrote."""
        with open(path, "wb") as f:
            pickle.dump((_SAVED_FORMAT, self), f, protocol=pickle.HIGHEST_PROTOCOL)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_runtime"] = None   # device handles do not outlive the process
        return state

    def runtime(self):
        """The loaded kernels and resident buffers on GPU 0 (`runtime.CudaRuntime`), made on first use."""
        if self._runtime is None:
            if not cuda_available():
                raise VtmlirError("error: no CUDA device available (no driver or no GPU); the CUDA "
                                  "executable can be inspected (ptx, host_program) but not run here")

            # A cubin runs only on its own major architecture (sm_80 code does not load on sm_90), so
            # assemble for the device itself; if this ptxas does not know it, the driver JITs the PTX.
            functions = {k.name: k.function for k in self.kernels}
            ptx = {k.name: k.ptx.encode() for k in self.kernels}
            cuda_graph = getattr(self, "cuda_graph", True)   # executables saved before the option: True
            arch = device_arch()
            if self.chip == arch + "a":  # PTX for sm_90a's own features assembles only for sm_90a
                arch = self.chip
            try:
                images = self.assemble(arch)
            except VtmlirError:
                images = ptx
            try:
                self._runtime = CudaRuntime(self.host_program, images, functions, cuda_graph)
            except VtmlirError:
                if images is ptx:
                    raise
                # A cubin from a newer ptxas than the driver knows (a saved executable on another
                # machine): let the driver compile the PTX instead.
                self._runtime = CudaRuntime(self.host_program, ptx, functions, cuda_graph)
        return self._runtime

    def __repr__(self):
        return f"CudaExecutable({len(self.kernels)} kernels for {self.chip})"


def load(path) -> CudaExecutable:
    """A `CudaExecutable` written by `CudaExecutable.save` (a pickle: load only files you wrote)."""
    try:
        with open(path, "rb") as f:
            saved = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as err:
        raise VtmlirError(f"error: {path}: not a saved CUDA executable ({err})") from None
    if not (isinstance(saved, tuple) and len(saved) == 2 and saved[0] == _SAVED_FORMAT
            and isinstance(saved[1], CudaExecutable)):
        raise VtmlirError(f"error: {path}: not a saved CUDA executable of this vtmlir version "
                          f"(format {_SAVED_FORMAT})")
    return saved[1]


def compile_cuda(module, chip: str = "sm_80", stages: tuple[GpuStage, ...] = DEFAULT_STAGES,
                 function: str = "main", donate: tuple[int, ...] = (), schedules=None,
                 signature: Signature | None = None, allow_tf32: bool = False,
                 cuda_graph: bool = True) -> CudaExecutable:
    """Compile a graph-level (linalg-on-tensors) module, `.mlir` text or path for CUDA.

    The input is cloned before bufferization; the caller's module is left as it was. Static shapes only.
    `donate`: arguments whose device buffer a result may be updated in (`passes/argument_updates.py`):
    the result is read back from that buffer, the buffer exists once on the device (the caller's host
    array is uploaded, never written). `schedules`: overrides of the GPU schedules per kernel kind
    (`vtmlir.codegen.gpu.DEFAULT_GPU_SCHEDULES`; None for a kind: the naive mapping). `signature`:
    the calling convention when the caller read it before (`vtmlir.compile`), else it is read from
    the module. `allow_tf32`: f32 contractions on TF32 tensor cores (the contraction schedule's
    `allow_tf32`, set before the `schedules` overrides, which may set it otherwise). `cuda_graph`:
    a call replays its kernel launches as one CUDA graph (True) or launches each kernel (False).
    """
    check_chip(chip)
    items = override_items(schedules, resolve=resolve_gpu_schedules)
    if allow_tf32:
        # First, so that a `schedules=` item for the contraction (its own allow_tf32, or
        # "contraction:none") takes precedence.
        items = ["contraction.allow_tf32:true", *items]
    source = as_module(module)
    signature = signature or signature_of(find_entry(source, function))
    exclude: list[int] = []
    unfused: list[int] = []
    while True:
        work = as_module(source.operation.get_asm(enable_debug_info=True), context=source.context)
        box_scalars(find_entry(work, function))
        recorded: dict[str, str] = {}
        result_arguments = bufferize(work, donate=donate, function=function)
        num_outputs = len(signature.results) if result_arguments is None else result_arguments.count(-1)
        recorded["bufferize"] = work.operation.get_asm(large_elements_limit=16, large_resource_limit=64)
        try:
            lowering: GpuLowering = lower_to_nvvm(work, chip=chip, stages=stages, schedules=items, exclude=exclude,
                                                  unfused=unfused)
        except ScheduleFailure as failure:
            # Compile again: a contraction that ran its fill and epilogue in its tiles without them,
            # else (or where that failed too: a row group's leader is fused but not a contraction)
            # the kernel keeps the naive mapping (the report says its schedule failed). Each kernel
            # is retried at most twice: a failure of an excluded kernel is raised (lower_to_nvvm).
            if failure.fused and failure.kernel not in unfused:
                unfused.append(failure.kernel)
            else:
                exclude.append(failure.kernel)
            continue
        break
    recorded.update(lowering.stages)
    program = build_host_program(work, num_outputs, function, result_arguments)

    sources = {s.module_name: s for s in kernel_sources(work)}
    translated = translate_kernels([(name, s.mlir) for name, s in sources.items()], chip=chip)
    launches: list[Launch] = program.launches()
    origins = lowering.launches if len(lowering.launches) == len(launches) else [None] * len(launches)
    plans = {plan.id: plan for plan in lowering.plans}
    kernels = []
    for launch, origin in zip(launches, origins):
        out = translated[launch.kernel]
        plan = plans.get(origin.kernel) if origin is not None else None
        kernels.append(CudaKernel(launch.kernel, launch.function, out["ptx"], launch.grid, launch.block,
                                  origin.iteration_space if origin is not None else (), out["llvm_ir"], plan,
                                  bool(origin is not None and origin.scheduled)))
    unused = set(sources) - {k.name for k in kernels}
    if unused:
        raise VtmlirError(f"error: kernel(s) {', '.join(sorted(unused))} are never launched by @{function}")
    executable = CudaExecutable(kernels, program, recorded, chip, signature, cuda_graph)
    executable.plans = lowering.plans
    return executable
