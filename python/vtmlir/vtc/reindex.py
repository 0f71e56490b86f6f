"""Re-indexing `linalg.generic` loops: the kernel-level half of realising virtual tensors.

Two lowerings of vt-lower-views change *which* iterations a generic runs and *where* they read or
write, without touching what it computes (so results stay bitwise identical):

* a producer writing straight into a physical destination (`vt.store_into`, VTC §4.1 input-of-output,
  Fig. 3): its loops are re-indexed over the destination box, the old loops recovered from the new
  ones by an affine map (`invert_piece` finds it);
* a consumer of a multi-piece view (concat, insert_slice F): its loop range is split at piece
  boundaries, one clone per piece (VTC §6: "loop ranges split at piece boundaries").

Both are "clone the generic with new operands, indexing maps and iterator types" (`clone_generic`);
linalg infers loop bounds from the first operand dimension a loop appears in as a bare `dK`, so maps
that would give a wrong bound are guarded with `dK mod extent` (`guard_bare_dims`; equal in range).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor

from ..dialects.affine_eval import eval_map
from ..ir_utils import iterator_kinds, iterator_type

#: Largest piece (in elements) `invert_piece` enumerates to find and check a non-trivial inverse.
MAX_INVERT_POINTS = 1 << 16


class NotInvertible(ValueError):
    """A store piece whose image is not a unit-stride box of the destination (or too large to check)."""


def _down(e):
    return e.maybe_downcast() if hasattr(e, "maybe_downcast") else e


def dim_plus_const(expr) -> tuple[int, int] | None:
    """(k, c) when `expr` is `dK + c` (c may be 0 or negative), else None."""
    e = _down(expr)
    if isinstance(e, ir.AffineDimExpr):
        return e.position, 0
    if isinstance(e, ir.AffineAddExpr):
        lhs, rhs = _down(e.lhs), _down(e.rhs)
        if isinstance(lhs, ir.AffineDimExpr) and isinstance(rhs, ir.AffineConstantExpr):
            return lhs.position, rhs.value
        if isinstance(rhs, ir.AffineDimExpr) and isinstance(lhs, ir.AffineConstantExpr):
            return rhs.position, lhs.value
    return None


def invert_piece(amap: ir.AffineMap, box: Sequence[tuple[int, int]], dest_shape: Sequence[int]):
    """Invert one store piece: `amap` maps the value's indices in `box` one-to-one into a destination.

    Returns (lo, sizes, inverse): the image is the unit-stride box `lo[d] <= y[d] < lo[d] + sizes[d]`
    of the destination, and `inverse` (an affine map over the box-relative destination index
    `y - lo`) gives the value index written there. Maps made of constants and `dK + c` (slices,
    permutations, KV-cache rows) are inverted symbolically; others (reshapes: floordiv/mod) by
    enumerating the piece (at most MAX_INVERT_POINTS elements), fitting an affine inverse on unit
    steps and checking it on every point. Raises NotInvertible otherwise."""
    rank_x, rank_y = len(box), len(amap.results)
    n = 1
    for lo, hi in box:
        n *= hi - lo
    if n == 0:
        raise NotInvertible("empty piece")
    parts = [dim_plus_const(r) for r in amap.results]
    consts = [_down(r) for r in amap.results]
    simple = all(p is not None or isinstance(c, ir.AffineConstantExpr) for p, c in zip(parts, consts))
    if simple:
        used = [p[0] for p in parts if p is not None]
        if len(used) == len(set(used)) and all(box[k][1] - box[k][0] == 1 for k in range(rank_x)
                                              if k not in used):
            lo, sizes, inv = [], [], [None] * rank_x
            for j, (p, c) in enumerate(zip(parts, consts)):
                if p is None:
                    lo.append(c.value)
                    sizes.append(1)
                    continue
                k, off = p
                lo.append(box[k][0] + off)
                sizes.append(box[k][1] - box[k][0])
                inv[k] = ir.AffineDimExpr.get(j) + box[k][0] if box[k][0] else ir.AffineDimExpr.get(j)
            for k in range(rank_x):
                if inv[k] is None:
                    inv[k] = ir.AffineConstantExpr.get(box[k][0])
            _check_inside(lo, sizes, dest_shape)
            return lo, sizes, ir.AffineMap.get(rank_y, 0, inv)
    if n > MAX_INVERT_POINTS:
        raise NotInvertible(f"piece of {n} elements read through {amap}: larger than the "
                            f"{MAX_INVERT_POINTS} the inverse is checked on")
    image: dict[tuple, tuple] = {}
    for x in itertools.product(*[range(lo, hi) for lo, hi in box]):
        y = eval_map(amap, list(x))
        if y in image:
            raise NotInvertible(f"{amap} maps two indices to {y}: not one-to-one")
        image[y] = x
    lo = [min(y[j] for y in image) for j in range(rank_y)]
    sizes = [max(y[j] for y in image) - lo[j] + 1 for j in range(rank_y)]
    vol = 1
    for s in sizes:
        vol *= s
    if vol != n:
        raise NotInvertible(f"the image of {amap} is not a box of the destination (strided or scattered)")
    _check_inside(lo, sizes, dest_shape)
    base = image[tuple(lo)]
    exprs = []
    for k in range(rank_x):
        e = ir.AffineConstantExpr.get(base[k])
        for j in range(rank_y):
            if sizes[j] == 1:
                continue
            step = list(lo)
            step[j] += 1
            a = image[tuple(step)][k] - base[k]
            if a:
                e = e + ir.AffineDimExpr.get(j) * a
        exprs.append(e)
    inv = ir.AffineMap.get(rank_y, 0, exprs)
    for y, x in image.items():
        if eval_map(inv, [a - b for a, b in zip(y, lo)]) != x:
            raise NotInvertible(f"{amap} has no affine inverse on its image")
    return lo, sizes, inv


def _check_inside(lo, sizes, dest_shape) -> None:
    for l, s, e in zip(lo, sizes, dest_shape):
        if l < 0 or l + s > e:
            raise NotInvertible(f"the image [{lo}, +{sizes}) leaves the destination {list(dest_shape)}")


def maps_of(op) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def iterators_of(op) -> list[str]:
    return iterator_kinds(op)


def shape_of(value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def loop_extents(op) -> list[int]:
    """Static loop extents of a linalg.generic, from the bare dims of its operands' maps."""
    maps = maps_of(op)
    ext: dict[int, int] = {}
    for operand, m in zip(op.operands, maps):
        shape = shape_of(operand)
        for r, e in enumerate(m.results):
            d = _down(e)
            if isinstance(d, ir.AffineDimExpr):
                ext.setdefault(d.position, shape[r])
    n = maps[0].n_dims
    if any(k not in ext for k in range(n)):
        raise ValueError(f"{op.name}: a loop appears in no operand as a bare dim")
    return [ext[k] for k in range(n)]


def uses_linalg_index(op) -> bool:
    return any(o.operation.name == "linalg.index" for o in op.regions[0].blocks[0].operations)


def body_reads_init(op) -> bool:
    """The generic's body reads its (single) output block argument: the init's values matter."""
    block = op.regions[0].blocks[0]
    return len(list(block.arguments[len(block.arguments) - 1].uses)) > 0


def guard_bare_dims(maps: list[ir.AffineMap], operands: list, extents: Sequence[int],
                    keep_bare: int) -> list[ir.AffineMap]:
    """Rewrite a bare `dK` over an operand dim whose size differs from loop K's extent as
    `dK mod size` (same values over the loop range, which stays inside the dim), except in
    `maps[keep_bare]` (the output, whose bare dims give the loop bounds)."""
    out = []
    for i, (m, v) in enumerate(zip(maps, operands)):
        if i == keep_bare:
            out.append(m)
            continue
        shape = shape_of(v)
        results = []
        for r, e in enumerate(m.results):
            d = _down(e)
            if isinstance(d, ir.AffineDimExpr) and extents[d.position] != shape[r]:
                e = ir.AffineExpr.get_mod(e, ir.AffineConstantExpr.get(shape[r]))
            results.append(e)
        out.append(ir.AffineMap.get(m.n_dims, 0, results))
    return out


def clone_generic(op, operands: list, maps: list[ir.AffineMap], iterators: Sequence[str],
                  result_type: ir.Type, ip: ir.InsertionPoint) -> ir.Value:
    """A copy of single-result `linalg.generic` `op` (same body) with new operands (inputs then the
    init), indexing maps, iterator types and result type, inserted at `ip`."""
    new = op.clone(ip=ip)
    for i, v in enumerate(operands):
        new.operands[i] = v
    new.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
    new.attributes["iterator_types"] = ir.ArrayAttr.get(
        [iterator_type(t) for t in iterators])
    new.results[0].set_type(result_type)
    return new.results[0]


def gather(source, amap: ir.AffineMap, shape: list[int], elt) -> ir.Value:
    """linalg.generic: out[x] = source[amap(x)] over `shape` (bare dims guarded as in folds)."""
    src_shape = shape_of(source)
    results = []
    for r, e in enumerate(amap.results):
        if isinstance(_down(e), ir.AffineDimExpr) and shape[ir.AffineDimExpr(e).position] != src_shape[r]:
            e = ir.AffineExpr.get_mod(e, ir.AffineConstantExpr.get(src_shape[r]))
        results.append(e)
    in_map = ir.AffineMap.get(amap.n_dims, 0, results)
    rank = len(shape)
    empty = tensor.EmptyOp(shape, elt).result
    par = iterator_type("parallel")
    op = linalg.GenericOp([ir.RankedTensorType.get(shape, elt)], [source], [empty],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(in_map),
                                            ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
                          ir.ArrayAttr.get([par] * rank))
    block = op.regions[0].blocks.append(elt, elt)
    with ir.InsertionPoint(block):
        linalg.YieldOp([block.arguments[0]])
    return op.results[0]
