"""Running a `HostProgram` on an NVIDIA GPU through the CUDA driver API (cuda-python).

Only the driver API is used (no CUDA runtime, no toolkit): `cuInit`, a primary context, one
`cuModuleLoadData` per kernel (the cubin from ptxas when given, else the PTX, which the driver JITs),
`cuMemAlloc` per buffer, `cuMemcpyHtoD`/`DtoH`, `cuLaunchKernel` with one pointer per parameter of the
kernel's `llvm.func`. On a machine without a driver or a device, `cuda_available()` is False and
`CudaRuntime` raises a `VtmlirError`; nothing here runs at import time.
"""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np

from ...errors import VtmlirError
from .host import Allocate, BufferPointer, Free, HostProgram, Launch, Scalar, UploadConstant, numpy_dtype

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


class CudaRuntime:
    """Loaded kernels of one executable on device 0; `run` executes its host program."""

    def __init__(self, program: HostProgram, images: dict[str, bytes], functions: dict[str, str]):
        if not cuda_available():
            raise VtmlirError("error: no CUDA device available (the CUDA driver did not load or reports "
                              "no device); the PTX and cubins can still be inspected")
        driver = cuda_driver()
        self.program = program
        check_cuda(driver.cuInit(0), "cuInit")
        self.device = check_cuda(driver.cuDeviceGet(0), "cuDeviceGet")
        self.context = check_cuda(driver.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        check_cuda(driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.modules = {}
        self.functions = {}
        for name, image in images.items():
            data = image
            if not image.startswith(b"\x7fELF") and not image.endswith(b"\0"):
                data = image + b"\0"  # PTX text must be NUL-terminated for cuModuleLoadData
            module = check_cuda(driver.cuModuleLoadData(data), f"loading kernel {name}")
            self.modules[name] = module
            self.functions[name] = check_cuda(driver.cuModuleGetFunction(module, functions[name].encode()),
                                          f"looking up {functions[name]} in kernel {name}")

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Execute the host program on `inputs` (numpy, in the function's argument order)."""
        driver = cuda_driver()
        program = self.program
        if len(inputs) != len(program.inputs):
            raise VtmlirError(f"error: expected {len(program.inputs)} inputs, got {len(inputs)}")
        check_cuda(driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        device_ptrs: dict[int, int] = {}
        try:
            for index, (buffer_id, array) in enumerate(zip(program.inputs, inputs)):
                buf = program.buffers[buffer_id]
                array = np.asarray(array, dtype=numpy_dtype(buf.dtype), order="C")  # keeps 0-d arrays 0-d
                if tuple(array.shape) != buf.shape:
                    raise VtmlirError(f"error: input {index} has shape {tuple(array.shape)}, "
                                      f"the compiled module expects {buf.shape}")
                device_ptrs[buffer_id] = self._alloc(buf.nbytes)
                self._upload(device_ptrs[buffer_id], array)
            for buffer_id in program.outputs:
                device_ptrs[buffer_id] = self._alloc(program.buffers[buffer_id].nbytes)
            for step in program.steps:
                if isinstance(step, Allocate):
                    device_ptrs[step.buffer.id] = self._alloc(step.buffer.nbytes)
                elif isinstance(step, UploadConstant):
                    self._upload(device_ptrs[step.buffer.id], step.data)
                elif isinstance(step, Launch):
                    self._launch(step, device_ptrs)
                elif isinstance(step, Free):
                    check_cuda(driver.cuMemFree(device_ptrs.pop(step.buffer)), "cuMemFree")
            check_cuda(driver.cuCtxSynchronize(), "running the kernels (cuCtxSynchronize)")
            results = []
            for buffer_id in program.result_buffers:   # out-parameters, or donated inputs updated in place
                buf = program.buffers[buffer_id]
                host = np.empty(buf.shape, dtype=numpy_dtype(buf.dtype))
                if host.nbytes:
                    check_cuda(driver.cuMemcpyDtoH(host.ctypes.data, device_ptrs[buffer_id], host.nbytes),
                           "cuMemcpyDtoH")
                results.append(host)
            return results
        finally:
            for ptr in device_ptrs.values():
                driver.cuMemFree(ptr)

    def _alloc(self, nbytes: int):
        return check_cuda(cuda_driver().cuMemAlloc(max(nbytes, 1)), f"cuMemAlloc({nbytes})")

    def _upload(self, ptr, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        if array.nbytes:
            check_cuda(cuda_driver().cuMemcpyHtoD(ptr, array.ctypes.data, array.nbytes), "cuMemcpyHtoD")

    def _launch(self, step: Launch, device_ptrs: dict) -> None:
        # cuLaunchKernel takes void** : one pointer per kernel parameter, each to that parameter's value.
        storage = []
        for param, ptype in zip(step.params(), step.param_types):
            if isinstance(param, BufferPointer):
                storage.append(ctypes.c_void_p(int(device_ptrs[param.buffer])))
            elif isinstance(param, Scalar):
                try:
                    storage.append(scalar_parameter(ptype, param.value))
                except VtmlirError as err:
                    raise VtmlirError(f"{err} (kernel {step.kernel})") from None
        pointers = (ctypes.c_void_p * len(storage))(*[ctypes.addressof(v) for v in storage])
        check_cuda(cuda_driver().cuLaunchKernel(self.functions[step.kernel], *step.grid, *step.block, 0, 0,
                                        ctypes.addressof(pointers), 0),
               f"launching kernel {step.kernel}")

    def close(self) -> None:
        driver = cuda_driver()
        for module in self.modules.values():
            driver.cuModuleUnload(module)
        self.modules.clear()
        driver.cuDevicePrimaryCtxRelease(self.device)

