"""Mapping functions of virtual tensors (VTC Def. 3) and their attribute encoding.

A virtual tensor V over physical tensors P_0..P_{n-1} is read as V[x] = P_j[y] with (j, y) = F(x).
F is a list of *pieces*. A piece says: on the part of the virtual index space it covers, read source
operand `source` at `map(x)`. `map` is an affine map from the virtual index to the source index; it may
use `floordiv`, `ceildiv` and `mod` by positive constants (VTC Eq. 2, Expand). The part a piece covers
is a box: for each constrained dimension d, `lo[d] <= x[d] < hi[d]`; unconstrained dimensions are
covered whole. A concat/split is one constrained dimension (the split dimension, VTC Fig. 3); a nested
virtual tensor can need more than one after composition, which is why the box is a list.

Attribute encoding (builtin attributes only, so any MLIR tool parses it; documented in
dialects/README.md):

    [{source = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>,
      dims = array<i64: 1>, lo = array<i64: 0>, hi = array<i64: 4>}, ...]

`dims`/`lo`/`hi` are absent for a piece that covers everything (the single-piece case). The pieces of
a valid mapping partition the virtual index space exactly; `MappingFunction.verify` checks that and
everything else the op verifiers report.
"""

import heapq
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from torch_mlir import ir

from .affine_eval import (
    bounds,
    compose_maps,
    divisors_are_positive_constants,
    eval_expr,
    eval_expr_grid,
    eval_map,
    used_dims,
)

_DYNAMIC = ir.ShapedType.get_dynamic_size()


class MappingFormatError(ValueError):
    """The attribute is not a well-formed mapping-function encoding."""


class MappingCompositionError(ValueError):
    """The composition exists but is not expressible as box pieces (or needs a static extent)."""


def _is_static(extent: int | None) -> bool:
    return extent is not None and extent >= 0 and extent != _DYNAMIC


@dataclass(frozen=True)
class Piece:
    """One piece of a mapping function: `source`, `map`, and the box of virtual indices it covers.

    `ranges` holds `(dim, lo, hi)` triples sorted by dim, hi exclusive; empty means "everything".
    """

    source: int
    map: ir.AffineMap
    ranges: tuple[tuple[int, int, int], ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "ranges", tuple(sorted(tuple(r) for r in self.ranges)))

    @property
    def box(self) -> dict[int, tuple[int, int]]:
        return {d: (lo, hi) for d, lo, hi in self.ranges}

    def covers(self, index: Sequence[int]) -> bool:
        return all(lo <= index[d] < hi for d, lo, hi in self.ranges)

    def extent(self, dim: int, shape: Sequence[int] | None) -> tuple[int, int] | None:
        """The half-open range of `dim` this piece covers; None when unconstrained and not static."""
        for d, lo, hi in self.ranges:
            if d == dim:
                return lo, hi
        if shape is not None and _is_static(shape[dim]):
            return 0, shape[dim]
        return None

    def _key(self):
        # Printed once: pieces are compared and hashed often (cache keys of whole mappings).
        key = self.__dict__.get("_printed_key")
        if key is None:
            key = (self.source, str(self.map), self.ranges)
            object.__setattr__(self, "_printed_key", key)
        return key

    def __eq__(self, other):
        return isinstance(other, Piece) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        box = ", ".join(f"{lo}<=d{d}<{hi}" for d, lo, hi in self.ranges) or "all"
        return f"Piece(source={self.source}, map={self.map}, covers={box})"

    # -- attribute encoding -------------------------------------------------------------------

    def to_attr(self) -> ir.DictAttr:
        i64 = ir.IntegerType.get_signless(64)
        entries = {
            "source": ir.IntegerAttr.get(i64, self.source),
            "map": ir.AffineMapAttr.get(self.map),
        }
        if self.ranges:
            entries["dims"] = ir.DenseI64ArrayAttr.get([d for d, _, _ in self.ranges])
            entries["lo"] = ir.DenseI64ArrayAttr.get([lo for _, lo, _ in self.ranges])
            entries["hi"] = ir.DenseI64ArrayAttr.get([hi for _, _, hi in self.ranges])
        return ir.DictAttr.get(entries)

    @classmethod
    def from_attr(cls, attr: ir.Attribute, position: int = 0) -> "Piece":
        where = f"piece #{position}"
        if not isinstance(attr, ir.DictAttr):
            try:
                attr = ir.DictAttr(attr)
            except ValueError:
                raise MappingFormatError(f"{where} is not a dictionary attribute: {attr}") from None
        names = {attr[i].name for i in range(len(attr))}
        unknown = names - {"source", "map", "dims", "lo", "hi"}
        if unknown:
            raise MappingFormatError(f"{where} has unknown key(s) {sorted(unknown)}")
        for key in ("source", "map"):
            if key not in names:
                raise MappingFormatError(f"{where} lacks '{key}'")
        try:
            source = ir.IntegerAttr(attr["source"]).value
        except ValueError:
            raise MappingFormatError(f"{where}: 'source' must be an integer") from None
        try:
            amap = ir.AffineMapAttr(attr["map"]).value
        except ValueError:
            raise MappingFormatError(f"{where}: 'map' must be an affine map") from None
        box_keys = [k for k in ("dims", "lo", "hi") if k in names]
        ranges: list[tuple[int, int, int]] = []
        if box_keys:
            if len(box_keys) != 3:
                raise MappingFormatError(f"{where}: 'dims', 'lo' and 'hi' must be given together")
            arrays = []
            for key in ("dims", "lo", "hi"):
                try:
                    arrays.append(list(ir.DenseI64ArrayAttr(attr[key])))
                except (ValueError, TypeError):  # TypeError: an array of another element type
                    raise MappingFormatError(f"{where}: '{key}' must be an array<i64>") from None
            dims, lo, hi = arrays
            if not (len(dims) == len(lo) == len(hi)):
                raise MappingFormatError(f"{where}: 'dims', 'lo' and 'hi' differ in length")
            if len(set(dims)) != len(dims):
                raise MappingFormatError(f"{where}: 'dims' repeats a dimension")
            ranges = list(zip(dims, lo, hi))
        return cls(source, amap, tuple(ranges))


class MappingFunction:
    """F: virtual index -> (source operand, source index), as a list of `Piece`s (VTC Def. 3)."""

    def __init__(self, pieces: Iterable[Piece]):
        self.pieces: tuple[Piece, ...] = tuple(pieces)
        if not self.pieces:
            raise ValueError("a mapping function needs at least one piece")
        ranks = {p.map.n_dims for p in self.pieces}
        if len(ranks) != 1:
            raise ValueError(f"pieces disagree on the virtual rank: {sorted(ranks)}")

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def single(cls, amap: ir.AffineMap, source: int = 0) -> "MappingFunction":
        """One piece covering everything."""
        return cls([Piece(source, amap)])

    @classmethod
    def identity(cls, rank: int, source: int = 0) -> "MappingFunction":
        return cls.single(ir.AffineMap.get_identity(rank), source)

    @classmethod
    def permutation(cls, perm: Sequence[int], source: int = 0) -> "MappingFunction":
        """V[x] = P[y] with y[i] = x[perm[i]] (the virtual view of a transposed source)."""
        return cls.single(ir.AffineMap.get_permutation(list(perm)), source)

    @classmethod
    def from_attr(cls, attr: ir.Attribute) -> "MappingFunction":
        if not isinstance(attr, ir.ArrayAttr):
            try:
                attr = ir.ArrayAttr(attr)
            except ValueError:
                raise MappingFormatError(f"mapping is not an array of pieces: {attr}") from None
        if len(attr) == 0:
            raise MappingFormatError("mapping has no pieces")
        pieces = [Piece.from_attr(a, i) for i, a in enumerate(attr)]
        ranks = [p.map.n_dims for p in pieces]
        for i, r in enumerate(ranks):
            if r != ranks[0]:
                raise MappingFormatError(
                    f"piece #{i} map has {r} dims but piece #0 map has {ranks[0]}")
        return cls(pieces)

    def to_attr(self) -> ir.ArrayAttr:
        return ir.ArrayAttr.get([p.to_attr() for p in self.pieces])

    # -- queries ------------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        """Rank of the virtual tensor."""
        return self.pieces[0].map.n_dims

    @property
    def num_sources(self) -> int:
        """Number of source operands the pieces refer to (highest index + 1)."""
        return max(p.source for p in self.pieces) + 1

    @property
    def is_single_piece(self) -> bool:
        return len(self.pieces) == 1

    def piece_for(self, index: Sequence[int]) -> Piece:
        for p in self.pieces:
            if p.covers(index):
                return p
        raise ValueError(f"no piece covers virtual index {tuple(index)}")

    def apply(self, index: Sequence[int]) -> tuple[int, tuple[int, ...]]:
        """(source operand, source index) that virtual index `index` reads."""
        if len(index) != self.rank:
            raise ValueError(f"index {tuple(index)} has rank {len(index)}, mapping has {self.rank}")
        p = self.piece_for(index)
        return p.source, eval_map(p.map, list(index))

    def __eq__(self, other):
        return isinstance(other, MappingFunction) and set(self.pieces) == set(other.pieces)

    def __hash__(self):
        return hash(frozenset(self.pieces))

    def __repr__(self):
        return f"MappingFunction({list(self.pieces)})"

    # -- verification -------------------------------------------------------------------------

    def verify(self, virtual_shape: Sequence[int], source_shapes: Sequence[Sequence[int]],
               noun: str = "source") -> str | None:
        """The first thing wrong with this mapping for these shapes, or None. `noun` names the
        physical operands in messages ("source" for vt.view, "destination" for vt.store_into).

        Checked: source indices in range and each source used; map dims == virtual rank; map results ==
        source rank; no symbols; divisors are positive constants; box ranges inside the virtual
        extent; pieces neither overlap nor leave a gap; static corners of each piece land inside
        the source (exact for maps without floordiv/mod, a sound partial check otherwise).
        """
        rank = len(virtual_shape)
        n = len(source_shapes)
        for i, p in enumerate(self.pieces):
            where = f"piece #{i}"
            if not 0 <= p.source < n:
                return (f"{where}: {noun} index {p.source} out of range (the op has {n} "
                        f"{noun}(s))")
            if p.map.n_dims != rank:
                return (f"{where}: map {p.map} has {p.map.n_dims} dims but the virtual tensor has "
                        f"rank {rank}")
            if p.map.n_symbols != 0:
                return f"{where}: map {p.map} has symbols; mapping maps take dims only"
            src_rank = len(source_shapes[p.source])
            if len(p.map.results) != src_rank:
                return (f"{where}: map {p.map} has {len(p.map.results)} results but {noun} "
                        f"#{p.source} has rank {src_rank}")
            if not all(divisors_are_positive_constants(r) for r in p.map.results):
                return f"{where}: map {p.map} divides by something other than a positive constant"
            for d, lo, hi in p.ranges:
                if not 0 <= d < rank:
                    return f"{where}: split dimension {d} out of range for rank {rank}"
                if not _is_static(virtual_shape[d]):
                    return f"{where}: split dimension {d} is dynamic in the virtual tensor"
                if not 0 <= lo < hi <= virtual_shape[d]:
                    return (f"{where}: range [{lo}, {hi}) of dimension {d} is empty or outside "
                            f"[0, {virtual_shape[d]})")
        used = {p.source for p in self.pieces}
        for j in range(n):
            if j not in used:
                return f"{noun} #{j} is used by no piece"
        error = self._verify_partition(virtual_shape)
        if error:
            return error
        return self._verify_in_bounds(virtual_shape, source_shapes, noun)

    def _verify_partition(self, shape: Sequence[int]) -> str | None:
        split_dims = sorted({d for p in self.pieces for d, _, _ in p.ranges})
        boxes = [[p.extent(d, shape) for d in split_dims] for p in self.pieces]
        for (i, a), (j, b) in itertools.combinations(enumerate(boxes), 2):
            if all(max(ra[0], rb[0]) < min(ra[1], rb[1]) for ra, rb in zip(a, b)):
                return f"pieces #{i} and #{j} overlap"
        covered = sum(_volume(b) for b in boxes)
        total = _volume([(0, shape[d]) for d in split_dims])
        if covered != total:
            where = ", ".join(f"dim {d}" for d in split_dims)
            return (f"pieces leave a gap: they cover {covered} of {total} positions "
                    f"along {where or 'the virtual index space'}")
        return None

    def _verify_in_bounds(self, shape, source_shapes, noun) -> str | None:
        if len(shape) > 12 or not all(_is_static(e) for e in shape):
            return None
        for i, p in enumerate(self.pieces):
            src = source_shapes[p.source]
            extents = [p.extent(d, shape) for d in range(len(shape))]
            if any(hi <= lo for lo, hi in extents):
                continue
            for corner in itertools.product(*[(lo, hi - 1) for lo, hi in extents]):
                y = eval_map(p.map, list(corner))
                for k, (v, e) in enumerate(zip(y, src)):
                    if v < 0 or (_is_static(e) and v >= e):
                        return (f"piece #{i} maps virtual index {tuple(corner)} to {y}, outside "
                                f"{noun} #{p.source} (dim {k} has size {_fmt(e)})")
        return None

    # -- composition --------------------------------------------------------------------------

    def compose(self, outer: "MappingFunction", *, shape: Sequence[int] | None = None,
                at: int = 0) -> "MappingFunction":
        """F_new = F_outer ∘ F_base (VTC §4.1): `self` is F_base, the mapping of a virtual tensor B;
        `outer` maps a virtual tensor V whose source operand `at` is B. The result maps V straight
        to B's sources: V[x] = P[self(outer(x))].

        Sources of the result: outer's sources before `at`, then B's sources, then outer's sources
        after `at` (see `composed_sources`); some may end up unread (`drop_unused_sources`). `shape` is V's shape; it is needed (static extents) only
        where a piece of `self` is selected by a box that must be pulled back through `outer`.
        Raises `MappingCompositionError` where the pulled-back region is not a union of boxes of the
        encoding (a split dimension read through an expression of several virtual dims that straddles
        a piece boundary).
        """
        nb = self.num_sources
        pieces: list[Piece] = []
        for o in outer.pieces:
            if o.source != at:
                s = o.source if o.source < at else o.source + nb - 1
                pieces.append(Piece(s, o.map, o.ranges))
                continue
            if len(o.map.results) != self.rank:
                raise ValueError(f"outer map {o.map} yields {len(o.map.results)} indices but the "
                                 f"base virtual tensor has rank {self.rank}")
            pull_back = _PullBack(o, shape)
            for b in self.pieces:
                amap = compose_maps(b.map, o.map)
                for box in pull_back.boxes(b, MAX_PIECES - len(pieces)):
                    pieces.append(Piece(at + b.source, amap, tuple(box)))
        if not pieces:
            raise MappingCompositionError("composition selects no piece (empty virtual tensor?)")
        return MappingFunction(pieces).simplified(shape)

    def drop_unused_sources(self) -> tuple["MappingFunction", list[int]]:
        """Renumber sources densely over those some piece reads (a composition can make a source
        unreachable, e.g. a slice of a concat). Returns the mapping and the kept old indices, in
        order, so `[sources[i] for i in kept]` is the new operand list."""
        kept = sorted({p.source for p in self.pieces})
        new_index = {old: new for new, old in enumerate(kept)}
        return MappingFunction(Piece(new_index[p.source], p.map, p.ranges) for p in self.pieces), kept

    def simplified(self, shape: Sequence[int] | None = None) -> "MappingFunction":
        """Same function, fewer pieces: drop ranges that span a whole static dim, merge neighbours
        with the same source and map whose boxes differ only in one adjacent range."""
        pieces = []
        for p in self.pieces:
            ranges = tuple(
                (d, lo, hi) for d, lo, hi in p.ranges
                if not (shape is not None and _is_static(shape[d]) and lo == 0 and hi == shape[d]))
            pieces.append(Piece(p.source, p.map, ranges))
        return MappingFunction(_merge_all(pieces, shape))


def composed_sources(outer_sources: Sequence, base_sources: Sequence, at: int = 0) -> list:
    """Operand list matching `base.compose(outer, at=at)`."""
    return list(outer_sources[:at]) + list(base_sources) + list(outer_sources[at + 1:])


def _fmt(extent: int) -> str:
    return str(extent) if _is_static(extent) else "?"


def _volume(box: Sequence[tuple[int, int]]) -> int:
    v = 1
    for lo, hi in box:
        v *= max(0, hi - lo)
    return v


#: Most index points a pull-back enumerates for one expression over several virtual dims (as
#: `reindex.invert_piece` does); more is refused (`MappingCompositionError`).
MAX_ENUMERATED_POINTS = 1 << 16
#: Most values of one virtual dim a pull-back enumerates for an expression of that dim alone.
MAX_ENUMERATED_VALUES = 1 << 22
#: Most pieces a composition may produce (before `simplified` merges them). A mapping needs one
#: piece per run of a split that a reshape interleaves (a concat along the inner dim of a matrix,
#: collapsed: one piece per element), so the count grows with the tensor; past this bound the
#: composition is refused (`MappingCompositionError`) and its callers keep the view nested or the
#: tensor physical -- a conservative answer, never a wrong one, in time linear in the bound.
MAX_PIECES = 4096


class _PullBack:
    """Pull-backs of base pieces through one outer piece `o` (`compose`): the boxes of outer indices
    x inside o's box whose image o.map(x) lies in a base piece's box.

    A base split dim d read through `o.map.results[d]` is answered from that expression's values at
    every point of o's box (over the dims it reads), computed once and sorted: the points inside a
    piece's range are one slice of the sorted order (`_points`), so pulling back P pieces costs one
    enumeration and P binary searches, not P enumerations (a dequantised matrix's mapping has a
    piece per row: each had evaluated the expression at every point again)."""

    def __init__(self, o: Piece, shape: Sequence[int] | None):
        self.o = o
        self.rank = o.map.n_dims
        self.box = o.box
        self.shape = shape
        self._cache: dict[int, tuple] = {}

    def full(self, k: int) -> tuple[int, int]:
        if k in self.box:
            return self.box[k]
        if self.shape is None or not _is_static(self.shape[k]):
            raise MappingCompositionError(
                f"composing through a split of the base needs the static extent of virtual dim {k}")
        return 0, self.shape[k]

    def _values(self, d: int, limit: int):
        """(dims read, their extents, sorted values, their flat point indices) of result d over o's box;
        None when the box has more than `limit` points."""
        if d not in self._cache:
            e = self.o.map.results[d]
            ks = sorted(used_dims(e))
            extents = [self.full(k) for k in ks]
            count = 1
            for a, b in extents:
                count *= max(0, b - a)
            if count > limit:
                self._cache[d] = (ks, extents, None, None)
            else:
                grid = [extents[ks.index(k)] if k in ks else (0, 1) for k in range(self.rank)]
                flat = eval_expr_grid(e, grid).ravel()
                order = np.argsort(flat, kind="stable")
                self._cache[d] = (ks, extents, flat[order], order)
        return self._cache[d]

    def _points(self, d: int, lo: int, hi: int, limit: int):
        """Per dim read by result d, the sorted distinct values of the points of o's box where
        `lo <= result d < hi`, and the number of those points; None when beyond `limit` points."""
        ks, extents, values, order = self._values(d, limit)
        if values is None:
            return None
        i, j = np.searchsorted(values, [lo, hi], side="left")
        inside = order[i:j]
        coords = np.unravel_index(inside, [max(0, b - a) for a, b in extents]) if len(ks) else ()
        return [np.unique(c) + a for c, (a, _) in zip(coords, extents)], len(inside)

    def boxes(self, b: Piece, budget: int) -> list[list[tuple[int, int, int]]]:
        """Boxes of outer indices x inside o's box whose image o.map(x) lies in b's box; raises
        `MappingCompositionError` past `budget` boxes."""
        rank = self.rank
        allowed: dict[int, list[tuple[int, int]]] = {}   # dim -> sorted maximal runs
        for d, lo, hi in b.ranges:
            e = self.o.map.results[d]
            ks = used_dims(e)
            if not ks:
                v = eval_expr(e, [0] * rank)
                if not lo <= v < hi:
                    return []
            elif len(ks) == 1:
                (k,) = ks
                runs = self._runs_of_one_dim(d, k, lo, hi)
                allowed[k] = _intersect_runs(allowed[k], runs) if k in allowed else runs
            else:
                elo, ehi = bounds(e, [self.full(k) if k in ks else (0, 1) for k in range(rank)])
                if lo <= elo and ehi < hi:
                    continue
                if ehi < lo or elo >= hi:
                    return []
                found = self._points(d, lo, hi, MAX_ENUMERATED_POINTS)
                projections = None
                if found is not None:
                    projections, count = found
                    if count == 0:
                        return []
                    product = 1
                    for proj in projections:
                        product *= len(proj)
                    if product != count:   # the region is no product of per-dim sets
                        projections = None
                if projections is None:
                    raise MappingCompositionError(
                        f"base split dim {d} is read through {e}, which depends on virtual dims "
                        f"{sorted(ks)} and straddles the piece boundary [{lo}, {hi})")
                for k, vals in zip(sorted(ks), projections):
                    runs = _runs(vals)
                    allowed[k] = _intersect_runs(allowed[k], runs) if k in allowed else runs
        per_dim = []
        count = 1
        for k, runs in sorted(allowed.items()):
            if not runs:
                return []
            per_dim.append([(k, lo, hi) for lo, hi in runs])
            count *= len(runs)
        if count > budget:
            raise MappingCompositionError(
                f"the composition needs more than {MAX_PIECES} pieces (MAX_PIECES)")
        out = []
        for combo in itertools.product(*per_dim):
            new_box = dict(self.box)
            for k, lo, hi in combo:
                new_box[k] = (lo, hi)
            out.append([(d, lo, hi) for d, (lo, hi) in sorted(new_box.items())])
        return out

    def _runs_of_one_dim(self, d: int, k: int, lo: int, hi: int) -> list[tuple[int, int]]:
        """Runs of the values v of dim k (over o's box) with `lo <= result d (v) < hi`."""
        a, b = self.full(k)
        if a >= b:
            return []
        try:   # the whole range in or out: no enumeration (a huge dim read through a slice)
            elo, ehi = bounds(self.o.map.results[d], [(a, b) if j == k else (0, 1) for j in range(self.rank)])
        except ValueError:
            elo, ehi = None, None
        if elo is not None and lo <= elo and ehi < hi:
            return [(a, b)]
        if elo is not None and (ehi < lo or elo >= hi):
            return []
        found = self._points(d, lo, hi, MAX_ENUMERATED_VALUES)
        if found is None:
            raise MappingCompositionError(
                f"base split dim {d} is read through {self.o.map.results[d]}, which straddles the "
                f"piece boundary [{lo}, {hi}) over more than {MAX_ENUMERATED_VALUES} values of virtual dim {k}")
        (vals,), _ = found
        return _runs(vals)


def _runs(values) -> list[tuple[int, int]]:
    """Sorted distinct integers (a numpy array) -> maximal half-open runs."""
    if len(values) == 0:
        return []
    breaks = np.flatnonzero(np.diff(values) != 1) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [len(values)]))
    return [(int(values[s]), int(values[e - 1]) + 1) for s, e in zip(starts, ends)]


def _intersect_runs(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Intersection of two sorted lists of maximal disjoint runs (again maximal)."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _merge_all(pieces: list[Piece], shape) -> list[Piece]:
    """Merge pairs of `pieces` until none merges, always the first pair (i < j, lexicographic) that
    `_merge` joins: the merged piece takes i's place and j is dropped.

    Two pieces merge only when they have one source and one map and their extents differ in one
    dimension, where one ends at the other's start: such pairs are found through tables of where
    pieces start and end, kept up to date as pieces merge, and taken from a heap in order (a piece's
    index never changes its order with the others, as pieces are only replaced and dropped). Each
    merge then costs the new piece's neighbours, where rescanning all pieces for every merge made
    mappings of a few hundred pieces (a dequantised matrix's) minutes long."""
    alive = dict(enumerate(pieces))
    version = [0] * len(pieces)
    starts: dict[tuple, set[int]] = {}   # (source, map, d, the other extents, start in d) -> pieces
    ends: dict[tuple, set[int]] = {}     # ... end in d -> pieces

    keys: dict[int, list[tuple]] = {}   # piece -> its (start key, end key) per dim

    def enter(i: int):
        p = alive[i]
        ext = tuple(p.extent(d, shape) for d in range(p.map.n_dims))
        keys[i] = []
        for d, e in enumerate(ext):
            if e is not None:
                rest = (p.source, p.map, d, ext[:d] + ext[d + 1:])
                keys[i].append((rest + (e[0],), rest + (e[1],)))
        for s, e in keys[i]:
            starts.setdefault(s, set()).add(i)
            ends.setdefault(e, set()).add(i)

    def leave(i: int):
        for s, e in keys.pop(i):
            starts[s].discard(i)
            ends[e].discard(i)

    def pairs(i: int):
        """Candidate pairs of piece i with the pieces that start where it ends or end where it starts."""
        for s, e in keys[i]:
            for j in starts.get(e, set()) | ends.get(s, set()):
                a, b = min(i, j), max(i, j)
                yield a, b, version[a], version[b]

    for i in alive:
        enter(i)
    heap = list({pair for i in alive for pair in pairs(i)})
    heapq.heapify(heap)
    while heap:
        a, b, va, vb = heapq.heappop(heap)
        if a not in alive or b not in alive or version[a] != va or version[b] != vb:
            continue   # a stale pair: one of its pieces has merged since
        merged = _merge(alive[a], alive[b], shape)
        if merged is None:
            continue
        leave(a)
        leave(b)
        del alive[b]
        alive[a] = merged
        version[a] += 1
        enter(a)
        for pair in set(pairs(a)):
            heapq.heappush(heap, pair)
    return [alive[i] for i in sorted(alive)]


def _merge(p: Piece, q: Piece, shape) -> Piece | None:
    if p.source != q.source or p.map != q.map:   # affine maps are uniqued: equal maps are one object
        return None
    dims = sorted(set(p.box) | set(q.box))
    diff = []
    for d in dims:
        a, b = p.extent(d, shape), q.extent(d, shape)
        if a is None or b is None:
            return None
        if a != b:
            diff.append((d, a, b))
    if len(diff) != 1:
        return None
    d, a, b = diff[0]
    if a[1] == b[0] or b[1] == a[0]:
        lo, hi = min(a[0], b[0]), max(a[1], b[1])
        box = {k: p.extent(k, shape) for k in dims}
        box[d] = (lo, hi)
        ranges = tuple((k, l, h) for k, (l, h) in box.items()
                       if not (shape is not None and _is_static(shape[k]) and l == 0
                               and h == shape[k]))
        return Piece(p.source, p.map, ranges)
    return None
