"""The two GPU quantised-matmul kernels (f16 activations x n-bit weights, f32 accumulate) that
`gpu_matmul.QuantizedMatmulKernel` builds, as MLIR built with the dialects' op builders: the tensor-core kernel (`mma.sync
m16n8k16`) and the CUDA-core kernel (f32 FMA) — Tilus §3 Fig. 2, §4 layouts, §6 Fig. 8 and casting.

Both kernels load weights the same way, from the register layout of their weight tile (B = W^T,
k x n): the weights are packed ahead of time with `subbyte-pack`'s re-layout for that layout (Fig. 8,
`pack.position_map`), so every thread's 4 codes of one tile are 4n consecutive bits at stream
position `tile * (threads * 4) + 4 * thread` (tiles n-major). A thread does **one vector load** of the
8 bytes holding them (`vector<8xi8>`), **reinterprets** them as one i64 (`vector.bitcast`: Tilus
`View`, same thread, same bits), extracts each code with a shift and a mask, and **casts it in
registers** to f32 (`@convert`, built by `convert.emit_code_to_f32`) — `_thread_codes`.

- mma (`mma_kernel`): wm x wn warps per block, one per 16 x 8 output tile; B tile 16 x 8 in
  the m16n8k16 B fragment layout `local(2, 1).column_spatial(4, 8).local(2, 1)`, staged per k step
  in shared memory (`workgroup` attribution, two `gpu.barrier`s) so the wm warps along M share one
  global read of it — the thread's vector load then reads shared memory; A fragment by four
  `vector<2xf16>` loads; C fragment `local(2, 1).spatial(8, 4).local(1, 2)`. The B operand is the
  code's **value** (minus the zero point), exact in f16 by the mma rule of gpu_matmul.py; the group
  scale is applied in f32 to the f32 partial sum of each group (K loop = groups x mma steps of 16
  inside a group), so the kernel computes with the exact dequantised weights.
- FMA (`fma_kernel`): tn threads (up to 4 warps; fewer for narrow N) per tm x tn output tile,
  C layout `local(tm, 1).spatial(1, tn)` (thread t owns output column t, tm rows); B tile 4 x tn in
  layout `spatial(1, tn).local(4, 1)` (thread t holds B[0..3, t]: its column's next 4 codes, no
  replication); A: each row's 4 f16 activations by one `vector<4xf16>` load (the same for every
  thread: a broadcast load). Each code is dequantised in f32 exactly like the reference,
  `(value - zero) * scale`, and accumulated with `llvm.intr.fma` (f32, `fma.rn.f32`; `math.fma`
  would call libdevice). Any type, group size and M.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, func, gpu, llvm, memref, nvvm, scf, vector

from .convert import emit_code_to_f32
from ..dialects.lowbit_types import LowBitType

MMA_B_LAYOUT = "local(2, 1).column_spatial(4, 8).local(2, 1)"
MMA_C_LAYOUT = "local(2, 1).spatial(8, 4).local(1, 2)"
MMA_TILE_M, MMA_TILE_N, MMA_TILE_K = 16, 8, 16
FMA_TILE_K = 4


def fma_b_layout(tn: int) -> str:
    return f"spatial(1, {tn}).local({FMA_TILE_K}, 1)"


def fma_c_layout(tm: int, tn: int) -> str:
    return f"local({tm}, 1).spatial(1, {tn})"


def _identity_layout(mtype: ir.MemRefType) -> bool:
    layout = mtype.layout
    if not isinstance(layout, ir.AffineMapAttr):
        return False
    amap = ir.AffineMapAttr(layout).value
    return amap == ir.AffineMap.get_identity(amap.n_dims)


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


class _Kernel:
    """``gpu.module @<name>_module`` with the code conversion ``@convert`` (code -> f32, built by
    `convert.emit_code_to_f32`) and the kernel ``gpu.func @<name>(%x, %p, %s[, %z], %y)``, whose
    entry block is the insertion point inside a ``with`` (it ends in ``gpu.return``). `smem`: the
    bytes of a workgroup-memory attribution (the mma kernel's staged B tiles)."""

    def __init__(self, name: str, dtype: LowBitType, m: int, n: int, k: int, kg: int, nbytes: int, zeros: bool,
                 smem: int | None = None, x_type: ir.MemRefType | None = None, y_type: ir.MemRefType | None = None):
        f16, f32, i8, i32 = ir.F16Type.get(), ir.F32Type.get(), ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(32)
        x_type = x_type or ir.MemRefType.get([m, k], f16)
        y_type = y_type or ir.MemRefType.get([m, n], f32)
        self.x_element, self.y_element = x_type.element_type, y_type.element_type
        # vector loads of x may assume their natural alignment only where x is a whole buffer (row
        # starts are then multiples of the vector: K % 4 = 0); a view's offset promises nothing
        self.x_aligned = _identity_layout(x_type)
        self.module = ir.Module.create()
        with ir.InsertionPoint(self.module.body):
            gmod = gpu.GPUModuleOp(f"{name}_module")
        body = gmod.regions[0].blocks.append()
        with ir.InsertionPoint(body):
            convert = func.FuncOp("convert", ([i32], [f32]), visibility="private")
            with ir.InsertionPoint(convert.add_entry_block()):
                func.ReturnOp([emit_code_to_f32(convert.entry_block.arguments[0], dtype)])
            scales = ir.MemRefType.get([n, kg], f32)
            args = [x_type, ir.MemRefType.get([nbytes], i8), scales]
            args += [scales] if zeros else []
            args.append(y_type)
            kernel = gpu.GPUFuncOp(ir.FunctionType.get(args, []), name)
            # The op's own `kernel` property: the Python builder's `kernel=True` sets a discardable
            # `gpu.kernel` instead, which convert-gpu-to-nvvm copies next to the one it adds (a
            # duplicate key that no parser accepts) -- harmless only after a print-and-parse.
            kernel.attributes["kernel"] = ir.UnitAttr.get()
            extra = []
            if smem is not None:
                workgroup = ir.AttrBuilder.get("gpu.GPU_AddressSpaceAttr")(gpu.AddressSpace.Workgroup, ir.Context.current)
                extra.append(ir.MemRefType.get([smem], i8, memory_space=workgroup))
                kernel.attributes["workgroup_attributions"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)
            self.entry = kernel.regions[0].blocks.append(*args, *extra)
        values = list(self.entry.arguments)
        self.x, self.p, self.s = values[:3]
        self.z = values[3] if zeros else None
        self.y = values[3 + zeros]
        self.smem = values[-1] if smem is not None else None

    def __enter__(self):
        self._ip = ir.InsertionPoint(self.entry)
        self._ip.__enter__()
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            gpu.ReturnOp([])
        self._ip.__exit__(*exc)

    def load_x(self, width: int, indices) -> list[ir.Value]:
        """`width` consecutive activations x[indices...] by one vector load, as f32 values (f16
        activations widened exactly; f32 ones as they are)."""
        f32 = ir.F32Type.get()
        element = self.x_element
        align = (width if self.x_aligned else 1) * ir.FloatType(element).width // 8
        xv = vector.load(ir.VectorType.get([width], element), self.x, indices, alignment=align)
        values = [vector.extract(xv, [], [j]) for j in range(width)]
        return values if isinstance(element, ir.F32Type) else [arith.extf(f32, v) for v in values]

    def load_x_f16(self, width: int, indices) -> ir.Value:
        """`width` consecutive activations as a vector of f16 (the mma A operand): f16 activations as
        they are; f32 ones rounded to f16 (`truncf`, only where the caller allowed it)."""
        f16, element = ir.F16Type.get(), self.x_element
        align = (width if self.x_aligned else 1) * ir.FloatType(element).width // 8
        xv = vector.load(ir.VectorType.get([width], element), self.x, indices, alignment=align)
        return xv if isinstance(element, ir.F16Type) else arith.truncf(ir.VectorType.get([width], f16), xv)

    def store_y(self, value: ir.Value, indices, accumulate: bool) -> None:
        """y[indices] = value (f32), or y[indices] + value where `accumulate` (the contraction's
        initial value: a linalg contraction adds to its output); rounded to y's element type."""
        f32 = ir.F32Type.get()
        if accumulate:
            old = memref.load(self.y, indices)
            value = arith.addf(old if isinstance(self.y_element, ir.F32Type) else arith.extf(f32, old), value)
        if not isinstance(self.y_element, ir.F32Type):
            value = arith.truncf(self.y_element, value)
        memref.store(value, self.y, indices)


def _constants(bits: int, extra: dict[str, int]) -> dict[str, ir.Value]:
    """The index constants the kernels share, then `extra`'s; the code mask (i64) and a zero (f32)."""
    consts = {"c0": 0, "c1": 1, "c2": 2, "c4": 4, "c8": 8, "c16": 16, "cbits": bits, **extra}
    out = {key: _index(value) for key, value in consts.items()}
    out["mask"] = arith.ConstantOp(ir.IntegerType.get_signless(64), (1 << bits) - 1).result
    out["zero"] = arith.ConstantOp(ir.F32Type.get(), 0.0).result
    return out


def _thread_codes(c: dict, pos, buffer, base=None) -> list[ir.Value]:
    """The 4 codes (f32) at stream position `pos` of the byte buffer `buffer` (starting at byte
    `base` when given): one vector load, reinterpretation as i64, shift/mask, in-register cast."""
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
    bit = arith.muli(pos, c["cbits"])
    byte = arith.divui(bit, c["c8"])
    if base is not None:
        byte = arith.addi(byte, base)
    off = arith.remui(bit, c["c8"])
    # byte-aligned only (a thread's window starts at any byte): the CUDA backend lowers vector loads
    # with their natural alignment unless told otherwise
    raw = vector.load(ir.VectorType.get([8], ir.IntegerType.get_signless(8)), buffer, [byte], alignment=1)
    word = vector.extract(vector.bitcast(ir.VectorType.get([1], i64), raw), [], [0])
    mine = arith.shrui(word, arith.index_cast(i64, off))
    codes = []
    for j in range(4):
        shifted = arith.shrui(mine, arith.ConstantOp(i64, j * c["bits"]).result)
        code = arith.trunci(i32, arith.andi(shifted, c["mask"]))
        codes.append(func.CallOp([ir.F32Type.get()], ir.FlatSymbolRefAttr.get("convert"), [code]).result)
    return codes


def _fma(a, b, acc):
    return llvm.intr_fma(a, b, acc)


def mma_kernel(name: str, dtype: LowBitType, m: int, n: int, k: int, group: int, nbytes: int, zeros: bool,
               warps_m: int = 1, warps_n: int = 1, x_type: ir.MemRefType | None = None,
               y_type: ir.MemRefType | None = None, accumulate: bool = False) -> ir.Module:
    """The tensor-core kernel: a block of warps_m x warps_n warps computes a (16 warps_m) x (8 warps_n)
    output tile, warp (wm, wn) its 16 x 8 part; each k step the block stages the packed B tiles of its
    warps_n n-tiles (16n bytes each, contiguous in the Fig. 8 order) in shared memory, so a B tile is
    read from global memory once per block and shared by the warps_m warps along M. Needs M % (16
    warps_m) = N % (8 warps_n) = 0, K % 16 = 0 and group % 16 = 0 (checked by the caller). Built in
    the current context. `x_type`/`y_type`: the memref types of x and y (default memref<MxKxf16>,
    memref<MxNxf32>; any strided layout with unit inner stride; f32 activations are rounded to f16,
    y is rounded to its element type); `accumulate`: y += x W'^T instead of y = x W'^T."""
    bits = dtype.bits
    kg, steps = k // group, group // MMA_TILE_K
    tile_bytes = MMA_TILE_K * MMA_TILE_N * bits // 8
    stride = tile_bytes + 8  # + the 8-byte window of the tile's last thread
    f16, f32 = ir.F16Type.get(), ir.F32Type.get()
    kernel = _Kernel(name, dtype, m, n, k, kg, nbytes, zeros, smem=warps_n * stride, x_type=x_type, y_type=y_type)
    with kernel as K:
        c = _constants(bits, {"ckg": kg, "csteps": steps, "ckt": k // MMA_TILE_K, "c32": 32, "cwn": warps_n,
                              "cwm": warps_m, "cstride": stride, "ctile": tile_bytes,
                              "ccopy": warps_n * tile_bytes, "cthreads": 32 * warps_m * warps_n})
        c["bits"] = bits
        tid = gpu.thread_id(gpu.Dimension.x)
        lane = arith.remui(tid, c["c32"])
        warp = arith.divui(tid, c["c32"])
        wm = arith.divui(warp, c["cwn"])
        wn = arith.remui(warp, c["cwn"])
        bn = gpu.block_id(gpu.Dimension.x)
        bm = gpu.block_id(gpu.Dimension.y)
        bnw = arith.muli(bn, c["cwn"])
        tn = arith.addi(bnw, wn)
        tm = arith.addi(arith.muli(bm, c["cwm"]), wm)
        grp = arith.divui(lane, c["c4"])
        tig = arith.remui(lane, c["c4"])
        row = arith.addi(arith.muli(tm, c["c16"]), grp)
        row8 = arith.addi(row, c["c8"])
        tn8 = arith.muli(tn, c["c8"])
        ncol = arith.addi(tn8, grp)
        kq = arith.muli(tig, c["c2"])
        lane4 = arith.muli(lane, c["c4"])
        sbase = arith.muli(wn, c["cstride"])
        col = arith.addi(tn8, kq)
        col1 = arith.addi(col, c["c1"])
        groups = scf.ForOp(c["c0"], c["ckg"], c["c1"], [c["zero"]] * 4)
        with ir.InsertionPoint(groups.body):
            g = groups.induction_variable
            zp = memref.load(K.z, [ncol, g]) if zeros else None
            gs = arith.muli(g, c["csteps"])
            mma_steps = scf.ForOp(c["c0"], c["csteps"], c["c1"], [c["zero"]] * 4)
            with ir.InsertionPoint(mma_steps.body):
                t = arith.addi(gs, mma_steps.induction_variable)
                gpu.barrier()
                copy = scf.ForOp(tid, c["ccopy"], c["cthreads"])
                with ir.InsertionPoint(copy.body):
                    i = copy.induction_variable
                    cw = arith.divui(i, c["ctile"])
                    cb = arith.remui(i, c["ctile"])
                    ctn = arith.addi(bnw, cw)
                    gtile = arith.addi(arith.muli(ctn, c["ckt"]), t)
                    gbyte = arith.addi(arith.muli(gtile, c["ctile"]), cb)
                    byte = memref.load(K.p, [gbyte])
                    memref.store(byte, K.smem, [arith.addi(arith.muli(cw, c["cstride"]), cb)])
                    scf.YieldOp([])
                gpu.barrier()
                kb = arith.addi(arith.muli(t, c["c16"]), kq)
                kb8 = arith.addi(kb, c["c8"])
                half2 = ir.VectorType.get([2], f16)
                a = [K.load_x_f16(2, [r, kk]) for r, kk in ((row, kb), (row8, kb), (row, kb8), (row8, kb8))]
                v = _thread_codes(c, lane4, K.smem, base=sbase)
                h = []
                for j in range(4):
                    # v - z: integers of at most 9 bits, exact in f16
                    d = arith.subf(v[j], zp) if zeros else arith.addf(v[j], c["zero"])
                    h.append(arith.truncf(f16, d))
                b = [vector.from_elements(half2, h[:2]), vector.from_elements(half2, h[2:])]
                acc_t = llvm.StructType.get_literal([f32] * 4)
                # the multiplicand types are what the op's parser infers from f16 operands (its
                # verifier crashes without them); the shape attribute has no Python builder
                acc = nvvm.MmaOp(acc_t, ir.Attribute.parse("#nvvm.shape<m = 16, n = 8, k = 16>"),
                                 nvvm.MMALayout.row, nvvm.MMALayout.col, a, b, list(mma_steps.inner_iter_args),
                                 multiplicandAPtxType=nvvm.MMATypes.f16,
                                 multiplicandBPtxType=nvvm.MMATypes.f16).result
                scf.YieldOp([llvm.extractvalue(f32, acc, [j]) for j in range(4)])
            s0 = memref.load(K.s, [col, g])
            s1 = memref.load(K.s, [col1, g])
            part, accs = mma_steps.results, groups.inner_iter_args
            scf.YieldOp([_fma(part[j], (s0, s1)[j % 2], accs[j]) for j in range(4)])
        r = groups.results
        for j, (yr, yc) in enumerate(((row, col), (row, col1), (row8, col), (row8, col1))):
            K.store_y(r[j], [yr, yc], accumulate)
    return kernel.module


def fma_kernel(name: str, dtype: LowBitType, m: int, n: int, k: int, group: int, nbytes: int, zeros: bool,
               tm: int, tn: int, x_type: ir.MemRefType | None = None, y_type: ir.MemRefType | None = None,
               accumulate: bool = False) -> ir.Module:
    """The CUDA-core kernel: grid (N / tn, M / tm), tn threads; needs K % 4 = 0, tm | M, tn | N.
    Built in the current context. `x_type`/`y_type`/`accumulate` as for `mma_kernel`, except that
    f32 activations stay f32 (the FMA kernel computes in f32: an f32 model keeps its precision)."""
    bits, kg = dtype.bits, k // group
    f16, f32 = ir.F16Type.get(), ir.F32Type.get()
    kernel = _Kernel(name, dtype, m, n, k, kg, nbytes, zeros, x_type=x_type, y_type=y_type)
    with kernel as K:
        c = _constants(bits, {"ck4": k // FMA_TILE_K, "ctile": FMA_TILE_K * tn, "ctm": tm, "ctn": tn,
                              "cgroup": group})
        c["bits"] = bits
        lane = gpu.thread_id(gpu.Dimension.x)
        bn = gpu.block_id(gpu.Dimension.x)
        bm = gpu.block_id(gpu.Dimension.y)
        ncol = arith.addi(arith.muli(bn, c["ctn"]), lane)
        row0 = arith.muli(bm, c["ctm"])
        lane4 = arith.muli(lane, c["c4"])
        tile0 = arith.muli(bn, c["ck4"])
        loop = scf.ForOp(c["c0"], c["ck4"], c["c1"], [c["zero"]] * tm)
        with ir.InsertionPoint(loop.body):
            t = loop.induction_variable
            k0 = arith.muli(t, c["c4"])
            tile = arith.addi(tile0, t)
            pos = arith.addi(arith.muli(tile, c["ctile"]), lane4)
            v = _thread_codes(c, pos, K.p)
            w = []
            for j in range(4):
                g = arith.divui(arith.addi(k0, _index(j)), c["cgroup"])
                s = memref.load(K.s, [ncol, g])
                if zeros:
                    z = memref.load(K.z, [ncol, g])
                    w.append(arith.mulf(arith.subf(v[j], z), s))
                else:
                    w.append(arith.mulf(v[j], s))
            new = []
            for r, acc in enumerate(loop.inner_iter_args):
                xrow = arith.addi(row0, _index(r))
                for j, xf in enumerate(K.load_x(4, [xrow, k0])):
                    acc = _fma(xf, w[j], acc)
                new.append(acc)
            scf.YieldOp(new)
        for r in range(tm):
            K.store_y(loop.results[r], [arith.addi(row0, _index(r)), ncol], accumulate)
    return kernel.module
