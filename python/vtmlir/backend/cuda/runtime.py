"""Running a `HostProgram` on an NVIDIA GPU through the CUDA driver API (cuda-python).

Only the driver API is used (no CUDA runtime, no toolkit): `cuInit`, a primary context, one
`cuModuleLoadData` per kernel (the cubin from ptxas when given, else the PTX, which the driver JITs),
`cuMemAlloc` per buffer, `cuMemcpyHtoD`/`DtoH`, `cuLaunchKernel` with one pointer per parameter of the
kernel's `llvm.func`. On a machine without a driver or a device, `cuda_available()` is False and
`CudaRuntime` raises a `VtmlirError`; nothing here runs at import time.

The kernel sequence of a call is one CUDA graph (`CudaRuntime`, `cuda_graph=True`, the default): every
pointer and size a launch passes is fixed when the runtime is made (the buffers are allocated once),
so the launches are built once into a graph of kernel nodes, chained in program order
(`cuGraphCreate`, `cuGraphAddKernelNode` per launch with the previous node as its one dependency,
`cuGraphInstantiate`), and a call replays it with one `cuGraphLaunch` on the stream the per-kernel
launches use (the legacy default stream, 0). Built explicitly rather than by stream capture
(`cuStreamBeginCapture` ... `cuStreamEndCapture`, torch.cuda.CUDAGraph's way): the sequence is known
without running it, and building it puts no stream or thread into capture mode, whose rules an
unrelated call (a synchronous copy on the legacy stream, `cuMemAlloc` elsewhere in the process) breaks
by invalidating the capture; nor does the graph's stream change. The per-kernel launches stay for
`profile()`'s per-kernel events and as the fallback: where a graph call fails (an old driver, a
binding without the function, an instantiation error), the runtime launches per kernel and says why
(`graph_reason`, `launch_mode`, the executable's report) -- never an error of its own.
"""

from __future__ import annotations

import ctypes
import statistics
import warnings

import ml_dtypes
import numpy as np

from ...errors import VtmlirError
from .host import BufferPointer, HostProgram, Launch, Scalar, UploadConstant, numpy_dtype

_CTYPES = {"i64": ctypes.c_int64, "i32": ctypes.c_int32, "i16": ctypes.c_int16, "i8": ctypes.c_int8,
           "i1": ctypes.c_bool, "f32": ctypes.c_float, "f64": ctypes.c_double}


def scalar_parameter(ptype: str, value):
    """A kernel's scalar parameter as the ctypes value cuLaunchKernel reads: integers and f32/f64 as
    themselves, f16 and bf16 as their 16 bits (ctypes has no half types)."""
    if ptype in ("f16", "bf16"):
        dtype = np.float16 if ptype == "f16" else ml_dtypes.bfloat16
        return ctypes.c_uint16(int(np.array(value, dtype=dtype).view(np.uint16)))
    ctype = _CTYPES.get(ptype)
    if ctype is None:
        raise VtmlirError(f"error: kernel parameter type {ptype} is not supported")
    return ctype(value)


def cuda_driver():
    from cuda.bindings import driver  # deferred: cuda is heavy; loaded on first use

    return driver


def cuda_available() -> bool:
    """True when the CUDA driver loads and reports at least one device; never raises."""
    try:
        driver = cuda_driver()
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False
        err, count = driver.cuDeviceGetCount()
        return err == driver.CUresult.CUDA_SUCCESS and count > 0
    except Exception:  # noqa: BLE001 - no driver library, no device: all mean "not available"
        return False


def device_arch(ordinal: int = 0) -> str:
    """The compute capability of device `ordinal` as a ptxas arch name (sm_80, sm_90, ...)."""
    driver = cuda_driver()
    check_cuda(driver.cuInit(0), "cuInit")
    device = check_cuda(driver.cuDeviceGet(ordinal), "cuDeviceGet")
    attr = driver.CUdevice_attribute
    major = check_cuda(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
                   "cuDeviceGetAttribute")
    minor = check_cuda(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
                   "cuDeviceGetAttribute")
    return f"sm_{major}{minor}"


def check_cuda(result, what: str):
    """Unpack a cuda-python result tuple, raising a VtmlirError with the driver's error name."""
    driver = cuda_driver()
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        name = name.decode() if isinstance(name, bytes) else name
        text = text.decode() if isinstance(text, bytes) else text
        raise VtmlirError(f"error: CUDA driver: {what} failed: {name} ({text})")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def retain_primary_context() -> tuple:
    """(device 0, its primary context), the context made current: what every runtime here launches in."""
    driver = cuda_driver()
    check_cuda(driver.cuInit(0), "cuInit")
    device = check_cuda(driver.cuDeviceGet(0), "cuDeviceGet")
    context = check_cuda(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
    check_cuda(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    return device, context


def load_module(image: bytes, what: str):
    """`cuModuleLoadData` of a cubin, or of PTX text (NUL-terminated here: the driver JITs it)."""
    data = image if image.startswith(b"\x7fELF") or image.endswith(b"\0") else image + b"\0"
    return check_cuda(cuda_driver().cuModuleLoadData(data), what)


def device_alloc(nbytes: int):
    """A device buffer of `nbytes` (at least 1) bytes."""
    return check_cuda(cuda_driver().cuMemAlloc(max(int(nbytes), 1)), f"cuMemAlloc({nbytes})")


def upload(ptr, array: np.ndarray) -> None:
    """Copy `array` (made contiguous) into the device buffer at `ptr`."""
    array = np.ascontiguousarray(array)
    if array.nbytes:
        check_cuda(cuda_driver().cuMemcpyHtoD(ptr, array.ctypes.data, array.nbytes), "cuMemcpyHtoD")


def parameter_array(storage: list):
    """cuLaunchKernel's `void**`: one pointer per kernel parameter, each to its ctypes value in
    `storage` (which the caller keeps alive while the array is used)."""
    return (ctypes.c_void_p * len(storage))(*[ctypes.addressof(v) for v in storage])


class CudaRuntime:
    """Loaded kernels of one executable on device 0, with its buffers resident on the device.

    Every buffer of the host program (inputs, outputs, constants, temporaries) is allocated once,
    when the runtime is made, and the constants (the weights) are uploaded then: a call uploads its
    inputs, enqueues the launches (their parameter arrays are built once too: the buffers never move)
    and reads the results back. Temporaries are not shared between buffers whose lifetimes do not
    overlap (the host program's `Free` steps): the device memory is the sum of all buffers, the price
    of a call path without allocation. Not thread-safe: one call at a time per executable.

    `cuda_graph` (default True): a call replays the launches as one CUDA graph (the module docstring),
    made here; `graph` is its executable graph, None where the runtime launches per kernel, and then
    `graph_reason` says why (turned off, no kernels, or the driver call that failed). `use_graph`
    (True) picks the path of the next calls while a graph exists: the benchmark times both.
    """

    def __init__(self, program: HostProgram, images: dict[str, bytes], functions: dict[str, str],
                 cuda_graph: bool = True):
        if not cuda_available():
            raise VtmlirError("error: no CUDA device available (the CUDA driver did not load or reports "
                              "no device); the PTX and cubins can still be inspected")
        driver = cuda_driver()
        self.program = program
        self.device, self.context = retain_primary_context()
        self.modules = {}
        self.functions = {}
        self.buffers: dict[int, object] = {}
        try:
            for name, image in images.items():
                module = load_module(image, f"loading kernel {name}")
                self.modules[name] = module
                self.functions[name] = check_cuda(driver.cuModuleGetFunction(module, functions[name].encode()),
                                                  f"looking up {functions[name]} in kernel {name}")
            for buffer_id, buf in program.buffers.items():
                self.buffers[buffer_id] = device_alloc(buf.nbytes)
            for step in program.steps:
                if isinstance(step, UploadConstant):
                    upload(self.buffers[step.buffer.id], step.data)
            self.launches = [self._prepare(step) for step in program.launches()]
        except Exception:
            self.close()
            raise
        self.graph = None          # CUgraphExec: every launch in order, replayed by one cuGraphLaunch
        self.graph_reason = None   # why there is no graph (None while there is one)
        self.use_graph = True
        if not cuda_graph:
            self.graph_reason = "turned off (cuda_graph=False)"
        elif not self.launches:
            self.graph_reason = "no kernels to launch"
        else:
            self._build_graph()

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Execute the host program on `inputs` (numpy, in the function's argument order)."""
        driver = cuda_driver()
        check_cuda(driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.upload_inputs(inputs)
        self.enqueue()
        check_cuda(driver.cuCtxSynchronize(), "running the kernels (cuCtxSynchronize)")
        results = []
        for buffer_id in self.program.result_buffers:   # out-parameters, or donated inputs updated in place
            buf = self.program.buffers[buffer_id]
            host = np.empty(buf.shape, dtype=numpy_dtype(buf.dtype))
            if host.nbytes:
                check_cuda(driver.cuMemcpyDtoH(host.ctypes.data, self.buffers[buffer_id], host.nbytes),
                           "cuMemcpyDtoH")
            results.append(host)
        return results

    def upload_inputs(self, inputs: list[np.ndarray]) -> None:
        """Copy `inputs` into the device buffers of the function's arguments."""
        program = self.program
        if len(inputs) != len(program.inputs):
            raise VtmlirError(f"error: expected {len(program.inputs)} inputs, got {len(inputs)}")
        for index, (buffer_id, array) in enumerate(zip(program.inputs, inputs)):
            buf = program.buffers[buffer_id]
            array = np.asarray(array, dtype=numpy_dtype(buf.dtype), order="C")  # keeps 0-d arrays 0-d
            if tuple(array.shape) != buf.shape:
                raise VtmlirError(f"error: input {index} has shape {tuple(array.shape)}, "
                                  f"the compiled module expects {buf.shape}")
            upload(self.buffers[buffer_id], array)

    def enqueue(self, events: list | None = None, graph: bool | None = None) -> None:
        """Launch every kernel, in order, on the default stream (asynchronously): one `cuGraphLaunch`
        of the graph where there is one (and `graph`, default `use_graph`, is true), else one
        `cuLaunchKernel` per kernel. With `events` (len(launches) + 1 CUDA events), launch per
        kernel, recording one event before each launch and one after the last."""
        driver = cuda_driver()
        if graph is None:
            graph = self.use_graph
        if events is None and graph and self.graph is not None:
            try:
                check_cuda(driver.cuGraphLaunch(self.graph, 0), "cuGraphLaunch")
                return
            except Exception as err:  # noqa: BLE001 - a graph that cannot launch: launch per kernel
                self._drop_graph(_failure(err, "cuGraphLaunch"))
        for i, (function, grid, block, pointers, name, _) in enumerate(self.launches):
            if events is not None:
                check_cuda(driver.cuEventRecord(events[i], 0), "cuEventRecord")
            check_cuda(driver.cuLaunchKernel(function, *grid, *block, 0, 0, ctypes.addressof(pointers), 0),
                       f"launching kernel {name}")
        if events is not None:
            check_cuda(driver.cuEventRecord(events[len(self.launches)], 0), "cuEventRecord")

    @property
    def launch_mode(self) -> str:
        """How a call launches its kernels: one CUDA graph, or per kernel and why."""
        if self.graph is not None:
            mode = f"one CUDA graph of {len(self.launches)} kernel nodes per call (cuGraphLaunch)"
            return mode if self.use_graph else mode + ", not used now (use_graph=False): per-kernel launches"
        return f"{len(self.launches)} cuLaunchKernel per call: no CUDA graph ({self.graph_reason})"

    def _build_graph(self) -> None:
        """Build the executable graph of the launches (`self.graph`), or record why not
        (`self.graph_reason`, a warning) and leave the per-kernel launches in place."""
        driver = cuda_driver()
        graph = None
        step = "cuGraphCreate"
        try:
            graph = check_cuda(driver.cuGraphCreate(0), step)
            node = None
            for function, grid, block, pointers, name, _ in self.launches:
                step = f"cuGraphAddKernelNode (kernel {name})"
                params = driver.CUDA_KERNEL_NODE_PARAMS()
                params.func = function
                params.gridDimX, params.gridDimY, params.gridDimZ = grid
                params.blockDimX, params.blockDimY, params.blockDimZ = block
                params.sharedMemBytes = 0
                # The parameter values are copied into the node by this call (the driver's contract),
                # as cuLaunchKernel copies them: the same void** the per-kernel launch passes.
                params.kernelParams = ctypes.addressof(pointers)
                dependencies = [node] if node is not None else None
                node = check_cuda(driver.cuGraphAddKernelNode(graph, dependencies, len(dependencies or ()), params),
                                  step)
            step = "cuGraphInstantiate"
            self.graph = check_cuda(driver.cuGraphInstantiate(graph, 0), step)
        except Exception as err:  # noqa: BLE001 - no graph: the per-kernel launches work without one
            self.graph = None
            self._drop_graph(_failure(err, step))
        finally:
            if graph is not None:   # the executable graph does not need its source graph
                try:
                    driver.cuGraphDestroy(graph)
                except Exception:  # noqa: BLE001
                    pass

    def _drop_graph(self, reason: str) -> None:
        """Launch per kernel from now on, because of `reason` (kept in `graph_reason`, warned once)."""
        if self.graph is not None:
            try:
                cuda_driver().cuGraphExecDestroy(self.graph)
            except Exception:  # noqa: BLE001
                pass
            self.graph = None
        self.graph_reason = reason
        warnings.warn(f"vtmlir CUDA runtime: launching the kernels one by one, without a CUDA graph: {reason}",
                      RuntimeWarning, stacklevel=3)

    def profile(self, inputs: list[np.ndarray], repeat: int = 20) -> dict:
        """Device time of the kernels on `inputs` (already on the device: no copies timed), measured
        with CUDA events after one warm-up pass. `total_s`: the median over `repeat` passes of the
        whole sequence as a call launches it (one graph launch where there is a graph);
        `launches_total_s`: the same sequence launched per kernel; `graph_total_s`: replayed as the
        graph (None without one); `cuda_graph`: whether calls use the graph (`graph_reason` why not);
        `kernels`: per launch (in order) the kernel name and its median time, from events between
        per-kernel launches (a graph has no events inside). The totals include the gaps between
        kernels; the per-kernel times do not."""
        driver = cuda_driver()
        check_cuda(driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.upload_inputs(inputs)
        self.enqueue()
        self.enqueue(graph=False)
        check_cuda(driver.cuCtxSynchronize(), "running the kernels (cuCtxSynchronize)")
        events = [check_cuda(driver.cuEventCreate(0), "cuEventCreate") for _ in range(len(self.launches) + 1)]
        ends = [check_cuda(driver.cuEventCreate(0), "cuEventCreate") for _ in range(2)]
        graph_totals, launch_totals, per_kernel = [], [], [[] for _ in self.launches]

        def timed(graph: bool) -> float:
            check_cuda(driver.cuEventRecord(ends[0], 0), "cuEventRecord")
            self.enqueue(graph=graph)
            check_cuda(driver.cuEventRecord(ends[1], 0), "cuEventRecord")
            check_cuda(driver.cuEventSynchronize(ends[1]), "cuEventSynchronize")
            return check_cuda(driver.cuEventElapsedTime(ends[0], ends[1]), "cuEventElapsedTime") / 1e3

        try:
            for _ in range(repeat):
                if self.graph is not None:
                    graph_totals.append(timed(True))
                launch_totals.append(timed(False))
                self.enqueue(events)
                check_cuda(driver.cuEventSynchronize(events[-1]), "cuEventSynchronize")
                for i in range(len(self.launches)):
                    per_kernel[i].append(check_cuda(driver.cuEventElapsedTime(events[i], events[i + 1]),
                                                    "cuEventElapsedTime") / 1e3)
        finally:
            for event in events + ends:
                driver.cuEventDestroy(event)
        # A graph dropped while timing (its launch failed) left fewer graph times than passes.
        graph_total = statistics.median(graph_totals) if self.graph is not None and graph_totals else None
        launches_total = statistics.median(launch_totals)
        in_use = graph_total is not None and self.use_graph
        return {"total_s": graph_total if in_use else launches_total,
                "launches_total_s": launches_total, "graph_total_s": graph_total,
                "cuda_graph": in_use, "graph_reason": self.graph_reason,
                "kernels": [(launch[4], statistics.median(times)) for launch, times in zip(self.launches, per_kernel)]}

    def _prepare(self, step: Launch) -> tuple:
        """The launch of `step`: cuLaunchKernel takes void**, one pointer per kernel parameter, each to
        that parameter's value; the values (device addresses, sizes) are fixed, so build them once."""
        storage = []
        for param, ptype in zip(step.params(), step.param_types):
            if isinstance(param, BufferPointer):
                storage.append(ctypes.c_void_p(int(self.buffers[param.buffer])))
            elif isinstance(param, Scalar):
                try:
                    storage.append(scalar_parameter(ptype, param.value))
                except VtmlirError as err:
                    raise VtmlirError(f"{err} (kernel {step.kernel})") from None
        pointers = parameter_array(storage)
        return (self.functions[step.kernel], tuple(step.grid), tuple(step.block), pointers, step.kernel, storage)

    def close(self) -> None:
        driver = cuda_driver()
        if getattr(self, "graph", None) is not None:
            driver.cuGraphExecDestroy(self.graph)
            self.graph = None
        for ptr in self.buffers.values():
            driver.cuMemFree(ptr)
        self.buffers.clear()
        for module in self.modules.values():
            driver.cuModuleUnload(module)
        self.modules.clear()
        driver.cuDevicePrimaryCtxRelease(self.device)


def _failure(err: Exception, step: str) -> str:
    """Why a graph call did not work, for `graph_reason`: the driver's error (check_cuda's message
    names the call), or the exception of a binding that lacks or refuses the call."""
    text = str(err)
    if text.startswith("error: CUDA driver: "):
        return text[len("error: CUDA driver: "):]
    return f"{step} failed: {type(err).__name__}: {text}"
