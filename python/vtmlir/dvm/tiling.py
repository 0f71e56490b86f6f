"""Shape tiling for the DVM runtime operator compiler (Fang et al., DVM, §4.2, Algorithm 1).

Tiling runs for every new shape, so it is pure integer arithmetic without measurement: the paper's
light-weight cost model ``cost = ceil(#tiles / N) * (L~ + 2)`` (N cores, L~ the tile size, 2 the
per-tile overhead of decoding bytecode) models the bottleneck core, and `hardware_align_div` rounds
the minimum-cost tile up to the vector instruction width without exceeding the tile size limit
``T_max = M / n_max`` (M local memory, n_max the peak number of live tiles).

Alg. 1 as written only enters its loop while the whole shape exceeds T_max; Fig. 6 nevertheless
splits a [32, 1024] add that fits into 40 tiles of 832 elements to occupy 40 cores. We follow
Fig. 6: walking the dominant shape from outer to inner, every dimension whose inner part alone
exceeds T_max gets tile 1 (lines 9-11), and at the first dimension where a tile can fit the cost
model chooses the tile (lines 12-15) -- which may be the whole dimension when that is cheapest.
A reduction dimension is never split (line 17): the split dimension must lie outside all of them.

The MatMul template (§4.2, "for matrix operations, the output shape of each tile is
2-dimensional") tiles the [m, n] output with power-of-two tiles (the n side aligned to the vector
width), splits k to fit local memory, and picks the candidate of minimum bottleneck cost with the
same formula, taking as L~ the elements a tile loads plus its multiply-adds per vector lane.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field


from ..errors import VtmlirError


class TilingError(VtmlirError):
    """No tiling of the shape fits the target's local memory."""


@dataclass(frozen=True)
class Target:
    """What tiling needs to know about the machine the VM runs on.

    cores: parallel workers (AI Cores in the paper, CPU threads or GPU blocks here);
    vector_bytes: the vector instruction width (32 bytes = 8 floats: AVX2, and the 32-byte
    instruction width of the paper's Fig. 6 example); local_memory_bytes: the per-core local buffer
    M (on a CPU: the part of the private L2 a core's working set should stay within)."""

    cores: int = field(default_factory=lambda: max(1, os.cpu_count() or 1))
    vector_bytes: int = 32
    local_memory_bytes: int = 256 * 1024
    tile_overhead: int = 2  # the "+2" of the cost model

    def __post_init__(self):
        if self.cores < 1 or self.vector_bytes < 1 or self.local_memory_bytes < 1:
            raise ValueError(f"invalid target {self}")

    def vector_elems(self, itemsize: int) -> int:
        return max(1, self.vector_bytes // itemsize)


def tile_cost(n_tiles: int, tile_size: int, cores: int, overhead: int = 2) -> int:
    """The paper's cost of a tiling solution: ceil(#tiles / N) * (L~ + 2)."""
    return -(-n_tiles // cores) * (tile_size + overhead)


def min_cost_tile(extent: int, inner: int, outer: int, t_max: int, cores: int, overhead: int = 2) -> int:
    """The tile t along a dimension of `extent` (a tile holds t * inner elements, and `outer` tiles
    are made for every block of the dimension) of minimum `tile_cost`, with t * inner <= t_max;
    ties go to the larger t (fewer tiles). Exact (equal to trying every t, see the tests) but it
    visits only the candidates that can win:

    - for a block count n the cheapest tile is ceil(extent / n), and within one wave count
      w = ceil(outer * n / N) the largest n is cheapest, so each wave has one candidate;
    - waves whose candidate tile equals the previous one are dominated and skipped;
    - any candidate with w waves costs at least ``extent*inner*outer/N + overhead*w``, so the walk
      stops once that bound exceeds the best cost found.
    """
    t_hi = min(extent, t_max // inner)
    if t_hi < 1:
        raise TilingError(f"a tile of {inner} elements exceeds the limit of {t_max}")
    lower = extent * inner * outer / cores
    n = -(-extent // t_hi)  # fewest blocks that fit
    best_cost, best_t = None, 0
    while True:
        w = -(-(outer * n) // cores)
        if best_cost is not None and lower + overhead * w > best_cost:
            break
        n = min(extent, (w * cores) // outer)  # the largest block count of this wave
        t = -(-extent // n)
        cost = w * (t * inner + overhead)
        if best_cost is None or cost < best_cost or (cost == best_cost and t > best_t):
            best_cost, best_t = cost, t
        if t == 1:
            break
        n = -(-extent // (t - 1))  # fewest blocks for a strictly smaller tile
    return best_t


def hardware_align_div(t_max: int, inner: int, extent: int, outer: int, target: Target, itemsize: int) -> int:
    """Alg. 1 line 14: the minimum-cost tile along a dimension of `extent` whose inner dimensions
    hold `inner` elements, rounded up so that the tile (t * inner elements) is a multiple of the
    vector width while respecting `t_max` (rounded down when up would exceed it; left unaligned
    when no aligned tile fits). A whole-dimension tile needs no alignment."""
    t = min_cost_tile(extent, inner, outer, t_max, target.cores, target.tile_overhead)
    if t == extent:
        return t
    align = target.vector_elems(itemsize)
    step = align // math.gcd(align, inner)
    up = -(-t // step) * step
    if up >= extent and extent * inner <= t_max:
        return extent
    if up * inner <= t_max and up <= extent:
        return up
    down = (t // step) * step
    return down if down >= 1 else t


# The tiling results are plain (not frozen) dataclasses: one is built per new shape, and a frozen
# dataclass's constructor costs ~2 µs more, a tenth of a natively compiled shape. Treat them as values.
@dataclass
class VectorTiling:
    """Result of Alg. 1 on a dominant shape: dimensions before `dim` get tile 1, `dim` gets
    `tile`, inner dimensions are whole. `t_max` and `n_max` are the limits it respected."""

    shape: tuple[int, ...]
    dim: int
    tile: int
    t_max: int
    n_max: int

    @property
    def tile_shape(self) -> tuple[int, ...]:
        return tuple(1 if d < self.dim else self.tile if d == self.dim else s
                     for d, s in enumerate(self.shape))

    @property
    def grid(self) -> tuple[int, ...]:
        """Tiles per dimension up to and including `dim`."""
        return tuple(self.shape[: self.dim]) + (-(-self.shape[self.dim] // self.tile),)

    @property
    def tile_count(self) -> int:
        return math.prod(self.grid)

    @property
    def tile_size(self) -> int:
        return math.prod(self.tile_shape)


def tile_vector(shape, reduce_dims, n_max: int, itemsize: int, target: Target) -> VectorTiling:
    """Algorithm 1 on the dominant shape S_d (`shape`) of a vector kernel whose reductions run
    along `reduce_dims`, with `n_max` live tiles of `itemsize`-byte elements."""
    shape = tuple(int(s) for s in shape)
    if not shape or min(shape) < 1:
        raise TilingError(f"cannot tile shape {list(shape)}")
    align = target.vector_elems(itemsize)
    t_max = target.local_memory_bytes // (max(1, n_max) * itemsize)  # line 4
    if t_max >= align:
        t_max -= t_max % align
    if t_max < 1:
        raise TilingError(f"{n_max} live tiles do not fit {target.local_memory_bytes} bytes of local memory")
    reduce_dims = {d % len(shape) for d in reduce_dims}
    outer = 1
    for i, ell in enumerate(shape):  # lines 5, 20: outer to inner
        inner = math.prod(shape[i + 1 :])
        if i in reduce_dims:
            # the remaining tile cannot be split: it must fit as a whole
            if ell * inner > t_max:
                raise TilingError(
                    f"reduction over a dimension of {ell} with {inner} inner elements exceeds the "
                    f"tile limit of {t_max} elements ({target.local_memory_bytes} bytes / {n_max} live tiles)")
            return VectorTiling(shape, i, ell, t_max, n_max)
        if inner > t_max:  # lines 9-11
            outer *= ell
            continue
        t = hardware_align_div(t_max, inner, ell, outer, target, itemsize)  # lines 13-15
        return VectorTiling(shape, i, t, t_max, n_max)
    raise AssertionError("unreachable: the innermost dimension always fits")  # pragma: no cover


@dataclass
class MatmulTiling:
    """The MatMul template's choice for an [m, k] x [k, n] product: output tiles of tm x tn,
    k in chunks of tk (the last chunk may be shorter)."""

    m: int
    n: int
    k: int
    tm: int
    tn: int
    tk: int
    cost: int

    @property
    def grid(self) -> tuple[int, int]:
        return (-(-self.m // self.tm), -(-self.n // self.tn))

    @property
    def tile_count(self) -> int:
        return math.prod(self.grid)


def matmul_candidates(m: int, n: int, target: Target, itemsize: int):
    """The (tm, tn) the MatMul template considers: powers of two (and the whole extent), with tn a
    multiple of the vector width unless it covers all of n."""
    align = target.vector_elems(itemsize)
    tms = {min(m, 1 << e) for e in range(0, 10)}
    tns = {min(n, align << e) for e in range(0, 8)}
    return sorted(tms), sorted(tns)


def matmul_tile_cost(m, n, k, tm, tn, target: Target) -> int:
    """The bottleneck cost of the MatMul template: ceil(#tiles / N) * (L~ + 2) with L~ the
    elements a tile loads ((tm + tn) * k) plus its multiply-adds per vector lane."""
    tiles = -(-m // tm) * -(-n // tn)
    work = (tm + tn) * k + -(-(tm * tn) // 8) * k
    return tile_cost(tiles, work, target.cores, target.tile_overhead)


def matmul_chunk(k: int, tm: int, tn: int, n_live: int, target: Target, itemsize: int) -> int:
    """The k chunk tk that fits local memory beside `n_live` tm x tn tiles (0 if none fits)."""
    avail = target.local_memory_bytes - n_live * tm * tn * itemsize
    tk = avail // ((tm + tn) * itemsize) if avail > 0 else 0
    if tk >= k:
        return k
    align = target.vector_elems(itemsize)
    return tk - tk % align if tk >= align else tk


_MATMUL_TABLES: dict = {}  # (n, k, n_live, itemsize, target) -> candidate rows, see below


def _matmul_rows(tms, n, k, n_live, itemsize, target: Target):
    """Per tm: the feasible (nt, work, area, tn, tk) of every tn candidate. None of it depends on
    m (only which tm are candidates does)."""
    align = target.vector_elems(itemsize)
    tns = sorted({min(n, align << e) for e in range(0, 8)})
    mem, live, over = target.local_memory_bytes, n_live * itemsize, target.tile_overhead
    rows = []
    for tm in tms:
        row = []
        for tn in tns:
            avail = mem - live * tm * tn
            tk = avail // ((tm + tn) * itemsize) if avail > 0 else 0
            if tk >= k:
                tk = k
            elif tk >= align:
                tk -= tk % align
            if tk >= 1:
                area = tm * tn
                row.append((-(-n // tn), (tm + tn) * k + -(-area // 8) * k + over, area, tn, tk))
        rows.append((tm, row))
    return rows


def tile_matmul(m: int, n: int, k: int, n_live: int, itemsize: int, target: Target) -> MatmulTiling:
    """Choose (tm, tn, tk) for an [m,k]x[k,n] tile with `n_live` output-sized tiles live at once
    (the accumulator and the epilogue's tiles): the candidate of `matmul_candidates` with a
    feasible `matmul_chunk` of minimum `matmul_tile_cost`, ties to the larger tile, then the
    smaller tm (equal to `tile_matmul_reference`, see the tests).

    This runs for every new shape, so it is a branch and bound rather than a scan. What does not
    depend on m -- per candidate (tm, tn) the chunk tk, the tile's work W (L~ + 2) and the n-side
    tile count nt -- is tabulated once per (n, k, live tiles, element size, target) for the
    power-of-two tm, ordered by W·nt/tm. A candidate costs ceil(ceil(m/tm)·nt / N)·W >=
    m·W·nt/(tm·N), a bound increasing along that order: the walk stops at the first candidate
    whose bound exceeds the best cost found (for large m after a handful of rows). When m < 512
    is not a power of two, the walk visits only the rows tm <= m and the m-dependent row tm = m
    is tried too."""
    if m < 1:
        raise TilingError(f"cannot tile a matmul of {m} rows")
    key = (n, k, n_live, itemsize, target)
    table = _MATMUL_TABLES.get(key)
    if table is None:
        if len(_MATMUL_TABLES) > 1024:
            _MATMUL_TABLES.clear()
        rows = _matmul_rows([1 << e for e in range(0, 10)], n, k, n_live, itemsize, target)
        flat = [(tm, *c) for tm, row in rows for c in row]  # tm, nt, work, area, tn, tk
        # exact order of W*nt/tm: every tm divides 512
        table = sorted(flat, key=lambda r: (r[2] * r[1] * (512 // r[0]), r[0], r[4]))
        # per e, the rows with tm <= 2^e (the walk for m < 512 skips larger tm): same order
        table = _MATMUL_TABLES[key] = [[r for r in table if r[0] <= 1 << e] for e in range(10)]
    cores = target.cores
    best = None  # (cost, -area, tm, tn, tk): the lexicographic minimum wins
    # m < 512: tm = min(m, 2^e) -- the rows tm > m are left out, the row tm = m below stands for them
    for tm, nt, work, area, tn, tk in table[min(9, m.bit_length() - 1)]:
        if best is not None and m * work * nt > best[0] * tm * cores:
            break
        cand = (-(-(-(-m // tm) * nt) // cores) * work, -area, tm, tn, tk)
        if best is None or cand < best:
            best = cand
    if m < 512 and m & (m - 1):  # the candidate tm = m (a power of two is in the table already)
        for tm, row in _matmul_rows([m], n, k, n_live, itemsize, target):
            for nt, work, area, tn, tk in row:
                cand = (-(-nt // cores) * work, -area, tm, tn, tk)
                if best is None or cand < best:
                    best = cand
    if best is None:
        raise TilingError(f"no matmul tile of [{m},{k}]x[{k},{n}] fits {target.local_memory_bytes} bytes")
    cost, _, tm, tn, tk = best
    return MatmulTiling(m, n, k, tm, tn, tk, cost)


def tile_matmul_reference(m: int, n: int, k: int, n_live: int, itemsize: int, target: Target) -> MatmulTiling:
    """`tile_matmul` written plainly from its three parts (the specification the tests check)."""
    tms, tns = matmul_candidates(m, n, target, itemsize)
    best = None
    for tm in tms:
        for tn in tns:
            tk = matmul_chunk(k, tm, tn, n_live, target, itemsize)
            if tk < 1:
                continue
            cost = matmul_tile_cost(m, n, k, tm, tn, target)
            key = (cost, -(tm * tn), tm)
            if best is None or key < best[0]:
                best = (key, MatmulTiling(m, n, k, tm, tn, tk, cost))
    if best is None:
        raise TilingError(f"no matmul tile of [{m},{k}]x[{k},{n}] fits {target.local_memory_bytes} bytes")
    return best[1]
