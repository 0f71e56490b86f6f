"""`vtmlir.compile(..., dynamic_shapes=...)`: one callable for every shape in the declared ranges.

The graph imported with torch.export `Dim`s keeps `?` dims and the symbol table of their ranges
(docs/dvm.md, "Dynamic import"); `DynamicExecutable` runs it through DVM (`dvm.runner.DvmFunction`,
the native VM compiled once through MLIR): a new shape costs the per-structure template fill, never a
recompile; from a shape's second call on, its kernels run as one native call on the tensors' own
memory (`dvm.replay`). Where the ranges span at most `PREBUILD_POINTS` shapes, every template is built ahead of
time (`DvmFunction.prebuild`). The static path (`CpuExecutable`) is taken where no dim is dynamic.

`CudaDynamicExecutable` (target="cuda") fills the same templates on the host and hands each kernel's
bytecode to DVM's PTX VM (`dvm.gpu.vm_ptx`, one kernel compiled once per chip; `dvm.gpu_runtime`):
one thread block per tile, launched through cuda-python. Compiling needs no GPU (the VM's PTX is
assembled with ptxas for the chip); calling does.
"""

from __future__ import annotations

import math
import os
import pickle
import threading
import time

import numpy as np
from torch_mlir import ir

from .backend.cuda.ptx import check_chip
from .backend.cuda.runtime import cuda_available, device_arch
from .backend.report import CompileReport
from .dvm.gpu import vm_ptx
from .dvm.gpu_runtime import CudaPlanRunner, HostPlanRunner
from .dvm.runner import DvmFunction
from .dvm.tiling import Target
from .errors import VtmlirError
from .frontend import as_module
from .frontend.torch_calls import call_compiled
from .signature import find_entry

# Shape spaces up to this many points are prebuilt at compile time (DVM's `prebuild`).
PREBUILD_POINTS = 64
#: thread blocks DVM's tiling spreads a kernel over on CUDA (Alg. 1's N, the cost model's cores):
#: of the order of an A100's / H100's SM count (108 / 132); `threads=` overrides it
CUDA_CORES = 128


class DynamicExecutable:
    """A function compiled for dynamic shapes, run by DVM's native VM on the CPU."""

    target = "cpu"

    def __init__(self, graph, entry: str, prebuild: bool | None = None, example=None, threads: int = 0):
        start = time.perf_counter()
        self._setup(graph, entry, prebuild, threads)
        if example is not None:
            self.run(*example)  # the first call JIT-compiles the native VM: at compile time, not the user's
        self.compile_seconds = time.perf_counter() - start

    def _setup(self, graph, entry: str, prebuild: bool | None, threads: int, device=None,
               cores: int | None = None) -> None:
        """The function as DVM kernels (`DvmFunction`), prebuilt where the ranges are small."""
        self.graph = graph  # the function's values live in its context
        # `threads` (0: every core) are Alg. 2's cores: the tiling's cost model and the VM's workers
        target = Target(cores=threads or cores or max(1, os.cpu_count() or 1))
        self.function = DvmFunction(graph, entry, native=device is None, target=target, device=device)
        self.call_spec = None
        self.optimization = None
        self.stages: dict[str, str] = {}
        self.prebuilt = None
        self._replayed: dict = {}  # argument shapes -> _TensorReplay, once `function.replays` has one
        ranges = self.function.symbols.symbols
        points = math.prod(hi - lo + 1 for lo, hi, _ in ranges.values()) if ranges else 0
        if prebuild or (prebuild is None and 0 < points <= PREBUILD_POINTS):
            self.prebuilt = self.function.prebuild(limit=max(points, 1))

    @property
    def symbols(self) -> dict:
        """Shape symbol -> (min, max, the user's Dim name)."""
        return dict(self.function.symbols.symbols)

    def __call__(self, *args, **kwargs):
        return call_compiled(self, args, kwargs)

    def run(self, *args) -> tuple:
        key = tuple([getattr(a, "shape", None) for a in args])
        call = self._replayed.get(key)
        if call is None:
            replay = self.function.replays.get(key)
            if replay:  # recorded (a shape's second call): from now on run without conversions
                call = self._replayed[key] = _TensorReplay(replay)
        if call is not None:
            results = call(args)
            if results is not None:
                return results
        import torch  # deferred: torch is heavy; loaded on first use

        arrays = [a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a) for a in args]
        arrays = [np.ascontiguousarray(a) for a in arrays]
        return tuple(torch.from_numpy(np.ascontiguousarray(r)) for r in self.function(*arrays))

    def _runs_on(self) -> str:
        return f"target cpu: DVM's native VM, {self.function.target.cores} core(s)"

    def report(self):
        """`backend.report.CompileReport` with DVM's part: symbols, kernels, templates, compile times."""
        f = self.function
        lines = [f"dvm (dynamic shapes): {len(f.kernels)} kernel(s); symbols "
                 + ", ".join(f"{name}{'=' + n if n else ''} in [{lo}, {hi}]" for name, (lo, hi, n) in self.symbols.items()),
                 f"  templates {f.template_count()}, per-shape compile {f.compile_seconds * 1e3:.2f} ms so far, "
                 f"setup {self.compile_seconds:.2f} s"]
        if self.prebuilt is not None:
            p = self.prebuilt
            lines.append(f"  prebuilt: {p['points']} shape(s), {p['templates']} template(s) in {p['seconds']:.2f} s")
        lines.append("  " + self._runs_on())
        return CompileReport(self.optimization, extra="\n".join(lines))


class CudaDynamicExecutable(DynamicExecutable):
    """A function compiled for dynamic shapes, run by DVM's PTX VM on GPU 0.

    Per new shape DVM fills its templates on the host exactly as for the CPU VM (the same bytecode);
    each kernel's launch plan (`dvm.gpu_runtime.LaunchPlan`: grid = tile count, one thread block per
    tile, Alg. 2) and its device buffers are made once per shape and kept; a call uploads each
    kernel's inputs, launches the VM and reads its outputs back (the glue between kernels runs on
    the host, numpy). Inputs and results are CPU tensors, as `CudaExecutable` takes and returns.

    Compiling needs no GPU: the VM is lowered to PTX for `chip` and assembled with ptxas
    (`cubin`), every template is built as on the CPU (`prebuild`), and the example inputs' kernels
    are compiled and admitted (a kernel the PTX VM cannot run is refused here). Calling it without
    a CUDA device raises `VtmlirError`; `run_on_host` runs every kernel's launch plan on the CPU
    native VM instead (what a launch would run, checked without a GPU). One call at a time."""

    target = "cuda"

    def __init__(self, graph, entry: str, chip: str = "sm_80", prebuild: bool | None = None, example=None,
                 threads: int = 0, vm=None, cubin: bytes | None = None):
        check_chip(chip)
        start = time.perf_counter()
        self.chip = chip
        # the VM as one PTX kernel (once per process and chip; `load` passes the saved one)
        self.vm = vm if vm is not None else vm_ptx(chip)
        # ptxas for the chip: refuses PTX the chip cannot run
        self.cubin = cubin if cubin is not None else self.vm.assemble(chip)
        self.entry = entry
        self.host = HostPlanRunner(self.vm.launch)
        self._device = None  # `gpu_runtime.CudaPlanRunner`, made at the first call
        self._setup(graph, entry, prebuild, threads, device=self.host, cores=CUDA_CORES)
        if example is not None:
            import torch  # deferred: torch is heavy; loaded on first use

            self.function.admit_shape(*[a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
                                        for a in example])
        self.compile_seconds = time.perf_counter() - start

    def save(self, path) -> None:
        """Write what `load_dynamic` needs to make this executable again on a machine with a GPU but
        without the compiler's PTX tools (llvmlite, the nvcc wheel): the function's IR (the
        graph-level module with its shape symbols), the VM's PTX, launch and cubin, the chip and the
        tiling's block count. The templates are built again there (`prebuild` as here). A pickle:
        load only files you wrote."""
        vm = type(self.vm)(self.vm.chip, self.vm.kernel, self.vm.ptx, {}, self.vm.launch)  # no stage IR
        state = {"mlir": self.graph.operation.get_asm(), "entry": self.entry, "chip": self.chip, "vm": vm,
                 "cubin": self.cubin, "cores": self.function.target.cores, "prebuild": self.prebuilt is not None}
        with open(path, "wb") as f:
            pickle.dump((_SAVED_DYNAMIC, state), f, protocol=pickle.HIGHEST_PROTOCOL)

    def device(self):
        """The PTX VM loaded on GPU 0 (`gpu_runtime.CudaPlanRunner`), made at the first call: the
        cubin assembled for the device's own arch (a cubin runs on its major arch only), else the
        PTX for the driver to JIT. `VtmlirError` without a CUDA device."""
        if self._device is None:
            if not cuda_available():
                raise VtmlirError("error: no CUDA device available (no driver or no GPU); the dynamic CUDA "
                                  "executable can be inspected (vm.ptx, report()) and its kernels run on the "
                                  "host (run_on_host) but not launched here")
            images = [self.vm.ptx.encode()]
            try:
                images.insert(0, self.cubin if device_arch() == self.chip else self.vm.assemble(device_arch()))
            except VtmlirError:
                pass  # this ptxas does not know the device's arch: the driver JITs the PTX
            self._device = CudaPlanRunner(self.vm.launch, images)
        return self._device

    def run(self, *args) -> tuple:
        return self._run(self.device(), args)

    def run_on_host(self, *args) -> tuple:
        """`run` with every kernel's launch plan run on the CPU native VM instead of launched: the
        same bytecode, tile count and argument table a launch uses (`host.ran` records them)."""
        return self._run(self.host, args)

    def _run(self, device, args) -> tuple:
        import torch  # deferred: torch is heavy; loaded on first use

        self.function.device = device
        arrays = [np.ascontiguousarray(a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a))
                  for a in args]
        return tuple(torch.from_numpy(np.ascontiguousarray(r)) for r in self.function(*arrays))

    def _runs_on(self) -> str:
        device = self._device
        launches = (device.launches if device is not None else 0)
        return (f"target cuda (chip {self.chip}): DVM's PTX VM, kernel {self.vm.kernel} (one thread block per "
                f"tile; tiling for {self.function.target.cores} blocks); {launches} launch(es) on the device, "
                f"{self.host.launches} kernel run(s) on the host so far")


class _TensorReplay:
    """A recorded shape (`dvm.replay.ShapeReplay`) run on torch tensors without converting them:
    CPU, contiguous, of the recorded dtypes, not negated or conjugated views (`CpuExecutable`'s
    fast call takes the same), on the recording thread; the results are fresh tensors (a large
    one's memory recycled once the caller has dropped it, `ShapeReplay.buffers`). Calling it
    returns None for anything else. Everything a call does not need to look up again is read once
    here: the steady state of a dynamic compile is this call and one native one."""

    __slots__ = ("run", "owner", "inputs", "arrays", "returned", "tensor", "wrap")

    def __init__(self, replay):
        import torch  # deferred: torch is heavy; made at a replayed call, when it is loaded

        self.run, self.owner = replay.run, replay.owner
        self.inputs = [torch.from_numpy(np.empty(0, d)).dtype for d in replay.dtypes]
        self.arrays = replay.buffers.arrays
        self.returned = replay.returned
        self.tensor, self.wrap = torch.Tensor, torch.from_numpy

    def __call__(self, args):
        if threading.get_ident() != self.owner:
            return None
        pointers = []
        tensor = self.tensor
        for a, dt in zip(args, self.inputs):
            if type(a) is not tensor or a.dtype is not dt or not a.is_cpu or not a.is_contiguous() or a.is_neg() \
                    or a.is_conj():
                return None
            pointers.append(a.data_ptr())
        wrap, outs = self.wrap, []
        for a in self.arrays():
            t = wrap(a)
            pointers.append(t.data_ptr())
            outs.append(t)
        self.run(pointers)
        return tuple([outs[r] for r in self.returned])


def has_dynamic_dims(graph, entry: str | None) -> bool:
    """Whether the entry function takes or returns a tensor with a `?` dim."""
    func = find_entry(graph, entry)
    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    for t in [*ftype.inputs, *ftype.results]:
        t = t.maybe_downcast() if hasattr(t, "maybe_downcast") else t
        if isinstance(t, ir.RankedTensorType) and any(ir.ShapedType.is_dynamic_size(d) for d in t.shape):
            return True
    return False


#: Version of `CudaDynamicExecutable.save`'s file; `load_dynamic` refuses others.
_SAVED_DYNAMIC = "vtmlir-cuda-dynamic/1"


def load_dynamic(path) -> CudaDynamicExecutable:
    """A `CudaDynamicExecutable` written by `CudaDynamicExecutable.save` (a pickle: load only files
    you wrote). Takes and returns flat tensors (the module's call structure is not saved)."""
    try:
        with open(path, "rb") as f:
            saved = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as err:
        raise VtmlirError(f"error: {path}: not a saved dynamic CUDA executable ({err})") from None
    if not (isinstance(saved, tuple) and len(saved) == 2 and saved[0] == _SAVED_DYNAMIC):
        raise VtmlirError(f"error: {path}: not a saved dynamic CUDA executable of this vtmlir version "
                          f"(format {_SAVED_DYNAMIC})")
    state = saved[1]
    graph = as_module(state["mlir"])
    return CudaDynamicExecutable(graph, state["entry"], chip=state["chip"], prebuild=state["prebuild"],
                                 threads=state["cores"], vm=state["vm"], cubin=state["cubin"])


def dynamic_executable(graph, entry: str, target: str, *, chip: str, prebuild, example, threads: int):
    """The dynamic-shape executable for `target`: DVM's native VM on the CPU, its PTX VM on CUDA."""
    if target == "cuda":
        return CudaDynamicExecutable(graph, entry, chip=chip, prebuild=prebuild, example=example, threads=threads)
    if target != "cpu":
        raise VtmlirError(f"error: dynamic shapes run on target 'cpu' or 'cuda', got '{target}'")
    return DynamicExecutable(graph, entry, prebuild=prebuild, example=example, threads=threads)
