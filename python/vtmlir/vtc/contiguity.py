"""Contiguity of virtual tensors (VTC Defs. 4–5) and Type I / Type II profitability (VTC Thm. 1).

A virtual tensor V of shape D reads (or writes) a physical tensor P through a mapping piece
`y = map(x)`. In memory that is the offset `f(x) = stride_P · map(x)`, which VTC Eq. 1 writes as
`f(x) = S · x + b(x)`: a linear part with stride vector S plus an index-dependent bias b (the
floordiv/mod terms, Eq. 2). Def. 4: dimension d is *contiguous* when, from d inward, S equals the
suffix products of D and b does not depend on those dimensions; then every block of
`prod(D[d:])` consecutive virtual elements is one consecutive run of memory. Def. 5: the minimal
contiguous dimension decides *full* contiguity (d = 0 here; the paper counts from 1) and *partial*
contiguity (the run is at least the target's minimal memory transfer unit). Thm. 1: fully contiguous
virtual tensors are Type I (always profitable); everything else is Type II (profile it).

How the linear part and the bias are found (`linearize_offset`): the affine expression tree is
walked; `e floordiv c` and `e mod c` are split as `e = c·q + r` (q: the terms whose coefficient c
divides), and when interval bounds show `r` stays inside one period over the index box the division
is exact and linear (e.g. `(4·i + j) floordiv 4 = i` for `0 <= j < 4`). Otherwise the term follows
Eq. 2: `x mod c = x − c·⌊x/c⌋`, so the linear part keeps x and the bias gains the dims of r.

Two refinements over the letter of Def. 4, both sound and both documented here because they make
the analysis see what the paper argues in prose:

* dimensions of extent 1 are "don't care" (their index is always 0): decode-time LLM tensors are
  full of them (batch 1, query length 1);
* *delinearisation*: a virtual dim read through `(x − lo) floordiv c` / `mod c` with the piece
  aligned on c is split into sub-dimensions (extent/c, c) before Def. 4 is applied. This does not
  change the virtual linear order, so runs found on the refined shape are runs of V. It is what lets
  the fused-QKV mapping of VTC Fig. 3 (c[i, j] → K_cache[i, j/128, pos, j mod 128]) be recognised as
  partially contiguous with 128-element runs (one head), as the paper's §3.1 argues.

Multi-piece mappings (concat, split, insert_slice): each piece is analysed over its own box; the
tensor's run length is the smallest piece's, and it is fully contiguous when every piece is (a split
on axis 0 is Type I, VTC §4.4). `min_contiguous_dim` is reported per Def. 4 on the original dims.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch_mlir import ir

from ..dialects.vt_mapping import MappingFunction, Piece

# -- targets ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TransferUnit:
    """The minimal memory transfer unit of a target (Def. 5): a run shorter than this wastes bandwidth."""

    name: str
    unit_bytes: int


#: One coalesced warp transaction on NVIDIA GPUs: 32 threads × 4 bytes.
CUDA_COALESCING = TransferUnit("cuda-coalescing", 128)
#: One cache line on x86-64 / AArch64 CPUs (and one AVX-512 vector).
CPU_CACHE_LINE = TransferUnit("cpu-cache-line", 64)

TARGETS = {"cuda": CUDA_COALESCING, "cpu": CPU_CACHE_LINE}


# -- linear part and bias of an offset (Eq. 1) --------------------------------------------------------


@dataclass(frozen=True)
class LinearForm:
    """`sum(coeffs[i] * t_i) + const + bias(t)` where bias depends only on the dims in `bias`."""

    coeffs: dict
    const: int
    bias: frozenset

    @staticmethod
    def constant(c: int) -> LinearForm:
        return LinearForm({}, c, frozenset())

    def __add__(self, other: LinearForm) -> LinearForm:
        coeffs = dict(self.coeffs)
        for k, v in other.coeffs.items():
            coeffs[k] = coeffs.get(k, 0) + v
        return LinearForm({k: v for k, v in coeffs.items() if v}, self.const + other.const,
                          self.bias | other.bias)

    def scale(self, c: int) -> LinearForm:
        if c == 0:
            return LinearForm.constant(0)
        return LinearForm({k: v * c for k, v in self.coeffs.items()}, self.const * c, self.bias)

    def dims(self) -> frozenset:
        return frozenset(self.coeffs) | self.bias

    def bounds(self, extents: Sequence[int]) -> tuple[int, int]:
        """Inclusive range of the linear part over `0 <= t_i < extents[i]` (bias must be empty)."""
        lo = hi = self.const
        for k, v in self.coeffs.items():
            top = v * (extents[k] - 1)
            lo += min(0, top)
            hi += max(0, top)
        return lo, hi


def _downcast(expr):
    return expr.maybe_downcast() if hasattr(expr, "maybe_downcast") else expr


def _linearize(expr, subst: Sequence[LinearForm], extents: Sequence[int]) -> LinearForm:
    e = _downcast(expr)
    if isinstance(e, ir.AffineConstantExpr):
        return LinearForm.constant(e.value)
    if isinstance(e, ir.AffineDimExpr):
        return subst[e.position]
    if isinstance(e, ir.AffineSymbolExpr):
        raise ValueError("mapping maps take no symbols")
    lhs = _linearize(e.lhs, subst, extents)
    rhs = _linearize(e.rhs, subst, extents)
    if isinstance(e, ir.AffineAddExpr):
        return lhs + rhs
    if isinstance(e, ir.AffineMulExpr):
        if not rhs.dims():
            return lhs.scale(rhs.const)
        if not lhs.dims():
            return rhs.scale(lhs.const)
        raise ValueError(f"non-affine product in {expr}")
    if rhs.dims() or rhs.const <= 0:
        raise ValueError(f"divisor of {expr} is not a positive constant")
    c = rhs.const
    if isinstance(e, ir.AffineCeilDivExpr):  # ceil(x / c) = floor((x + c - 1) / c)
        lhs = lhs + LinearForm.constant(c - 1)
    if lhs.bias:  # a division of something already non-linear: all of it is bias
        return LinearForm({}, 0, lhs.dims())
    q = {k: v // c for k, v in lhs.coeffs.items() if v % c == 0}
    r = LinearForm({k: v for k, v in lhs.coeffs.items() if v % c != 0}, lhs.const % c, frozenset())
    q_const = lhs.const - lhs.const % c
    r_lo, r_hi = r.bounds(extents)
    exact = r_lo // c == r_hi // c
    period = r_lo // c
    if isinstance(e, (ir.AffineFloorDivExpr, ir.AffineCeilDivExpr)):
        form = LinearForm(q, q_const // c + (period if exact else 0), frozenset())
        return form if exact else LinearForm(form.coeffs, form.const, r.dims())
    if isinstance(e, ir.AffineModExpr):
        if exact:
            return r + LinearForm.constant(-c * period)
        return LinearForm(r.coeffs, r.const, r.dims())  # Eq. 2: r − c·⌊r/c⌋
    raise TypeError(f"unsupported affine expression {expr}")


def row_major_strides(shape: Sequence[int]) -> list[int]:
    strides, acc = [], 1
    for e in reversed(list(shape)):
        strides.append(acc)
        acc *= e
    return strides[::-1]


# -- delinearisation ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _RefinedDim:
    orig: int       # the virtual dim it comes from
    first: bool     # outermost sub-dimension of `orig`
    extent: int
    vweight: int    # stride of this sub-dim in the virtual tensor's row-major linear order


def _split_factors(amap: ir.AffineMap, dim: int, lo: int, extent: int) -> list[int]:
    """Divisor chain f1 | f2 | ... of `extent` at which `dim` is read through floordiv/mod by an
    expression `a·x_dim + b` aligned with the piece start `lo`."""
    found: set[int] = set()
    ident = [LinearForm({k: 1}, 0, frozenset()) for k in range(amap.n_dims)]

    def visit(expr):
        e = _downcast(expr)
        if isinstance(e, (ir.AffineFloorDivExpr, ir.AffineModExpr, ir.AffineCeilDivExpr)):
            r = _downcast(e.rhs)
            if isinstance(r, ir.AffineConstantExpr) and r.value > 0:
                try:
                    form = _linearize(e.lhs, ident, [1 << 62] * amap.n_dims)
                except ValueError:
                    form = None
                if form is not None and not form.bias and set(form.coeffs) == {dim}:
                    a = form.coeffs[dim]
                    c = r.value
                    if a > 0 and c % a == 0 and (a * lo + form.const) % c == 0:
                        found.add(c // a)
        if hasattr(e, "lhs"):
            visit(e.lhs)
            visit(e.rhs)

    for res in amap.results:
        visit(res)
    chain: list[int] = []
    for f in sorted(found):
        if 1 < f < extent and extent % f == 0 and all(f % g == 0 for g in chain):
            chain.append(f)
    return chain


def _refine(piece: Piece, vshape: Sequence[int], refine: bool):
    """Refined dims of the piece's box and the substitution original dim -> LinearForm over them."""
    box = piece.box
    vweights = row_major_strides(vshape)
    dims: list[_RefinedDim] = []
    subst: list[LinearForm] = []
    for k, full_extent in enumerate(vshape):
        lo, hi = box.get(k, (0, full_extent))
        n = hi - lo
        chain = _split_factors(piece.map, k, lo, n) if refine else []
        # sub-dims outer->inner: extents n/f_m, f_m/f_{m-1}, ..., f_1 with weights f_m, ..., f_1, 1
        bounds = [1] + chain + [n]
        subs = []
        for i in range(len(bounds) - 1, 0, -1):
            subs.append((bounds[i] // bounds[i - 1], bounds[i - 1]))
        coeffs = {}
        for j, (ext, w) in enumerate(subs):
            idx = len(dims)
            dims.append(_RefinedDim(k, j == 0, ext, w * vweights[k]))
            coeffs[idx] = w
        subst.append(LinearForm(coeffs, lo, frozenset()))
    return dims, subst


# -- Defs. 4–5 ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PieceContiguity:
    """Def. 4 for one piece: its minimal contiguous dimension and the run length it guarantees."""

    piece: int
    min_contiguous_dim: int  # over the virtual dims, 0-based; == rank when no dim is contiguous
    run: int                 # elements per guaranteed consecutive run of memory (>= 1)
    full: bool               # the whole box is one run with a constant bias (Def. 5)


@dataclass(frozen=True)
class Contiguity:
    pieces: tuple[PieceContiguity, ...]

    @property
    def run(self) -> int:
        """Elements per consecutive memory run every piece guarantees (the smallest piece's)."""
        return min(p.run for p in self.pieces)

    @property
    def full(self) -> bool:
        return all(p.full for p in self.pieces)

    @property
    def min_contiguous_dim(self) -> int:
        return max(p.min_contiguous_dim for p in self.pieces)


def piece_contiguity(piece: Piece, virtual_shape: Sequence[int], source_shape: Sequence[int],
                     index: int = 0, refine: bool = True) -> PieceContiguity:
    """Def. 4 on one piece over its box, physical tensor laid out row-major (VTC §2.1)."""
    dims, subst = _refine(piece, virtual_shape, refine)
    extents = [d.extent for d in dims]
    offset = LinearForm.constant(0)
    for stride, res in zip(row_major_strides(source_shape), piece.map.results):
        offset = offset + _linearize(res, subst, extents).scale(stride)
    n = len(dims)
    best = n
    suffix = 1
    for i in range(n - 1, -1, -1):
        d = dims[i]
        if d.extent > 1:
            if i in offset.bias or offset.coeffs.get(i, 0) != suffix or d.vweight != suffix:
                break
        suffix *= d.extent
        best = i
    run = 1
    for d in dims[best:]:
        run *= d.extent
    # Map the refined minimal dim back onto the virtual dims (Def. 4 speaks of those).
    rank = len(virtual_shape)
    if best == n:
        orig = rank
    else:
        k = dims[best].orig
        leading = [d for d in dims[:best] if d.orig == k and d.extent > 1]
        orig = k if not leading else k + 1
    return PieceContiguity(index, orig, run, orig == 0)


def contiguity(mapping: MappingFunction, virtual_shape: Sequence[int],
               source_shapes: Sequence[Sequence[int]], refine: bool = True) -> Contiguity:
    """Defs. 4–5 for every piece of `mapping` (virtual tensor of shape `virtual_shape` over sources of
    `source_shapes`, all static)."""
    return Contiguity(tuple(
        piece_contiguity(p, virtual_shape, source_shapes[p.source], i, refine)
        for i, p in enumerate(mapping.pieces)))


# -- Thm. 1 ------------------------------------------------------------------------------------------

TYPE_I = "I"
TYPE_II = "II"


@dataclass(frozen=True)
class Profitability:
    """Thm. 1 classification of one virtual tensor for one target."""

    type: str            # "I" (always profitable) or "II" (uncertain: profile)
    contiguity: str      # "full", "partial" (runs >= the transfer unit) or "none"
    run_elements: int
    run_bytes: int
    unit_bytes: int
    min_contiguous_dim: int

    def __str__(self) -> str:
        return (f"type {self.type} ({self.contiguity}, run {self.run_elements} elt = "
                f"{self.run_bytes} B, unit {self.unit_bytes} B)")


def classify(mapping: MappingFunction, virtual_shape: Sequence[int],
             source_shapes: Sequence[Sequence[int]], element_bytes: int,
             unit: TransferUnit | int = CUDA_COALESCING, refine: bool = True) -> Profitability:
    """Type I when fully contiguous (Thm. 1); otherwise Type II, partially contiguous when each run
    covers at least one transfer unit (Def. 5: "exceeds" read as >=, a run equal to the unit fills
    whole transactions), else incontiguous."""
    unit_bytes = unit.unit_bytes if isinstance(unit, TransferUnit) else int(unit)
    c = contiguity(mapping, virtual_shape, source_shapes, refine)
    run_bytes = c.run * element_bytes
    if c.full:
        kind, cont = TYPE_I, "full"
    elif run_bytes >= unit_bytes:
        kind, cont = TYPE_II, "partial"
    else:
        kind, cont = TYPE_II, "none"
    return Profitability(kind, cont, c.run, run_bytes, unit_bytes, c.min_contiguous_dim)
