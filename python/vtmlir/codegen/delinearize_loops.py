"""`codegen-delinearize-loops`: a kernel that reads a folded view through `floordiv`/`mod` gets loops
over the view's dimensions, and operands viewed so that every indexing map is a projected permutation.

VTC (docs/vtc.md) folds reshapes, slices and transposes into the indexing maps of the kernels that
read them, instead of copying: attention's `q.reshape(b, s, h, hd).transpose(1, 2)` read straight out
of the fused QKV projection is `(d0 floordiv 4, d1, (d0 mod 4) * 16 + d3)` over a loop `d0` of
batch x heads. Such a map is no projected permutation, so the kernel was no contraction (nor
elementwise) for `kernels.classify` and kept scalar loops (transformer_block b8: the three attention
products and the output projection took half the model's time as loops).

This pass undoes the linearisation on the kernel, not on the data:

- a loop `d` that a map divides by `c` (`d floordiv c`, `d mod c`; several divisors must divide each
  other; in a linear index, `(d * k + e) floordiv (k * c)` divides `d` by `c`: an NCHW8c convolution
  reading an NCHW16c buffer at `(c8 * 8 + cb8) floordiv 16`) is split into loops `(d_hi, d_lo)` of
  extents `(R / c, c)`, `d = d_hi * c + d_lo`, placed
  where `d` was, outer first, with `d`'s iterator type: the iteration order over the old `d` is
  unchanged, so every reduction sums in the same order (bitwise the same results);
- every indexing expression is then a sum `Σ c_i · d_i + k` of the new loops; where it is not a
  single loop, the operand is viewed (`memref.subview` at offset `k`, then `memref.expand_shape` of
  that dimension into the loops' extents, `c_i` the row-major strides of that split): the same
  elements, addressed by one loop per dimension.

A sliding window (linalg's convolution interface, or any sum of loops two of which have the same
coefficient: `h + kh`, also with a BatchNorm fused into the body) is
`codegen-decompose-convolutions`' to take: its window expressions (a sum mixing parallel and
reduction loops, or with equal coefficients) stay, rewritten over the new loops, and their operand
dimensions are not viewed; the other expressions are treated as above. So a blocked (NCHW16c) 1x1
convolution with a BatchNorm fused into its input, which reads the BatchNorm's vectors at
`c * 16 + cb`, reads them as (c, cb): the BatchNorm's assert and normalisation then read plain
dimensions, `codegen-split-checks` and `codegen-split-prologues` take them out, and the product is a
convolution again (EfficientViT's MBConv: the kernel kept scalar loops and took 2/3 of the block's
time). ShuffleNet's 1x1 convolutions reading half of the channels (`c + 58`) or the shuffled ones
(`(c floordiv 2 + 29, c mod 2)` of a `[58, 2]` view of the 116 channels) were no convolutions for
linalg either ('pooling' kernels, scalar loops): a subview at channel 58; the shuffled read is first
merged back into the one contiguous channel dimension it cuts (`collapse_shape`, channel `c + 58`:
`_merge_divided_dims`), where a split of `c` into (29, 2) made the product's sum two loops. A TeMCO group of UNet's decoder reads its
upsampled tile in the 1x1 fconv at `((h + kh) floordiv 2, (w + kw) floordiv 2)` (kh, kw of extent 1;
the BatchNorm and ReLU in its body) and writes a tile of its output, a subview at the tile's row:
`w` splits into (W/2, 2), the views keep the tile's dynamic offset, and the BatchNorm reads plain
dimensions for `codegen-split-prologues`.

A strided slice (`d1 * 48 + d2 + 32` over a dimension of 384: 16 of every 48 elements, EfficientViT's
multi-scale q, k and v read through VTC's views of the concatenated projections in f16) is viewed the
other way round: `memref.expand_shape` of the dimension into the coefficients' radices (8, 48), then
a `memref.subview` of each digit (0..8, 32..48); an operand with such a dimension next to a window
or a contiguous split is left as it is.

A kernel whose expressions do not have the form above (a coefficient that is not such a stride, a
`floordiv` whose remainder terms could reach the divisor, negative coefficients, loops to split under
a body that reads `linalg.index`, a view of a buffer with dynamic strides) is left as it is.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg, memref

from ..passes.registry import Pass, register_pass
from .bodies import expr_dims
from .kernels import indexing_maps_of, loop_ranges_of, rewrite_generics

# A linear form over loops: ({loop: coefficient}, constant).
Linear = tuple[dict[int, int], int]


def _plain(amap: ir.AffineMap) -> bool:
    """Every result a distinct loop or the constant 0 (what `kernels.classify` schedules)."""
    seen = set()
    for e in amap.results:
        if isinstance(e, ir.AffineDimExpr) and e.position not in seen:
            seen.add(e.position)
        elif not (isinstance(e, ir.AffineConstantExpr) and e.value == 0):
            return False
    return True


def subview_type(source: ir.MemRefType, offsets, sizes, dropped) -> ir.MemRefType:
    """The type of `memref.subview` of `source` at `offsets` of `sizes` (unit strides) without the
    unit dimensions `dropped` (a rank-reducing subview)."""
    strides, offset = source.get_strides_and_offset()
    if not source.is_dynamic_stride_or_offset(offset):  # a dynamic offset stays dynamic
        offset += sum(o * s for o, s in zip(offsets, strides))
    keep = [i for i in range(source.rank) if i not in dropped]
    return ir.MemRefType.get([sizes[i] for i in keep], source.element_type,
                             ir.StridedLayoutAttr.get(offset, [strides[i] for i in keep]), source.memory_space)


def expanded_type(source: ir.MemRefType, shape: list[int], groups: list[list[int]]) -> ir.MemRefType:
    """The type `memref.expand_shape` infers (its verifier demands it exactly): the default layout
    from the default layout, else each expanded dimension's stride split row-major."""
    if source.affine_map == ir.AffineMap.get_identity(source.rank):
        return ir.MemRefType.get(shape, source.element_type)
    strides, offset = source.get_strides_and_offset()
    new = [1] * len(shape)
    for i, group in enumerate(groups):
        step = strides[i]
        for d in reversed(group):
            new[d] = step
            step *= shape[d]
    return ir.MemRefType.get(shape, source.element_type, ir.StridedLayoutAttr.get(offset, new))


def collapse(value, groups: list[list[int]]):
    """memref.collapse_shape of `value` (contiguous within each group) by `groups`."""
    t = ir.MemRefType(value.type)
    strides, offset = t.get_strides_and_offset()
    shape = []
    new_strides = []
    for group in groups:
        size = 1
        for i in group:
            size *= t.shape[i]
        shape.append(size)
        new_strides.append(strides[group[-1]])

    # The result has a strided layout where the source has one, even a contiguous one (as
    # collapse_shape's verifier infers it).
    if isinstance(t.layout, ir.AffineMapAttr) and t.layout.value == ir.AffineMap.get_identity(t.rank):
        result = ir.MemRefType.get(shape, t.element_type)
    else:
        result = ir.MemRefType.get(shape, t.element_type, ir.StridedLayoutAttr.get(offset, new_strides))
    i64 = ir.IntegerType.get_signless(64)
    reassociation = ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, i) for i in g]) for g in groups])
    return memref.CollapseShapeOp(result, value, reassociation).result


def _quotient(expr, c: int):
    """(E, a) when `expr` is `E floordiv c` or `E floordiv c + a` (a constant), else None."""
    add = 0
    if isinstance(expr, ir.AffineAddExpr):
        for q, k in ((expr.lhs, expr.rhs), (expr.rhs, expr.lhs)):
            if isinstance(k, ir.AffineConstantExpr) and isinstance(q, ir.AffineFloorDivExpr):
                expr, add = q, k.value
                break
        else:
            return None
    if isinstance(expr, ir.AffineFloorDivExpr) and isinstance(expr.rhs, ir.AffineConstantExpr) \
            and expr.rhs.value == c:
        return expr.lhs, add
    return None


def _merge_divided_dims(op, maps, ranges) -> bool:
    """Read `(E floordiv c + a, E mod c)` of two dimensions that are one contiguous dimension cut in
    rows of c (a `[58, 2]` view of 116 channels, read at ShuffleNet's shuffled channel
    `(k floordiv 2 + 29, k mod 2)`) as `E + a c` of that dimension (`collapse_shape`: the same
    element at the same address). Splitting `k` into (29, 2) loops instead made the 1x1
    convolution's sum two loops, 2x slower on the CPU than reading a copy (`vtc_shufflenet_unit`).
    Where the merged index is a plain loop over less than the merged dimension (row 0 of a [3, 12]
    array read at `(d floordiv 12, d mod 12)`, `d` < 12), the dimension is cut to the loop's extent
    (linalg's verifier demands a plain loop's extent); `ranges` are the loops' extents before the
    merge (None: unknown, no merge). Returns whether an operand changed."""
    changed, new_maps = False, list(maps)
    with op.context, op.location, ir.InsertionPoint(op):
        for i, (value, amap) in enumerate(zip(list(op.operands), maps)):
            if not isinstance(value.type, ir.MemRefType):
                continue
            t = ir.MemRefType(value.type)
            strides, _ = t.get_strides_and_offset()
            results = list(amap.results)
            j = 0
            while j + 1 < len(results):
                low = results[j + 1]
                found = None
                if isinstance(low, ir.AffineModExpr) and isinstance(low.rhs, ir.AffineConstantExpr):
                    c = low.rhs.value
                    found = _quotient(results[j], c)
                    if found is not None and (found[0] != low.lhs or t.shape[j + 1] != c
                                              or any(t.is_dynamic_stride_or_offset(s) for s in strides[j:j + 2])
                                              or strides[j] != c * strides[j + 1]):
                        found = None
                if found is not None and ranges is None:
                    found = None
                if found is None:
                    j += 1
                    continue
                expr, add = found
                groups = [[d] for d in range(j)] + [[j, j + 1]] + [[d] for d in range(j + 2, len(results))]
                value = collapse(value, groups)
                t = ir.MemRefType(value.type)
                if not add and isinstance(expr, ir.AffineDimExpr) and ranges[expr.position] != t.shape[j]:
                    sizes = list(t.shape)
                    sizes[j] = ranges[expr.position]
                    zeros = [0] * t.rank
                    value = memref.subview(value, zeros, sizes, [1] * t.rank,
                                           result_type=subview_type(t, zeros, sizes, []))
                    t = ir.MemRefType(value.type)
                strides, _ = t.get_strides_and_offset()
                results[j:j + 2] = [expr + ir.AffineConstantExpr.get(add * c)] if add else [expr]
                changed = True
            if len(results) != len(amap.results):
                op.operands[i] = value
                new_maps[i] = ir.AffineMap.get(amap.n_dims, amap.n_symbols, results)
    if changed:
        op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in new_maps])
        if "linalg.memoized_indexing_maps" in op.attributes:
            del op.attributes["linalg.memoized_indexing_maps"]
    return changed


def _divided_dim(expr) -> tuple[int, int] | None:
    """(d, m) when `expr` is `d floordiv m` with `d` a loop, a chain of floordivs and mods of one (m:
    the product of the floordivs' divisors; a plain `d` or a mod keeps it), else None."""
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position, 1
    if isinstance(expr, (ir.AffineFloorDivExpr, ir.AffineModExpr)) and isinstance(expr.rhs, ir.AffineConstantExpr):
        inner = _divided_dim(expr.lhs)
        if inner is not None and isinstance(expr, ir.AffineFloorDivExpr):
            return inner[0], inner[1] * expr.rhs.value
        return inner
    return None


def _divisors(expr, found: dict[int, set[int]]) -> None:
    """Record, per loop, the strides its value is cut at in `expr`: `c` for `d floordiv c` and
    `d mod c`, `4 * 2` for GQA's `(d floordiv 4) mod 2`-like chains."""
    if isinstance(expr, (ir.AffineFloorDivExpr, ir.AffineModExpr)) and isinstance(expr.rhs, ir.AffineConstantExpr):
        inner = _divided_dim(expr.lhs)
        if inner is not None:
            found.setdefault(inner[0], set()).add(inner[1] * expr.rhs.value)
        elif (form := _linear(expr.lhs, _IDENTITY, _NO_RANGES)) is not None:
            # A linear index cut at c (`(c8 * 8 + cb8) floordiv 16`: an NCHW8c convolution reading an
            # NCHW16c buffer): a loop of coefficient k | c is cut at c / k; whether the other terms
            # carry into the divisor is `_linear`'s to check, with the new loops' extents.
            c = expr.rhs.value
            for d, k in form[0].items():
                if 0 < k < c and c % k == 0:
                    found.setdefault(d, set()).add(c // k)
    if isinstance(expr, ir.AffineBinaryExpr):
        _divisors(expr.lhs, found)
        _divisors(expr.rhs, found)


def _is_window(expr) -> bool:
    """A sum of loops two of which have the same coefficient (`h + kh`, `2 * h + 2 * kh`): a
    sliding window, not the linear index of a view (whose coefficients are distinct strides)."""
    form = _linear(expr, _IDENTITY, _NO_RANGES)
    if form is None:
        return False
    coefficients = list(form[0].values())
    return len(coefficients) != len(set(coefficients))


def _slides(expr, iterator_kinds: list[str]) -> bool:
    """A sum in which a parallel and a reduction loop enter with the same coefficient (`h floordiv 32
    + kh`: a merged pixel loop slid by a filter tap, where a 1x1 filter's unit tap loops would
    otherwise read as the digits of a view, `h * 1 + kh`); a view's linear index gives its loops
    distinct strides (`(h mod 4) * 16 + d`)."""
    terms, pending = [], [expr]
    while pending:
        e = pending.pop()
        if isinstance(e, ir.AffineAddExpr):
            pending += [e.lhs, e.rhs]
        else:
            terms.append(e)
    coefficients = {True: set(), False: set()}  # per kind (reduction or not): the coefficients
    for term in terms:
        coefficient = 1
        if isinstance(term, ir.AffineMulExpr) and isinstance(term.rhs, ir.AffineConstantExpr):
            term, coefficient = term.lhs, term.rhs.value
        dims = expr_dims(term)
        if len(dims) == 1:
            coefficients["reduction" in iterator_kinds[next(iter(dims))]].add(coefficient)
    return bool(coefficients[True] & coefficients[False])


class _Identity(dict):
    """The old loops as linear forms over themselves (`_linear` without a split)."""

    def __missing__(self, d):
        return {d: 1}, 0


class _Unbounded:
    """Unknown extents: a floordiv/mod over them is never exact (`_linear` gives None)."""

    def __getitem__(self, d):
        return 1 << 62


_IDENTITY, _NO_RANGES = _Identity(), _Unbounded()


def _scale(form: Linear, factor: int) -> Linear:
    return {d: c * factor for d, c in form[0].items()}, form[1] * factor


def _add(a: Linear, b: Linear) -> Linear:
    terms = dict(a[0])
    for d, c in b[0].items():
        terms[d] = terms.get(d, 0) + c
    return {d: c for d, c in terms.items() if c}, a[1] + b[1]


def _linear(expr, loops: dict[int, Linear], ranges: list[int]) -> Linear | None:
    """`expr` (over the old loops) as a linear form over the new ones, or None."""
    if isinstance(expr, ir.AffineDimExpr):
        return loops[expr.position]
    if isinstance(expr, ir.AffineConstantExpr):
        return {}, expr.value
    if isinstance(expr, ir.AffineAddExpr):
        a, b = _linear(expr.lhs, loops, ranges), _linear(expr.rhs, loops, ranges)
        return _add(a, b) if a is not None and b is not None else None
    if isinstance(expr, ir.AffineMulExpr):
        a, b = _linear(expr.lhs, loops, ranges), _linear(expr.rhs, loops, ranges)
        if a is None or b is None:
            return None
        if not b[0]:
            return _scale(a, b[1])
        return _scale(b, a[1]) if not a[0] else None
    if isinstance(expr, (ir.AffineFloorDivExpr, ir.AffineModExpr)) and isinstance(expr.rhs, ir.AffineConstantExpr):
        form, c = _linear(expr.lhs, loops, ranges), expr.rhs.value
        if form is None or c <= 0 or form[1] < 0 or any(k < 0 for k in form[0].values()):
            return None
        high = {d: k // c for d, k in form[0].items() if k % c == 0}
        low = {d: k for d, k in form[0].items() if k % c}
        # Exact only when the low terms and the constant's remainder never carry into the divisor.
        if sum(k * (ranges[d] - 1) for d, k in low.items()) + form[1] % c >= c:
            return None
        if isinstance(expr, ir.AffineFloorDivExpr):
            return high, form[1] // c
        return low, form[1] % c
    return None


def _split_loops(ranges: tuple[int, ...], divisors: dict[int, set[int]]) -> list[list[tuple[int, int]]] | None:
    """Per old loop, its new loops as (extent, stride in the old loop), outer first; None if a loop's
    divisors do not form a chain that divides its extent."""
    pieces = []
    for d, extent in enumerate(ranges):
        chain = sorted(c for c in divisors.get(d, ()) if 1 < c < extent)
        strides = [1] + chain
        if any(b % a for a, b in zip(strides, strides[1:])) or extent % strides[-1]:
            return None
        bounds = strides[1:] + [extent]
        pieces.append([(bound // stride, stride) for stride, bound in reversed(list(zip(strides, bounds)))])
    return pieces


def _view_dim(form: Linear, ranges: list[int], size: int) -> tuple[list[int], int, int] | None:
    """(the loops of one operand dimension, outer first; its offset; its span) when `form` addresses
    that dimension as a row-major split of a slice, else None."""
    terms, offset = form
    order = sorted(terms, key=lambda d: -terms[d])
    step = 1
    for d in reversed(order):
        if terms[d] != step:
            return None
        step *= ranges[d]
    if offset < 0 or offset + step > size:
        return None
    return order, offset, step


class Digits(list):
    """An operand dimension read as a strided slice (`d1 * 48 + d2 + 32` over a dimension of 384:
    16 of every 48 elements): the dimension split into digits by the coefficients' radices, each
    digit `(radix, offset, size, loop or None)`, outer first. Viewed by `memref.expand_shape` into the
    radices, then `memref.subview` per digit; a digit no loop indexes is a slice of one, dropped."""


def _strided_dim(form: Linear, ranges: list[int], size: int) -> Digits | None:
    """`form` as digits of `size` (`Digits`) when its coefficients are nested strides dividing the
    dimension and each loop's digit stays within its radix from the offset's digit, else None."""
    terms, offset = form
    if not terms or offset < 0:
        return None
    order = sorted(terms, key=lambda d: -terms[d])
    strides = [terms[d] for d in order]
    loops: list[int | None] = list(order)
    if strides[-1] > 1:
        strides.append(1)
        loops.append(None)
    if size % strides[0] or any(a % b for a, b in zip(strides, strides[1:])):
        return None
    radices = [size // strides[0]] + [a // b for a, b in zip(strides, strides[1:])]
    digits, rest = Digits(), offset
    for radix, stride, loop in zip(radices, strides, loops):
        digit, rest = divmod(rest, stride)
        extent = ranges[loop] if loop is not None else 1
        if digit + extent > radix:
            return None
        digits.append((radix, digit, extent, loop))
    return digits


def _expr(form: Linear) -> ir.AffineExpr:
    """`form` as an affine expression of the loops."""
    terms, constant = form
    expr = None
    for d, c in sorted(terms.items()):
        term = ir.AffineDimExpr.get(d)
        if c != 1:
            term = term * ir.AffineConstantExpr.get(c)
        expr = term if expr is None else expr + term
    if expr is None:
        return ir.AffineConstantExpr.get(constant)
    return expr + ir.AffineConstantExpr.get(constant) if constant else expr


def _plan(value, amap: ir.AffineMap, loops: dict[int, Linear], ranges: list[int], window=None):
    """How to view `value` so that every result of `amap` is one loop per dimension: (offsets, sizes,
    groups), or None if it cannot be. A group per operand dimension: the loops that address it, outer
    first (one view dimension each; none: a unit dimension no loop indexes, dropped), or, where
    `window(form)` holds (a sliding window's result), its linear form over the new loops, kept as an
    expression with the dimension whole."""
    memref_type = ir.MemRefType(value.type)
    shape = list(memref_type.shape)
    offsets, sizes, groups = [], [], []
    for size, expr in zip(shape, amap.results):
        form = _linear(expr, loops, ranges)
        if form is None:
            return None
        if window is not None and window(form):
            offsets.append(0)
            sizes.append(size)
            groups.append(form)
            continue
        view = _view_dim(form, ranges, size)
        if view is None:
            digits = _strided_dim(form, ranges, size)
            if digits is None:
                return None
            offsets.append(0)
            sizes.append(size)
            groups.append(digits)
            continue
        order, offset, span = view
        offsets.append(offset)
        sizes.append(span)
        groups.append(order)
    if any(isinstance(g, Digits) for g in groups) and any(
            not isinstance(g, list) or (not isinstance(g, Digits) and len(g) > 1) for g in groups):
        return None  # a strided slice next to a window or a contiguous split: not viewed (kept as it is)
    used = [d for g in groups if isinstance(g, list)
            for d in ([loop for *_, loop in g if loop is not None] if isinstance(g, Digits) else g)]
    if len(used) != len(set(used)):
        return None  # a loop twice in one operand (a diagonal): no projected permutation
    strides, _ = memref_type.get_strides_and_offset()
    if _needs_view(offsets, sizes, groups, shape):
        # A dynamic offset carries over to the views (a fused group's tile of its output, a
        # subview at the tile's row); dynamic strides would make the expanded ones dynamic.
        if any(memref_type.is_dynamic_stride_or_offset(v) for v in strides):
            return None
    return offsets, sizes, groups


def _needs_view(offsets, sizes, groups, shape) -> bool:
    return (any(offsets) or sizes != shape
            or any(isinstance(g, Digits) or isinstance(g, list) and len(g) != 1 for g in groups))


def _view(value, plan, ranges: list[int]):
    """`value` viewed as `plan` says (`_plan`), inserted at the current insertion point, and its
    indexing map over the new loops."""
    offsets, sizes, groups = plan
    if any(isinstance(g, Digits) for g in groups):
        return _strided_view(value, plan, ranges)
    shape = list(ir.MemRefType(value.type).shape)
    # Dimensions no loop indexes (a slice of one element: a KV head of GQA) are dropped by a
    # rank-reducing subview: a constant index would hide the product from linalg's contraction
    # interface, which takes projected permutations without constants.
    dropped = [j for j, g in enumerate(groups) if isinstance(g, list) and not g]
    kept = [(j, g) for j, g in enumerate(groups) if j not in dropped]
    view = value
    if any(offsets) or sizes != shape or dropped:
        view = memref.subview(value, offsets, sizes, [1] * len(sizes),
                              result_type=subview_type(ir.MemRefType(value.type), offsets, sizes, dropped))
    if any(isinstance(g, list) and len(g) > 1 for _, g in kept):
        kept_groups, new_shape = [], []
        for j, g in kept:
            extents = [ranges[d] for d in g] if isinstance(g, list) else [sizes[j]]
            kept_groups.append(list(range(len(new_shape), len(new_shape) + len(extents))))
            new_shape += extents
        i64 = ir.IntegerType.get_signless(64)
        reassociation = ir.ArrayAttr.get(
            [ir.ArrayAttr.get([ir.IntegerAttr.get(i64, k) for k in g]) for g in kept_groups])
        result = expanded_type(ir.MemRefType(view.type), new_shape, kept_groups)
        view = memref.ExpandShapeOp(result, view, reassociation, [], new_shape).result
    exprs = [e for _, g in kept for e in ([ir.AffineDimExpr.get(d) for d in g] if isinstance(g, list) else [_expr(g)])]
    return view, ir.AffineMap.get(len(ranges), 0, exprs)


def _strided_view(value, plan, ranges: list[int]):
    """`_view` for a plan with strided slices (`Digits`; every other dimension one loop, none, or
    a contiguous slice): `memref.expand_shape` of each such dimension into its radices, then one
    `memref.subview` taking every digit's slice and dropping the digits and dimensions no loop indexes."""
    offsets, sizes, groups = plan
    source = ir.MemRefType(value.type)
    shape, reassociation, slices = [], [], []   # slices: (offset, size, loop or None) per expanded dim
    for j, g in enumerate(groups):
        first = len(shape)
        if isinstance(g, Digits):
            for radix, digit, extent, loop in g:
                shape.append(radix)
                slices.append((digit, extent, loop))
        else:
            shape.append(source.shape[j])
            slices.append((offsets[j], sizes[j], g[0] if g else None))
        reassociation.append(list(range(first, len(shape))))
    i64 = ir.IntegerType.get_signless(64)
    attr = ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, k) for k in g]) for g in reassociation])
    expanded = memref.ExpandShapeOp(expanded_type(source, shape, reassociation), value, attr, [], shape).result
    starts, extents = [o for o, _, _ in slices], [n for _, n, _ in slices]
    dropped = [i for i, (_, _, loop) in enumerate(slices) if loop is None]
    view = memref.subview(expanded, starts, extents, [1] * len(extents),
                          result_type=subview_type(ir.MemRefType(expanded.type), starts, extents, dropped))
    exprs = [ir.AffineDimExpr.get(loop) for _, _, loop in slices if loop is not None]
    return view, ir.AffineMap.get(len(ranges), 0, exprs)


def delinearize(op) -> bool:
    """Rewrite one linalg.generic on memrefs as described in the module docstring."""
    op = op.operation
    maps = indexing_maps_of(op)
    if maps is None or any(m.n_symbols for m in maps):
        return False
    static = all(isinstance(v.type, ir.MemRefType) and ir.MemRefType(v.type).has_static_shape for v in op.operands)
    if _merge_divided_dims(op, maps, loop_ranges_of(op, maps) if static else None):
        delinearize(op)  # the merged dimension may need a view of its own (`k + 58`: a subview)
        return True
    merged = False
    if all(_plain(m) for m in maps):
        return False
    divisors: dict[int, set[int]] = {}
    for m in maps:
        for e in m.results:
            _divisors(e, divisors)
    # A sliding window (a convolution's, a pooling's, also with a BatchNorm fused into its body:
    # `h + kh`) is codegen-decompose-convolutions' to take: its window expressions stay (over the
    # new loops); only the other results are viewed (a BatchNorm's per-channel vectors read as
    # `c * 16 + cb` by a blocked convolution; a channel slice `c + 58`), so that the passes after
    # this one see plain dimensions there.
    iterator_kinds = [str(i) for i in ir.ArrayAttr(op.attributes["iterator_types"])]
    windowed = (linalg.isa_convolution_op(op) or any(_is_window(e) for m in maps for e in m.results)
                or any(_slides(e, iterator_kinds) for m in maps for e in m.results))
    types = [v.type for v in op.operands]
    if not all(isinstance(t, ir.MemRefType) and t.has_static_shape for t in types):
        return merged
    old_ranges = loop_ranges_of(op, maps)
    if old_ranges is None:
        return merged
    block = op.regions[0].blocks[0]
    if divisors and any(inner.operation.name == "linalg.index" for inner in block.operations):
        return merged  # the loops are split: an index of the old loop would need rebuilding
    pieces = _split_loops(old_ranges, divisors)
    if pieces is None:
        return merged
    ranges, old_of, loops = [], [], {}
    for d, split in enumerate(pieces):
        form = {}
        for extent, stride in split:
            form[len(ranges)] = stride
            ranges.append(extent)
            old_of.append(d)
        loops[d] = (form, 0)
    old_iterators = ir.ArrayAttr(op.attributes["iterator_types"])
    iterators = [old_iterators[d] for d in old_of]

    def window(form: Linear) -> bool:
        # A window slides an output position by a filter tap: loops of both kinds (`2 * oh + kh`,
        # also strided), or equal coefficients (`h + kh`). A view's linear index combines loops of
        # one role (`c * 16 + cb`, both reductions of the convolution).
        terms = form[0]
        if len(terms) < 2:
            return False
        first = iterators[next(iter(terms))]
        return len(set(terms.values())) != len(terms) or any(iterators[d] != first for d in terms)

    plans = []
    for value, amap in zip(op.operands, maps):
        plan = _plan(value, amap, loops, ranges, window if windowed else None)
        if plan is None:
            return merged
        plans.append(plan)
    if len(ranges) == len(old_ranges) and not any(
            _needs_view(*plan, list(ir.MemRefType(v.type).shape)) for v, plan in zip(op.operands, plans)):
        return merged  # nothing to split or view (a window's kernel with plain operands otherwise)
    new_maps = []
    with op.context, op.location, ir.InsertionPoint(op):
        for i, (value, plan) in enumerate(zip(list(op.operands), plans)):
            view, new_map = _view(value, plan, ranges)
            op.operands[i] = view
            new_maps.append(new_map)
    op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in new_maps])
    op.attributes["iterator_types"] = ir.ArrayAttr.get(iterators)
    if "linalg.memoized_indexing_maps" in op.attributes:  # (the old maps, cached by linalg)
        del op.attributes["linalg.memoized_indexing_maps"]
    return True


def delinearize_loops(module_op) -> int:
    """Delinearise every kernel that reads through `floordiv`/`mod` or a linear index; returns how many."""
    return rewrite_generics(module_op, delinearize)


@register_pass
class DelinearizeLoops(Pass):
    name = "codegen-delinearize-loops"
    summary = "Split loops that folded views divide (floordiv/mod) and view operands so every map is a projected permutation"

    def run(self, module):
        delinearize_loops(module)
