"""GPU schedules per kernel kind: parameters (dataclasses, overridable), the tiling each chooses for
a kernel, and the transform IR that carries it out.

A schedule works in the phases of the CUDA lowering (`backend/cuda/lower.py`), its transform ops
built in each phase's entry point: "tile" (block tiles, the k loop, shared-memory
promotion), "map" (copies and compute spread over threads or warps, vectorisation, `gpu.launch`),
"finish" (after the accumulators are hoisted: SIMT contractions become FMAs) and "pipeline" (after
`convert-vector-to-gpu`: `cp.async` copies, multi-buffered shared memory, software pipelining).

- `ContractionSchedule`: matmul, batch matmul, Linear, attention's products, convolutions as
  im2col batch matmuls (`codegen-gpu-im2col-convolutions`). f16 and bf16 operands on tensor cores
  (`mma.sync.m16n8k16`, f32 accumulators, or f16 ones for f16 operands): block
  tiles from a table chosen by shape (`mma_tiling`), 2x2 or 1xN warps, A and B tiles staged in
  shared memory by `cp.async` in 2-3 stages, fragments loaded with `ldmatrix`. Everything else
  (f32, mixed types, shapes that do not tile by 16) as a SIMT kernel: block tiles staged in shared
  memory, a register tile of `thread_m x thread_n` accumulators per thread, products summed in k
  order (no TF32).
- `VectorSchedule` (elementwise, data movement, outer reductions): 128-bit vectors along the
  output's contiguous dimension, up to 256 threads per block, reduction loops inside each thread.
- `RowReductionSchedule` (softmax, LayerNorm, RMSNorm, row sums): a warp per row (several rows per
  block) or, for long rows, a block of up to 8 warps per row; `shfl.sync` butterflies, one pass over
  global memory (the kernel is built by `codegen-gpu-reduce-rows`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod
from typing import ClassVar

from torch_mlir import ir

from ..kernels import Kernel, KernelKind
from ..schedules import Schedule, resolve_schedules, schedule_key
from ..transform_ir import cse, match_names, tile
from . import transform_gpu as tg
from .drop_unit_dims import DROP_UNIT_DIMS_ATTR
from ..fusion import block_tile_of_output
from .fusion import FusedNeighbour
from .sync_epilogues import EPILOGUE_ATTR
from .reduce_rows import (ROW_CHUNKS_ATTR, ROW_THREADS_ATTR, ROW_VECTOR_ATTR, ROWS_PER_BLOCK_ATTR, row_combiners,
                          row_member_problem, row_vector_width)
from .layouts import aligned_elements, element_bytes, vector_width
from .matvec import matvec_problem, matvec_rows
from .target import GpuTarget

MAX_THREADS = 256
WARP = 32
# Shared memory rows padded so that 8 rows read by one ldmatrix (16 bytes each) fall in distinct banks.
SHARED_ROW_PAD_BYTES = 16


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def padded_row_elements(row: int, elem_bytes: int) -> int:
    """Row length of a shared-memory tile after padding (`codegen-gpu-workgroup-globals`): rows whose
    length is a multiple of 32 bytes get 16 more bytes, so consecutive rows start in different
    16-byte bank groups (8 ldmatrix rows of 16 bytes: conflict-free)."""
    nbytes = row * elem_bytes
    if nbytes % 32 == 0 and nbytes >= 32:
        return row + SHARED_ROW_PAD_BYTES // elem_bytes
    return row


@dataclass(frozen=True)
class GpuSchedule(Schedule):
    """Base of the GPU schedules (`Schedule`: a `name`, parameters as overridable fields)."""

    def choose(self, kernel: Kernel, target: GpuTarget):
        """The tiling for `kernel` on `target`, or a string saying why the schedule does not apply."""
        raise NotImplementedError

    # The transform IR per phase of the CUDA lowering ("tile", "promote", "map", "finish",
    # "pipeline"; `attach_schedule._append_script` builds it in the phase's entry point): "tile" gets
    # the kernel's op (its handle may be consumed), the others the module. A schedule overrides the
    # phases it has work in.
    def build_tile(self, kid: int, kernel: Kernel, tiling, op: ir.Value) -> None:
        raise NotImplementedError

    def build_promote(self, kid: int, kernel: Kernel, tiling, root: ir.Value) -> None:
        return

    def build_map(self, kid: int, kernel: Kernel, tiling, root: ir.Value) -> None:
        return

    def build_finish(self, kid: int, kernel: Kernel, tiling, root: ir.Value) -> None:
        return

    def build_pipeline(self, kid: int, kernel: Kernel, tiling, root: ir.Value) -> None:
        return


# --------------------------------------------------------------------------------------------------
# Contractions


@dataclass(frozen=True)
class CopyPlan:
    """How the threads of a block copy one operand tile into shared memory: `num_threads` per tile
    dimension (0: not split), `linear_dims` their thread mapping, `vector` elements per access."""

    shape: tuple[int, ...]
    num_threads: tuple[int, ...]
    linear_dims: tuple[int, ...]
    vector: int


@dataclass(frozen=True)
class ContractionTiling:
    """What `ContractionSchedule` decided for one kernel."""

    mma: bool
    order: tuple[int, ...]          # loop interchange: new loop i is old loop order[i]
    outer: int                      # leading loops tiled by 1 into the grid (batch, outer m/n dims)
    k_outer: int                    # outer reduction loops, by 1, outside the k loop
    block: tuple[int, int, int]     # (BM, BN, BK)
    sub: tuple[int, int]            # per warp (mma) or per thread (simt) tile of C
    threads: int
    stages: int
    copies: tuple[CopyPlan, CopyPlan]   # of input 0 and input 1, in operand order
    split: tuple[bool, bool]        # whether m and n are split over blocks (else one block tile covers it)
    grid: int
    shared_bytes: int
    element_type: str
    flops: int
    bytes: int
    prologue: tuple[FusedNeighbour, ...] = ()   # kernels run in the block tiles first (fusion.py)
    epilogue: tuple[FusedNeighbour, ...] = ()   # and last
    linearized: bool = False        # the outer tiles on one grid dimension (more than the grid's three)

    @property
    def schedule(self) -> str:
        return "mma-sync" if self.mma else "simt"

    def describe(self) -> str:
        bm, bn, bk = self.block
        what = "warp" if self.mma else "thread"
        elem = "tf32" if self.mma and self.element_type == "f32" else self.element_type
        fused = "".join(f" + {role} (kernel{'s' if len(found) > 1 else ''} {', '.join(str(n.id) for n in found)})"
                        for role, found in (("prologue", self.prologue), ("epilogue", self.epilogue)) if found)
        linear = f", {self.outer} outer dimensions on one grid dimension" if self.linearized else ""
        return (f"{self.schedule} {elem}: block {bm}x{bn}x{bk}, {what} tile "
                f"{self.sub[0]}x{self.sub[1]}, {self.threads} threads, {self.stages} stage(s){linear}{fused}")

    def output_block_sizes(self, kernel: Kernel) -> tuple[int, ...] | None:
        """The block tile per dimension of C (`fusion.block_tile_of_output`)."""
        bm, bn, _ = self.block
        loop_sizes = {d: 1 for d in self.order[:self.outer]}
        loop_sizes[kernel.m[-1]] = bm if self.split[0] else 0
        loop_sizes[kernel.n[-1]] = bn if self.split[1] else 0
        return block_tile_of_output(kernel, loop_sizes)

    def _c_dim_of(self, kernel: Kernel, loop: int) -> int | None:
        for d, e in enumerate(kernel.maps[2].results):
            if isinstance(e, ir.AffineDimExpr) and e.position == loop:
                return d
        return None

    def whole_output_dims(self, kernel: Kernel) -> set[int]:
        """The dimensions of C one block tile covers whole, or could: m or n when one block tile
        spans it (a padded contraction's 16 rows)."""
        bm, bn, _ = self.block
        ranges = kernel.loop_ranges
        found = set()
        for loop, size in ((kernel.m[-1], bm), (kernel.n[-1], bn)):
            d = self._c_dim_of(kernel, loop)
            if d is not None and ranges[loop] == size:
                found.add(d)
        return found

    def covering(self, kernel: Kernel, dims: set[int]) -> ContractionTiling | None:
        """This tiling with the C dimensions `dims` covered whole by each block (not split over
        blocks: the same tiles, one fewer grid dimension), or None when one cannot be."""
        split = list(self.split)
        for d in dims:
            for i, loop in enumerate((kernel.m[-1], kernel.n[-1])):
                if self._c_dim_of(kernel, loop) == d:
                    split[i] = False
                    break
            else:
                return None
        return replace(self, split=tuple(split))

    def with_neighbours(self, prologue: tuple[FusedNeighbour, ...],
                        epilogue: tuple[FusedNeighbour, ...]) -> ContractionTiling:
        """This tiling with the prologue and epilogue kernels run in its block tiles, their work
        added (their bytes as if from memory: intermediates the block wrote come from cache)."""
        flops = self.flops + sum(n.flops for n in prologue + epilogue)
        moved = self.bytes + sum(n.bytes for n in prologue + epilogue)
        return replace(self, prologue=prologue, epilogue=epilogue, flops=flops, bytes=moved)


# Block tiles for tensor cores (BM, BN, WM, WN): 1-4 warps of WM x WN, CUTLASS-like shapes.
MMA_TILES = (
    (128, 128, 64, 64), (128, 64, 64, 32), (64, 128, 32, 64), (64, 64, 32, 32), (64, 32, 32, 16),
    (32, 64, 16, 32), (32, 32, 16, 16), (16, 128, 16, 32), (16, 64, 16, 16), (16, 32, 16, 16),
    (16, 16, 16, 8), (16, 8, 16, 8),
)
# A SIMT contraction with k and sqrt(m n) at least this large takes k-steps of 32.
SIMT_LARGE = 512
# Register tiles for SIMT contractions (per-thread accumulators), largest first.
SIMT_THREAD_TILES = ((8, 8), (4, 8), (8, 4), (4, 4), (2, 4), (4, 2), (2, 2), (1, 4), (4, 1), (1, 2), (2, 1), (1, 1))


def _element_name(t: ir.Type) -> str:
    return str(t)


def _tile_cost(target: GpuTarget, bm: int, bn: int, k: int, blocks: int, warps: int, resident: int,
               intensity: float, needed_intensity: float) -> float:
    """Relative run time of a block tiling: the blocks an SM has to run one after the other, each
    `bm*bn*k` multiply-adds, at the rate the resident blocks reach: full with 4 warps on the SM (one
    per sub-partition) and enough reuse per element loaded (`intensity` multiply-adds per element,
    `needed_intensity` to keep the math units busy)."""
    per_sm = -(-blocks // target.sms)
    active = min(per_sm, max(1, resident))
    rate = min(1.0, active * warps / 4) * min(1.0, intensity / needed_intensity)
    return per_sm * bm * bn * k / rate


@dataclass(frozen=True)
class ContractionSchedule(GpuSchedule):
    name: ClassVar[str] = "contraction"
    tensor_cores: bool = True   # f16 / bf16 operands on mma.sync (else SIMT)
    block_m: int = 0            # 0: from the tile table by shape
    block_n: int = 0
    block_k: int = 0
    stages: int = 0             # shared-memory stages (0: 2, or 3 where 48 KiB allow)
    warp_m: int = 0             # tensor-core warp tile (0: the tile table's for the block tile)
    warp_n: int = 0
    thread_m: int = 0           # SIMT register tile (0: by shape)
    thread_n: int = 0
    allow_tf32: bool = False    # f32 contractions on TF32 tensor cores (10-bit mantissa products), as torch's flag
    fuse: bool = True           # prologue (fill) and epilogue (bias, activation) kernels in the block tiles (fusion.py)
    wgmma: bool = True          # sm_90a: the contractions the wgmma kernel takes launch it (wgmma_contractions.py)

    def uses_tensor_cores(self, kernel: Kernel, target: GpuTarget) -> bool:
        """Whether this contraction goes to `mma.sync` once m, n and k are multiples of 16 and C's rows
        are aligned for the accumulators' 2-element accesses (`codegen-gpu-pad-contractions` makes
        them so): f16 operands with an f32 or f16 accumulator or bf16 ones with an f32 accumulator (`_mma_types`),
        A and B contiguous along m/k and n/k."""
        if kernel.kind is not KernelKind.CONTRACTION or not (self.tensor_cores and target.tensor_cores):
            return False
        a_idx = 1 - kernel.b_operand
        types = [ir.MemRefType(v.type) for v in kernel.op.operands]
        mi, ni, ki = kernel.m[-1], kernel.n[-1], kernel.k[-1]
        f32 = all(isinstance(t.element_type, ir.F32Type) for t in types)
        return ((_mma_types(types[a_idx], types[kernel.b_operand], types[2]) or (self.allow_tf32 and f32))
                and _innermost(kernel.maps[a_idx]) in (mi, ki) and _innermost(kernel.maps[kernel.b_operand]) in (ni, ki)
                and _innermost(kernel.maps[2]) == ni)

    @staticmethod
    def mma_aligned(kernel: Kernel) -> bool:
        """m, n, k multiples of 16 and C's rows aligned to 2 elements (8-byte accumulator stores)."""
        ranges = kernel.loop_ranges
        c_type = ir.MemRefType(kernel.op.operands[2].type)
        return (all(ranges[d[-1]] % 16 == 0 for d in (kernel.m, kernel.n, kernel.k))
                and aligned_elements(c_type) >= 2)

    def choose(self, kernel: Kernel, target: GpuTarget):
        if kernel.kind is not KernelKind.CONTRACTION:
            return f"not a contraction ({kernel.kind.value})"
        op = kernel.op
        a_idx = 1 - kernel.b_operand
        types = [ir.MemRefType(v.type) for v in op.operands]
        ranges = kernel.loop_ranges
        mi, ni, ki = kernel.m[-1], kernel.n[-1], kernel.k[-1]
        big_m, big_n, big_k = ranges[mi], ranges[ni], ranges[ki]
        outer_dims = list(kernel.batch) + list(kernel.m[:-1]) + list(kernel.n[:-1])
        k_outer = list(kernel.k[:-1])
        # A loop of one trip that only C reads (a VTC store of a projection into one position of a
        # KV cache) is no batch, m, n or k for linalg; as an outer dimension it is a tile of 1.
        outer_dims = [d for d in range(kernel.rank) if ranges[d] == 1 and all(
            d not in dims for dims in (outer_dims, k_outer, [mi, ni, ki]))] + outer_dims
        order = tuple(outer_dims + k_outer + [mi, ni, ki])
        if sorted(order) != list(range(kernel.rank)):
            return "the contraction's dimensions are not batch/m/n/k"
        if min(big_m, big_n, big_k) < 2:
            return "a unit m, n or k dimension (a matrix-vector product)"
        outer_tiles = prod(ranges[d] for d in outer_dims)
        elem = _element_name(types[a_idx].element_type)
        mma = self.uses_tensor_cores(kernel, target) and self.mma_aligned(kernel)
        candidates = (self._mma_tiles(target, big_m, big_n, big_k, outer_tiles) if mma
                      else self._simt_tiles(target, big_m, big_n, big_k, outer_tiles))
        if not candidates:
            return "no block tile fits the shape"
        # The cheapest tiling whose operand tiles the block's threads can copy (a 4x32 SIMT block of
        # four threads cannot spread a 16x32 B tile: the next tiling then, not the naive mapping).
        refusals = []
        for (bm, bn, bk), sub, threads in candidates:
            tile_of = {mi: bm, ni: bn, ki: bk}
            copies = []
            for idx in (0, 1):
                # The operand's tile after the unit dimensions of the tiles of 1 are dropped.
                shape = tuple(tile_of[e.position] for e in kernel.maps[idx].results
                              if isinstance(e, ir.AffineDimExpr) and e.position in tile_of)
                copy = _copy_plan(shape, types[idx], threads)
                if copy is None:
                    refusals.append(f"operand {idx} tile {shape} cannot be spread over {threads} threads")
                    break
                copies.append(copy)
            else:
                break
        else:
            return refusals[0]
        # Each outer dimension is a grid dimension next to m and n, and `map_forall_to_blocks`
        # launches three: m or n covered by one block tile need none.
        split = [True, True]
        for i, (extent, size) in enumerate(((big_m, bm), (big_n, bn))):
            if len(outer_dims) + sum(split) > 3 and extent == size:
                split[i] = False
        # Beyond three, the outer tiles share one grid dimension: the block forall's leading
        # dimensions linearised after tiling (codegen-gpu-drop-unit-dims), m and n split as they were.
        linearized = len(outer_dims) + sum(split) > 3
        trips = big_k // bk
        stages = self.stages or 2
        if not self.stages and mma and _shared_bytes(copies, types, 3) <= target.shared_per_block_static:
            stages = 3
        stages = min(stages, trips)  # the pipeliner needs at least as many k steps as stages
        # The pipeliner takes only copies at the top of the k loop's body: a copy that fewer threads
        # than the block's make is guarded by an `scf.if` it cannot see into.
        predicated = any(prod(n for n in c.num_threads if n) < threads for c in copies)
        if k_outer or predicated:
            stages = 1
        while stages > 1 and _shared_bytes(copies, types, stages) > target.shared_per_block_static:
            stages -= 1
        shared = _shared_bytes(copies, types, stages)
        if shared > target.shared_per_block_static:
            return f"its tiles need {shared} bytes of shared memory"
        grid = outer_tiles * (big_m // bm) * (big_n // bn)
        flops = 2 * kernel.iterations
        moved = sum(prod(t.shape) * element_bytes(t.element_type) for t in types) + \
            prod(types[2].shape) * element_bytes(types[2].element_type)
        return ContractionTiling(bool(mma), order, len(outer_dims), len(k_outer), (bm, bn, bk), sub, threads, stages,
                                 tuple(copies), tuple(split), grid, shared, elem, flops, moved,
                                 linearized=linearized)

    def _mma_tiles(self, target, big_m, big_n, big_k, outer_tiles):
        """The tensor-core block tilings that fit the shape, cheapest first (`_tile_cost`)."""
        bk = self.block_k or (32 if big_k % 32 == 0 else 16)
        found = []
        for bm, bn, wm, wn in MMA_TILES:
            if self.block_m and bm != self.block_m or self.block_n and bn != self.block_n:
                continue
            if big_m % bm or big_n % bn or big_k % bk:
                continue
            wm, wn = self.warp_m or wm, self.warp_n or wn
            if bm % wm or bn % wn or wm % 16 or wn % 8 or (bm // wm) * (bn // wn) * WARP > MAX_THREADS:
                continue
            warps = (bm // wm) * (bn // wn)
            blocks = outer_tiles * (big_m // bm) * (big_n // bn)
            # ~200 registers per thread for a 64x64 warp tile, proportionally fewer below.
            regs = min(255, 40 + wm * wn // 32 * 5 // 2)
            per_sm, _ = target.occupancy(warps * WARP, regs, 0)
            cost = _tile_cost(target, bm, bn, big_k, blocks, warps, per_sm, bm * bn / (bm + bn), 64)
            found.append(((cost, -bm * bn), ((bm, bn, bk), (wm, wn), warps * WARP)))
        return [tiles for _, tiles in sorted(found, key=lambda f: f[0])]

    def _simt_tiles(self, target, big_m, big_n, big_k, outer_tiles):
        """The SIMT block tilings that fit: each block tile with its largest register tile, cheapest
        first; then, for operands whose tiles too few threads cannot copy (a strided operand copied
        one element per thread), the smaller register tiles (more threads), cheapest first."""
        # Large products take k-steps of 32: on an H100 a 2048^3 f32 product took 434 us with
        # 128x128x32 tiles in one stage, 697 us with 64x128x16 in two (fewer barriers per k step,
        # longer runs of FMAs); small ones keep 16 (their tiles are few and thin).
        large = big_k >= SIMT_LARGE and big_m * big_n >= SIMT_LARGE * SIMT_LARGE
        bk = self.block_k or max(d for d in divisors(big_k) if d <= (32 if large else 16))
        if bk < 2:
            return []
        found, smaller = [], []
        for bm in [d for d in divisors(big_m) if 2 <= d <= 128]:
            if self.block_m and bm != self.block_m:
                continue
            for bn in [d for d in divisors(big_n) if 2 <= d <= 128]:
                if self.block_n and bn != self.block_n:
                    continue
                largest = True
                for tm, tn in SIMT_THREAD_TILES:
                    if self.thread_m and tm != self.thread_m or self.thread_n and tn != self.thread_n:
                        continue
                    if bm % tm or bn % tn:
                        continue
                    threads = (bm // tm) * (bn // tn)
                    if threads > MAX_THREADS or threads < min(WARP, big_m * big_n // (tm * tn)):
                        continue
                    blocks = outer_tiles * (big_m // bm) * (big_n // bn)
                    regs = min(255, 32 + 2 * tm * tn)
                    per_sm, _ = target.occupancy(threads, regs, 0)
                    cost = _tile_cost(target, bm, bn, big_k, blocks, -(-threads // WARP), per_sm,
                                      tm * tn / (tm + tn), 4)
                    (found if largest else smaller).append(((cost, -bm * bn, -tm * tn), ((bm, bn, bk), (tm, tn), threads)))
                    largest = False
        return [tiles for _, tiles in sorted(found, key=lambda f: f[0]) + sorted(smaller, key=lambda f: f[0])]

    # ---- transform IR per phase ------------------------------------------------------------------

    def build_tile(self, kid: int, kernel: Kernel, tiling: ContractionTiling, op: ir.Value) -> None:
        handle = op
        if tiling.order != tuple(range(kernel.rank)):
            handle = tg.interchange(handle, tiling.order)
        p, q = tiling.outer, tiling.k_outer
        bm, bn, bk = tiling.block
        dims = p + sum(tiling.split)
        linear = [dims - 1 - i for i in range(dims)]
        func = tg.parent_function(op) if tiling.prologue or tiling.epilogue else None
        tiled, forall = tg.tile_forall(handle, tile_sizes=[1] * p + [0] * q + [bm if tiling.split[0] else 0,
                                                                               bn if tiling.split[1] else 0, 0],
                                       processor="block", linear_dims=linear)
        tiled, _ = tile(tiled, [0] * p + [1] * q + [0, 0, bk])
        if p or q:
            # The tiles of 1 (batch, outer m/n/k) are unit loops on views with dynamic offsets, which
            # upstream's unit-dimension folding leaves alone: `codegen-gpu-drop-unit-dims` drops them
            # after this phase, so the shared-memory tiles and the warp-level contraction are 2-d
            # (m, k) x (n, k) -> (m, n).
            tg.annotate(tiled, DROP_UNIT_DIMS_ATTR, 1)
        # The prologue and epilogue kernels in the same block tiles, their foralls fused with this
        # one (`fusion.py`) in program order: each prologue's body before, each epilogue's after;
        # the loop takes the last one's place.
        for member in reversed(tiling.prologue):
            _, member_forall = tg.tile_forall(tg.match_tagged(func, "linalg.generic", member.id),
                                              tile_sizes=member.block_sizes, processor="block", linear_dims=linear)
            forall = tg.fuse_sibling(member_forall, forall)
        for member in tiling.epilogue:
            _, member_forall = tg.tile_forall(tg.match_tagged(func, "linalg.generic", member.id),
                                              tile_sizes=member.block_sizes, processor="block", linear_dims=linear)
            forall = tg.fuse_sibling(forall, member_forall)
        tg.annotate_kernel(forall, kid)

    def build_promote(self, kid: int, kernel: Kernel, tiling: ContractionTiling, root: ir.Value) -> None:
        forall = tg.match_tagged(root, "scf.forall", kid)
        tg.apply_patterns(forall, tg.canonicalization)
        tg.promote_to_workgroup(tg.match_tagged(forall, "linalg.generic", kid), [0, 1])

    def build_map(self, kid: int, kernel: Kernel, tiling: ContractionTiling, root: ir.Value) -> None:
        forall = tg.match_tagged(root, "scf.forall", kid)
        tg.apply_patterns(forall, tg.canonicalization)
        copies = tg.split(match_names(forall, ["linalg.copy"]), 2)
        for copy, plan in zip(copies, tiling.copies):
            tg.tile_forall(copy, num_threads=plan.num_threads, processor="thread", linear_dims=plan.linear_dims)
        compute = tg.match_tagged(forall, "linalg.generic", kid)
        tg.tile_forall(compute, tile_sizes=[tiling.sub[0], tiling.sub[1], 0], processor="warp" if tiling.mma else "thread", linear_dims=[1, 0])
        for fused in tiling.prologue + tiling.epilogue:
            # Each thread its vectors of the tile. The barrier after each distributed forall orders
            # one member's stores before the next one's loads (and the prologue's before the
            # accumulators' loads); C's stores, hoisted out of the k loop later, get theirs from
            # codegen-gpu-sync-epilogues.
            per_thread, _ = tg.tile_forall(tg.match_tagged(forall, "linalg.generic", fused.id),
                                           num_threads=fused.threads, processor="thread",
                                           linear_dims=fused.linear_dims)
            # One vector per row, the rows unrolled: 1-d vectors, which convert-vector-to-gpu leaves
            # alone (it takes a 2-d transfer -> elementwise -> transfer chain for mma.sync
            # fragments, wherever it is, and then fails on the elementwise op).
            rows = [1 if extent > 1 else 0 for extent in fused.thread_tile[:-1]]
            if any(rows):
                _, loops = tile(per_thread, rows + [0])
                for loop_handle, extent in zip(loops, [e for e in fused.thread_tile[:-1] if e > 1]):
                    tg.unroll(loop_handle, extent)
        tg.apply_patterns(forall, tg.canonicalization)
        tg.vectorize(match_names(forall, ["linalg.copy", "linalg.generic"]))
        launch = tg.map_to_launch(forall, tiling.threads, kid)
        if tiling.epilogue:
            tg.annotate(launch, EPILOGUE_ATTR, tiling.epilogue[0].id)  # codegen-gpu-sync-epilogues
        # With the warp tiles' views folded into the shared buffers' indices, the vectorised
        # broadcast-multiply-reduce becomes a 2-d vector.contract (then 16x8x16 pieces for mma.sync).
        tg.apply_patterns(launch, tg.fold_memref_aliases, tg.canonicalization)
        tg.apply_patterns(launch, tg.contraction_patterns, tg.canonicalization)
        if tiling.mma:
            tg.apply_patterns(launch, tg.fold_extensions, tg.canonicalization)
        tg.apply_patterns(launch, tg.drop_unit_dims, tg.canonicalization)
        if tiling.mma:
            # m16n8k16 for f16, m16n8k8 for TF32.
            k = 8 if tiling.element_type == "f32" else 16
            tg.apply_patterns(launch, lambda: tg.unroll_to_mma(16, 8, k), tg.canonicalization)

    def build_finish(self, kid: int, kernel: Kernel, tiling: ContractionTiling, root: ir.Value) -> None:
        if tiling.mma:
            return
        launch = tg.match_tagged(root, "gpu.launch", kid)
        tg.apply_patterns(launch, tg.lower_contractions_to_fma, tg.canonicalization)
        tg.apply_patterns(launch, tg.lower_outer_products, tg.canonicalization)

    def build_pipeline(self, kid: int, kernel: Kernel, tiling: ContractionTiling, root: ir.Value) -> None:
        kernel_func = tg.match_tagged(root, "gpu.func", kid)  # outlined by codegen-gpu-outline-kernels
        tg.apply_patterns(kernel_func, tg.transfers_to_1d, tg.canonicalization)
        kernel_func = tg.async_copies(kernel_func)
        if tiling.stages > 1:
            tg.multibuffer(match_names(kernel_func, ["memref.alloc"]), tiling.stages)
            tg.pipeline_copies(match_names(kernel_func, ["scf.for"]), tiling.stages)
        cse(kernel_func)


def _innermost(amap: ir.AffineMap) -> int | None:
    for e in reversed(list(amap.results)):
        if isinstance(e, ir.AffineDimExpr):
            return e.position
    return None


def _mma_types(a_t, b_t, c_t) -> bool:
    """What `mma.sync.m16n8k16` computes: f16 x f16 into an f32 or f16 accumulator, bf16 x bf16 into
    an f32 one (PTX has no bf16 accumulators). Upstream's vector route to `nvgpu.mma.sync` has f16
    fragments only; bf16 ones are the same (`codegen-gpu-convert-mma` takes bf16 through it as
    16-bit payload: retype_payload.py)."""
    a, b, c = a_t.element_type, b_t.element_type, c_t.element_type
    if isinstance(a, ir.F16Type) and isinstance(b, ir.F16Type):
        return isinstance(c, (ir.F32Type, ir.F16Type))
    return isinstance(a, ir.BF16Type) and isinstance(b, ir.BF16Type) and isinstance(c, ir.F32Type)


def _copy_plan(shape: tuple[int, ...], global_type: ir.MemRefType, threads: int) -> CopyPlan | None:
    """Spread a tile copy over `threads`: vectors along the contiguous dimension (one vector per
    thread and row, at most 16 bytes), rows over the remaining threads."""
    last = shape[-1]
    vec = vector_width(global_type, last, index_multiple=last)
    across = last // vec
    if across > threads:
        return None
    rows_dim = next((i for i in range(len(shape) - 2, -1, -1) if shape[i] > 1), None)
    num = [0] * len(shape)
    num[-1] = across
    linear = [0]
    if rows_dim is not None:
        rows = max(d for d in divisors(shape[rows_dim]) if d * across <= threads)
        num[rows_dim] = rows
        linear = [1, 0]
    return CopyPlan(shape, tuple(num), tuple(linear), vec)


def _shared_bytes(copies, types, stages: int) -> int:
    total = 0
    for copy, t in zip(copies, types[:2]):
        eb = element_bytes(t.element_type)
        rows = prod(copy.shape[:-1])
        total += rows * padded_row_elements(copy.shape[-1], eb) * eb
    return total * stages


# --------------------------------------------------------------------------------------------------
# Elementwise, data movement, outer reductions


@dataclass(frozen=True)
class VectorTiling:
    vector_dim: int
    vector: int
    block_sizes: tuple[int, ...]     # per loop (0: whole extent, reduction dims)
    thread_sizes: tuple[int, ...]
    block_linear: tuple[int, ...]    # mapping of the block forall's dimensions
    thread_linear: tuple[int, ...]
    reduction_dims: tuple[int, ...]
    threads: int
    grid: int
    flops: int
    bytes: int
    serial_dims: tuple[int, ...] = ()   # parallel loops each thread runs in turn (beyond the grid's three)
    vectorized: bool = True             # else scalar code per thread ("threads")

    @property
    def schedule(self) -> str:
        return "vector" if self.vectorized else "threads"

    def describe(self) -> str:
        serial = f", loops {list(self.serial_dims)} in each thread" if self.serial_dims else ""
        if not self.vectorized:
            return f"threads: an output element per thread, {self.threads} threads per block, {self.grid} blocks{serial}"
        return f"vector x{self.vector}: {self.threads} threads per block, {self.grid} blocks{serial}"


@dataclass(frozen=True)
class VectorSchedule(GpuSchedule):
    """Parallel loops over blocks and threads, the contiguous one in vectors of up to 128 bits; loops
    over reductions inside each thread. With `vectorize=False` ("threads"), scalar code for kernels
    the vectoriser does not take (convolution and pooling windows, gathers): an output element per
    thread, coalesced along the output's contiguous dimension, instead of the naive mapping's one
    thread per block."""
    name: ClassVar[str] = "vector"
    threads: int = MAX_THREADS   # threads per block at most
    vectorize: bool = True
    # A long reduction over too few outputs to fill the GPU is split into chunk partials and a
    # combine first (`codegen-gpu-split-reductions`; float sums reassociated).
    split_reductions: bool = True

    def choose(self, kernel: Kernel, target: GpuTarget):
        op = kernel.op
        ranges = kernel.loop_ranges
        if not ranges:
            return "rank 0"
        parallel = [d for d in range(kernel.rank) if d not in kernel.reduction_dims]
        out_map = kernel.maps[-1]
        vd = _innermost(out_map)
        if vd is None or vd not in parallel:
            vd = parallel[-1] if parallel else None
        if vd is None:
            return "no parallel dimension"
        vec = 1 << 30
        for operand, amap in zip(op.operands, kernel.maps):
            if not self.vectorize or not isinstance(operand.type, ir.MemRefType) or operand.type.rank == 0:
                continue
            if _innermost(amap) == vd:
                vec = min(vec, vector_width(ir.MemRefType(operand.type), ranges[vd]))
        vec = 1 if vec == 1 << 30 else vec
        tx = max(d for d in divisors(ranges[vd] // vec) if d <= self.threads)
        others = [d for d in reversed(parallel) if d != vd and ranges[d] > 1]
        y = others[0] if others else None
        ty = max(d for d in divisors(ranges[y]) if d * tx <= self.threads) if y is not None else 1
        block_sizes, thread_sizes = [], []
        for d in range(kernel.rank):
            if d in kernel.reduction_dims:
                block_sizes.append(0)
                thread_sizes.append(0)
            elif d == vd:
                block_sizes.append(tx * vec)
                thread_sizes.append(vec)
            elif d == y:
                block_sizes.append(ty)
                thread_sizes.append(1)
            else:
                block_sizes.append(1)
                thread_sizes.append(0)
        # A dimension one block covers whole is not a dimension of the block forall: upstream
        # `map_forall_to_blocks` sizes the grid from linear dimensions 0-2 only (a fourth one is
        # dropped from the launch, its tiles never run), so at most three may be left.
        for d in range(kernel.rank):
            if block_sizes[d] == ranges[d] and d != vd:
                block_sizes[d] = 0
        tiled_dims = [d for d in range(kernel.rank) if block_sizes[d]]
        # Beyond three, the loops of least extent (never x or y) run inside each thread, one
        # iteration at a time: [8, 16, 66, 66] (a padded NCHW batch) loops over its 8 images.
        serial_dims: list[int] = []
        while len(tiled_dims) > 3:
            d = min((d for d in tiled_dims if d not in (vd, y)), key=lambda d: (ranges[d], d))
            tiled_dims.remove(d)
            serial_dims.append(d)
            block_sizes[d] = 0
        # Linear block dimensions numbered densely from 0 (x): the vector dimension, then y, then
        # the rest from the inside out.
        order = [vd] + [d for d in [y, *reversed(tiled_dims)] if d is not None and d in tiled_dims and d != vd]
        rank_of = {d: i for i, d in enumerate(dict.fromkeys(order))}
        block_linear = tuple(rank_of[d] for d in tiled_dims)
        thread_dims = [d for d in range(kernel.rank) if thread_sizes[d]]
        thread_linear = tuple(0 if d == vd else 1 for d in thread_dims)
        grid = prod(-(-ranges[d] // block_sizes[d]) for d in tiled_dims)
        moved = sum(prod(ir.MemRefType(v.type).shape) * element_bytes(ir.MemRefType(v.type).element_type)
                    for v in op.operands if isinstance(v.type, ir.MemRefType))
        body_ops = len(list(op.regions[0].blocks[0].operations)) - 1 if op.regions else 0
        return VectorTiling(vd, vec, tuple(block_sizes), tuple(thread_sizes), block_linear, thread_linear,
                            tuple(kernel.reduction_dims), tx * ty, grid, kernel.iterations * max(0, body_ops), moved,
                            tuple(sorted(serial_dims)), self.vectorize)

    def build_tile(self, kid: int, kernel: Kernel, tiling: VectorTiling, op: ir.Value) -> None:
        tiled, forall = tg.tile_forall(op, tile_sizes=tiling.block_sizes, processor="block",
                                       linear_dims=tiling.block_linear)
        tg.annotate_kernel(forall, kid)
        tiled, _ = tg.tile_forall(tiled, tile_sizes=tiling.thread_sizes, processor="thread",
                                  linear_dims=tiling.thread_linear)
        loops = set(tiling.reduction_dims) | set(tiling.serial_dims)
        if loops:
            tile(tiled, [1 if d in loops else 0 for d in range(kernel.rank)])

    def build_map(self, kid: int, kernel: Kernel, tiling: VectorTiling, root: ir.Value) -> None:
        forall = tg.match_tagged(root, "scf.forall", kid)
        tg.apply_patterns(forall, tg.canonicalization)
        if tiling.vectorized:
            tg.vectorize(tg.match_tagged(forall, kernel.op.name, kid))
        else:
            tg.convert_to_loops(tg.match_tagged(forall, kernel.op.name, kid))
        # Each thread reads and writes its own elements of global memory only: no barrier.
        tg.map_to_launch(forall, tiling.threads, kid, sync=False)

    def build_finish(self, kid: int, kernel: Kernel, tiling: VectorTiling, root: ir.Value) -> None:
        launch = tg.match_tagged(root, "gpu.launch", kid)
        tg.apply_patterns(launch, tg.drop_unit_dims, tg.canonicalization)


# --------------------------------------------------------------------------------------------------
# Row reductions


@dataclass(frozen=True)
class RowReductionTiling:
    row_threads: int       # per row: 32 (a warp) or 64-256 (a block)
    rows_per_block: int
    grid: int
    flops: int
    bytes: int
    shared_bytes: int
    members: tuple[int, ...] = ()   # a row group: the kernels run in this one, in program order (itself last)
    vector: int = 1                 # elements per thread and access along the row (`row_vector_width`)
    vectors: tuple[int, ...] = ()   # a row group: each member's `vector`, in `members`' order

    @property
    def threads(self) -> int:
        return self.row_threads * self.rows_per_block

    @property
    def schedule(self) -> str:
        return "warp-reduce" if self.row_threads == WARP else "block-reduce"

    def _loads(self) -> str:
        widths = sorted({v for v in (self.vectors or (self.vector,)) if v > 1})
        if not widths:
            return "scalar loads"
        return f"vector loads of {' / '.join(map(str, widths))} elements"

    def describe(self) -> str:
        group = f" + row group (kernels {', '.join(map(str, self.members[:-1]))})" if self.members else ""
        return (f"{self.schedule}: {self.row_threads} threads per row, {self.rows_per_block} row(s) per block, "
                f"{self._loads()}, {self.grid} blocks{group}")


@dataclass(frozen=True)
class RowReductionSchedule(GpuSchedule):
    name: ClassVar[str] = "row-reduction"
    elements_per_thread: int = 32   # a block per row once a warp would take more per thread
    max_threads: int = MAX_THREADS  # per row
    block_threads: int = MAX_THREADS  # per block (warp per row: rows per block x 32)
    fuse: bool = True   # a row reduction and the row kernels around it in one kernel (`choose_group`)
    vectorize: bool = True   # 128-bit accesses along the rows where they are legal (`row_vector_width`)
    # Chunks of 128 bits per thread and loop trip, at most: 64 bytes per input in flight (twice the
    # scalar loop's 8 elements of f32); 8 took 83-111 registers on a 4096-f32 softmax or LayerNorm
    # (4: 62-73) and a block less per H100 SM for the LayerNorm.
    vector_chunks: int = 4

    def _vector(self, kernel: Kernel) -> int:
        return row_vector_width(kernel.op) if self.vectorize else 1

    def _row_threads(self, row: int) -> int:
        threads = WARP
        while threads < self.max_threads and row > threads * self.elements_per_thread:
            threads *= 2
        return threads

    def choose_group(self, members: list[tuple[int, Kernel]], rows: int, target: GpuTarget,
                     per_row: frozenset[int] | set[int] = frozenset()):
        """The tiling of a row group (`codegen.fuse_rows.row_groups`: kernels over the same rows,
        each reading only the rows it writes), run as one kernel by its last member: a block (or a
        warp) per row as for the longest row's reduction alone, every member in turn over the row's
        elements `tx, tx + T, ...` (the per-row kernels `per_row`, ids: one element by thread 0 of
        the row), a barrier between members where one reads what another thread wrote; or why not."""
        for kid, kernel in members:
            if problem := row_member_problem(kernel.op):
                return f"kernel {kid} cannot join a row group: {problem}"
        threads = self._row_threads(max(k.loop_ranges[-1] for kid, k in members if kid not in per_row))
        rows_per_block = 1
        if threads == WARP:
            # Rows per block divide the rows: every thread of a block reaches each barrier.
            rows_per_block = max(d for d in range(1, max(1, self.block_threads // WARP) + 1) if rows % d == 0)
        moved, seen = 0, set()
        flops = shared = 0
        for _, kernel in members:
            for v in kernel.op.operands:
                if isinstance(v.type, ir.MemRefType) and v not in seen:
                    seen.add(v)
                    moved += prod(ir.MemRefType(v.type).shape) * element_bytes(ir.MemRefType(v.type).element_type)
            flops += kernel.iterations * (len(list(kernel.op.regions[0].blocks[0].operations)) - 1)
            if kernel.kind is KernelKind.REDUCTION and threads > WARP:
                shared += sum(threads // WARP * element_bytes(c.results[0].type) for c in row_combiners(kernel.op))
        # Per member (a per-row one has no row loop): each walks the row in its own chunks, a
        # reduction in those it takes as a kernel of its own (the same order of its elements).
        vectors = tuple(1 if kid in per_row else self._vector(k) for kid, k in members)
        return RowReductionTiling(threads, rows_per_block, rows // rows_per_block, flops, moved, shared,
                                  tuple(kid for kid, _ in members), vectors[-1], vectors)

    def choose(self, kernel: Kernel, target: GpuTarget):
        if kernel.kind is not KernelKind.REDUCTION or tuple(kernel.reduction_dims) != (kernel.rank - 1,):
            return "not a reduction over the innermost loop alone"
        combiners = row_combiners(kernel.op)
        if isinstance(combiners, str):
            return combiners
        row = kernel.loop_ranges[-1]
        rows = prod(kernel.loop_ranges[:-1])
        threads = self._row_threads(row)
        rows_per_block = 1
        if threads == WARP:
            rows_per_block = min(max(1, self.block_threads // WARP), 1 << max(0, (rows - 1).bit_length()))
        grid = -(-rows // rows_per_block)
        moved = sum(prod(ir.MemRefType(v.type).shape) * element_bytes(ir.MemRefType(v.type).element_type)
                    for v in kernel.op.operands if isinstance(v.type, ir.MemRefType))
        body_ops = len(list(kernel.op.regions[0].blocks[0].operations)) - 1
        shared = 0
        if threads > WARP:
            shared = sum(threads // WARP * element_bytes(c.results[0].type) for c in combiners)
        return RowReductionTiling(threads, rows_per_block, grid, kernel.iterations * body_ops, moved, shared,
                                  (), self._vector(kernel))

    def build_tile(self, kid: int, kernel: Kernel, tiling: RowReductionTiling, op: ir.Value) -> None:
        # The tiling travels on the op to `codegen-gpu-reduce-rows` (gpu-map stage), which builds the
        # kernel (a row group's other members carry their `vectors` from `codegen-gpu-attach-schedule`).
        tg.annotate(op, ROW_THREADS_ATTR, tiling.row_threads)
        tg.annotate(op, ROWS_PER_BLOCK_ATTR, tiling.rows_per_block)
        if tiling.vector > 1:
            tg.annotate(op, ROW_VECTOR_ATTR, tiling.vector)
            tg.annotate(op, ROW_CHUNKS_ATTR, self.vector_chunks)


# --------------------------------------------------------------------------------------------------
# Matrix-vector products (batch-1 Linears, decode)


@dataclass(frozen=True)
class MatvecTiling(RowReductionTiling):
    """A matvec as a row reduction (`codegen-gpu-reduce-rows`): `row_threads` lanes per output row
    (4-16: several rows per warp; 32: a warp; 64-256: a block), each reading `vector` consecutive
    elements of the row per access."""

    @property
    def schedule(self) -> str:
        return "gemv"

    def describe(self) -> str:
        if self.row_threads < WARP:
            lanes = f"{self.row_threads} lanes per output row ({WARP // self.row_threads} rows per warp)"
        elif self.row_threads == WARP:
            lanes = "a warp per output row"
        else:
            lanes = f"{self.row_threads // WARP} warps per output row"
        loads = f"vector loads of {self.vector} elements" if self.vector > 1 else "scalar loads"
        group = f" + row group (kernels {', '.join(map(str, self.members[:-1]))})" if self.members else ""
        return (f"gemv: {lanes}, {self.rows_per_block} row(s) per block, {loads}, shfl.sync butterfly, "
                f"{self.grid} blocks{group}")


@dataclass(frozen=True)
class MatvecSchedule(RowReductionSchedule):
    """Matrix-vector products (`codegen/gpu/matvec.py`: a batch-1 Linear's `y = W x`, decode's
    `q K^T`): each output row reduced by a group of lanes reading consecutive elements of W's row
    (coalesced), `vector` elements (up to 16 bytes) per load where the rows are aligned, partial
    sums per lane, a `shfl.sync.bfly` butterfly, lane 0 adding the output's initial value. Lanes
    per row: rows of fewer than 32 vectors share a warp (4-16 lanes each); longer ones a warp,
    grown to up to `max_threads` lanes while the rows are too few to fill the chip and each lane
    keeps at least `min_vectors` vectors. A reassociated sum (docs/codegen_gpu.md gives the
    tolerance)."""
    name: ClassVar[str] = "gemv"
    max_threads: int = MAX_THREADS   # per row
    block_threads: int = MAX_THREADS
    min_vectors: int = 8            # per lane before a row takes more lanes
    vectorize: bool = True          # 128-bit loads where alignment allows
    fuse: bool = True               # the output's fill and a per-row epilogue run in the kernel (lane 0)

    def choose(self, kernel: Kernel, target: GpuTarget):
        if problem := matvec_problem(kernel):
            return problem
        if tuple(d for d in kernel.reduction_dims if kernel.loop_ranges[d] > 1) != (kernel.rank - 1,):
            return "the sum is not the innermost loop"
        rows, row = matvec_rows(kernel)
        op = kernel.op
        n_in = len(op.opview.inputs)
        vec = 1 << 30
        for value, amap in zip(list(op.operands)[:n_in], kernel.maps[:n_in]):
            if _innermost(amap) == kernel.rank - 1 and isinstance(value.type, ir.MemRefType):
                vec = min(vec, vector_width(ir.MemRefType(value.type), row) if self.vectorize else 1)
        vec = 1 if vec == 1 << 30 else vec
        vectors = row // vec
        chip = target.sms * target.max_threads_per_sm
        threads, rows_per_block = WARP, 1
        if vectors < WARP:
            # Several rows per warp: lanes per row a power of two (the butterfly's width), the rows
            # of a block dividing the rows (a warp's rows all in range: its shuffles are full-warp).
            lanes = 1 << (vectors.bit_length() - 1)
            lanes = max(4, lanes)
            per_block = [d for d in divisors(rows) if d * lanes <= self.block_threads and d * lanes % WARP == 0]
            if per_block:
                threads, rows_per_block = lanes, max(per_block)
        if threads == WARP:
            while (threads < self.max_threads and rows * threads < chip // 4
                   and vectors >= 2 * threads * self.min_vectors):
                threads *= 2
            if threads == WARP:
                rows_per_block = min(max(1, self.block_threads // WARP), 1 << max(0, (rows - 1).bit_length()))
        grid = -(-rows // rows_per_block)
        moved = sum(prod(ir.MemRefType(v.type).shape) * element_bytes(ir.MemRefType(v.type).element_type)
                    for v in op.operands if isinstance(v.type, ir.MemRefType))
        body_ops = len(list(op.regions[0].blocks[0].operations)) - 1
        shared = threads // WARP * element_bytes(ir.MemRefType(op.operands[-1].type).element_type) \
            if threads > WARP else 0
        return MatvecTiling(threads, rows_per_block, grid, kernel.iterations * body_ops, moved, shared, (), vec)

    def build_tile(self, kid: int, kernel: Kernel, tiling: MatvecTiling, op: ir.Value) -> None:
        # The row-reduction annotations, and the vector width even where it is 1 (as before); no
        # `codegen.row_chunks`: a gemv keeps `UNROLL` (8) vectors a trip, as measured on an H100.
        tg.annotate(op, ROW_THREADS_ATTR, tiling.row_threads)
        tg.annotate(op, ROWS_PER_BLOCK_ATTR, tiling.rows_per_block)
        tg.annotate(op, ROW_VECTOR_ATTR, tiling.vector)


# The default GPU schedule per kernel kind (keys as codegen.schedules.schedule_key); None: the naive
# mapping (one thread per element of the parallel loops), named in the report. Convolutions reach the
# contraction schedule as im2col batch matmuls (`codegen-gpu-im2col-convolutions`); those it leaves
# (depthwise, grouped) keep the naive mapping.
DEFAULT_GPU_SCHEDULES: dict[str, GpuSchedule | None] = {
    KernelKind.CONTRACTION.value: ContractionSchedule(),
    KernelKind.ELEMENTWISE.value: VectorSchedule(),
    KernelKind.DATA_MOVEMENT.value: VectorSchedule(),
    "outer-reduction": VectorSchedule(),
    "row-reduction": RowReductionSchedule(),
    # Matrix-vector products (a refinement of their kind, "unknown": `gpu_schedule_key`); None: that kind's.
    "gemv": MatvecSchedule(),
    KernelKind.CONVOLUTION.value: VectorSchedule(vectorize=False),
    KernelKind.POOLING.value: VectorSchedule(vectorize=False),
    KernelKind.UNKNOWN.value: VectorSchedule(vectorize=False),
}


def gpu_schedule_key(kernel: Kernel, table: dict[str, GpuSchedule | None], target: GpuTarget | None) -> str:
    """The key of `kernel`'s schedule in `table`: `schedule_key`'s, but "gemv" for a matrix-vector
    product that the table's gemv schedule takes on `target` (`MatvecSchedule.choose`): a product
    with no m or n once unit loops are folded, or a contraction whose m or n is one (its unit loop
    kept by a strided view: a VTC store of a projection into a KV cache)."""
    key = schedule_key(kernel)
    schedule = table.get("gemv")
    if (key in (KernelKind.UNKNOWN.value, KernelKind.CONTRACTION.value) and isinstance(schedule, MatvecSchedule)
            and target is not None
            and not isinstance(schedule.choose(kernel, target), str)):
        return "gemv"
    return key


def resolve_gpu_schedules(overrides) -> dict[str, GpuSchedule | None]:
    """DEFAULT_GPU_SCHEDULES with overrides (the forms of the CPU's `resolve_schedules`)."""
    return resolve_schedules(overrides, DEFAULT_GPU_SCHEDULES)
