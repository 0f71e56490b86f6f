"""Layout (memory layouts of the `layout` dialect): names, encoding, shapes, index maps, laws."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_mlir import ir

from vtmlir.context import make_context
from vtmlir.dialects import Layout, LayoutFormatError, layout_from_attr
from vtmlir.dialects.affine_eval import eval_map


@pytest.fixture(scope="module")
def ctx():
    c = make_context()
    with c, ir.Location.unknown():
        yield c


def test_names():
    assert Layout.from_name("NCHW") == Layout.identity(4)
    assert Layout.from_name("NHWC") == Layout.permutation([0, 2, 3, 1])
    nchw16c = Layout.from_name("NCHW16c")
    assert nchw16c == Layout.blocked(4, 1, 16)
    assert nchw16c.name() == "NCHW16c"
    oihw = Layout.from_name("OIhw4i16o4i", logical="OIHW")
    assert oihw.blocks == ((1, 4), (0, 16), (1, 4)) and oihw.name("OIHW") == "OIHW4i16o4i"
    assert Layout.from_name("nChw16c") == nchw16c
    for bad in ("NCH", "NCHWX", "NCHW16", "NCCW", "NC-HW"):
        with pytest.raises(LayoutFormatError):
            Layout.from_name(bad)


def test_attr_roundtrip(ctx):
    for layout in (Layout.identity(3), Layout.from_name("NHWC"), Layout.from_name("NCHW16c")):
        attr = ir.Attribute.parse(str(layout.to_attr()))
        assert Layout.from_attr(attr) == layout
        assert layout_from_attr(attr) == layout
    assert str(Layout.from_name("NHWC").to_attr()) == "{perm = array<i64: 0, 2, 3, 1>}"


@pytest.mark.parametrize("text, message", [
    ("{perm = array<i64: 0, 0>}", "not a permutation"),
    ("{perm = array<i64: 0, 1>, block_dims = array<i64: 2>, block_sizes = array<i64: 4>}",
     "block dim 2 out of range"),
    ("{perm = array<i64: 0, 1>, block_dims = array<i64: 1>}", "given together"),
    ("{perm = array<i64: 0, 1>, block_dims = array<i64: 1>, block_sizes = array<i64: 0>}",
     "must be positive"),
    ("{order = array<i64: 0>}", "unknown layout key"),
    ("\"NHWC\"", "not a layout attribute"),
])
def test_attr_errors(ctx, text, message):
    with pytest.raises(LayoutFormatError, match=message):
        layout_from_attr(ir.Attribute.parse(text))


def test_shapes():
    nchw16c = Layout.from_name("NCHW16c")
    assert nchw16c.physical_shape([2, 32, 7, 7]) == [2, 2, 7, 7, 16]
    assert nchw16c.logical_shape([2, 2, 7, 7, 16]) == [2, 32, 7, 7]
    assert "not divisible by its block 16" in nchw16c.check_shape([2, 30, 7, 7])
    assert Layout.from_name("NHWC").physical_shape([1, 3, 4, 5]) == [1, 4, 5, 3]
    dyn = ir.ShapedType.get_dynamic_size()
    assert Layout.from_name("NHWC").logical_shape([dyn, 4, 5, 3]) == [dyn, 3, 4, 5]


@st.composite
def layouts(draw):
    rank = draw(st.integers(1, 4))
    perm = draw(st.permutations(range(rank)))
    blocks = draw(st.lists(st.tuples(st.integers(0, rank - 1), st.integers(1, 3)), max_size=2))
    logical = []
    for d in range(rank):
        f = 1
        for bd, s in blocks:
            if bd == d:
                f *= s
        logical.append(f * draw(st.integers(1, 2)))
    return Layout(tuple(perm), tuple(blocks)), logical


@settings(max_examples=60, deadline=None)
@given(layouts(), layouts())
def test_property_index_maps(a, b):
    """index_map is a bijection onto the physical shape; logical_index_map inverts it; the
    conversion map agrees with applying the layouts in sequence."""
    (src, logical), (dst, _) = a, b
    with make_context(), ir.Location.unknown():
        phys = src.physical_shape(logical)
        fwd, back = src.index_map(), src.logical_index_map()
        seen = set()
        for x in itertools.product(*[range(e) for e in logical]):
            p = src.apply(x)
            assert p == eval_map(fwd, list(x))
            assert all(0 <= v < e for v, e in zip(p, phys))
            assert eval_map(back, list(p)) == x
            seen.add(p)
        total = 1
        for e in logical:
            total *= e
        assert len(seen) == total
        if dst.rank == src.rank and dst.check_shape(logical) is None:
            conv = src.conversion_map(dst)
            for x in itertools.product(*[range(e) for e in logical]):
                assert eval_map(conv, list(dst.apply(x))) == src.apply(x)
