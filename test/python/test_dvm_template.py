"""Bytecode templates (`vtmlir.dvm.template`): a new shape = guards + tiling + filling words. The
filled bytecode must equal the lowering's own encoding bit for bit (``template=False``) on every
shape, structures that differ must get templates of their own, and the traced sizes
(`symbolic.Sym`) must record every decision."""

from __future__ import annotations

import numpy as np
import pytest

from vtmlir.dvm import Graph, GraphError, Target, TilingError, compile_graph
from vtmlir.dvm.expr import evaluate, parse
from vtmlir.dvm.symbolic import Sym, Tracer, traced_call
from vtmlir.dvm.template import coverage, prebuild, templates_of
from vtmlir.dvm.tiling import tile_matmul, tile_matmul_reference
from vtmlir.dvm import workloads
from vtmlir.dvm.workloads import layernorm

RNG = np.random.default_rng(11)
SMALL = Target(cores=3, vector_bytes=32, local_memory_bytes=16 * 1024)  # many tiles, tails, k chunks


def same_as_reference(g, shapes, target, strides=None):
    a = compile_graph(g, shapes, target, input_strides=strides)
    b = compile_graph(g, shapes, target, input_strides=strides, template=False)
    assert a.bytecode.dtype == b.bytecode.dtype
    np.testing.assert_array_equal(a.bytecode, b.bytecode)
    assert a.tiling == b.tiling and a.output_shapes == b.output_shapes
    assert a.input_strides == b.input_strides and a.output_dtypes == b.output_dtypes
    return a


def n_templates(g):
    return sum(len(s) for s in templates_of(g).values())


def addmm():
    """addmm with a maximum epilogue (a second read of c, an elementwise op after the matmul)."""
    g = Graph("addmm")
    c, a, b = g.input(2), g.input(2), g.input(2)
    g.output(g.maximum(g.matmul(a, b) + c, c * 0.5))
    return g


def test_layernorm_one_template_for_all_sizes():
    g = layernorm()
    for _ in range(60):
        b, s, h = (int(v) for v in RNG.integers(2, 50, size=3))
        same_as_reference(g, [(b, s, h), (h,), (h,)], SMALL)
    # the mean's 1/h is an f64 field computed per shape; sizes > 1 share one structure
    assert n_templates(g) <= 2
    x = RNG.standard_normal((3, 5, 7)).astype(np.float32)
    w, bb = RNG.standard_normal(7).astype(np.float32), RNG.standard_normal(7).astype(np.float32)
    (out,) = compile_graph(g, [x.shape, w.shape, bb.shape], SMALL)(x, w, bb)
    mu = x.mean(-1, keepdims=True)
    ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * w + bb
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_size_one_dims_are_a_structure_of_their_own():
    g = Graph()
    x, y = g.input(3), g.input(3)
    g.output(g.exp(x) * y - x)
    shapes = [(1, 5, 7), (4, 1, 7), (4, 5, 1), (1, 1, 1), (4, 5, 7)]
    for sx in shapes:
        for sy in shapes:
            try:
                np.broadcast_shapes(sx, sy)
            except ValueError:
                continue
            same_as_reference(g, [sx, sy], SMALL)
    assert 1 < n_templates(g) <= 25
    # replaying every shape again builds nothing new
    before = n_templates(g)
    for sx in shapes:
        same_as_reference(g, [sx, sx], SMALL)
    assert n_templates(g) == before


@pytest.mark.parametrize("cores", [1, 3, 40])
def test_matmul_chunk_count_is_not_a_structure(cores):
    """The full chunks of the unrolled k loop are one repeated run in the template: k from a few
    to hundreds of chunks reuses a handful of templates."""
    target = Target(cores=cores, vector_bytes=32, local_memory_bytes=16 * 1024)
    g = addmm()
    ks = set()
    for _ in range(40):
        m, n, k = (int(v) for v in RNG.integers(1, 700, size=3))
        kern = same_as_reference(g, [(m, n), (m, k), (k, n)], target)
        ks.add(-(-k // kern.tiling.tk))
    assert len(ks) > 8  # many different chunk counts ...
    assert n_templates(g) < 20  # ... far fewer templates


def test_addmm_results_through_templates():
    g = addmm()
    for m, n, k in [(5, 9, 300), (17, 3, 77), (64, 40, 513)]:
        c, a, b = (RNG.standard_normal(s).astype(np.float32) for s in [(m, n), (m, k), (k, n)])
        (out,) = compile_graph(g, [c.shape, a.shape, b.shape], SMALL)(c, a, b)
        np.testing.assert_allclose(out, np.maximum(a @ b + c, c * 0.5), rtol=1e-4, atol=1e-4)


def test_strided_inputs_and_mixed_dtypes():
    g = Graph()
    x, y = g.input(2), g.input(2)
    c = g.cmp(x, y, "gt")
    g.output(g.select(c, x, y * 2.0), g.cast(c, "float32"))
    for _ in range(30):
        m, n = (int(v) for v in RNG.integers(1, 60, size=2))
        base = RNG.standard_normal((n, m)).astype(np.float32)
        xt = base.T  # a transposed view: strides (1, m)
        yy = RNG.standard_normal((m, n)).astype(np.float32)
        st = [(1, m), (n, 1)]  # element strides (size-1 dims are normalised to 0)
        k = same_as_reference(g, [(m, n), (m, n)], SMALL, strides=st)
        o1, o2 = k(xt, yy)
        np.testing.assert_array_equal(o1, np.where(xt > yy, xt, yy * 2))
        np.testing.assert_array_equal(o2, (xt > yy).astype(np.float32))


def test_errors_still_come_from_the_lowering():
    g = Graph()
    g.output(g.input(2) + g.input(2))
    same_as_reference(g, [(4, 5), (4, 5)], SMALL)
    with pytest.raises(GraphError, match="do not broadcast"):
        compile_graph(g, [(4, 5), (3, 5)], SMALL)
    with pytest.raises(GraphError, match="rank"):
        compile_graph(g, [(4, 5), (4, 5, 1)], SMALL)
    r = Graph()
    r.output(r.sum(r.input(2), 0))
    tiny = Target(cores=2, vector_bytes=32, local_memory_bytes=1024)
    same_as_reference(r, [(8, 4)], tiny)
    with pytest.raises(TilingError, match="reduction"):
        compile_graph(r, [(10000, 4)], tiny)


def test_traced_sizes_record_decisions():
    tr = Tracer()
    a, b = tr.param("a", 6), tr.param("b", 4)
    c = (a * b + 2) // 3
    assert c.v == 8 and c.e.names() == {"a", "b"}
    assert (c > 5) is True and (a == b) is False and bool(a)
    assert int(b) == 4  # pins b
    guards = [x for k, x, _ in tr.stmts if k == "guard"]
    assert [str(g) for g in guards] == [f"{c.e}>5", "a!=b", "a!=0", "b==4"]
    assert guards[0] == parse(f"{c.e}>5")  # the rendering parses back to the same tree
    env = {"a": 6, "b": 4}
    assert all(evaluate(g, env) for g in guards)
    assert not evaluate(guards[0], {"a": 1, "b": 2})
    assert a * 1 is a and a + 0 is a and 0 * a == 0  # identities fold without guards
    t = Target(cores=2)
    res, view = traced_call(tile_matmul, (a, b, 8, 2, 4, t), ("tm", "tn"), ("tk",), target=5)
    assert res == tile_matmul(6, 4, 8, 2, 4, t) and isinstance(view.tm, Sym) and view.tk == res.tk
    assert tr.calls and f"{tr.calls[-1]}.tk=={res.tk}" in [str(x) for k, x, _ in tr.stmts]


def test_tile_matmul_equals_its_reference():
    rng = np.random.default_rng(3)
    for _ in range(1000):
        t = Target(cores=int(rng.integers(1, 65)), vector_bytes=int(rng.choice([16, 32, 64])),
                   local_memory_bytes=int(rng.choice([1024, 16 * 1024, 256 * 1024])))
        m = int(rng.choice([rng.integers(1, 600), rng.integers(1, 9000), 1 << int(rng.integers(0, 13))]))
        n, k = (int(rng.choice([rng.integers(1, 9000), rng.integers(1, 40)])) for _ in range(2))
        live, item = int(rng.integers(1, 6)), int(rng.choice([2, 4, 8]))
        try:
            a = tile_matmul(m, n, k, live, item, t)
        except TilingError:
            a = None
        try:
            b = tile_matmul_reference(m, n, k, live, item, t)
        except TilingError:
            b = None
        assert a == b, (m, n, k, live, item, t)


def test_prebuild_covers_every_shape_of_the_space():
    g = workloads.addmm()
    space = {"m": range(1, 200), "nk": [(16, 40), (40, 16), (24, 24), (8, 300)]}

    def shapes_of(m, nk):
        return [(m, nk[0]), (m, nk[1]), (nk[1], nk[0])]

    report = prebuild(g, shapes_of, space, SMALL)
    assert report["points"] == 199 * 4 and report["built"] == report["templates"] == n_templates(g) > 1
    for m in range(1, 200, 7):  # every point: no trace, and the words of the lowering itself
        for nk in space["nk"]:
            same_as_reference(g, shapes_of(m, nk), SMALL)
    assert n_templates(g) == report["templates"]
    assert prebuild(g, shapes_of, space, SMALL)["built"] == 0
    with pytest.raises(ValueError, match="796 points, more than limit=10"):
        prebuild(g, shapes_of, space, SMALL, limit=10)


def test_coverage_puts_the_most_used_templates_first():
    g = Graph("add")
    g.output(g.input(2) + g.input(2))
    for shape in [(1, 8), (8, 1), (1, 1)]:  # rare structures traced first
        compile_graph(g, [shape, shape], SMALL)
    with coverage() as hits:
        for m in range(2, 40):
            compile_graph(g, [(m, 8), (m, 8)], SMALL)
        compile_graph(g, [(1, 8), (1, 8)], SMALL)
    (tset,) = templates_of(g).values()
    counts = [hits[tset].get(t, 0) for t in tset.templates]
    assert counts == sorted(counts, reverse=True) and counts[0] >= 38
    for shape in [(1, 8), (8, 1), (1, 1), (5, 8)]:  # still the lowering's words after reordering
        same_as_reference(g, [shape, shape], SMALL)
