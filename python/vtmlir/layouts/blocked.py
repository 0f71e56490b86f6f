"""Physical forms of memory layouts for `layout-materialize`: kernels and conversions.

A permutation layout (NHWC) only reorders an operand's index, so a kernel runs on it by composing the
operand's indexing map with the layout (`Layout.index_map() ∘ map`). A blocked layout (NCHW16c,
VTensor §4.1's oneDNN formats) splits a dim outer×inner: its index map has `floordiv`/`mod`, which
linalg cannot infer loop bounds from. So a kernel with a blocked operand gets its **iteration space
split** instead (`physical_generic`): every loop `d` that indexes a blocked dim is replaced, in
place, by the adjacent pair `(d_o, d_i)` with `d = d_o · b + d_i`. Blocked operands then read plain
dims (`(n, c_o, h, w, c_i)` for NCHW16c), others the expression `d_o · b + d_i`. The pair iterates in
the order `d` did (lexicographic order of (d_o, d_i) is the order of d), so a convolution's c·kh·kw
reduction adds in the same order and the results stay **bitwise** those of the logical kernel.

A conversion (`physical_conversion`) is one `linalg.transpose` between permutation layouts; with a
blocked side it is `tensor.expand_shape` (logical dims split into outer and blocks, `Layout.expansion`)
+ `linalg.transpose`, and the inverse (`linalg.transpose` + `tensor.collapse_shape`) out of a blocked
source. Both are pure copies.

Limits (errors naming the op, raised by `layout-materialize`): a blocked dim must be indexed by a
single loop (`d`, not `d + k`), one loop cannot be blocked by two different sizes, a dim blocked
twice (OIhw4i16o4i) and a kernel body that reads `linalg.index` are not split.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor

from ..dialects.affine_eval import compose_maps
from ..dialects.memory_layout import Layout
from ..ir_utils import iterator_kinds


class BlockedLayoutError(ValueError):
    """The kernel cannot run in the blocked layouts asked for (message says why)."""


def physical_type(logical: ir.RankedTensorType, layout: Layout) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(layout.physical_shape(list(logical.shape)), logical.element_type)


# -- conversions ---------------------------------------------------------------------------------------


def _transpose(value: ir.Value, permutation: list[int], loc) -> ir.Value:
    t = ir.RankedTensorType(value.type)
    shape = [t.shape[p] for p in permutation]
    init = tensor.EmptyOp(shape, t.element_type, loc=loc).result
    return linalg.transpose(value, outs=[init], permutation=permutation).results[0]


def _reassociation(groups: list[list[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, k) for k in g]) for g in groups])


def to_logical(value: ir.Value, layout: Layout, loc) -> ir.Value:
    """The row-major logical array of `value`, a physical array in `layout`."""
    if layout.is_identity:
        return value
    t = ir.RankedTensorType(value.type)
    logical = layout.logical_shape(list(t.shape))
    sizes, groups, order = layout.expansion(logical)
    inverse = [order.index(a) for a in range(len(order))]
    expanded = _transpose(value, inverse, loc)
    if all(len(g) == 1 for g in groups):
        return expanded
    out = ir.RankedTensorType.get(logical, t.element_type)
    return tensor.CollapseShapeOp(out, expanded, _reassociation(groups), loc=loc).result


def from_logical(value: ir.Value, layout: Layout, loc) -> ir.Value:
    """The physical array in `layout` of the row-major logical array `value`."""
    if layout.is_identity:
        return value
    t = ir.RankedTensorType(value.type)
    sizes, groups, order = layout.expansion(list(t.shape))
    x = value
    if any(len(g) > 1 for g in groups):
        out = ir.RankedTensorType.get(sizes, t.element_type)
        x = tensor.ExpandShapeOp(out, value, _reassociation(groups), [], sizes, loc=loc).result
    return _transpose(x, order, loc)


def physical_conversion(value: ir.Value, src: Layout, dst: Layout, loc) -> ir.Value:
    """`value` (physical in `src`) as a physical array in `dst`."""
    if not src.blocks and not dst.blocks:
        # result dim i holds logical dim dst.perm[i], which sits at src.perm.index(...) in the source.
        return _transpose(value, [list(src.perm).index(d) for d in dst.perm], loc)
    return from_logical(to_logical(value, src, loc), dst, loc)


# -- kernels -------------------------------------------------------------------------------------------


def _dim(expr) -> int | None:
    """The position of `expr` if it is a plain loop dim."""
    try:
        return ir.AffineDimExpr(expr).position
    except ValueError:
        return None


def _splits(maps: list[ir.AffineMap], layouts: list) -> dict[int, int]:
    """Loop -> block size, from every blocked operand's blocked dims."""
    splits: dict[int, int] = {}
    for i, layout in enumerate(layouts):
        if not isinstance(layout, Layout) or not layout.blocks:
            continue
        seen = set()
        for d, size in layout.blocks:
            if d in seen:
                raise BlockedLayoutError(f"operand {i} blocks dim {d} twice; nested blocks are not materialised")
            seen.add(d)
            loop = _dim(maps[i].results[d])
            if loop is None:
                raise BlockedLayoutError(
                    f"operand {i}'s blocked dim {d} is indexed by '{maps[i].results[d]}', not by a single loop")
            if splits.get(loop, size) != size:
                raise BlockedLayoutError(f"loop d{loop} is blocked by both {splits[loop]} and {size}")
            splits[loop] = size
    return splits


def physical_generic(op, layouts: list, *, output_order: bool = False) -> None:
    """Rewrite the `linalg.generic` `op` in place to run on physical operands: `layouts[i]` is operand
    i's layout (None or identity: row-major). Results get their init's layout's physical type by the
    caller. With `output_order`, the loops are then reordered to walk the output in memory order
    (`order_loops_for_output`). Raises `BlockedLayoutError` when a blocked layout cannot be met."""
    _physical_maps(op, layouts)
    if output_order:
        order_loops_for_output(op)


def order_loops_for_output(op) -> None:
    """Reorder the loops of `op` so the output is written in memory order: its parallel loops in the
    order of the output's (physical) dims, the reduction loops after them in their original relative
    order, and the loop of the output's innermost dim moved innermost, after the reductions (the loop
    a vector unit runs over: contiguous output and, for NHWC/HWIO or nChw16c/OIhw16i16o, contiguous
    weights). Only parallel loops move relative to the reductions, so every output element still
    accumulates its terms in the original order: results stay bitwise identical. Kernels whose body
    reads `linalg.index`, or whose output map is not a projection of loops, are left alone."""
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    n_in = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[0]
    if len(maps) != n_in + 1 or _reads_index(op):
        return
    out = [_dim(r) for r in maps[-1].results]
    if not out or any(d is None for d in out) or len(set(out)) != len(out):
        return
    iterators = list(ir.ArrayAttr(op.attributes["iterator_types"]))
    kinds = iterator_kinds(op)
    n = maps[0].n_dims
    reduction = [k for k in range(n) if kinds[k] == "reduction"]
    if any(d in reduction for d in out):
        return
    others = [k for k in range(n) if k not in out and k not in reduction]
    order = out[:-1] + others + reduction + out[-1:]
    if order == list(range(n)):
        return
    dims = [ir.AffineDimExpr.get(j) for j in range(n)]
    rename = ir.AffineMap.get(n, 0, [dims[order.index(k)] for k in range(n)])
    _set_maps(op, [compose_maps(m, rename) for m in maps])
    op.attributes["iterator_types"] = ir.ArrayAttr.get([iterators[k] for k in order])


def _physical_maps(op, layouts: list) -> None:
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    splits = _splits(maps, layouts)
    if not splits:
        for i, layout in enumerate(layouts):
            if isinstance(layout, Layout) and not layout.is_identity:
                maps[i] = compose_maps(layout.index_map(), maps[i])
        _set_maps(op, maps)
        return
    if _reads_index(op):
        raise BlockedLayoutError("the kernel body reads linalg.index; its loops cannot be split")
    n = maps[0].n_dims
    new_pos: list[int] = []         # old loop -> first new loop
    iterators = list(ir.ArrayAttr(op.attributes["iterator_types"]))
    new_iterators = []
    for k in range(n):
        new_pos.append(len(new_iterators))
        new_iterators.append(iterators[k])
        if k in splits:
            new_iterators.append(iterators[k])
    m = len(new_iterators)
    dims = [ir.AffineDimExpr.get(j) for j in range(m)]
    substitution = []
    for k in range(n):
        j = new_pos[k]
        substitution.append(dims[j] * splits[k] + dims[j + 1] if k in splits else dims[j])
    sub_map = ir.AffineMap.get(m, 0, substitution)
    new_maps = []
    for i, amap in enumerate(maps):
        layout = layouts[i] if i < len(layouts) else None
        if not isinstance(layout, Layout) or not layout.blocks:
            composed = compose_maps(amap, sub_map)
            if isinstance(layout, Layout) and not layout.is_identity:
                composed = compose_maps(layout.index_map(), composed)
            new_maps.append(composed)
            continue
        results = []
        for p in layout.perm:
            if layout.block_factor(p) > 1:
                loop = _dim(amap.results[p])
                if layout.block_factor(p) != splits[loop]:
                    raise BlockedLayoutError(f"operand {i}'s dim {p} and loop d{loop} are blocked differently")
                results.append(dims[new_pos[loop]])
            else:
                results.append(amap.results[p].compose(sub_map))
        for d, _ in layout.blocks:
            results.append(dims[new_pos[_dim(amap.results[d])] + 1])
        new_maps.append(ir.AffineMap.get(m, 0, results))
    _set_maps(op, new_maps)
    op.attributes["iterator_types"] = ir.ArrayAttr.get(new_iterators)


def _set_maps(op, maps) -> None:
    op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
    if "linalg.memoized_indexing_maps" in op.attributes:
        del op.attributes["linalg.memoized_indexing_maps"]


def _reads_index(op) -> bool:
    for block in op.regions[0].blocks:
        for inner in block.operations:
            if inner.operation.name == "linalg.index":
                return True
    return False


def physical_pads(pads: list[int], layout: Layout) -> list[int] | None:
    """A `tensor.pad`'s low or high list in `layout`'s physical dims, or None when a blocked dim is
    padded (the padding would not be a whole number of blocks in general)."""
    out = []
    for p in layout.perm:
        if layout.block_factor(p) > 1 and pads[p]:
            return None
        out.append(pads[p])
    return out + [0] * len(layout.blocks)
