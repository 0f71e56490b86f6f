"""Schedules per kernel kind: parameters (dataclasses, overridable) and the transform IR they build.

A schedule receives the kernel's handle (the op tagged `codegen.kernel = id`, consumed) inside its
own `transform.named_sequence` and tiles, packs and vectorises it. Three schedules cover the kinds:

- `ContractionSchedule` (matmul, batch matmul, Linear after `codegen-transpose-b-operands`): the
  outer N (and batch) tiles in an `scf.forall`; N tiled to the register width `nr` and peeled; the
  B panel of that tile promoted to an aligned stack buffer (contiguous packing: B's power-of-two row
  stride otherwise thrashes L1 and the TLB; a B whose tiles are contiguous already, an im2col panel
  or a transposed K panel of `codegen-transpose-b-operands`, is read in place); in a kernel inside a parallel loop the outer tiles are `scf.for`s; where a
  thread has several N tiles, the A block (rows x k-chunk) is packed once per K chunk for all of them
  (GotoBLAS's loop order), else per register tile; M tiled to `mr` rows and peeled; K tiled to 1;
  vectorised as `vector.contract` 1 x `mr` x `nr`, whose accumulators `hoist_redundant_vector_transfers`
  keeps in registers and which lowers to outer products (an FMA per vector register). Each output
  element is still the sum over k in order 0..K-1 with one multiply and one add per step, as in the
  scalar loops: the results are bitwise those of the loops. Its fused neighbours (`FusedMember`:
  the accumulator's fill, the elementwise epilogue; `codegen.fusion`) are tiled with its outer
  tiles, their loops fused with its own, and vectorised inside the tile (`_fuse_members`).
- `VectorSchedule` (elementwise, data movement, reductions over an outer dimension): the innermost
  dimension of the output in vectors of `vectors` registers (peeled), every other dimension by 1
  (reduction dimensions in order: exact), the outer dimension split for the threads.
- `RowReductionSchedule` (reductions over the innermost dimension: softmax's max and sum, LayerNorm's
  and RMSNorm's means): chunks of `vectors` registers reduced as one vector, chunk sums added in order.
  This reassociates (a tree within each chunk): results differ from the loops by a few ulp of the
  sum, the same for any thread count (docs/codegen.md has the tolerance and its test).

The thread split never changes values: it splits parallel dimensions only, in tiles that divide
them exactly (a partial tile would make the inner tiles dynamic and the vectoriser refuse them).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import ClassVar

from torch_mlir import ir

from ..errors import VtmlirError
from . import transform_ir as t
from .bodies import buffer_root
from .kernels import FMA_ATTR, RECIPROCAL_ATTR, STREAMING_STORES_ATTR, Kernel, KernelKind, element_bits_of
from .target import HostTarget

# Block sizes tried for transposing copies (square blocks of the two swapped dimensions).
TRANSPOSE_BLOCKS = (128, 64, 32)
# A transposing copy whose output is at least this large goes to memory with streaming stores
# (`codegen-streaming-stores`): bands of `width` input rows, each swept along its length. Measured on
# a 2048x2048 f32 transpose, 1 thread (L2: 2 MiB per core): 3.0x faster than cached stores with the
# caches cold, 1.6x with them warm; a small output is read back from the cache by the next kernel.
STREAMING_STORE_BYTES = 4 << 20

# The AVX-512 register tile of a contraction with fused multiply-adds and N of two registers or more
# (`ContractionSchedule.register_tile`).
AVX512_FMA_TILE = (8, 2)

# Kernels with fewer iterations than this run on one thread (an OpenMP fork costs a few µs).
PARALLEL_MIN_ITERATIONS = 1 << 15


def register_m_dim(kernel: Kernel) -> int:
    """The m dimension a contraction's register tile spans: the innermost one of more than one
    iteration. GQA's decode attention `q[kvh, rep, s, hd] . K[kvh, t, hd]` has m = (rep, s), s of
    extent 1 innermost: tiled over s, each register tile held one query row and the B panel (the
    head's keys or values) was packed and read once per row of its group (4 times) instead of once.
    Which rows share a register tile never changes a sum: bitwise the same."""
    ranges = kernel.loop_ranges
    return next((d for d in reversed(kernel.m) if ranges[d] > 1), kernel.m[-1])


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def chunk(extent: int, parts: int, multiple: int = 1, largest: int | None = None) -> int:
    """A tile size that divides `extent` into at least `parts` tiles (the fewest such), a multiple of
    `multiple` where one exists and at most `largest`; `extent` itself when no split fits."""
    candidates = [d for d in _divisors(extent) if d % multiple == 0 and (largest is None or d <= largest)]
    if not candidates:
        candidates = [d for d in _divisors(extent) if largest is None or d <= largest] or [extent]
    good = [d for d in candidates if extent // d >= parts]
    return max(good) if good else min(candidates)


@dataclass(frozen=True)
class Schedule:
    """Base of the schedules: a `name` for reports and overrides, parameters as dataclass fields."""

    name: ClassVar[str] = ""

    def build(self, kernel_id: int, kernel: Kernel, target: HostTarget, parts: int, op: ir.Value) -> None:
        raise NotImplementedError

    def with_overrides(self, values: dict[str, str]) -> Schedule:
        """A copy with fields set from text (`register_m` or `register-m` = "4")."""
        known = {f.name: f for f in fields(self)}
        typed = {}
        for key, text in values.items():
            name = key.replace("-", "_")
            if name not in known:
                raise VtmlirError(f"error: schedule '{self.name}' has no parameter '{key}' "
                                  f"(parameters: {', '.join(known) or 'none'})")
            typed[name] = _parse_value(text, type(getattr(self, name)), self.name, key)
        return replace(self, **typed)


def _parse_value(text: str, kind: type, schedule: str, key: str):
    try:
        if kind is bool:
            if text.lower() in ("1", "true", "on", "yes"):
                return True
            if text.lower() in ("0", "false", "off", "no"):
                return False
            raise ValueError(text)
        return kind(text)
    except ValueError:
        raise VtmlirError(f"error: invalid value '{text}' for parameter '{key}' of schedule '{schedule}'") from None


def _parallel_parts(kernel: Kernel, parts: int) -> int:
    if kernel.in_parallel_loop:
        return 1
    return parts if kernel.iterations >= PARALLEL_MIN_ITERATIONS else 1


def _tile_outer(kernel: Kernel, op: ir.Value, sizes: list[int]) -> ir.Value:
    """The kernel's outer tiles (`sizes`, at least one non-zero): an `scf.forall`, the parallel loop;
    in a kernel already inside a parallel loop (`Kernel.in_parallel_loop`) `scf.for` loops, which
    run on the thread of that loop's iteration (a nested forall would fork a nested team per call).
    Returns the handle of the outermost tile loop, the scope of the schedule's later steps."""
    if kernel.in_parallel_loop:
        _, loops = t.tile(op, sizes)
        return loops[0]
    _, forall = t.tile_forall(op, sizes)
    return forall


@dataclass(frozen=True)
class ContractionSchedule(Schedule):
    name: ClassVar[str] = "contraction"
    register_m: int = 0          # rows of the register tile (0: by target, see `register_tile`)
    register_n_vectors: int = 0  # vector registers per row of the register tile (nr = this x lanes; 0: by target)
    cache_n: int = 256           # columns of C per N tile (the B panel of one tile stays in L2); with the
                                 # A blocks packed per N tile: 128 -> 256 columns, 1 thread, 1024^3
                                 # 142 -> 154 GF/s, 2048^3 138 -> 153; 512 and more slower
    cache_k: int = 256           # depth of a packed B panel (k x nr floats stay in L1); 0: all of K
    a_block_bytes: int = 2 << 20  # a thread with several N tiles packs the A block (rows x k-chunk, at
                                 # most this large: rows in blocks of a divisor of M) once per K chunk for
                                 # all its N tiles (GotoBLAS order; `_a_block_rows`); 0: per N tile and
                                 # register tile. A 4 MiB block with 512-deep K chunks was no faster
    promote_b: bool = True       # pack each B panel (k-chunk x nc) contiguously
    fma: bool = True             # multiply-add in one rounding (`codegen-fuse-multiply-add`); False: the
                                 # loops' separate multiply and add, bitwise (EXACT_SCHEDULES)
    promote_a: bool = True       # pack each A row block (mr x k-chunk): its rows are K apart, and
                                 # a power-of-two K puts all mr of them in one L1 set
    blocks_in_registers: bool = True  # several reduction dimensions (a blocked convolution's input
                                 # channel blocks) whose A and B tiles are read in place: looped inside
                                 # the register tile, so its accumulators stay in registers across them
    register_blocks: int = 0     # with `blocks_in_registers` and N one register wide, tiles of an outer
                                 # N dimension (a blocked convolution's output channel blocks) side by
                                 # side in the register tile, one register per row each; 0: by target
                                 # (AVX-512 with FMA: `AVX512_FMA_TILE`, 8 rows x 2 blocks; else 1)
    fuse_neighbours: bool = True  # the accumulator's fill and the elementwise epilogue (bias, activation,
                                 # BatchNorm, residual add, casts) run in the outer tiles, each tile of C
                                 # still in cache (`codegen.fusion`, `_fuse_members`); bitwise the same
    fuse_tile_bytes: int = 0     # fuse only where an outer tile of C is at most this large (0: any)
    fused_c_bytes: int = 512 << 10  # with fused neighbours, a thread's group of N tiles (GotoBLAS order) is cut
                                 # to at most this much of C per outer tile (0: not cut)

    def register_tile(self, target: HostTarget, m_extent: int = 0, n_extent: int = 0) -> tuple[int, int]:
        """(rows, vector registers per row) of the accumulator tile. With AVX2's 16 registers 6 x 2
        (notes §10: 60-78 GF/s, torch 70-74). With AVX-512 (32 registers), fused multiply-adds and
        an N of two registers or more, 8 x 2 (`AVX512_FMA_TILE`): a k step then loads 2 B vectors
        and 8 A elements for 16 FMAs, where 12 x 1 loaded 13 for 12 -- more loads than FMAs, on a
        core that issues two of each a cycle (1 thread: 512^3 136 -> 161 GF/s, 1024^3 134 -> 144).
        Also where N ends in a partial tile of one power-of-two vector (`_whole_vectors`; a 14x14
        im2col panel: 196 = 6 x 32 + 4 columns; 3x3 convolution 1x256x14x14, 1 thread, 97 -> 116
        GF/s, eager 122).
        Without FMA (a multiply and an add per step, so twice the arithmetic per load) 12 x 1 beat
        6 x 2 and 8 x 2 (512^3: 84 against 57 GF/s). Else 12 x 1, and an M of 13 or 14 rows (a
        blocked convolution's tap over a 14-pixel row, N of one register) is one tile of its own: as
        12 + 2 rows, the second tile read every B vector again for two rows (3x3 convolution
        1x256x14x14 in nChw16c, 1 thread: 0.93x the time). Over 28 or 56 rows tiles of 14 were 1.02x
        and 1.00x (not taken). (With FMA, such a tap whose channel blocks `build` loops inside the
        register tile takes 8 rows x 2 output channel blocks instead: `register_blocks`.)"""
        lanes = target.lanes(32)
        if (target.vector_bits >= 512 and self.fma and n_extent >= 2 * lanes
                and _whole_vectors(n_extent % (AVX512_FMA_TILE[1] * lanes))):
            default = AVX512_FMA_TILE
        else:
            default = (12, 1) if target.vector_bits >= 512 else (6, 2)
        rows = (m_extent if target.vector_bits >= 512 and default == (12, 1) and default[0] < m_extent <= 14
                else default[0])
        return self.register_m or rows, self.register_n_vectors or default[1]

    def outer_tile_sizes(self, kernel: Kernel, target: HostTarget, parts: int) -> list[int]:
        """The tile size per loop of the kernel's outer loop (the `scf.forall`, or `scf.for`s inside
        a parallel loop; 0: not tiled there) as `build` makes it with fused neighbours: what they
        are tiled with (`codegen.fusion`)."""
        return list(self._tiles(kernel, target, parts, fused=True).forall_sizes)

    def _tiles(self, kernel: Kernel, target: HostTarget, parts: int, fused: bool = False) -> _ContractionTiles:
        rank, ranges = kernel.rank, kernel.loop_ranges
        ni, mi, ki = kernel.n[-1], register_m_dim(kernel), kernel.k[-1]
        lanes = target.lanes(kernel.element_bits)
        mr, vectors = self.register_tile(target, ranges[mi], ranges[ni])
        nr = vectors * lanes
        parts = _parallel_parts(kernel, parts)
        n_extent, m_extent = ranges[ni], ranges[mi]
        if nr > lanes and not _whole_vectors(n_extent % nr):
            # The remainder would be an odd-sized vector (24 of 32 lanes: slow in LLVM's legalisation):
            # one register per row instead, and as many more rows (same accumulator count).
            mr, nr = mr * (nr // lanes), lanes
        outer = [d for d in kernel.batch + kernel.m + kernel.n[:-1] if d != mi]
        outer_tiles = 1
        for d in outer:
            outer_tiles *= ranges[d]
        forall_sizes = [0] * rank
        for d in outer:
            forall_sizes[d] = 1
        nc = chunk(n_extent, -(-parts // outer_tiles), multiple=nr, largest=max(self.cache_n, nr))
        forall_sizes[ni] = nc
        k_extent = ranges[ki]
        k_chunk = self.cache_k if self.cache_k and k_extent > self.cache_k else k_extent
        # An A block is read by the nc / nr register tiles of its row; one that is read once and is
        # a contiguous block already (a blocked convolution's tap: `w x cb` input rows, nc = nr = fb)
        # is read where it is.
        a_in_place = nc <= nr and _is_dense_tile(kernel, 1 - kernel.b_operand, {mi: mr, ki: k_chunk})
        blocks_inside = (self.blocks_in_registers and bool(kernel.k[:-1]) and a_in_place and k_chunk == k_extent
                         and _is_dense_tile(kernel, kernel.b_operand, {ki: k_extent, ni: nc}))
        # Output channel blocks side by side in the register tile (an outer N dimension; N itself is
        # one register, a block of 16 channels): as 12 rows x 1 register, a k step loaded 13 values
        # for 12 FMAs, bound by the two load ports; as 8 rows x 2 blocks (`AVX512_FMA_TILE`, as a
        # matmul's) 10 for 16. 3x3 convolutions in nChw16c with their layout conversions, 1 thread,
        # speed against eager's (CPU time, interleaved): 1x64x56x56 / 1x128x28x28 / 1x256x14x14
        # 0.93 / 0.91 / 0.82 (12 x 1, the blocks inside) -> 1.07 / 1.08 / 1.05, bitwise. Tiles of
        # 7 x 2, 6 x 4 and 4 x 4 were as fast; 14 x 2 (28 accumulators beside the row's broadcasts)
        # spilled: 1.8x the time.
        nb = kernel.n[-2] if len(kernel.n) > 1 else None
        blocks = self.register_blocks or (AVX512_FMA_TILE[1] if target.vector_bits >= 512 and self.fma else 1)
        if (blocks > 1 and blocks_inside and nb is not None and nc == nr == lanes and ranges[nb] % blocks == 0
                and outer_tiles // blocks >= parts):
            forall_sizes[nb] = blocks
            outer_tiles //= blocks
            mr = self.register_m or AVX512_FMA_TILE[0]
        else:
            blocks = 1
        tiles = outer_tiles * (n_extent // nc)
        if tiles < parts and m_extent >= 2 * mr * parts:
            forall_sizes[mi] = chunk(m_extent, -(-parts // tiles), multiple=mr)
        # GotoBLAS order where a thread has several N tiles: the A block (mc rows x k-chunk) packed
        # once per K chunk, then read by every N tile of the thread, instead of each register tile's
        # A block again per N tile (`_a_block_rows`).
        # Not where C is visited several times in short steps (K chunks shallower than `cache_k`, over
        # outer reduction dimensions: a channel-shuffled 1x1 convolution's 2 x 29 channels): each N
        # tile's C block stayed in L1 from one step to the next; after all the N tiles it comes from
        # L2 (vtc_shufflenet_unit's, 1 thread: 107 -> 125 us).
        visits = -(-k_extent // k_chunk)
        for d in kernel.k[:-1]:
            visits *= ranges[d]
        short_steps = visits > 1 and k_chunk < (self.cache_k or k_extent)
        # With fused neighbours and one K chunk, at most `fused_c_bytes` of C per outer tile: the
        # epilogue then reads its tile from L2, not all of the thread's C from memory; the A block is
        # packed once per tile instead of once. (Over several K chunks C's tile is read back per
        # chunk either way, and the A block packed per tile of the group costs more than the
        # epilogue saves: Linear + GELU 256x1024x4096, 1 thread, 1.05x the time with the cut.)
        c_bytes = (forall_sizes[mi] or m_extent) * nc * blocks * kernel.element_bits // 8
        most = (max(1, self.fused_c_bytes // c_bytes) if fused and self.fused_c_bytes and visits == 1
                else n_extent // nc)
        group = (1 if a_in_place or not self.promote_a or kernel.in_parallel_loop or short_steps  # (a panel's stack: below)
                 else _n_tiles_per_thread(n_extent // nc, outer_tiles, parts, most))
        # (A peeled K chunk has an A block of its own, on the same stack: both count.)
        a_row = (k_chunk + (k_extent % k_chunk if k_extent > k_chunk else 0)) * element_bits_of(
            kernel.op.operands[1 - kernel.b_operand]) // 8
        mc = _a_block_rows(m_extent, mr, a_row, self.a_block_bytes) if group > 1 else 0
        if mc:
            forall_sizes[ni] = nc * group
        return _ContractionTiles(mr, nr, nc, k_chunk, tuple(forall_sizes), a_in_place, blocks_inside, blocks, nb, mc)

    def build(self, kernel_id, kernel, target, parts, op, members: tuple[FusedMember, ...] = ()):
        rank = kernel.rank
        ni, mi, ki = kernel.n[-1], register_m_dim(kernel), kernel.k[-1]
        m_extent, k_extent = kernel.loop_ranges[mi], kernel.loop_ranges[ki]
        tiles = self._tiles(kernel, target, parts, fused=bool(members))
        mr, nr, nc, mc = tiles.mr, tiles.nr, tiles.nc, tiles.mc
        a_in_place, blocks_inside, blocks, nb = tiles.a_in_place, tiles.blocks_inside, tiles.blocks, tiles.nb
        # The neighbours are matched in the contraction's block, which tiling it leaves in place.
        scope = t.parent_op(op) if members else None
        forall = _tile_outer(kernel, op, list(tiles.forall_sizes))
        if kernel.k[:-1] and not blocks_inside:
            # Several reduction dimensions (a blocked channel c = (c_outer, c_inner), merged heads):
            # all but the innermost one by one, outermost first -- the loops' order of the sum.
            t.tile(t.match_kernel(forall, kernel_id), _sizes(rank, {d: 1 for d in kernel.k[:-1]}))
        if mc and mc < m_extent:
            t.tile(t.match_kernel(forall, kernel_id), _sizes(rank, {mi: mc}))
        if self.cache_k and k_extent > self.cache_k:
            # K in panels, in order (the sums stay in order: C is read back between panels).
            _, k_loops = t.tile(t.match_kernel(forall, kernel_id), _sizes(rank, {ki: self.cache_k}))
            if k_extent % self.cache_k:
                t.peel(k_loops[0])
        if mc:
            # The A block of this K chunk (mc x k-chunk), packed once for the thread's N tiles; then
            # the N tiles, each packing its B panel below as before.
            t.promote(t.match_kernel(forall, kernel_id), [1 - kernel.b_operand])
            _vectorize_copies(forall, len(kernel.maps[1 - kernel.b_operand].results))
            t.tile(t.match_kernel(forall, kernel_id), _sizes(rank, {ni: nc}))
        if self.promote_b and not blocks_inside and not _rows_packed_already(kernel, nc):
            # The B panel of this tile (k-chunk x nc) packed once, then read by every row tile.
            t.promote(t.match_kernel(forall, kernel_id), [kernel.b_operand])
            _vectorize_copies(forall, len(kernel.maps[kernel.b_operand].results))
        _, m_loops = t.tile(t.match_kernel(forall, kernel_id), _sizes(rank, {mi: mr}))
        t.peel(m_loops[0])
        if blocks_inside:
            # The channel blocks inside the register tile, outermost first (the sum's order is the
            # loops': each output element still sums block by block, channel by channel), reading A's
            # and B's blocks where they are: the accumulators are loaded and stored once per tile,
            # not once per block, and B's 16 x 16 block is not copied (it is packed already). 3x3
            # convolutions in nChw16c as above, 12 x 1 tiles: 0.84 / 0.78 / 0.69 -> 0.93 / 0.91 / 0.82
            # eager's speed, bitwise.
            t.tile(t.match_kernel(forall, kernel_id), _sizes(rank, {d: 1 for d in kernel.k[:-1]}))
        if self.promote_a and not a_in_place and not mc:  # (B's copies are vector code by now: the copies left are A's)
            t.promote(t.match_kernel(forall, kernel_id), [1 - kernel.b_operand])
            _vectorize_copies(forall, len(kernel.maps[1 - kernel.b_operand].results))
        _, n_loops = t.tile(t.match_kernel(forall, kernel_id), _sizes(rank, {ni: nr}))
        if nc % nr:
            t.peel(n_loops[0])
        t.tile(t.match_kernel(forall, kernel_id), _sizes(rank, {ki: 1}))
        if blocks > 1:
            # One register tile per block, unrolled side by side in the k step: they share its A
            # elements, so a step loads `blocks` B vectors and mr A elements for blocks x mr FMAs.
            _, block_loops = t.tile(t.match_kernel(forall, kernel_id), _sizes(rank, {nb: 1}))
            t.unroll(block_loops[0], blocks)
        t.canonicalize(forall)
        t.vectorize(t.match_kernel(forall, kernel_id))
        if self.fma:
            # The register tile's products, marked for `codegen-fuse-multiply-add`.
            t.annotate(t.match_names(forall, ["arith.mulf"]), FMA_ATTR)
        if members:
            # Last: the marks and clean-ups above see only the contraction's own ops (a fused
            # BatchNorm's multiply-add must not become an FMA).
            _fuse_members(kernel, target, forall, scope, members)


@dataclass(frozen=True)
class _ContractionTiles:
    """What `ContractionSchedule` decided for one kernel before building its transform IR."""

    mr: int                               # register tile rows
    nr: int                               # register tile columns
    nc: int                               # columns of an N tile
    k_chunk: int                          # depth of a packed B panel
    forall_sizes: tuple[int, ...]         # the outer (parallel) tile per loop, 0: not tiled there
    a_in_place: bool                      # A blocks read where they are
    blocks_inside: bool                   # reduction blocks looped inside the register tile
    blocks: int                           # output channel blocks side by side in the register tile
    nb: int | None                        # their loop
    mc: int                               # rows of the A block packed per K chunk (0: per register tile)


@dataclass(frozen=True)
class FusedMember:
    """A kernel run in a contraction's outer tiles (`codegen.fusion`, `codegen-attach-schedule`):
    its id, `role` (prologue: before the contraction's tile, epilogue: after it), its kernel, its
    outer tile per loop (the contraction's tile of the C dimension the loop walks; 0: the whole
    extent) and the vector schedule that vectorises it inside that tile, as it would alone."""

    id: int
    role: str
    kernel: Kernel
    sizes: tuple[int, ...]
    schedule: VectorSchedule


def _fuse_members(kernel: Kernel, target: HostTarget, loop, scope, members: tuple[FusedMember, ...]) -> None:
    """Tile each member with the contraction's outer tiles (`loop`, its forall or outermost
    `scf.for`), fuse the members' loops with it (prologues' bodies before the contraction's tile,
    epilogues' after it; the loop takes the last epilogue's place) and vectorise each member inside
    the tile as `VectorSchedule` would: its innermost loop in vectors of `vectors` registers
    (peeled), the others by 1. Each element is computed by the operations of the member's own
    kernel, in the same order: bitwise the unfused kernels. The members' outer tiles are the
    contraction's loops (same bounds and steps: `codegen.fusion.find_group`'s rules)."""
    loops = [_tile_outer(m.kernel, t.match_kernel(scope, m.id), list(m.sizes)) for m in members]
    if kernel.in_parallel_loop:
        # `scf.for` tiles fuse only with the same SSA bounds: each tiling made its own constants.
        t.cse(scope)
    # Prologues nearest first, so that the fused body keeps program order (`codegen.fusion.PROLOGUE`).
    for member_loop in reversed([ml for m, ml in zip(members, loops) if m.role == "prologue"]):
        loop = t.fuse_sibling(member_loop, loop)
    for member_loop in [ml for m, ml in zip(members, loops) if m.role != "prologue"]:
        loop = t.fuse_sibling(loop, member_loop)
    for member in members:
        rank, extents = member.kernel.rank, [s or r for s, r in zip(member.sizes, member.kernel.loop_ranges)]
        width = member.schedule.vectors * target.lanes(member.kernel.element_bits)
        inner = {d: 1 for d in range(rank - 1) if extents[d] > 1}  # (an identity output: vectors along the last loop)
        if extents[-1] > width:
            inner[rank - 1] = width
        if inner:
            _, tile_loops = t.tile(t.match_kernel(loop, member.id), _sizes(rank, inner))
            if rank - 1 in inner and extents[-1] % width:
                t.peel(tile_loops[-1])
        t.canonicalize(loop)
        t.vectorize(t.match_kernel(loop, member.id))
    if any(m.schedule.reciprocal and body_divides(m.kernel) for m in members):
        # (`codegen-attach-schedule` fuses no members that disagree on it.)
        t.annotate(t.match_names(loop, ["arith.divf"]), RECIPROCAL_ATTR)


def body_divides(kernel: Kernel) -> bool:
    """Whether the kernel's body divides (what `VectorSchedule.reciprocal` acts on)."""
    if not kernel.op.regions or not kernel.op.regions[0].blocks:
        return False
    return any(op.operation.name == "arith.divf" for op in kernel.op.regions[0].blocks[0].operations)


def fusable_member(kernel: Kernel) -> bool:
    """Whether `VectorSchedule` tiles `kernel` as `_fuse_members` tiles a fused member: vectors along
    its innermost loop, no transposed input (which takes square tiles of one register)."""
    return (kernel.op.name in ("linalg.generic", "linalg.fill") and kernel.rank > 0
            and _vector_dim(kernel) == kernel.rank - 1 and _transposed_dim(kernel, kernel.rank - 1) is None)


def _n_tiles_per_thread(tiles: int, outer_tiles: int, parts: int, most: int = 0) -> int:
    """How many of a kernel's `tiles` N tiles one parallel iteration takes (1: one each, the plain
    split): the most that still leave every thread the same number of iterations (the iterations,
    `outer_tiles` x tiles / group, a multiple of the threads that need N tiles: 8 tiles on 2 threads
    are 2 iterations of 4; 8 on 3 stay 8 iterations, 3 + 3 + 2 tiles, where groups of 2 would give
    4 + 2 + 2); at most `most` (0: any)."""
    need = -(-parts // outer_tiles)
    for group in range(min(tiles, most or tiles), 1, -1):
        if tiles % group == 0 and (tiles // group) % need == 0:
            return group
    return 1


def _a_block_rows(m_extent: int, mr: int, row_bytes: int, budget: int) -> int:
    """Rows of the A block packed once per K chunk (its rows `row_bytes` long, at most `budget`
    bytes: it is a stack buffer, on a thread's stack beside the B panel): all of M where it fits,
    else the largest divisor of M that is a multiple of `mr` (the block's tiles static) and fits;
    0 where no block of at least 4 register tiles fits (the A blocks are then packed per register
    tile, as without a group of N tiles)."""
    if budget <= 0 or row_bytes <= 0:
        return 0
    rows = budget // row_bytes
    if m_extent <= rows:
        return m_extent
    fitting = [d for d in _divisors(m_extent) if d % mr == 0 and d <= rows]
    best = max(fitting, default=0)
    return best if best >= 4 * mr else 0


def _whole_vectors(remainder: int) -> bool:
    """Whether a register tile's last `remainder` columns are one vector of a legal width (none, or a
    power of two: 4 of 16 lanes is an xmm register; 24 of 32 would be legalised piecewise)."""
    return remainder & (remainder - 1) == 0


def _is_dense_tile(kernel: Kernel, operand: int, extents: dict[int, int]) -> bool:
    """Whether the tile of input `operand` that the loop dimensions in `extents` span (each over its
    extent, every other dimension fixed) is one contiguous block of its buffer: packing it would copy
    it as it is. Needs static strides and results that are a loop dimension or a constant."""
    value = kernel.op.operands[operand]
    if not isinstance(value.type, ir.MemRefType):
        return False
    strides, _ = value.type.get_strides_and_offset()
    spans = []
    for stride, expr in zip(strides, kernel.maps[operand].results):
        if isinstance(expr, ir.AffineConstantExpr):
            continue
        if not isinstance(expr, ir.AffineDimExpr):
            return False
        extent = extents.get(expr.position, 1)
        if extent == 1:
            continue
        if value.type.is_dynamic_stride_or_offset(stride):
            return False
        spans.append((stride, extent))
    covered = 1  # elements of the block so far, innermost stride first
    for stride, extent in sorted(spans):
        if stride != covered:
            return False
        covered *= extent
    return True


def _rows_packed_already(kernel: Kernel, nc: int) -> bool:
    """Whether B's tiles (k-chunk x nc) are contiguous blocks of B already, laid out as their packed
    copy would be: B's n dimension is its innermost, unit-stride and nc wide, and its k rows follow
    each other (an im2col panel `[K, pixels]` read whole: packing it only copied it)."""
    operand = kernel.op.operands[kernel.b_operand]
    if not isinstance(operand.type, ir.MemRefType):
        return False
    b_type = ir.MemRefType(operand.type)
    strides, _ = b_type.get_strides_and_offset()
    # Unit dimensions aside (a transposed K panel of one head, `codegen-transpose-b-operands`: [1, K, nc]).
    kept = [(e, stride) for e, stride, extent in zip(kernel.maps[kernel.b_operand].results, strides, b_type.shape)
            if extent != 1]
    if len(kept) != 2:
        return False  # (a B with batch dimensions, read in place, was slower: a 1x1 convolution's
                      # [n, c, pixels] input at batch 8, 10 -> 19 us)
    positions = [e.position if isinstance(e, ir.AffineDimExpr) else None for e, _ in kept]
    ni, ki = kernel.n[-1], kernel.k[-1]
    if positions[-1] != ni or ki not in positions:
        return False
    if not (kept[-1][1] == 1 and b_type.shape[-1] == nc and kept[positions.index(ki)][1] == nc):
        return False
    # Only a stack buffer (the im2col panel): a weight read in place made transformer_block's Linears
    # 1.17-1.20x slower while LLVM alone kept their accumulators in registers; with
    # `codegen-hoist-accumulators` it is neutral (0.92-1.07x on 11 models), so packing stays.
    root = buffer_root(operand)
    return not isinstance(root, ir.BlockArgument) and root.owner.operation.name == "memref.alloca"


def _vectorize_copies(scope, rank: int) -> None:
    """Vectorise the packing copies under `scope` (all of one operand, so of one rank) row by row: a
    vector per packed row, not the whole panel as one vector."""
    t.tile(t.match_names(scope, ["linalg.copy"]), [1] * (rank - 1) + [0])
    t.canonicalize(scope)
    t.vectorize(t.match_names(scope, ["linalg.copy"]))


def _sizes(rank: int, given: dict[int, int]) -> list[int]:
    return [given.get(d, 0) for d in range(rank)]


def _vector_dim(kernel: Kernel) -> int:
    """The loop dimension the vectors run along: the innermost of the output (contiguous stores)."""
    out_map = kernel.maps[-1]
    for e in reversed(list(out_map.results)):
        if isinstance(e, ir.AffineDimExpr):
            return e.position
    return kernel.rank - 1


def _output_bytes(kernel: Kernel) -> int:
    shaped = ir.ShapedType(kernel.op.operands[-1].type)
    if not shaped.has_static_shape:
        return 0
    elements = 1
    for extent in shaped.shape:
        elements *= extent
    return elements * kernel.element_bits // 8


def _tile_vectors(kernel_id: int, kernel: Kernel, parts: int, op, vector_dim: int, width: int,
                  cross: int | None = None) -> ir.Value:
    """Shared by the vector schedules: thread split on the outermost other dimension, every other
    dimension by 1, `vector_dim` by `width` (peeled), then vectorise the pieces. With `cross` (an
    input's contiguous dimension, not the output's: a transposition), that dimension is tiled by
    `width` too, so each tile reads `width` contiguous rows and transposes them in registers.
    Returns the handle of the kernel's outermost tile loop."""
    rank, ranges = kernel.rank, kernel.loop_ranges
    if kernel.op.name == "linalg.map":  # (a padding's fill) its tiles would have dynamic shapes
        op = t.generalize(op)
    parts = _parallel_parts(kernel, parts)
    forall_sizes = [0] * rank
    split = next((d for d in range(rank) if d != vector_dim and d not in kernel.reduction_dims and ranges[d] > 1), None)
    if split is not None:
        forall_sizes[split] = chunk(ranges[split], parts, multiple=width if split == cross else 1)
    elif vector_dim not in kernel.reduction_dims:
        forall_sizes[vector_dim] = chunk(ranges[vector_dim], parts, multiple=width)
    else:
        forall_sizes[vector_dim] = ranges[vector_dim]  # one tile: a reduction is not split
    forall = _tile_outer(kernel, op, forall_sizes)
    inner = {d: 1 for d in range(rank) if d != vector_dim and not (d == split and forall_sizes[d] == 1)}
    extent = forall_sizes[vector_dim] or ranges[vector_dim]
    if extent > width:
        inner[vector_dim] = width
    cross_extent = (forall_sizes[cross] or ranges[cross]) if cross is not None else 0
    streaming = cross is not None and _output_bytes(kernel) >= STREAMING_STORE_BYTES
    order = list(range(rank))
    if cross is not None:
        inner.pop(cross, None)
        if cross_extent > width:
            inner[cross] = width
        block = next((b for b in TRANSPOSE_BLOCKS if b > width and cross_extent % b == 0 and extent % b == 0), None)
        if streaming:
            # A band of `width` input rows (contiguous along `cross`) read along its length, innermost:
            # the reads are `width` sequential streams; each tile's rows go out as whole cache lines.
            order = [d for d in order if d != cross] + [cross]
        elif block:  # blocks of rows whose pages stay in the TLB while their columns are swept
            t.tile(t.match_kernel(forall, kernel_id), _sizes(rank, {cross: block, vector_dim: block}))
    if any(inner.values()):
        _, loops = t.tile(t.match_kernel(forall, kernel_id), _sizes(rank, inner),
                          interchange=order if order != sorted(order) else None)
        tiled = [d for d in order if inner.get(d)]
        if streaming:
            t.annotate(loops[0], STREAMING_STORES_ATTR)
        # Peel the innermost loop first: peeling an outer loop would copy the inner one.
        for d in reversed(tiled):
            if (d == vector_dim and extent % width) or (d == cross and cross_extent % width):
                t.peel(loops[tiled.index(d)])
    t.canonicalize(forall)
    t.vectorize(t.match_kernel(forall, kernel_id))
    return forall


@dataclass(frozen=True)
class VectorSchedule(Schedule):
    name: ClassVar[str] = "vector"
    vectors: int = 4         # vector registers per tile of the innermost dimension
    reciprocal: bool = True  # an f32/f64 division by a value the same all along its loop (softmax's row
                             # sum) as a multiplication by its reciprocal (`codegen-reciprocal-divisions`):
                             # one rounding more; False: the loops' division, bitwise (EXACT_SCHEDULES)

    def build(self, kernel_id, kernel, target, parts, op):
        vector_dim = _vector_dim(kernel)
        cross = _transposed_dim(kernel, vector_dim)
        if cross is not None:  # square tiles of one register: `width` rows read, transposed in registers
            scope = _tile_vectors(kernel_id, kernel, parts, op, vector_dim, target.lanes(kernel.element_bits), cross)
        else:
            scope = _tile_vectors(kernel_id, kernel, parts, op, vector_dim, self.vectors * target.lanes(kernel.element_bits))
        if self.reciprocal:
            t.annotate(t.match_names(scope, ["arith.divf"]), RECIPROCAL_ATTR)


def _transposed_dim(kernel: Kernel, vector_dim: int) -> int | None:
    """The contiguous dimension of an input that is not the output's (a parallel dimension both
    index): the kernel transposes that input."""
    if vector_dim in kernel.reduction_dims:
        return None
    out_dims = {e.position for e in kernel.maps[-1].results if isinstance(e, ir.AffineDimExpr)}
    for amap in kernel.maps[:-1]:
        results = list(amap.results)
        if not results or not isinstance(results[-1], ir.AffineDimExpr):
            continue
        inner = results[-1].position
        uses_vector_dim = any(isinstance(e, ir.AffineDimExpr) and e.position == vector_dim for e in results)
        if (inner != vector_dim and uses_vector_dim and inner in out_dims and inner not in kernel.reduction_dims
                and kernel.loop_ranges[inner] > 1):
            return inner
    return None


@dataclass(frozen=True)
class RowReductionSchedule(Schedule):
    name: ClassVar[str] = "row-reduction"
    vectors: int = 8  # vector registers reduced as one chunk (the reassociation's tree width)
    partial_sums: bool = True  # in a loop over row blocks, sum into per-lane partial sums first
                               # (`codegen-split-row-reductions`; one tree per row, not per chunk)

    def build(self, kernel_id, kernel, target, parts, op):
        bits = max(kernel.element_bits, _input_bits(kernel))
        width = self.vectors * target.lanes(bits)
        _tile_vectors(kernel_id, kernel, parts, op, kernel.rank - 1, width)


def _input_bits(kernel: Kernel) -> int:
    return max((element_bits_of(v) for v in kernel.op.operands[:-1]), default=kernel.element_bits)


@dataclass(frozen=True)
class ParallelLoops(Schedule):
    """Not a schedule of its own: a kernel no schedule covers (a gather's `memref.load`, a strided
    window's read: 'unknown' kernels) keeps its scalar loops and is named in the report as such, but
    at more than one thread its outermost parallel loop of more than one trip is split over them (an
    `scf.forall`), so it does not run on one core while the others wait (temco_unet's upsampling
    gathers: 0.5 ms of scalar loops at b8). Each element is computed as before: bitwise for every
    thread count."""
    name: ClassVar[str] = "parallel-loops"

    @staticmethod
    def applies(kernel: Kernel, parts: int) -> bool:
        return (kernel.op.name == "linalg.generic" and bool(kernel.loop_ranges)
                and _parallel_parts(kernel, parts) > 1 and bool(_split_dims(kernel)))

    def build(self, kernel_id, kernel, target, parts, op):
        dims = _split_dims(kernel)
        if _parallel_parts(kernel, parts) <= 1 or not dims:
            return
        sizes = [0] * kernel.rank
        sizes[dims[0]] = chunk(kernel.loop_ranges[dims[0]], parts)
        _tile_outer(kernel, op, sizes)


def _split_dims(kernel: Kernel) -> list[int]:
    """The parallel loops of more than one trip, outermost first."""
    return [d for d in range(kernel.rank) if d not in kernel.reduction_dims and kernel.loop_ranges[d] > 1]


# The default schedule per kernel kind; a kind mapped to None keeps its loops (and is reported).
DEFAULT_SCHEDULES: dict[str, Schedule | None] = {
    KernelKind.CONTRACTION.value: ContractionSchedule(),
    KernelKind.ELEMENTWISE.value: VectorSchedule(),
    KernelKind.DATA_MOVEMENT.value: VectorSchedule(),
    "outer-reduction": VectorSchedule(),
    "row-reduction": RowReductionSchedule(),
    KernelKind.CONVOLUTION.value: None,
    KernelKind.POOLING.value: None,
}


# The override that leaves only schedules that never reassociate or fuse: every kernel then computes
# each element with the scalar loops' operations in their order (a convolution's loops: taps outer,
# as codegen-order-window-taps orders them for every route; a contraction's multiply and add
# rounded separately; every division a division). VTC's and VTensor's bitwise comparisons of two
# pipelines hold under it -- a view or a layout can change which loop of a reduction is innermost,
# and with it whether it is summed as a tree, or make a contraction a kernel of another kind.
EXACT_SCHEDULES: dict[str, dict | None] = {"row-reduction": None, "contraction": {"fma": False},
                                          "elementwise": {"reciprocal": False}, "outer-reduction": {"reciprocal": False}}


def schedule_key(kernel: Kernel) -> str:
    """The key of `DEFAULT_SCHEDULES` (and of `schedules=` overrides) for a kernel."""
    if kernel.kind is KernelKind.REDUCTION:
        return "row-reduction" if kernel.innermost_is_reduction else "outer-reduction"
    return kernel.kind.value


def resolve_schedules(overrides: list[str] | dict | None,
                      defaults: dict[str, Schedule | None] | None = None) -> dict[str, Schedule | None]:
    """DEFAULT_SCHEDULES (or another target's `defaults`) with overrides applied. Text form (the pass
    option), one item per setting: `kind:none` (keep loops), `kind:default`, or `kind.parameter:value`;
    the dict form maps a kind to None, a `Schedule`, or a dict of parameter values."""
    defaults = DEFAULT_SCHEDULES if defaults is None else defaults
    table = dict(defaults)
    if not overrides:
        return table
    if isinstance(overrides, dict):
        items = []
        for kind, value in overrides.items():
            if value is None or isinstance(value, Schedule):
                _check_kind(kind, defaults)
                table[kind] = value
            elif isinstance(value, dict):
                items += [f"{kind}.{k}:{v}" for k, v in value.items()]
            else:
                raise VtmlirError(f"error: schedules[{kind!r}] must be None, a Schedule or a dict of parameters")
        overrides = items
    for item in overrides:
        key, sep, value = item.partition(":")
        if not sep:
            raise VtmlirError(f"error: schedule override '{item}' is not 'kind:none', 'kind:default' or "
                              "'kind.parameter:value'")
        kind, dot, param = key.partition(".")
        _check_kind(kind, defaults)
        if not dot:
            if value.lower() not in ("none", "default"):
                raise VtmlirError(f"error: schedule override '{item}': expected 'none' or 'default'")
            table[kind] = None if value.lower() == "none" else defaults[kind]
            continue
        base = table[kind] or defaults[kind]
        if base is None:
            raise VtmlirError(f"error: kernel kind '{kind}' has no schedule to set '{param}' of")
        table[kind] = base.with_overrides({param: value})
    return table


def _check_kind(kind: str, defaults: dict) -> None:
    if kind not in defaults:
        raise VtmlirError(f"error: unknown kernel kind '{kind}' in schedules (kinds: {', '.join(defaults)})")
