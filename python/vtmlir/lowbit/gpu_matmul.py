"""Quantised matmul kernels for NVIDIA GPUs: f16 activations x n-bit weights, f32 accumulate, on
tensor cores (`mma.sync.m16n8k16`) where the types allow and on CUDA cores (f32 FMA) otherwise
(Tilus §3 Fig. 2, §4 layouts, §6 Fig. 8 re-layout and casting).

    kernel = QuantizedMatmulKernel.build(qweight, m=16)       # mode="auto" | "mma" | "fma", warps=
    kernel.mode, kernel.reason                               # which kernel, and why
    kernel.ptx("sm_80"); kernel.assemble("sm_90")            # PTX through ptxas
    y = kernel.run(x_f16)                                    # where a GPU exists (cuda-python)

The kernels (built in gpu_kernels.py) share the weight path: the codes are packed ahead of time
in the Fig. 8 order of the kernel's B-tile register layout, each thread loads its 4 codes with one
8-byte vector load, reinterprets them as an i64, extracts and casts them in registers.

**The mma rule** (`mma_refusal`). mma.sync takes f16 operands, so it computes the exact quantised
product only if (1) every value of the type minus its zero point is exactly an f16 — true for all
ints and uints and for every float split except e5m0, e5m1, e6m0, e6m1 and e7m0, whose top values
exceed f16's 65504 (and e6m1's smallest fall below 2^-24) —, (2) the group size is a multiple of 16,
so that the group scale factors out of each k16 step and multiplies the f32 partial sum instead of
being rounded into the f16 operand, and (3) M, N, K tile by 16, 8, 16. Then B holds the code value
exactly, products of two f16 are exact in f32, and the result differs from the f32 reference only by
the order of f32 additions. Where the rule fails, `mode="auto"` builds the FMA kernel: dequantisation
in f32 exactly like the reference, `fma.rn.f32` accumulation, any type, group size and M (K % 4 = 0).
`mode="mma"` forces tensor cores and raises a `VtmlirError` naming the failed condition; `mode="fma"`
forces CUDA cores for any type.

Both are lowered by `convert-gpu-to-nvvm` with bare-pointer memrefs and emitted with the CUDA
backend's LLVM -> PTX route (backend/cuda/ptx.py); `reference` is the numpy model of both.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np
from torch_mlir import ir

from ..backend.cuda.ptx import kernel_sources, translate_kernels
from ..backend.cuda.ptxas import assemble
from ..backend.cuda.runtime import check_cuda, cuda_available, cuda_driver, device_arch
from ..context import make_context
from ..errors import VtmlirError
from ..passes import run_pipeline
from .mma_rule import largest_divisor as _largest_divisor, mma_refusal, pack_for_layout
from .gpu_kernels import (FMA_TILE_K, MMA_B_LAYOUT, MMA_TILE_M, MMA_TILE_N, fma_b_layout, fma_kernel,
                          mma_kernel)
from .quantize import QuantizedWeight

LOWERING = ("builtin.module(nvvm-attach-target{{chip={chip}}}, gpu.module(convert-scf-to-cf, "
            "convert-gpu-to-nvvm{{use-bare-ptr-memref-call-conv=1}}, canonicalize, reconcile-unrealized-casts))")
MODES = ("auto", "mma", "fma")


def pack_for_mma(qweight: QuantizedWeight) -> np.ndarray:
    return pack_for_layout(qweight, MMA_B_LAYOUT)


@dataclass
class QuantizedMatmulKernel:
    """y[M, N] (f32) = x[M, K] (f16) @ W'[N, K]^T for one quantised weight; see the module docstring."""

    name: str
    mode: str  # "mma" or "fma"
    mlir: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    packed: np.ndarray
    scales: np.ndarray
    zeros: np.ndarray | None
    shape: tuple[int, int, int]  # M, N, K
    reason: str  # why this mode (the mma rule's verdict)

    @classmethod
    def build(cls, qweight: QuantizedWeight, m: int = 16, name: str | None = None,
              mode: str = "auto", warps: tuple[int, int] | None = None) -> "QuantizedMatmulKernel":
        """`mode`: "auto" (mma.sync where `mma_refusal` finds nothing, FMA otherwise), "mma" (an error
        naming the failed condition where the rule refuses), or "fma" (any type, group and shape with
        K % 4 == 0). `warps` (mma): warps per block along M and N (default: up to 4 x 2 that divide
        the 16 x 8 tiles); the B tiles are staged in shared memory and shared by the warps along M."""
        if mode not in MODES:
            raise VtmlirError(f"error: unknown kernel mode {mode!r}; expected one of {', '.join(MODES)}")
        n, k = qweight.codes.shape
        t = qweight.dtype
        refusal = mma_refusal(qweight, m)
        if mode == "mma" and refusal:
            raise VtmlirError(f"error: the mma.sync kernel cannot compute {t.name} exactly: {refusal}; "
                              "use mode='fma' or 'auto'")
        chosen = mode if mode != "auto" else ("fma" if refusal else "mma")
        reason = (refusal or "the mma rule holds") if mode == "auto" else f"forced {mode}"
        zeros = None if qweight.zeros is None else qweight.zeros.astype(np.float32)
        name = name or f"lowbit_{chosen}_{t.name}"
        if chosen == "mma":
            wm, wn = warps or (_largest_divisor(m // MMA_TILE_M, 4), _largest_divisor(n // MMA_TILE_N, 2))
            if (m // MMA_TILE_M) % wm or (n // MMA_TILE_N) % wn or wm * wn > 32:
                raise VtmlirError(f"error: warps {wm} x {wn} do not tile the {m // MMA_TILE_M} x {n // MMA_TILE_N} "
                                  "mma tiles (or exceed 32 warps per block)")
            packed = pack_for_layout(qweight, MMA_B_LAYOUT)
            build = lambda: mma_kernel(name, t, m, n, k, qweight.group_size, packed.size, zeros is not None, wm, wn)
            grid, block = (n // (MMA_TILE_N * wn), m // (MMA_TILE_M * wm), 1), (32 * wm * wn, 1, 1)
        else:
            if k % FMA_TILE_K:
                raise VtmlirError(f"error: the FMA kernel needs K % {FMA_TILE_K} == 0; got K={k}")
            tm, tn = _largest_divisor(m, 16), _largest_divisor(n, 128)
            packed = pack_for_layout(qweight, fma_b_layout(tn))
            build = lambda: fma_kernel(name, t, m, n, k, qweight.group_size, packed.size, zeros is not None, tm, tn)
            grid, block = (n // tn, m // tm, 1), (tn, 1, 1)
        return cls(name, chosen, _printed(build), grid, block, packed,
                   qweight.scales.astype(np.float32), zeros, (m, n, k), reason)

    def nvvm(self, chip: str = "sm_80") -> str:
        """The kernel after the NVVM lowering (llvm + nvvm dialects only)."""
        with make_context():
            module = ir.Module.parse(self.mlir)
            run_pipeline(module, LOWERING.format(chip=chip), what="lowbit mma kernel lowering")
            return str(module)

    def ptx(self, chip: str = "sm_80") -> str:
        """PTX through the CUDA backend's translation (subprocess-isolated LLVM, llvmlite NVPTX)."""
        return ptx_batch([self], chip)[self.name]

    def assemble(self, arch: str = "sm_80") -> bytes:
        return assemble(self.ptx(arch if arch != "sm_90a" else "sm_90"), arch, self.name)

    def run(self, x: np.ndarray) -> np.ndarray:
        """y = x @ W'^T on GPU 0 (x is cast to f16); `VtmlirError` without a device."""
        if not cuda_available():
            raise VtmlirError("error: no CUDA device available")
        m, n, _ = self.shape
        driver = cuda_driver()
        loaded = LoadedKernel(self.assemble(device_arch()), self.name, self.grid, self.block)
        y = np.zeros((m, n), np.float32)
        arrays = kernel_parameters(np.ascontiguousarray(x, np.float16), self.packed, self.scales, self.zeros, y)
        ptrs = []
        try:
            for a in arrays:
                ptr = check_cuda(driver.cuMemAlloc(a.nbytes), "cuMemAlloc")
                ptrs.append(ptr)
                check_cuda(driver.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes), "cuMemcpyHtoD")
            loaded.launch([int(p) for p in ptrs])
            check_cuda(driver.cuCtxSynchronize(), "cuCtxSynchronize")
            check_cuda(driver.cuMemcpyDtoH(y.ctypes.data, ptrs[-1], y.nbytes), "cuMemcpyDtoH")
        finally:
            for p in ptrs:
                driver.cuMemFree(p)
            loaded.close()
        return y


def kernel_parameters(x, packed, scales, zeros, y) -> list:
    """Both kernels' parameters in order (bare pointers, one per memref): x, packed codes, scales,
    zero points (only where the weight has them: unsigned types), y. Any objects: host arrays,
    torch tensors, device pointers."""
    return [x, packed, scales] + ([zeros] if zeros is not None else []) + [y]


def launch_parameters(pointers: list[int]):
    """The `kernelParams` array cuLaunchKernel reads for a kernel of pointer parameters: one pointer
    per parameter to a slot holding the device address. Returns (slots, array): keep both alive
    until the launch has been enqueued."""
    slots = [ctypes.c_void_p(int(p)) for p in pointers]
    return slots, (ctypes.c_void_p * len(slots))(*[ctypes.addressof(s) for s in slots])


class LoadedKernel:
    """A kernel image (cubin from ptxas, or PTX that the driver JITs) loaded into device 0's primary
    context — the context torch's CUDA runtime uses too, so torch tensors' `data_ptr()`s are valid
    pointers for `launch` and torch's CUDA events time it. `QuantizedMatmulKernel.run` launches
    through this, and so does benchmarks/gpu.py from a saved cubin (no MLIR, no ptxas needed)."""

    def __init__(self, image: bytes, name: str, grid: tuple[int, int, int], block: tuple[int, int, int]):
        driver = cuda_driver()
        self.name, self.grid, self.block = name, tuple(grid), tuple(block)
        check_cuda(driver.cuInit(0), "cuInit")
        self.device = check_cuda(driver.cuDeviceGet(0), "cuDeviceGet")
        self.context = check_cuda(driver.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        self.module = None
        try:
            check_cuda(driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
            if not image.startswith(b"\x7fELF") and not image.endswith(b"\0"):
                image = image + b"\0"  # PTX text must be NUL-terminated for cuModuleLoadData
            self.module = check_cuda(driver.cuModuleLoadData(image), f"loading kernel {name}")
            self.function = check_cuda(driver.cuModuleGetFunction(self.module, name.encode()),
                                       f"looking up {name}")
        except Exception:
            self.close()
            raise

    def launch(self, pointers: list[int], stream=0) -> None:
        """Enqueue one launch on `stream` (0: the legacy default stream, torch's default) with these
        device pointers as the parameters (`kernel_parameters` order)."""
        _slots, params = launch_parameters(pointers)
        check_cuda(cuda_driver().cuLaunchKernel(self.function, *self.grid, *self.block, 0, stream,
                                                ctypes.addressof(params), 0), f"launching {self.name}")

    def close(self) -> None:
        driver = cuda_driver()
        if self.module is not None:
            driver.cuModuleUnload(self.module)
            self.module = None
        if self.context is not None:
            driver.cuDevicePrimaryCtxRelease(self.device)
            self.context = None


def _printed(build) -> str:
    """The kernel module `build()` makes in a fresh context, verified and printed (the kernel's
    `mlir` artifact, which `nvvm` lowers)."""
    with make_context(), ir.Location.unknown():
        module = build()
        module.operation.verify()
        return str(module)


def ptx_batch(kernels: list[QuantizedMatmulKernel], chip: str = "sm_80") -> dict[str, str]:
    """{kernel name: PTX} for several kernels with one LLVM translation subprocess."""
    sources = []
    for kernel in kernels:
        with make_context():
            sources.extend(kernel_sources(ir.Module.parse(kernel.nvvm(chip))))
    out = translate_kernels([(s.module_name, s.mlir) for s in sources], chip=chip)
    return {kernel.name: out[src.module_name]["ptx"] for kernel, src in zip(kernels, sources)}


def reference(qweight: QuantizedWeight, x: np.ndarray) -> np.ndarray:
    """What both kernels compute, in numpy: x rounded to f16, the exact W' (f32), sums in f64 then
    rounded to f32 (the kernels sum in f32, in their own orders)."""
    w = qweight.dequantize().astype(np.float64)
    return (np.asarray(x, np.float16).astype(np.float64) @ w.T).astype(np.float32)
