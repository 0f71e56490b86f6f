"""DVM kernels on the PTX VM (`gpu.vm_ptx`): the launch plan of a kernel, built on the host, and its
launch through the CUDA driver API (cuda-python, as `backend.cuda.runtime` launches the static
kernels).

A new shape is compiled exactly as for the CPU VM (the same templates fill the same bytecode,
`compile.compile_graph`); what changes is who runs the words. `LaunchPlan.of(kernel, launch)` reads
the kernel's header (tile count M, local bytes per tile, the arguments' dtypes and element counts,
`native.launch_header`) and evaluates the VM's launch (`gpu.VmLaunch`, read from the lowered IR) on
it: grid (M, 1, 1) -- one thread block per tile, Alg. 2's cores are the thread blocks -- block
(1, 1, 1), and the kernel's parameters: the code, a local memory of M · local bytes (one slice per
block) and the argument table (one memref<?xi8> descriptor of five words per argument, as the CPU
VM's table, with device addresses), each as a 1-d memref descriptor, and the scalars. Nothing of it
needs a device.

Runners (`DvmFunction(..., device=runner)` hands every kernel to one):
- `HostPlanRunner`: builds each kernel's plan and runs the plan's bytecode on the CPU native VM
  (`native.NativeVM.run_valid`): everything of a CUDA call short of the launch, checked without a
  GPU (the tests; `CudaDynamicExecutable.run_on_host`).
- `CudaPlanRunner`: loads the VM's cubin (ptxas for the device's arch; the PTX, JIT-compiled by the
  driver, where this ptxas does not know it) and launches each plan: per kernel (per shape) its
  code, argument table and argument buffers are allocated and uploaded once and kept
  (`_DeviceFrame`); a run uploads the inputs, launches, and reads the outputs back. Values between
  kernels and the glue stay on the host (numpy): every kernel's arguments cross the bus.

The PTX VM computes in f32 only (`native_mlir.GPU_ARITH_TYPES`; data movement, Cmp, Select and Cast
take every dtype): `gpu_unsupported_reason` names what else a kernel needs, and the runners refuse
it when it is admitted (at compile time for the example inputs' shape).
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field

import numpy as np

from ..backend.cuda.runtime import (check_cuda, cuda_available, cuda_driver, device_alloc, load_module,
                                     parameter_array, retain_primary_context, upload)
from ..errors import VtmlirError
from .gpu import VmLaunch
from .native import ARITH_OPS, launch_header, native_vm
from .native_mlir import GPU_ARITH_TYPES

#: words of one memref<?xi8> descriptor in the argument table: allocated, aligned, offset, size, stride
DESCRIPTOR_WORDS = 5


def gpu_unsupported_reason(kernel) -> str | None:
    """Why the PTX VM cannot run `kernel` (a `CompiledKernel`; None: it can): what the native CPU VM
    refuses, and arithmetic in another type than f32 (the PTX VM stamps its arithmetic for f32 only).
    Reads the decoded program (`CompiledKernel.program`, decoded once per kernel)."""
    reason = kernel.native_reason
    if reason is not None:
        return reason
    for ins in kernel.program.body:
        if ins.op in ARITH_OPS and ins.dtype not in GPU_ARITH_TYPES:
            return (f"{ins.op.name} on {ins.dtype.name} (the PTX VM computes in "
                    f"{'/'.join(t.name.lower() for t in GPU_ARITH_TYPES)} only)")
    return None


@dataclass(frozen=True)
class LaunchPlan:
    """One kernel's launch of the PTX VM, made on the host from its bytecode (`of`).

    `code` is the kernel's own bytecode (the words the CPU VM runs, not copied); `arguments` the
    header's (numpy dtype, element count) per argument, inputs then outputs; `params` one entry per
    parameter of the kernel's `llvm.func`: ``("ptr", buffer)`` with buffer "code", "local" or
    "table" (the argument table), or ``("i64", value)``."""

    code: np.ndarray = field(repr=False)
    tiles: int
    local_bytes: int
    arguments: tuple
    grid: tuple
    block: tuple
    params: tuple

    @classmethod
    def of(cls, kernel, launch: VmLaunch) -> LaunchPlan:
        tiles, local_bytes, descs, _ = launch_header(kernel.bytecode)
        grid, block, operands = launch.evaluate(tiles, local_bytes)
        if math.prod(grid) * math.prod(block) < tiles:
            raise VtmlirError(f"error: the DVM kernel's launch {grid} x {block} covers fewer than {tiles} tiles")
        sizes = {"code": kernel.bytecode.size, "local": tiles * local_bytes, "table": len(descs)}
        params = []
        for (kind, _), value in zip(launch.operands, operands):
            if kind == "memref":
                buffer = "table" if value == "args" else value
                params += [("ptr", buffer), ("ptr", buffer), ("i64", 0), ("i64", sizes[buffer]), ("i64", 1)]
            else:
                params.append(("i64", value))
        return cls(kernel.bytecode, tiles, local_bytes, tuple((np.dtype(d), n) for d, n in descs), grid, block,
                   tuple(params))

    @property
    def local_total(self) -> int:
        """Bytes of the local-memory buffer: one `local_bytes` slice per tile."""
        return self.tiles * self.local_bytes

    def table(self, addresses, nbytes) -> np.ndarray:
        """The argument table: per argument a memref<?xi8> descriptor (address, address, 0, bytes, 1)."""
        words = np.zeros(DESCRIPTOR_WORDS * len(self.arguments), dtype=np.int64)
        for j, (address, size) in enumerate(zip(addresses, nbytes)):
            words[DESCRIPTOR_WORDS * j:DESCRIPTOR_WORDS * (j + 1)] = (address, address, 0, size, 1)
        return words

    def check(self, flat: list) -> None:
        """`flat` (the VM's 1-d arguments, inputs then outputs) against the header, as the CPU VM
        checks its arguments (`NativeVM._launch`): count, dtype, enough elements, dense."""
        if len(flat) != len(self.arguments):
            raise VtmlirError(f"error: the DVM kernel takes {len(self.arguments)} arguments, got {len(flat)}")
        for i, (a, (dt, numel)) in enumerate(zip(flat, self.arguments)):
            if a.ndim != 1 or a.dtype != dt or a.size < numel or (a.size > 1 and a.strides[0] != a.itemsize):
                raise VtmlirError(f"error: argument {i} of the DVM kernel must be a dense 1-d {dt} array "
                                  f"of at least {numel} elements")


class PlanRunner:
    """What `DvmFunction(..., device=...)` hands kernels to: `admit` (may the kernel run here; its
    `LaunchPlan`, made once per kernel) and `run` (the kernel on numpy inputs: its outputs).
    Subclasses define `launch(plan, flat, outs)`."""

    target = "cuda"

    def __init__(self, launch: VmLaunch):
        self.launch_spec = launch
        self.plans: dict = {}  # id(kernel) -> (kernel, LaunchPlan); the kernel kept alive with it
        self.launches = 0

    def admit(self, kernel) -> None:
        """Refuse (`VtmlirError`) a kernel the PTX VM cannot run; make its plan."""
        if id(kernel) in self.plans:
            return
        reason = gpu_unsupported_reason(kernel)
        if reason is not None:
            raise VtmlirError(f"error: DVM's PTX VM cannot run kernel {kernel.graph.name}: {reason} "
                              "(target='cpu' runs it on the native VM)")
        self.plans[id(kernel)] = (kernel, LaunchPlan.of(kernel, self.launch_spec))

    def plan(self, kernel) -> LaunchPlan:
        entry = self.plans.get(id(kernel))
        if entry is None:
            self.admit(kernel)
            entry = self.plans[id(kernel)]
        return entry[1]

    def run(self, kernel, inputs) -> list:
        plan = self.plan(kernel)
        flat, outs = kernel.arguments(inputs)
        flat = [np.ascontiguousarray(a) for a in flat] + [o.reshape(-1) for o in outs]
        plan.check(flat)
        self.launch(kernel, plan, flat)
        self.launches += 1
        return outs

    def launch(self, kernel, plan: LaunchPlan, flat: list) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class HostPlanRunner(PlanRunner):
    """Runs each kernel's launch plan on the CPU native VM: the plan's own bytecode (`plan.code`,
    the words a GPU launch uploads) on one core. `ran` records (kernel, plan) per run."""

    def __init__(self, launch: VmLaunch):
        super().__init__(launch)
        self.ran: list = []

    def launch(self, kernel, plan: LaunchPlan, flat: list) -> None:
        native_vm().run_valid(plan.code, flat, cores=1)
        self.ran.append((kernel, plan))


class _DeviceFrame:
    """One kernel's device buffers (code, argument table, one per argument), allocated and the
    code and table uploaded once, and the parameter values of its launch except the local memory."""

    __slots__ = ("buffers", "arguments", "nbytes")

    def __init__(self, buffers: dict, arguments: list, nbytes: list):
        self.buffers, self.arguments, self.nbytes = buffers, arguments, nbytes


class CudaPlanRunner(PlanRunner):
    """Launches each kernel's plan on GPU 0 through the CUDA driver API (cuda-python). Made only
    where a device exists (`VtmlirError` otherwise). Not thread-safe: one call at a time."""

    def __init__(self, launch: VmLaunch, images: list[bytes]):
        if not cuda_available():
            raise VtmlirError("error: no CUDA device available (the CUDA driver did not load or reports no "
                              "device); the dynamic executable's PTX VM can be inspected (vm.ptx) and its "
                              "kernels run on the host (run_on_host) but not launched here")
        super().__init__(launch)
        driver = self.driver = cuda_driver()
        self.device, self.context = retain_primary_context()
        self.module = self.function = None
        errors = []
        for image in images:  # the cubin for the device, else the PTX (the driver JITs it)
            try:
                self.module = load_module(image, "loading the DVM VM kernel")
                break
            except VtmlirError as err:
                errors.append(str(err))
        if self.module is None:
            raise VtmlirError("; ".join(errors) or "error: no image of the DVM VM kernel to load")
        self.function = check_cuda(driver.cuModuleGetFunction(self.module, launch.function.encode()),
                                   f"looking up {launch.function}")
        self.frames: dict = {}  # id(kernel) -> _DeviceFrame (the kernel is kept alive in `plans`)
        self.local = None  # (device address, bytes): grown, shared by every launch (one at a time)

    def _frame(self, kernel, plan: LaunchPlan, flat: list) -> _DeviceFrame:
        frame = self.frames.get(id(kernel))
        if frame is None:
            nbytes = [a.nbytes for a in flat]
            arguments = [device_alloc(n) for n in nbytes]
            code = device_alloc(plan.code.nbytes)
            upload(code, plan.code)
            table_words = plan.table([int(a) for a in arguments], nbytes)
            table = device_alloc(table_words.nbytes)
            upload(table, table_words)
            frame = self.frames[id(kernel)] = _DeviceFrame({"code": code, "table": table}, arguments, nbytes)
        return frame

    def launch(self, kernel, plan: LaunchPlan, flat: list) -> None:
        driver, check = self.driver, check_cuda
        check(driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        frame = self._frame(kernel, plan, flat)
        if [a.nbytes for a in flat] != frame.nbytes:
            raise VtmlirError(f"error: kernel {kernel.graph.name}: arguments of {[a.nbytes for a in flat]} bytes, "
                              f"its device buffers hold {frame.nbytes}")
        if self.local is None or self.local[1] < plan.local_total:
            if self.local is not None:
                driver.cuMemFree(self.local[0])
            size = max(plan.local_total, 2 * (self.local[1] if self.local else 0), 1 << 20)
            self.local = (device_alloc(size), size)
        buffers = dict(frame.buffers, local=self.local[0])
        n_in = len(kernel.input_shapes)
        for address, a in zip(frame.arguments[:n_in], flat[:n_in]):
            upload(address, a)
        storage = [ctypes.c_void_p(int(buffers[v])) if kind == "ptr" else ctypes.c_int64(v) for kind, v in plan.params]
        pointers = parameter_array(storage)
        check(driver.cuLaunchKernel(self.function, *plan.grid, *plan.block, 0, 0, ctypes.addressof(pointers), 0),
              f"launching the DVM VM for kernel {kernel.graph.name}")
        check(driver.cuCtxSynchronize(), f"running the DVM VM for kernel {kernel.graph.name} (cuCtxSynchronize)")
        for address, o, n in zip(frame.arguments[n_in:], flat[n_in:], frame.nbytes[n_in:]):
            if n:
                check(driver.cuMemcpyDtoH(o.ctypes.data, address, n), "cuMemcpyDtoH")

    def close(self) -> None:
        driver = self.driver
        for frame in self.frames.values():
            for address in list(frame.buffers.values()) + frame.arguments:
                driver.cuMemFree(address)
        self.frames.clear()
        if self.local is not None:
            driver.cuMemFree(self.local[0])
            self.local = None
        if self.module is not None:
            driver.cuModuleUnload(self.module)
            self.module = None
        driver.cuDevicePrimaryCtxRelease(self.device)
