"""Running a `HostProgram` on an NVIDIA GPU through the CUDA driver API (cuda-python).

Only the driver API is used (no CUDA runtime, no toolkit): `cuInit`, a primary context, one
`cuModuleLoadData` per kernel (the cubin from ptxas when given, else the PTX, which the driver JITs),
`cuMemAlloc` per buffer, `cuMemcpyHtoD`/`DtoH`, `cuLaunchKernel` with one pointer per parameter of the
kernel's `llvm.func`. On a machine without a driver or a device, `cuda_available()` is False and
`CudaRuntime` raises a `VtmlirError`; nothing here runs at import time.
"""

from __future__ import annotations

import ctypes
import statistics

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
    """

    def __init__(self, program: HostProgram, images: dict[str, bytes], functions: dict[str, str]):
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

    def enqueue(self, events: list | None = None) -> None:
        """Launch every kernel, in order, on the default stream (asynchronously). With `events`
        (len(launches) + 1 CUDA events), record one before each launch and one after the last."""
        driver = cuda_driver()
        for i, (function, grid, block, pointers, name, _) in enumerate(self.launches):
            if events is not None:
                check_cuda(driver.cuEventRecord(events[i], 0), "cuEventRecord")
            check_cuda(driver.cuLaunchKernel(function, *grid, *block, 0, 0, ctypes.addressof(pointers), 0),
                       f"launching kernel {name}")
        if events is not None:
            check_cuda(driver.cuEventRecord(events[len(self.launches)], 0), "cuEventRecord")

    def profile(self, inputs: list[np.ndarray], repeat: int = 20) -> dict:
        """Device time of the kernels on `inputs` (already on the device: no copies timed), measured
        with CUDA events after one warm-up pass: `total_s`, the median over `repeat` passes of the
        whole launch sequence, and `kernels`, per launch (in order) the kernel name and its median
        time. The total includes the gaps between launches; the per-kernel times do not."""
        driver = cuda_driver()
        check_cuda(driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.upload_inputs(inputs)
        self.enqueue()
        check_cuda(driver.cuCtxSynchronize(), "running the kernels (cuCtxSynchronize)")
        events = [check_cuda(driver.cuEventCreate(0), "cuEventCreate") for _ in range(len(self.launches) + 1)]
        ends = [check_cuda(driver.cuEventCreate(0), "cuEventCreate") for _ in range(2)]
        totals, per_kernel = [], [[] for _ in self.launches]
        try:
            for _ in range(repeat):
                check_cuda(driver.cuEventRecord(ends[0], 0), "cuEventRecord")
                self.enqueue()
                check_cuda(driver.cuEventRecord(ends[1], 0), "cuEventRecord")
                check_cuda(driver.cuEventSynchronize(ends[1]), "cuEventSynchronize")
                totals.append(check_cuda(driver.cuEventElapsedTime(ends[0], ends[1]), "cuEventElapsedTime") / 1e3)
                self.enqueue(events)
                check_cuda(driver.cuEventSynchronize(events[-1]), "cuEventSynchronize")
                for i in range(len(self.launches)):
                    per_kernel[i].append(check_cuda(driver.cuEventElapsedTime(events[i], events[i + 1]),
                                                    "cuEventElapsedTime") / 1e3)
        finally:
            for event in events + ends:
                driver.cuEventDestroy(event)
        return {"total_s": statistics.median(totals),
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
        for ptr in self.buffers.values():
            driver.cuMemFree(ptr)
        self.buffers.clear()
        for module in self.modules.values():
            driver.cuModuleUnload(module)
        self.modules.clear()
        driver.cuDevicePrimaryCtxRelease(self.device)
