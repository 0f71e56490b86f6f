"""Register layouts (Tilus §4, Appendix A): primitives against Defs. 2–3, composition against the
Def. 4 formula, the monoid laws (Theorems 1–2), division (Def. 6) inverting composition, canonical
form = function, reinterpretation keeping every thread's bits (§3, Fig. 2(c)), attribute round trip."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_mlir import ir

from vtmlir.context import make_context
from vtmlir.dialects import layout_from_attr
from vtmlir.dialects.layout import produced_layouts, set_produced_layouts
from vtmlir.dialects.memory_layout import Layout, LayoutFormatError
from vtmlir.dialects.register_layout import (
    LayoutDivisionError,
    RegisterLayout,
    can_reinterpret,
    column_local,
    column_spatial,
    identity,
    local,
    parse_register_layout,
    reinterpret,
    spatial,
    thread_bits,
)

PRIMS = {"local": local, "spatial": spatial, "column_local": column_local,
         "column_spatial": column_spatial}


@st.composite
def primitives(draw, rank=None):
    r = rank or draw(st.integers(1, 2))
    dims = draw(st.lists(st.integers(1, 4), min_size=r, max_size=r))
    return PRIMS[draw(st.sampled_from(sorted(PRIMS)))](*dims)


@st.composite
def layouts(draw, max_parts=3):
    parts = draw(st.lists(primitives(), min_size=1, max_size=max_parts))
    out = parts[0]
    for p in parts[1:]:
        out = out * p
    return out


def broadcast_table(f: RegisterLayout, rank: int) -> np.ndarray:
    """Def. 5: prepend zeros to every logical index."""
    tab = f.table()
    pad = np.zeros(tab.shape[:2] + (rank - f.rank,), dtype=np.int64)
    return np.concatenate([pad, tab], axis=2)


def composed_table(f: RegisterLayout, g: RegisterLayout) -> np.ndarray:
    """Def. 4 evaluated literally from the function tables of f and g."""
    r = max(f.rank, g.rank)
    tf, tg = broadcast_table(f, r), broadcast_table(g, r)
    Sg = np.array((1,) * (r - g.rank) + g.shape)
    Tg, mg = g.num_threads, g.local_size
    T, m = f.num_threads * Tg, f.local_size * mg
    t = np.arange(T)[:, None]
    i = np.arange(m)[None, :]
    return tf[t // Tg, i // mg] * Sg + tg[t % Tg, i % mg]


def test_primitives_follow_definitions_2_and_3():
    for shape in [(5,), (2, 3), (2, 3, 4)]:
        idx = np.array(list(itertools.product(*[range(n) for n in shape])))
        assert (local(*shape).table()[0] == idx).all()                       # Def. 2
        assert (spatial(*shape).table()[:, 0] == idx).all()                  # Def. 3
        col = np.array(list(itertools.product(*[range(n) for n in reversed(shape)])))[:, ::-1]
        assert (column_local(*shape).table()[0] == col).all()
        assert (column_spatial(*shape).table()[:, 0] == col).all()
        for f in (local(*shape), column_local(*shape)):
            assert (f.num_threads, f.local_size) == (1, math.prod(shape))
    # Fig. 4
    assert [tuple(v) for v in local(2, 3).table()[0]] == [(i // 3, i % 3) for i in range(6)]
    assert [tuple(v) for v in spatial(2, 3).table()[:, 0]] == [(t // 3, t % 3) for t in range(6)]
    assert column_local(2, 3)(0, 3) == (1, 1)


def test_tensor_core_layout_of_figure_3():
    f = local(2, 1).spatial(8, 4).local(1, 2)
    assert (f.shape, f.num_threads, f.local_size) == ((16, 8), 32, 4)
    for t in range(32):
        for i in range(4):
            assert f(t, i) == (t // 4 + i // 2 * 8, t % 4 * 2 + i % 2)
            assert f.locate(f(t, i)) == (t, i)
    assert parse_register_layout("local(2, 1).spatial(8, 4).local(1, 2)") == f
    # §4.2: dividing local(2, 4) by local(1, 2) gives local(2, 2).
    assert local(2, 4) / local(1, 2) == local(2, 2)


@settings(max_examples=150, deadline=None)
@given(layouts(), layouts())
def test_composition_is_definition_4(f, g):
    h = f * g
    assert (h.table() == composed_table(f, g)).all()
    r = max(f.rank, g.rank)
    assert h.num_threads == f.num_threads * g.num_threads
    assert h.local_size == f.local_size * g.local_size
    assert h.shape == tuple(a * b for a, b in zip((1,) * (r - f.rank) + f.shape,
                                                  (1,) * (r - g.rank) + g.shape))


@settings(max_examples=150, deadline=None)
@given(layouts(), layouts(), layouts())
def test_composition_is_associative(f, g, h):
    """Theorem 1, as canonical forms and as functions (the tables where they have at most 2^16
    entries: nine primitives of up to 16 elements can compose to 16^9, which made the run time
    depend on the random draw — from seconds to minutes)."""
    a, b = (f * g) * h, f * (g * h)
    assert a == b
    if a.num_threads * a.local_size <= 1 << 16:
        assert (a.table() == b.table()).all()


@settings(max_examples=100, deadline=None)
@given(layouts())
def test_identity_and_bijection(f):
    """Theorem 2: local(1) (= spatial(1)) is the identity; every layout is a bijection."""
    for e in (identity(), spatial(1), local(1, 1)):
        assert e * f == f.canonical_at_rank(max(f.rank, e.rank))
        assert f * e == f.canonical_at_rank(max(f.rank, e.rank))
    tab = f.table().reshape(-1, f.rank)
    assert len({tuple(v) for v in tab}) == math.prod(f.shape) == f.num_threads * f.local_size
    thread, reg = f.inverse_table()
    x = np.arange(math.prod(f.shape)).reshape(f.shape)
    regs = f.distribute(x)
    assert (f.gather(regs) == x).all()
    assert (regs[thread, reg] == x).all()


@settings(max_examples=200, deadline=None)
@given(layouts(), layouts())
def test_division_inverts_composition(f, g):
    """Def. 6: (f ∘ g) / g = f and the left quotient of f ∘ g by f is g (h is unique)."""
    h = f * g
    r = h.rank
    assert h / g == f.canonical_at_rank(r)
    assert h.left_divide(f) == g.canonical_at_rank(r)
    assert (h / g) * g == h
    assert f * h.left_divide(f) == h


def test_division_failures():
    with pytest.raises(LayoutDivisionError):
        local(2, 4) / spatial(1, 2)          # a thread digit is not a register digit
    with pytest.raises(LayoutDivisionError):
        local(3) / local(2)                  # extents do not divide
    with pytest.raises(LayoutDivisionError):
        column_local(2, 2) / local(1, 2)     # dim 1 is not the innermost register digit
    assert column_local(2, 2) / local(2, 1) == local(1, 2)
    assert not spatial(8, 4).divisible_by(spatial(4, 8))
    assert (spatial(2, 3) * local(3, 2)).left_divide(spatial(2, 3)) == local(3, 2)
    with pytest.raises(LayoutDivisionError):
        (spatial(2, 3) * local(3, 2)).left_divide(local(3, 2))


def _small_layouts():
    prims = [PRIMS[k](a, b) for k in sorted(PRIMS) for a in (1, 2) for b in (1, 2, 4)]
    seen = {}
    for n in (1, 2, 3):
        for combo in itertools.product(prims, repeat=n):
            out = combo[0]
            for p in combo[1:]:
                out = out * p
            seen.setdefault(out, None)
    return list(seen)


def test_canonical_form_is_the_function():
    """Two layouts have equal canonical forms iff they are the same function (exhaustive over all
    compositions of up to 3 small rank-2 primitives)."""
    by_table = {}
    for f in _small_layouts():
        key = (f.shape, f.num_threads, f.local_size, f.table().tobytes())
        by_table.setdefault(key, set()).add(f)
    assert len(by_table) > 100
    assert all(len(forms) == 1 for forms in by_table.values())


# -- reinterpretation ------------------------------------------------------------------------------


def test_reinterpretation_of_figure_2c():
    """32 threads x 3 u8 as 32 threads x 4 i6 (24 bits each), the i6 tile in the mma B layout."""
    src, dst = spatial(32).local(3), local(2, 1).column_spatial(4, 8).local(2, 1)
    assert can_reinterpret(src, 8, dst, 6)
    assert not can_reinterpret(src, 8, dst, 8) and not can_reinterpret(src, 8, spatial(16).local(6), 6)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=src.shape).astype(np.uint8)
    y = reinterpret(x, src, 8, dst, 6)
    assert y.shape == (16, 8) and y.max() < 64
    for t in range(32):
        word = sum(int(b) << (8 * k) for k, b in enumerate(x[3 * t:3 * t + 3]))
        for i in range(4):
            assert y[dst(t, i)] == (word >> (6 * i)) & 63
    with pytest.raises(ValueError, match="bits per thread differ"):
        reinterpret(x, src, 8, dst, 8)


@st.composite
def reinterpretable(draw):
    """(src, src_bits, dst, dst_bits) with the same threads and bits per thread; dst is a random
    arrangement of T threads x k registers (k = m_src * src_bits / dst_bits)."""
    src = draw(layouts(max_parts=2))
    a = draw(st.integers(1, 8))
    bits = src.local_size * a
    b = draw(st.sampled_from([d for d in range(1, 9) if bits % d == 0]))
    T, k = src.num_threads, bits // b
    t1 = draw(st.sampled_from([d for d in range(1, T + 1) if T % d == 0]))
    k1 = draw(st.sampled_from([d for d in range(1, k + 1) if k % d == 0]))
    dst = draw(st.sampled_from([
        spatial(T).local(k), local(k).spatial(T), column_spatial(t1, T // t1).local(k1, k // k1),
        local(k1, 1).spatial(t1, T // t1).column_local(1, k // k1)]))
    return src, a, dst, b


@settings(max_examples=100, deadline=None)
@given(reinterpretable(), st.randoms(use_true_random=False))
def test_reinterpretation_keeps_every_threads_bits(case, rnd):
    src, a, dst, b = case
    assert can_reinterpret(src, a, dst, b)
    x = np.array([rnd.randrange(1 << a) for _ in range(math.prod(src.shape))],
                 dtype=np.uint8).reshape(src.shape)
    y = reinterpret(x, src, a, dst, b)
    assert (thread_bits(y, dst, b) == thread_bits(x, src, a)).all()
    assert (reinterpret(y, dst, b, src, a) == x).all()


# -- attribute encoding ----------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(layouts())
def test_attribute_round_trip(f):
    with make_context(), ir.Location.unknown():
        attr = f.to_attr()
        assert RegisterLayout.from_attr(attr) == f
        assert layout_from_attr(attr) == f
        assert layout_from_attr(ir.Attribute.parse(str(attr))) == f


def test_attribute_decoding_keeps_memory_layouts_and_rejects_bad_encodings():
    with make_context(), ir.Location.unknown():
        assert layout_from_attr(Layout.from_name("NHWC").to_attr()) == Layout.from_name("NHWC")
        m = ir.Module.parse("func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                            "  %0 = arith.addf %x, %x : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}")
        op = m.body.operations[0].regions[0].blocks[0].operations[0]
        set_produced_layouts(op, [local(4)])
        assert produced_layouts(op) == [local(4)]
        for text, msg in [
            ("{shape = array<i64: 4>, modes = array<i64: 2, 2>, spatial = array<i64>, local = array<i64: 0, 1>}",
             "not in canonical form"),
            ("{shape = array<i64: 4>, modes = array<i64: 4>, spatial = array<i64>}", "misses local"),
            ("{shape = array<i64: 4>, modes = array<i64: 3>, spatial = array<i64>, local = array<i64: 0>}",
             "do not factor"),
        ]:
            with pytest.raises(LayoutFormatError, match=msg):
                layout_from_attr(ir.Attribute.parse(text))


@pytest.mark.parametrize("text", ["local(2, 1).column_spatial(4, 8).local(2, 1)", "local(2, 1).spatial(8, 4).local(1, 2)",
                                  "column_local(3, 2).spatial(2, 2)", "local(16, 1)"])
def test_locate_affine_is_the_inverse(text):
    """`locate_affine` (used by subbyte-pack's Fig. 8 re-layout) equals `inverse_table` everywhere."""
    from vtmlir.dialects.register_layout import parse_register_layout
    from vtmlir.lowbit.evaluate import affine_eval

    layout = parse_register_layout(text)
    with ir.Context():
        t_expr, i_expr = layout.locate_affine([ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)])
        m = ir.AffineMap.get(2, 0, [t_expr, i_expr])
        grid = list(np.indices(layout.shape, dtype=np.int64))
        thread, reg = (np.broadcast_to(affine_eval(e, grid), layout.shape) for e in m.results)
    want_t, want_i = layout.inverse_table()
    assert np.array_equal(thread, want_t) and np.array_equal(reg, want_i)
