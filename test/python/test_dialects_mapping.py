"""MappingFunction (vt mapping functions, VTC Def. 3): encoding, apply, verify, compose."""

import itertools

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from torch_mlir import ir

from vtmlir.context import make_context
from vtmlir.dialects import (
    MappingCompositionError,
    MappingFormatError,
    MappingFunction,
    Piece,
)


@pytest.fixture(scope="module")
def ctx():
    c = make_context()
    with c, ir.Location.unknown():
        yield c


def amap(text: str) -> ir.AffineMap:
    return ir.AffineMapAttr(ir.Attribute.parse(f"affine_map<{text}>")).value


def concat0(ctx):
    """[2,4] ++ [3,4] along dim 0."""
    return MappingFunction([
        Piece(0, amap("(d0, d1) -> (d0, d1)"), ((0, 0, 2),)),
        Piece(1, amap("(d0, d1) -> (d0 - 2, d1)"), ((0, 2, 5),)),
    ])


def test_attr_roundtrip(ctx):
    m = concat0(ctx)
    attr = m.to_attr()
    assert "dims = array<i64: 0>" in str(attr)
    assert MappingFunction.from_attr(attr) == m
    single = MappingFunction.permutation([1, 0])
    assert "dims" not in str(single.to_attr())
    assert MappingFunction.from_attr(ir.Attribute.parse(str(single.to_attr()))) == single


@pytest.mark.parametrize("text, message", [
    ("[]", "no pieces"),
    ("[1]", "not a dictionary"),
    ("[{map = affine_map<(d0) -> (d0)>}]", "lacks 'source'"),
    ("[{source = 0, map = 3}]", "'map' must be an affine map"),
    ("[{source = 0, map = affine_map<(d0) -> (d0)>, dims = array<i64: 0>}]", "given together"),
    ("[{source = 0, map = affine_map<(d0) -> (d0)>, colour = 1}]", "unknown key"),
])
def test_format_errors(ctx, text, message):
    with pytest.raises(MappingFormatError, match=message):
        MappingFunction.from_attr(ir.Attribute.parse(text))


def test_apply(ctx):
    m = concat0(ctx)
    assert m.apply([1, 3]) == (0, (1, 3))
    assert m.apply([4, 0]) == (1, (2, 0))
    expand = MappingFunction.single(amap("(d0, d1, d2) -> (d0, d1 mod 2, d2)"))  # VTC Eq. 2
    assert expand.apply([1, 5, 2]) == (0, (1, 1, 2))
    flat = MappingFunction.single(amap("(d0) -> (d0 floordiv 4, d0 mod 4)"))
    assert flat.apply([11]) == (0, (2, 3))
    with pytest.raises(ValueError, match="rank"):
        m.apply([1])


@pytest.mark.parametrize("pieces, vshape, sshapes, message", [
    ([(2, "(d0, d1) -> (d0, d1)", ())], [2, 4], [[2, 4]], "piece #0: source index 2 out of range"),
    ([(0, "(d0) -> (d0, d0)", ())], [2, 4], [[2, 4]], "has 1 dims but the virtual tensor has rank 2"),
    ([(0, "(d0, d1) -> (d0)", ())], [2, 4], [[2, 4]], "has 1 results but source #0 has rank 2"),
    ([(0, "(d0, d1) -> (d0, d1)", ((0, 0, 2),)), (1, "(d0, d1) -> (d0 - 1, d1)", ((0, 1, 3),))],
     [3, 4], [[2, 4], [2, 4]], "pieces #0 and #1 overlap"),
    ([(0, "(d0, d1) -> (d0, d1)", ((0, 0, 1),)), (1, "(d0, d1) -> (d0 - 2, d1)", ((0, 2, 3),))],
     [3, 4], [[2, 4], [2, 4]], "pieces leave a gap: they cover 2 of 3"),
    ([(0, "(d0, d1) -> (d0, d1)", ((0, 0, 4),))], [3, 4], [[3, 4]], "outside [0, 3)"),
    ([(0, "(d0, d1) -> (d0, d1 + 1)", ())], [2, 4], [[2, 4]], "outside source #0 (dim 1 has size 4)"),
    ([(0, "(d0, d1) -> (d0, d1)", ())], [2, 4], [[2, 4], [2, 4]], "source #1 is used by no piece"),
])
def test_verify_errors(ctx, pieces, vshape, sshapes, message):
    m = MappingFunction([Piece(s, amap(t), r) for s, t, r in pieces])
    error = m.verify(vshape, sshapes)
    assert error is not None and message in error, error


def test_verify_ok(ctx):
    assert concat0(ctx).verify([5, 4], [[2, 4], [3, 4]]) is None
    dyn = ir.ShapedType.get_dynamic_size()
    assert MappingFunction.identity(2).verify([dyn, 4], [[dyn, 4]]) is None


def test_compose_single_piece(ctx):
    base = MappingFunction.permutation([1, 0])         # B = transpose(P), P: [4, 2]
    outer = MappingFunction.single(amap("(d0) -> (d0 floordiv 4, d0 mod 4)"))  # V = flatten(B)
    composed = base.compose(outer)
    assert composed.is_single_piece
    for x in range(8):
        assert composed.apply([x]) == base.apply(outer.apply([x])[1])


def test_compose_multi_piece_base_through_flatten(ctx):
    base = concat0(ctx)                                 # B: [5, 4] from [2,4] ++ [3,4]
    outer = MappingFunction.single(amap("(d0) -> (d0 floordiv 4, d0 mod 4)"))  # V = flatten(B)
    composed = base.compose(outer, shape=[20])
    assert len(composed.pieces) == 2
    assert {p.ranges for p in composed.pieces} == {((0, 0, 8),), ((0, 8, 20),)}
    for x in range(20):
        assert composed.apply([x]) == base.apply(outer.apply([x])[1])


def test_compose_at_nonzero_source(ctx):
    base = concat0(ctx)
    # V = concat(Q, B) along dim 0: Q [1, 4] is outer source 0, B outer source 1.
    outer = MappingFunction([
        Piece(0, amap("(d0, d1) -> (d0, d1)"), ((0, 0, 1),)),
        Piece(1, amap("(d0, d1) -> (d0 - 1, d1)"), ((0, 1, 6),)),
    ])
    composed = base.compose(outer, shape=[6, 4], at=1)
    assert composed.num_sources == 3
    assert composed.verify([6, 4], [[1, 4], [2, 4], [3, 4]]) is None
    assert composed.apply([0, 2]) == (0, (0, 2))
    assert composed.apply([2, 2]) == (1, (1, 2))
    assert composed.apply([5, 1]) == (2, (2, 1))


def test_compose_unrepresentable_raises(ctx):
    base = MappingFunction([
        Piece(0, amap("(d0) -> (d0)"), ((0, 0, 3),)),
        Piece(1, amap("(d0) -> (d0 - 3)"), ((0, 3, 6),)),
    ])
    outer = MappingFunction.single(amap("(d0, d1) -> (d0 * 2 + d1)"))  # unflatten [6] -> [3, 2]
    with pytest.raises(MappingCompositionError, match="straddles"):
        base.compose(outer, shape=[3, 2])



def test_compose_split_read_through_aligned_unflatten(ctx):
    """A concat along a dim that a reshape then splits at the concat boundary (ShuffleNet's channel
    shuffle reads its concat through [2c] -> [2, c]): `d0 * 4 + d1` in [0, 4) with d1 < 4 is the box
    d0 = 0, so each concat input becomes one piece of the reshaped view."""
    base = MappingFunction([
        Piece(0, amap("(d0) -> (d0)"), ((0, 0, 4),)),
        Piece(1, amap("(d0) -> (d0 - 4)"), ((0, 4, 8),)),
    ])
    outer = MappingFunction.single(amap("(d0, d1) -> (d0 * 4 + d1)"))  # unflatten [8] -> [2, 4]
    composed = base.compose(outer, shape=[2, 4])
    assert [(p.source, p.ranges) for p in composed.pieces] == [(0, ((0, 0, 1),)), (1, ((0, 1, 2),))]
    assert composed.verify([2, 4], [[4], [4]]) is None
    for x in itertools.product(range(2), range(4)):
        assert composed.apply(x) == _sequential(base, outer, 0, 2, x)

# -- property tests: composing then applying == applying in sequence, on random shapes ---------

dims_st = st.integers(1, 4)


@st.composite
def movement(draw, src):
    """A data-movement view over a tensor of shape `src` (source 0), maybe with extra physical
    sources. Returns (MappingFunction, virtual shape, all source shapes)."""
    rank = len(src)
    kinds = ["permute", "concat", "flatten", "slice", "expand"]
    if rank == 1 and src[0] in (4, 6, 8, 9, 12):
        kinds.append("unflatten")
    kind = draw(st.sampled_from(kinds))
    x = [ir.AffineDimExpr.get(i) for i in range(rank)]
    if kind == "permute":
        perm = draw(st.permutations(range(rank)))
        inv = [perm.index(j) for j in range(rank)]
        vshape = [src[p] for p in perm]
        m = MappingFunction.single(ir.AffineMap.get(rank, 0, [x[inv[j]] for j in range(rank)]))
        return m, vshape, [list(src)]
    if kind == "concat":
        d = draw(st.integers(0, rank - 1))
        extra = draw(st.integers(1, 3))
        other = list(src)
        other[d] = extra
        first = draw(st.booleans())
        n0 = src[d] if first else extra
        vshape = list(src)
        vshape[d] = src[d] + extra
        shifted = [x[i] - n0 if i == d else x[i] for i in range(rank)]
        lo_piece = Piece(0 if first else 1, ir.AffineMap.get(rank, 0, x), ((d, 0, n0),))
        hi_piece = Piece(1 if first else 0, ir.AffineMap.get(rank, 0, shifted), ((d, n0, vshape[d]),))
        return MappingFunction([lo_piece, hi_piece]), vshape, [list(src), other]
    if kind == "flatten":
        total = 1
        for e in src:
            total *= e
        results, stride = [], total
        x0 = ir.AffineDimExpr.get(0)
        for j, e in enumerate(src):
            stride //= e
            r = ir.AffineExpr.get_floor_div(x0, stride) if stride > 1 else x0
            results.append(ir.AffineExpr.get_mod(r, e) if j > 0 else r)
        return MappingFunction.single(ir.AffineMap.get(1, 0, results)), [total], [list(src)]
    if kind == "unflatten":
        n = src[0]
        a = draw(st.sampled_from([f for f in range(1, n + 1) if n % f == 0]))
        b = n // a
        y = ir.AffineDimExpr.get(0) * b + ir.AffineDimExpr.get(1)
        return MappingFunction.single(ir.AffineMap.get(2, 0, [y])), [a, b], [list(src)]
    if kind == "slice":
        d = draw(st.integers(0, rank - 1))
        off = draw(st.integers(0, src[d] - 1))
        length = draw(st.integers(1, src[d] - off))
        vshape = list(src)
        vshape[d] = length
        res = [x[i] + off if i == d else x[i] for i in range(rank)]
        return MappingFunction.single(ir.AffineMap.get(rank, 0, res)), vshape, [list(src)]
    # expand (broadcast by tiling, VTC Eq. 2)
    d = draw(st.integers(0, rank - 1))
    k = draw(st.integers(2, 3))
    vshape = list(src)
    vshape[d] = src[d] * k
    res = [ir.AffineExpr.get_mod(x[i], src[d]) if i == d else x[i] for i in range(rank)]
    return MappingFunction.single(ir.AffineMap.get(rank, 0, res)), vshape, [list(src)]


def _sequential(base, outer, at, nb, x):
    j, y = outer.apply(x)
    if j == at:
        k, z = base.apply(y)
        return at + k, z
    return (j if j < at else j + nb - 1), y


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_property_compose_equals_sequential(data):
    with make_context(), ir.Location.unknown():
        p0 = data.draw(st.lists(dims_st, min_size=1, max_size=3), label="physical shape")
        base, bshape, bsources = data.draw(movement(p0), label="base")
        outer, oshape, osources = data.draw(movement(bshape), label="outer")
        at = 0
        if len(osources) > 1 and data.draw(st.booleans(), label="base second"):
            # Renumber so the base virtual tensor is outer source 1.
            outer = MappingFunction(Piece(1 - p.source, p.map, p.ranges) for p in outer.pieces)
            osources = [osources[1], osources[0]]
            at = 1
        assert base.verify(bshape, bsources) is None
        assert outer.verify(oshape, osources) is None
        try:
            composed = base.compose(outer, shape=oshape, at=at)
        except MappingCompositionError:
            assume(False)
        sources = osources[:at] + bsources + osources[at + 1:]
        dense, kept = composed.drop_unused_sources()
        assert dense.verify(oshape, [sources[i] for i in kept]) is None
        for x in itertools.product(*[range(e) for e in oshape]):
            assert composed.apply(x) == _sequential(base, outer, at, len(bsources), x)
            j, y = dense.apply(x)
            assert (kept[j], y) == composed.apply(x)


# -- many pieces: the dequantisation of packed codes (fuzz seed 2611, cases 5532/5596/5692) -----------

def _interleaved_concat(columns: int, rows: int) -> MappingFunction:
    """`columns` tensors [rows, 1] concatenated along dim 1 (the unpacked nibbles of a code matrix)."""
    return MappingFunction([Piece(k, amap(f"(d0, d1) -> (d0, d1 - {k})"), ((1, k, k + 1),))
                            for k in range(columns)])


def test_compose_interleaved_concat_through_reshapes(ctx):
    """Collapsing a concat along its inner dim interleaves its inputs: one piece per element (768);
    viewing the result as [32, 24] merges them back to 8 x 3 pieces. Both compositions are exact."""
    concat = _interleaved_concat(8, 96)
    collapse = MappingFunction.single(amap("(d0) -> (d0 floordiv 8, d0 mod 8)"))
    flat = concat.compose(collapse, shape=[768])
    assert len(flat.pieces) == 768
    assert flat.verify([768], [[96, 1]] * 8) is None
    for x in range(768):
        assert flat.apply([x]) == _sequential(concat, collapse, 0, 8, [x])
    expand = MappingFunction.single(amap("(d0, d1) -> (d0 * 24 + d1)"))
    matrix = flat.compose(expand, shape=[32, 24])
    assert len(matrix.pieces) == 24
    assert matrix.verify([32, 24], [[96, 1]] * 8) is None
    for x in itertools.product(range(32), range(24)):
        assert matrix.apply(x) == _sequential(flat, expand, 0, 8, x)


def test_compose_refuses_beyond_the_piece_bound(ctx):
    """A composition that needs more than MAX_PIECES pieces is refused (its callers keep
    the view nested or the tensor physical) instead of growing with the tensor."""
    from vtmlir.dialects.vt_mapping import MAX_PIECES

    rows = MAX_PIECES // 2 + 1
    collapse = MappingFunction.single(amap("(d0) -> (d0 floordiv 2, d0 mod 2)"))
    with pytest.raises(MappingCompositionError, match="MAX_PIECES"):
        _interleaved_concat(2, rows).compose(collapse, shape=[2 * rows])
    smaller = _interleaved_concat(2, rows - 1).compose(collapse, shape=[2 * rows - 2])
    assert len(smaller.pieces) == MAX_PIECES


def _simplified_by_scanning_all_pairs(pieces: list[Piece], shape) -> list[Piece]:
    """`simplified`'s merges by their definition: always the first pair (i < j) `_merge` joins."""
    from vtmlir.dialects.vt_mapping import _merge

    pieces = list(pieces)
    while True:
        for i, j in itertools.combinations(range(len(pieces)), 2):
            merged = _merge(pieces[i], pieces[j], shape)
            if merged is not None:
                pieces[i] = merged
                del pieces[j]
                break
        else:
            return pieces


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_property_merges_equal_the_pairwise_scan(data):
    """The table-and-heap merge of `simplified` merges the same pairs in the same order as scanning
    every pair for the first that merges: a grid of boxes, each with one of two sources and maps,
    in random order."""
    from vtmlir.dialects.vt_mapping import _merge_all

    with make_context(), ir.Location.unknown():
        shape = data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3), label="shape")
        cuts = [sorted(data.draw(st.sets(st.integers(1, e - 1), max_size=e - 1), label=f"cuts {d}")) if e > 1 else []
                for d, e in enumerate(shape)]
        bounds_ = [list(zip([0] + c, c + [e])) for c, e in zip(cuts, shape)]
        rank = len(shape)
        maps = [ir.AffineMap.get_identity(rank), ir.AffineMap.get_minor_identity(rank, 1)]
        cells = list(itertools.product(*bounds_))
        labels = data.draw(st.lists(st.integers(0, 3), min_size=len(cells), max_size=len(cells)), label="labels")
        pieces = [Piece(label % 2, maps[label // 2], tuple((d, lo, hi) for d, (lo, hi) in enumerate(cell)))
                  for cell, label in zip(cells, labels)]
        pieces = data.draw(st.permutations(pieces), label="order")
        assert _merge_all(list(pieces), shape) == _simplified_by_scanning_all_pairs(pieces, shape)


def test_eval_expr_grid_equals_pointwise(ctx):
    """The grid evaluator gives eval_expr's value at every point, in itertools.product order, also
    past int64 (Python integers)."""
    from vtmlir.dialects.affine_eval import eval_expr, eval_expr_grid

    box = [(-3, 4), (0, 5)]
    for text in ("(d0, d1) -> (d0 * 7 + d1 floordiv 2 - (d0 mod 3) + (d1 ceildiv 4))",
                 "(d0, d1) -> ((d0 - d1) floordiv 3 + 4611686018427387904 * d1)"):
        e = amap(text).results[0]
        grid = eval_expr_grid(e, box).ravel().tolist()
        points = list(itertools.product(*(range(lo, hi) for lo, hi in box)))
        assert grid == [eval_expr(e, list(p)) for p in points]
