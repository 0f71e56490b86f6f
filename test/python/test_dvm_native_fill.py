"""The per-shape compile JIT-compiled through MLIR (`vtmlir.dvm.native_fill`): a template set's
native `fill` must give exactly what its Python `fill` gives -- template, tiling, every word,
output shapes -- on random shapes inside and outside the prebuilt space, and hand back to Python
whatever it cannot decide the same way (Alg. 1 refusing a shape)."""

from __future__ import annotations

import numpy as np
import pytest

from vtmlir.dvm import Graph, GraphError, Target, TilingError, compile_graph
from vtmlir.errors import VtmlirError
from vtmlir.dvm.kernel import dense_strides
from vtmlir.dvm.graph import Value
from vtmlir.dvm.template import _params, forget_last_tiling, prebuild, templates_of

from test_dvm_template import addmm, layernorm  # the same graphs as the template tests

RNG = np.random.default_rng(23)
SMALL = Target(cores=3, vector_bytes=32, local_memory_bytes=16 * 1024)  # many tiles, tails, k chunks


def softmax_rows():
    g = Graph("softmax")
    x = g.input(2)
    e = g.exp(x - g.max(x, -1))
    g.output(e / g.sum(e, -1))
    return g


def _same_fill(g, shapes, strides=None):
    shapes = tuple(tuple(s) for s in shapes)
    strides = strides or tuple(map(dense_strides, shapes))
    for tset in templates_of(g).values():
        if tset.native is None or len(tset.native.meta) == 0:
            continue
        params = _params(shapes, strides)
        forget_last_tiling()
        want = tset.fill(*params)
        got = tset.native(params)
        if want is None:
            assert got is None, shapes
            continue
        assert got[0] == want[0] and got[1] == want[1] and got[3] == want[3], shapes
        np.testing.assert_array_equal(got[2], want[2])
        if strides == tuple(map(dense_strides, shapes)):  # the dense entry computes the strides natively
            k = tset.native.kernel(shapes, None)
            assert k.template_index == want[0] and k.tiling == want[1] and k.output_shapes == want[3], shapes
            assert k.input_shapes == shapes and k.input_strides == strides
            np.testing.assert_array_equal(k.bytecode, want[2])


def _padded_strides(shape):
    st, acc = [], 1
    for n in reversed(shape):
        st.append(0 if n == 1 else acc)
        acc *= n + 3
    return tuple(reversed(st))


CASES = [
    (addmm, lambda m, n, k: [(m, n), (m, k), (k, n)], {"m": range(1, 70, 3), "n": [1, 8, 33], "k": [1, 40, 300]}),
    (layernorm, lambda b, s, h: [(b, s, h), (h,), (h,)], {"b": [1, 2, 5], "s": range(1, 20, 4), "h": [1, 7, 64]}),
    (softmax_rows, lambda m, n: [(m, n)], {"m": range(1, 40, 5), "n": range(1, 200, 13)}),
]


@pytest.mark.parametrize("build,shapes_of,space", CASES, ids=[c[0].__name__ for c in CASES])
def test_native_fill_equals_the_python_fill(build, shapes_of, space):
    g = build()
    prebuild(g, shapes_of, space, SMALL, native=False)  # dense, then padded-strided structures
    prebuild(g, shapes_of, space, SMALL, strides_of=lambda **p: [_padded_strides(s) for s in shapes_of(**p)])
    tsets = list(templates_of(g).values())
    assert tsets and all(t.native is not None for t in tsets), [t.native_error for t in tsets]
    names = list(space)
    for _ in range(150):  # inside the space and beyond it (a shape no template covers: None both)
        point = {n: int(RNG.choice(list(space[n]))) + int(RNG.integers(0, 3)) * int(RNG.integers(0, 2))
                 for n in names}
        shapes = shapes_of(**point)
        _same_fill(g, shapes)
        # strided inputs: each input as a slice of a larger, padded buffer
        _same_fill(g, shapes, tuple(_padded_strides(s) for s in shapes))
    # and through compile_graph: the native words are the lowering's own encoding
    for _ in range(20):
        point = {n: int(RNG.choice(list(space[n]))) for n in names}
        shapes = shapes_of(**point)
        a = compile_graph(g, shapes, SMALL)
        b = compile_graph(g, shapes, SMALL, template=False)
        np.testing.assert_array_equal(a.bytecode, b.bytecode)
        assert a.tiling == b.tiling and a.output_shapes == b.output_shapes


def test_many_k_chunks_grow_the_word_buffer():
    g = addmm()
    prebuild(g, lambda k: [(5, 9), (5, k), (k, 9)], {"k": [300, 20000]}, SMALL)
    (tset,) = templates_of(g).values()
    k = compile_graph(g, [(5, 9), (5, 40000), (40000, 9)], SMALL)  # > 4096 words: the buffer grows
    ref = compile_graph(g, [(5, 9), (5, 40000), (40000, 9)], SMALL, template=False)
    assert tset.native is not None and k.bytecode.size > 4096
    np.testing.assert_array_equal(k.bytecode, ref.bytecode)
    c, a, b = (RNG.standard_normal(s).astype(np.float32) for s in [(5, 9), (5, 40000), (40000, 9)])
    (out,) = k(c, a, b)
    np.testing.assert_allclose(out, np.maximum(a @ b + c, c * 0.5), rtol=1e-3, atol=1e-3)


def test_what_alg1_refuses_is_refused_the_same_way():
    r = Graph()
    r.output(r.sum(r.input(2), 0))
    tiny = Target(cores=2, vector_bytes=32, local_memory_bytes=1024)
    prebuild(r, lambda m, n: [(m, n)], {"m": [2, 8], "n": [4]}, tiny)
    (tset,) = templates_of(r).values()
    assert tset.native is not None
    with pytest.raises(TilingError, match="reduction"):  # native hands the shape back to Python
        compile_graph(r, [(10000, 4)], tiny)


def test_a_new_template_makes_the_native_fill_stale_until_recompiled():
    g = softmax_rows()
    prebuild(g, lambda m, n: [(m, n)], {"m": [4], "n": [16]}, SMALL)
    (tset,) = templates_of(g).values()
    before = len(tset)
    assert tset.native is not None
    compile_graph(g, [(1, 1)], SMALL)  # size-1 dims: a structure of its own, traced now
    assert len(tset) > before and tset.native is None
    tset.compile_native()
    assert tset.native is not None
    _same_fill(g, [(1, 1)])
    _same_fill(g, [(7, 30)])


def test_compile_graph_goes_through_the_registered_native_entry():
    g = addmm()
    prebuild(g, lambda m: [(m, 24), (m, 40), (40, 24)], {"m": range(1, 50)}, SMALL)
    (tset,) = templates_of(g).values()
    fast = g.__dict__["_dvm_fast"]
    assert list(fast.values()) == [(SMALL, tset.native.fast)]  # registered by compile_native, for SMALL
    for m in (3, 17, 49):
        shapes = [(m, 24), (m, 40), (40, 24)]
        ref = compile_graph(g, shapes, SMALL, template=False)
        # lists, numpy integers: the kernel's shapes are tuples of ints all the same
        for given in (shapes, [list(s) for s in shapes], [tuple(np.int64(x) for x in s) for s in shapes]):
            k = compile_graph(g, given, SMALL)
            assert k.input_shapes == ref.input_shapes and all(type(x) is int for s in k.input_shapes for x in s)
            assert k.input_strides == ref.input_strides and k.tiling == ref.tiling
            assert k.output_shapes == ref.output_shapes and k.output_dtypes == ref.output_dtypes
            np.testing.assert_array_equal(k.bytecode, ref.bytecode)
        # given strides (normalised: 0 along size-1 dims) through the same entry
        st = [(24 + 5, 1), (40, 1), (1, 40)]
        k = compile_graph(g, shapes, SMALL, input_strides=st)
        r = compile_graph(g, shapes, SMALL, input_strides=st, template=False)
        np.testing.assert_array_equal(k.bytecode, r.bytecode)
        assert k.input_strides == r.input_strides
    # a dense kernel checks its inputs' contiguity (its strides are derived when read)
    k = compile_graph(g, [(5, 24), (5, 40), (40, 24)], SMALL)
    c, a, b = (RNG.standard_normal(s).astype(np.float32) for s in [(5, 24), (5, 40), (40, 24)])
    (out,) = k(c, a, b)
    np.testing.assert_allclose(out, np.maximum(a @ b + c, c * 0.5), rtol=1e-5, atol=1e-5)
    with pytest.raises(GraphError, match="strides"):
        k(c, a, np.asfortranarray(b))
    # wrong ranks or counts: the general path's error, not the entry's unpacking
    with pytest.raises(GraphError):
        compile_graph(g, [(5, 24), (5, 40, 1), (40, 24)], SMALL)
    with pytest.raises(GraphError):
        compile_graph(g, [(5, 24), (5, 40)], SMALL)
    # a graph that grows drops the entry of its old structure
    g.output(g.sqrt(Value(g, g.inputs[0])))
    assert "_dvm_fast" not in g.__dict__
    assert len(compile_graph(g, [(5, 24), (5, 40), (40, 24)], SMALL).output_shapes) == 2


def test_compile_native_refuses_a_native_fill_that_differs_from_python():
    from vtmlir.dvm.native_fill import NativeFill

    g = softmax_rows()
    prebuild(g, lambda m, n: [(m, n)], {"m": [4, 9], "n": [16, 40]}, SMALL, native=False)
    (tset,) = templates_of(g).values()
    native = NativeFill(tset)
    tset._check(native)  # as compiled: the same at every template's traced shape
    native.words[:] += 1  # a wrong constant word
    with pytest.raises(VtmlirError, match="differs from the Python fill"):
        tset._check(native)


def test_the_native_entry_is_shared_safely():
    """Threads compiling the same graph share the set's native buffers: each gets its own words."""
    import sys
    import threading

    g = addmm()
    prebuild(g, lambda m: [(m, 24), (m, 40), (40, 24)], {"m": range(1, 200)}, SMALL)
    shapes = [[(m, 24), (m, 40), (40, 24)] for m in range(1, 200)]
    want = [compile_graph(g, s, SMALL).bytecode for s in shapes]
    # an equal Target object of its own gets an entry of its own (the same native set)
    other = Target(cores=3, vector_bytes=32, local_memory_bytes=16 * 1024)
    np.testing.assert_array_equal(compile_graph(g, shapes[5], other).bytecode, want[5])
    assert len(g.__dict__["_dvm_fast"]) == 2
    bad = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(10):  # without the lock, ~1-2 % of these get another thread's words
            for j in rng.permutation(len(shapes)):
                k = compile_graph(g, shapes[j], SMALL)
                if not np.array_equal(k.bytecode, want[j]) or k.input_shapes != tuple(shapes[j]):
                    bad.append(int(j))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not bad
