"""The sm_90a tensor-core contraction kernel: `wgmma.mma_async` on operand tiles staged in shared
memory by `cp.async` (issue 22: "wgmma on sm_90a where the bindings reach it"). Built with the
nvgpu / nvvm op builders in a `gpu.module` of its own; `codegen-gpu-wgmma-contractions` launches it
in place of the contractions it takes.

The kernel computes C'[z, i, j] (+)= sum_k A'[z, i, k] B'[z, k, j] for i < M, j < N, k < K and
z < Z, each operand a memref whose dimensions play the roles z, i, j, k (`WgmmaProblem`): A' and
B' are the contraction's operands in either order (a convolution's im2col product runs with its
output pixels as i), an operand without z is shared by every z, C' may be stored in any order of
its dimensions. One block is one warpgroup (128 threads) computing a 128 x BN tile of C' (BN: the
largest of 128, 64, 32, 16, 8 dividing N) for one z, as two 64 x BN halves
(`wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.{f16,bf16}`), over k tiles of 32 in a 3-stage
`cp.async` pipeline (16-byte copies, L1 bypassed; 3 x (128 + BN) x 32 x 2 bytes of static shared
memory: 48 KiB at BN = 128). A k tile past K, or rows of A' past M, are zero-filled by the copies
(`cp.async`'s source size 0), and accumulators of rows past M are not stored.

Shared memory holds each operand tile in the canonical no-swizzle layout of the PTX ISA
("Shared Memory Matrix Layout": core matrices of 8 rows x 16 bytes, 128 contiguous bytes each):
- K-major (the operand's contiguous dimension is k: A[m, k], a Linear's weight W[n, k]): core
  matrix (r / 8, k / 8) at ((r / 8) x 4 + k / 8) x 128 bytes, its row r % 8 at 16 (r % 8) bytes
  (r the operand's i or j);
- MN-major (contiguous along i or j: `torch.mm`'s right operand B[k, n], im2col's [k, pixels]):
  core matrix (r / 8, k / 8) at ((r / 8) x 4 + k / 8) x 128 bytes, its row k % 8 at 16 (k % 8)
  bytes, each row 8 consecutive r; the instruction's transpose flag for that operand.
In both, core matrices adjacent along k are 128 bytes apart (the descriptor's leading dimension
byte offset, LBO) and those adjacent along i or j 512 bytes apart (the stride dimension byte
offset, SBO); each 16-byte copy fills one core-matrix row from 16 contiguous bytes of global memory.
The descriptors (PTX ISA "Matrix Descriptor Format": start address >> 4 in bits 0-13, LBO >> 4 in
16-29, SBO >> 4 in 32-45, swizzle mode 0) are computed from the buffer's shared address.

The accumulators (the m64nNk16 D fragment: element e of thread t is row 16 (t / 32) + (t % 32) / 4
+ 8 ((e / 2) % 2), column 8 (e / 4) + 2 (t % 4) + e % 2 of its half) start from C or from zero, and
the products are summed in f32, 16 k at a time in the tensor core, k tiles in order.

Not run on a GPU yet (this machine has none): the PTX is assembled by ptxas for sm_90a; the
layouts follow the PTX ISA's canonical layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import arith, gpu, llvm, memref, nvgpu, nvvm, scf

TILE_M, TILE_K, STAGES, THREADS = 128, 32, 3, 128
TILE_N_CHOICES = (128, 64, 32, 16, 8)
CORE_BYTES = 128  # one core matrix: 8 rows x 16 bytes
LBO = CORE_BYTES  # core matrices adjacent along k
SBO = (TILE_K // 8) * CORE_BYTES  # core matrices adjacent along i or j


@dataclass(frozen=True)
class WgmmaProblem:
    """The product the kernel computes: extents, and per operand memref the role of each of its
    dimensions ("z", "i", "j", "k"; A' of z, i, k, B' of z, j, k, C' of z, i, j with i and j)."""

    z: int
    m: int
    n: int
    k: int
    a_roles: tuple[str, ...]
    b_roles: tuple[str, ...]
    c_roles: tuple[str, ...]

    @property
    def tile_n(self) -> int:
        return next(t for t in TILE_N_CHOICES if self.n % t == 0)

    @property
    def a_k_major(self) -> bool:
        return self.a_roles[-1] == "k"

    @property
    def b_k_major(self) -> bool:
        return self.b_roles[-1] == "k"

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.n // self.tile_n, -(-self.m // TILE_M), self.z)

    @property
    def stage_bytes(self) -> int:
        return (TILE_M + self.tile_n) * TILE_K * 2

    @property
    def shared_bytes(self) -> int:
        return STAGES * self.stage_bytes


def refusal(m: int, n: int, k: int) -> str | None:
    """Why the kernel does not take an M x N x K product (None where it does): at least a block's
    128 rows (smaller products waste most of the tile: the `mma-sync` schedule's tiles fit them),
    whole 16-byte copies along every dimension."""
    if m < TILE_M:
        return f"M = {m} is less than a block's {TILE_M} rows"
    for name, extent in (("M", m), ("N", n), ("K", k)):
        if extent % 8:
            return f"{name} = {extent} is not a multiple of 8"
    return None


def tile_offset(row: int, col8: int, k_major: bool) -> int:
    """Byte offset within an operand tile of the 16-byte chunk `col8` of tile row `row`: for a
    K-major operand row = i or j and col8 = k / 8; for an MN-major one row = k and col8 = i / 8 or
    j / 8 (the layout above; `_tile_offset` builds the same in IR)."""
    core = (row // 8) * (TILE_K // 8) + col8 if k_major else col8 * (TILE_K // 8) + row // 8
    return core * CORE_BYTES + (row % 8) * 16


def descriptor_address(r: int, k: int, k_major: bool, start: int = 0) -> int:
    """The byte address at which a wgmma with a no-swizzle descriptor starting `start` bytes in reads
    element (r, k) of its 64 x 16 (A) or N x 16 (B) operand, by the PTX ISA's canonical layouts with
    this kernel's LBO and SBO: core matrix (r / 8, k / 8) at r / 8 x SBO + k / 8 x LBO; inside it
    K-major rows of 8 k (row r % 8), MN-major rows of 8 r (row k % 8), 16 bytes each."""
    inside = (r % 8) * 16 + (k % 8) * 2 if k_major else (k % 8) * 16 + (r % 8) * 2
    return start + (r // 8) * SBO + (k // 8) * LBO + inside


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _i64(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(64), value).result


def _tile_offset(row: ir.Value, col8: ir.Value, k_major: bool) -> ir.Value:
    """`tile_offset` in elements (16-bit), built in IR."""
    per_row = _index(TILE_K // 8)
    if k_major:
        core = arith.addi(arith.muli(arith.divui(row, _index(8)), per_row), col8)
    else:
        core = arith.addi(arith.muli(col8, per_row), arith.divui(row, _index(8)))
    return arith.addi(arith.muli(core, _index(CORE_BYTES // 2)), arith.muli(arith.remui(row, _index(8)), _index(8)))


def wgmma_kernel(name: str, problem: WgmmaProblem, a_type: ir.MemRefType, b_type: ir.MemRefType,
                 c_type: ir.MemRefType, *extra_types: ir.MemRefType, accumulate: bool = True,
                 initial=None, store=None) -> ir.Module:
    """``gpu.module @<name>_module { gpu.func @<name>(%a, %b, %c, %extra...) kernel }`` (built in the
    current context) for `problem`. A' and B' f16 or bf16 (the same), static strides and offsets,
    their innermost stride 1 and the others and the offset multiples of 8 elements (16-byte copies).
    The accumulators start from `initial(extra_args)(c_indices)` when given (a prologue computed in
    registers), else from C's values where `accumulate` (f32), else from zero; with a start other
    than zero M must be a multiple of 128. `store(extra_args)`, when given, returns
    `f(c_indices, value, c)` that stores one accumulator (an epilogue computed in registers; C is
    then its output, of any type); else C[...] = value."""
    p = problem
    element = a_type.element_type
    wtype = nvvm.WGMMATypes.f16 if isinstance(element, ir.F16Type) else nvvm.WGMMATypes.bf16
    f32, i64 = ir.F32Type.get(), ir.IntegerType.get_signless(64)
    tn = p.tile_n
    acc_regs = tn // 2
    acc_type = llvm.StructType.get_literal([f32] * acc_regs)
    workgroup = ir.AttrBuilder.get("gpu.GPU_AddressSpaceAttr")(gpu.AddressSpace.Workgroup, ir.Context.current)
    smem_type = ir.MemRefType.get([p.shared_bytes // 2], element, memory_space=workgroup)
    m_tail, k_tail = p.m % TILE_M != 0, p.k % TILE_K != 0

    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        gmod = gpu.GPUModuleOp(f"{name}_module")
    with ir.InsertionPoint(gmod.regions[0].blocks.append()):
        kernel = gpu.GPUFuncOp(ir.FunctionType.get([a_type, b_type, c_type, *extra_types], []), name)
        # the op's own `kernel` property (lowbit/gpu_kernels.py: the builder's `kernel=True` adds a
        # discardable attribute that convert-gpu-to-nvvm duplicates)
        kernel.attributes["kernel"] = ir.UnitAttr.get()
        kernel.attributes["workgroup_attributions"] = ir.IntegerAttr.get(i64, 1)
        # 16-byte copies and descriptors need 16-byte aligned core matrices (an attribution is
        # otherwise aligned to its element type only)
        align = ir.DictAttr.get({"llvm.align": ir.IntegerAttr.get(i64, 128)})
        kernel.attributes["workgroup_attrib_attrs"] = ir.ArrayAttr.get([align])
        entry = kernel.regions[0].blocks.append(a_type, b_type, c_type, *extra_types, smem_type)
    a, b, c, *extras, smem = entry.arguments

    with ir.InsertionPoint(entry):
        k_tiles = -(-p.k // TILE_K)
        tid = gpu.thread_id(gpu.Dimension.x)
        block_j = arith.muli(gpu.block_id(gpu.Dimension.x), _index(tn))
        block_i = arith.muli(gpu.block_id(gpu.Dimension.y), _index(TILE_M))
        z = gpu.block_id(gpu.Dimension.z)
        base = arith.index_cast(i64, memref.extract_aligned_pointer_as_index(smem))
        fixed = _i64(((LBO >> 4) << 16) | ((SBO >> 4) << 32))

        def descriptor(byte_offset: ir.Value) -> ir.Value:
            """The matrix descriptor of the core matrices `byte_offset` (i64) bytes into the shared
            buffer: start address (18 bits of the shared window, in 16-byte units) | LBO | SBO."""
            address = arith.andi(arith.addi(base, byte_offset), _i64(0x3FFFF))
            return arith.ori(arith.shrui(address, _i64(4)), fixed)

        def copy_operand(source, roles, rows_role: str, rows: int, extent: int, block0, k0, dst0) -> None:
            """The cp.async copies of one operand's k tile: `rows` tile rows along `rows_role`
            ("i" or "j", from `block0`, `extent` of them in all) by TILE_K along k."""
            k_major = roles[-1] == "k"
            chunks_per_row = TILE_K // 8 if k_major else rows // 8
            total = (rows if k_major else TILE_K) * chunks_per_row
            for first in range(0, total, THREADS):
                chunk = arith.addi(tid, _index(first))
                r, col8 = arith.divui(chunk, _index(chunks_per_row)), arith.remui(chunk, _index(chunks_per_row))
                if k_major:
                    along, k = arith.addi(block0, r), arith.addi(k0, arith.muli(col8, _index(8)))
                else:
                    k, along = arith.addi(k0, r), arith.addi(block0, arith.muli(col8, _index(8)))
                valid = []
                if k_tail:
                    valid.append(arith.cmpi(arith.CmpIPredicate.ult, k, _index(p.k)))
                if rows_role == "i" and m_tail:
                    valid.append(arith.cmpi(arith.CmpIPredicate.ult, along, _index(extent)))
                size = None
                if valid:
                    ok = valid[0] if len(valid) == 1 else arith.andi(valid[0], valid[1])
                    # a chunk past the operand reads nothing and writes zeros (source size 0) from
                    # an address inside the operand (the tile's first row and k)
                    k = arith.select(ok, k, k0)
                    along = arith.select(ok, along, block0)
                    size = arith.select(ok, _index(8), _index(0))
                value = {"z": z, "k": k, rows_role: along}
                dst = arith.addi(dst0, _tile_offset(r, col8, k_major))
                copy = lambda: nvgpu.device_async_copy(smem, [dst], source, [value[x] for x in roles], 8,  # noqa: E731
                                                       src_elements=size, bypass_l1=True)
                if total - first >= THREADS:
                    copy()
                else:  # fewer chunks than threads left: the first ones copy
                    guard = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ult, chunk, _index(total)))
                    with ir.InsertionPoint(guard.then_block):
                        copy()
                        scf.YieldOp([])

        def load_stage(stage: ir.Value, tile: ir.Value) -> None:
            """Issue the copies of k tile `tile` into `stage` (committed by the caller: one
            cp.async group per k step, empty where there is no tile left, so that
            `cp.async.wait_group STAGES - 2` always means "the tile of this step has landed")."""
            k0 = arith.muli(tile, _index(TILE_K))
            a0 = arith.muli(stage, _index(p.stage_bytes // 2))
            b0 = arith.addi(a0, _index(TILE_M * TILE_K))
            copy_operand(a, p.a_roles, "i", TILE_M, p.m, block_i, k0, a0)
            copy_operand(b, p.b_roles, "j", tn, p.n, block_j, k0, b0)

        warp, lane = arith.divui(tid, _index(32)), arith.remui(tid, _index(32))
        row0 = arith.addi(arith.addi(block_i, arith.muli(warp, _index(16))), arith.divui(lane, _index(4)))
        col0 = arith.addi(block_j, arith.muli(arith.remui(lane, _index(4)), _index(2)))

        def c_indices(half: int, e: int) -> tuple[ir.Value, list[ir.Value]]:
            """(i, C's indices) of accumulator element e of a half."""
            i = arith.addi(row0, _index(64 * half + 8 * ((e // 2) % 2)))
            j = arith.addi(col0, _index(8 * (e // 4) + e % 2))
            value = {"z": z, "i": i, "j": j}
            return i, [value[x] for x in p.c_roles]

        start = initial(list(extras)) if initial is not None else \
            (lambda indices: memref.load(c, indices)) if accumulate else None
        accs = []
        for half in range(2):
            if start is None:
                accs.append(llvm.ZeroOp(acc_type).result)
                continue
            acc = llvm.UndefOp(acc_type).result
            for e in range(acc_regs):
                acc = llvm.insertvalue(acc, start(c_indices(half, e)[1]), [e])
            accs.append(acc)

        for s in range(STAGES - 1):
            if s < k_tiles:
                load_stage(_index(s), _index(s))
            nvvm.cp_async_commit_group()
        loop = scf.ForOp(_index(0), _index(k_tiles), _index(1), accs)
        with ir.InsertionPoint(loop.body):
            kt = loop.induction_variable
            # tile kt's group is complete when at most STAGES - 2 newer groups are pending
            nvvm.cp_async_wait_group(STAGES - 2)
            # the copies wrote through the generic proxy; wgmma reads through the async proxy
            nvvm.fence_proxy(nvvm.ProxyKind.async_shared, space=nvvm.SharedSpace.shared_cta)
            gpu.barrier()
            stage = arith.index_cast(i64, arith.muli(arith.remui(kt, _index(STAGES)), _index(p.stage_bytes)))
            nvvm.wgmma_fence_aligned()
            accs = list(loop.inner_iter_args)
            shape = ir.Attribute.parse(f"#nvvm.shape<m = 64, n = {tn}, k = 16>")
            layout_a = nvvm.MMALayout.row if p.a_k_major else nvvm.MMALayout.col
            layout_b = nvvm.MMALayout.col if p.b_k_major else nvvm.MMALayout.row
            for kk in range(TILE_K // 16):
                b_desc = descriptor(arith.addi(stage, _i64(TILE_M * TILE_K * 2 + 2 * kk * LBO)))
                for half in range(2):
                    a_desc = descriptor(arith.addi(stage, _i64(half * (64 // 8) * SBO + 2 * kk * LBO)))
                    accs[half] = nvvm.wgmma_mma_async(
                        acc_type, accs[half], a_desc, b_desc, shape, wtype, wtype, nvvm.WGMMATypes.f32,
                        nvvm.WGMMAScaleOut.one, nvvm.WGMMAScaleIn.one, nvvm.WGMMAScaleIn.one, layout_a, layout_b)
            nvvm.wgmma_commit_group_sync_aligned()
            # the stage read here is refilled STAGES - 1 tiles later, after the next barrier
            nvvm.wgmma_wait_group_sync_aligned(0)
            ahead = arith.addi(kt, _index(STAGES - 1))
            refill = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ult, ahead, _index(k_tiles)))
            with ir.InsertionPoint(refill.then_block):
                load_stage(arith.remui(ahead, _index(STAGES)), ahead)
                scf.YieldOp([])
            nvvm.cp_async_commit_group()
            scf.YieldOp(accs)

        put = store(list(extras)) if store is not None else (lambda indices, value, out: memref.store(value, out, indices))
        for half, acc in enumerate(loop.results):
            for e in range(acc_regs):
                i, indices = c_indices(half, e)
                value = llvm.extractvalue(f32, acc, [e])
                if not m_tail:
                    put(indices, value, c)
                    continue
                inside = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ult, i, _index(p.m)))
                with ir.InsertionPoint(inside.then_block):
                    put(indices, value, c)
                    scf.YieldOp([])
        gpu.ReturnOp([])
    return module
