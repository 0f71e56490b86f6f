"""A warp-level quantised matmul kernel for NVIDIA GPUs: f16 activations × n-bit weights, f32
accumulate, `mma.sync.m16n8k16` (Tilus §3 Fig. 2, §4 layouts, §6 Fig. 8 re-layout and casting).

    kernel = QuantizedMatmulKernel.build(qweight, m=16)      # a QuantizedWeight of any LowBitType
    kernel.ptx("sm_80"); kernel.assemble("sm_90")           # PTX through ptxas
    y = kernel.run(x_f16)                                   # where a GPU exists (cuda-python)

One warp computes a 16 x 8 output tile (grid = (N/8, M/16), 32 threads), looping over K in steps of
16. The operand layouts are the register layouts of `vtmlir.dialects.register_layout`:

- B (weights, k x n = 16 x 8) is `local(2, 1).column_spatial(4, 8).local(2, 1)` — exactly the PTX
  m16n8k16 B fragment (lane = 4·n + k/2 mod 4, registers k ∈ {0, 1, 8, 9} + 2·(lane mod 4)). The
  weights are packed ahead of time with `subbyte-pack`'s re-layout for that tile layout (Fig. 8:
  `pack.position_map_text`), so thread t's 4 codes are the 4n consecutive bits at stream position
  (tile · 128 + 4t)·n. Each thread does **one vector load** of the 8 bytes holding them
  (`vector<8xi8>`), **reinterprets** them as one i64 (`vector.bitcast`, Tilus `View`: same thread,
  same bits), and extracts its codes with shift/mask; each code is **cast in registers** to f32
  (convert.emit_code_to_f32: sign extension, or the exponent/mantissa rebuild), scaled (and
  zero-pointed) in f32 like the reference, rounded to f16 and paired into the two `vector<2xf16>`
  B registers.
- A (activations, row-major [M, K] f16) uses the m16n8k16 A fragment: four `vector<2xf16>` loads.
- `nvvm.mma.sync` (m16n8k16, row.col, f16 × f16 + f32) accumulates; the C fragment is stored.

Every n-bit type goes through mma.sync: the conversion and scaling happen in f32 registers, and only
the scaled weight — a number of the original weight's range — is rounded to f16, so no type needs the
FMA fallback Tilus keeps for types that tensor cores cannot take directly. (A type whose scaled
weights overflowed f16 would; quantised weights never do.)

The kernel is MLIR (gpu, arith, vector, memref, scf, nvvm) lowered by `convert-gpu-to-nvvm` with
bare-pointer memrefs and emitted with the CUDA backend's LLVM → PTX route (backend/cuda/ptx.py).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import func

from ..errors import VtmlirError
from .convert import emit_code_to_f32
from .evaluate import affine_eval
from .pack import position_map_text
from .quantize import QuantizedWeight
from .storage import pack_bits

MMA_B_LAYOUT = "local(2, 1).column_spatial(4, 8).local(2, 1)"
TILE_M, TILE_N, TILE_K = 16, 8, 16
LOWERING = ("builtin.module(nvvm-attach-target{{chip={chip}}}, gpu.module(convert-scf-to-cf, "
            "convert-gpu-to-nvvm{{use-bare-ptr-memref-call-conv=1}}, canonicalize, reconcile-unrealized-casts))")


def pack_for_mma(qweight: QuantizedWeight) -> np.ndarray:
    """The weight codes (B[k, n] = W[n, k]) in the Fig. 8 order of the mma B tile layout, packed
    compactly, plus 8 bytes of slack for the last thread's 8-byte vector load."""
    codes = qweight.codes.T  # [K, N]
    k, n = codes.shape
    with ir.Context():
        pos_map = ir.AffineMapAttr(ir.Attribute.parse(position_map_text(k, n, MMA_B_LAYOUT))).value
        pos = np.broadcast_to(affine_eval(pos_map.results[0], list(np.indices((k, n), dtype=np.int64))), (k, n))
    stream = np.zeros(k * n, dtype=np.uint8)
    stream[pos.reshape(-1)] = codes.reshape(-1)
    return np.concatenate([pack_bits(stream, qweight.dtype.bits), np.zeros(8, np.uint8)])


def kernel_text(name: str, bits: int, m: int, n: int, k: int, group: int, nbytes: int, zeros: bool) -> str:
    """The gpu.module (MLIR text); `@convert` (code → f32) is filled in by `build`."""
    kt = k // TILE_K
    mask = (1 << bits) - 1
    kg = k // group
    zero_arg = f", %z: memref<{n}x{kg}xf32>" if zeros else ""
    lines = [f"gpu.module @{name}_module {{",
             "  func.func private @convert(%c: i32) -> f32",
             f"  gpu.func @{name}(%x: memref<{m}x{k}xf16>, %p: memref<{nbytes}xi8>, %s: memref<{n}x{kg}xf32>"
             f"{zero_arg}, %y: memref<{m}x{n}xf32>) kernel {{"]
    body = f"""
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %ckt = arith.constant {kt} : index
    %cgroup = arith.constant {group} : index
    %c128 = arith.constant 128 : index
    %cbits = arith.constant {bits} : index
    %zero = arith.constant 0.0 : f32
    %lane = gpu.thread_id x
    %tn = gpu.block_id x
    %tm = gpu.block_id y
    %grp = arith.divui %lane, %c4 : index
    %tig = arith.remui %lane, %c4 : index
    %tm16 = arith.muli %tm, %c16 : index
    %row = arith.addi %tm16, %grp : index
    %row8 = arith.addi %row, %c8 : index
    %tn8 = arith.muli %tn, %c8 : index
    %ncol = arith.addi %tn8, %grp : index
    %kq = arith.muli %tig, %c2 : index
    %lane4 = arith.muli %lane, %c4 : index
    %tile0 = arith.muli %tn, %ckt : index
    %r:4 = scf.for %t = %c0 to %ckt step %c1 iter_args(%a0 = %zero, %a1 = %zero, %a2 = %zero, %a3 = %zero) -> (f32, f32, f32, f32) {{
      %t16 = arith.muli %t, %c16 : index
      %kb = arith.addi %t16, %kq : index
      %kb8 = arith.addi %kb, %c8 : index
      %x0 = vector.load %x[%row, %kb] : memref<{m}x{k}xf16>, vector<2xf16>
      %x1 = vector.load %x[%row8, %kb] : memref<{m}x{k}xf16>, vector<2xf16>
      %x2 = vector.load %x[%row, %kb8] : memref<{m}x{k}xf16>, vector<2xf16>
      %x3 = vector.load %x[%row8, %kb8] : memref<{m}x{k}xf16>, vector<2xf16>
      %tile = arith.addi %tile0, %t : index
      %tbase = arith.muli %tile, %c128 : index
      %pos = arith.addi %tbase, %lane4 : index
      %bit = arith.muli %pos, %cbits : index
      %byte = arith.divui %bit, %c8 : index
      %off = arith.remui %bit, %c8 : index
      %bytes = vector.load %p[%byte] : memref<{nbytes}xi8>, vector<8xi8>
      %word1 = vector.bitcast %bytes : vector<8xi8> to vector<1xi64>
      %word = vector.extract %word1[0] : i64 from vector<1xi64>
      %off64 = arith.index_cast %off : index to i64
      %mine = arith.shrui %word, %off64 : i64
      %mask = arith.constant {mask} : i64"""
    lines.append(body)
    for i, dk in enumerate((0, 1, 8, 9)):
        lines.append(f"""
      %sh{i} = arith.constant {i * bits} : i64
      %w{i} = arith.shrui %mine, %sh{i} : i64
      %m{i} = arith.andi %w{i}, %mask : i64
      %code{i} = arith.trunci %m{i} : i64 to i32
      %v{i} = func.call @convert(%code{i}) : (i32) -> f32
      %dk{i} = arith.constant {dk} : index
      %k{i} = arith.addi %t16, %kq : index
      %kk{i} = arith.addi %k{i}, %dk{i} : index
      %g{i} = arith.divui %kk{i}, %cgroup : index
      %s{i} = memref.load %s[%ncol, %g{i}] : memref<{n}x{kg}xf32>""")
        if zeros:
            lines.append(f"""
      %z{i} = memref.load %z[%ncol, %g{i}] : memref<{n}x{kg}xf32>
      %vz{i} = arith.subf %v{i}, %z{i} : f32
      %d{i} = arith.mulf %vz{i}, %s{i} : f32""")
        else:
            lines.append(f"""
      %d{i} = arith.mulf %v{i}, %s{i} : f32""")
        lines.append(f"""
      %h{i} = arith.truncf %d{i} : f32 to f16""")
    lines.append(f"""
      %b0 = vector.from_elements %h0, %h1 : vector<2xf16>
      %b1 = vector.from_elements %h2, %h3 : vector<2xf16>
      %acc = nvvm.mma.sync A[%x0, %x1, %x2, %x3] B[%b0, %b1] C[%a0, %a1, %a2, %a3]
        {{layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}}
        : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
      %e0 = llvm.extractvalue %acc[0] : !llvm.struct<(f32, f32, f32, f32)>
      %e1 = llvm.extractvalue %acc[1] : !llvm.struct<(f32, f32, f32, f32)>
      %e2 = llvm.extractvalue %acc[2] : !llvm.struct<(f32, f32, f32, f32)>
      %e3 = llvm.extractvalue %acc[3] : !llvm.struct<(f32, f32, f32, f32)>
      scf.yield %e0, %e1, %e2, %e3 : f32, f32, f32, f32
    }}
    %col = arith.addi %tn8, %kq : index
    %col1 = arith.addi %col, %c1 : index
    memref.store %r#0, %y[%row, %col] : memref<{m}x{n}xf32>
    memref.store %r#1, %y[%row, %col1] : memref<{m}x{n}xf32>
    memref.store %r#2, %y[%row8, %col] : memref<{m}x{n}xf32>
    memref.store %r#3, %y[%row8, %col1] : memref<{m}x{n}xf32>
    gpu.return
  }}
}}""")
    return "\n".join(lines) + "\n"


@dataclass
class QuantizedMatmulKernel:
    """y[M, N] (f32) = x[M, K] (f16) @ W'[N, K]^T for one quantised weight; see the module docstring."""

    name: str
    mlir: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    packed: np.ndarray
    scales: np.ndarray
    zeros: np.ndarray | None
    shape: tuple[int, int, int]  # M, N, K

    @classmethod
    def build(cls, qweight: QuantizedWeight, m: int = 16, name: str | None = None) -> "QuantizedMatmulKernel":
        n, k = qweight.codes.shape
        if m % TILE_M or n % TILE_N or k % TILE_K:
            raise VtmlirError(f"error: the mma kernel needs M % 16, N % 8, K % 16 == 0; got M={m} N={n} K={k}")
        if qweight.group_size % 2:
            raise VtmlirError("error: the mma kernel needs an even group size (codes k, k+1 share a group)")
        t = qweight.dtype
        name = name or f"lowbit_mma_{t.name}"
        packed = pack_for_mma(qweight)
        zeros = None if qweight.zeros is None else qweight.zeros.astype(np.float32)
        text = kernel_text(name, t.bits, m, n, k, qweight.group_size, packed.size, zeros is not None)
        from ..context import make_context

        with make_context(), ir.Location.unknown():
            module = ir.Module.parse(text)
            gpu_module = module.body.operations[0]
            decl = next(op for op in gpu_module.regions[0].blocks[0].operations
                        if op.operation.name == "func.func")
            decl.operation.erase()
            with ir.InsertionPoint.at_block_begin(gpu_module.regions[0].blocks[0]):
                i32, f32 = ir.IntegerType.get_signless(32), ir.F32Type.get()
                fn = func.FuncOp("convert", ir.FunctionType.get([i32], [f32]))
                fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
                block = fn.add_entry_block()
                with ir.InsertionPoint(block):
                    func.ReturnOp([emit_code_to_f32(block.arguments[0], t)])
            module.operation.verify()
            mlir = str(module)
        return cls(name, mlir, (n // TILE_N, m // TILE_M, 1), (32, 1, 1), packed,
                   qweight.scales.astype(np.float32), zeros, (m, n, k))

    def nvvm(self, chip: str = "sm_80") -> str:
        """The kernel after the NVVM lowering (llvm + nvvm dialects only)."""
        from ..context import make_context
        from ..passes import run_pipeline

        with make_context():
            module = ir.Module.parse(self.mlir)
            run_pipeline(module, LOWERING.format(chip=chip), what="lowbit mma kernel lowering")
            return str(module)

    def ptx(self, chip: str = "sm_80") -> str:
        """PTX through the CUDA backend's translation (subprocess-isolated LLVM, llvmlite NVPTX)."""
        return ptx_batch([self], chip)[self.name]

    def assemble(self, arch: str = "sm_80") -> bytes:
        from ..backend.cuda.ptxas import assemble

        return assemble(self.ptx(arch if arch != "sm_90a" else "sm_90"), arch, self.name)

    def run(self, x: np.ndarray) -> np.ndarray:
        """y = x @ W'^T on GPU 0 (x is cast to f16); `VtmlirError` without a device."""
        from ..backend.cuda.runtime import _check, _driver, cuda_available, device_arch

        if not cuda_available():
            raise VtmlirError("error: no CUDA device available")
        m, n, _ = self.shape
        driver = _driver()
        _check(driver.cuInit(0), "cuInit")
        device = _check(driver.cuDeviceGet(0), "cuDeviceGet")
        context = _check(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
        _check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
        module = _check(driver.cuModuleLoadData(self.assemble(device_arch())), "cuModuleLoadData")
        function = _check(driver.cuModuleGetFunction(module, self.name.encode()), "cuModuleGetFunction")
        arrays = [np.ascontiguousarray(x, np.float16), self.packed, self.scales]
        arrays += [self.zeros] if self.zeros is not None else []
        y = np.zeros((m, n), np.float32)
        ptrs = []
        try:
            for a in arrays + [y]:
                ptr = _check(driver.cuMemAlloc(a.nbytes), "cuMemAlloc")
                ptrs.append(ptr)
                _check(driver.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes), "cuMemcpyHtoD")
            holders = [ctypes.c_void_p(int(p)) for p in ptrs]
            params = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
            _check(driver.cuLaunchKernel(function, *self.grid, *self.block, 0, 0, ctypes.addressof(params), 0),
                   "cuLaunchKernel")
            _check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
            _check(driver.cuMemcpyDtoH(y.ctypes.data, ptrs[-1], y.nbytes), "cuMemcpyDtoH")
        finally:
            for p in ptrs:
                driver.cuMemFree(p)
            driver.cuModuleUnload(module)
            driver.cuDevicePrimaryCtxRelease(device)
        return y


def ptx_batch(kernels: list[QuantizedMatmulKernel], chip: str = "sm_80") -> dict[str, str]:
    """{kernel name: PTX} for several kernels with one LLVM translation subprocess."""
    from ..backend.cuda.ptx import kernel_sources, translate_kernels
    from ..context import make_context

    sources = []
    for kernel in kernels:
        with make_context():
            sources.extend(kernel_sources(ir.Module.parse(kernel.nvvm(chip))))
    out = translate_kernels([(s.module_name, s.mlir) for s in sources], chip=chip)
    return {kernel.name: out[src.module_name]["ptx"] for kernel, src in zip(kernels, sources)}


def reference(qweight: QuantizedWeight, x: np.ndarray) -> np.ndarray:
    """What the kernel computes, in numpy: f16 x, W' dequantised in f32 then rounded to f16, f32 sums."""
    w = qweight.dequantize().astype(np.float16).astype(np.float32)
    return np.asarray(x, np.float16).astype(np.float32) @ w.T
