"""The per-graph cache of shape-independent analyses in `codegen` (per-new-shape latency): a graph
that grows after a compile, or a different graph, never sees stale analyses."""

from __future__ import annotations

import numpy as np
import pytest

from vtmlir.dvm import Graph, GraphError, Target, compile_graph

T = Target(cores=3, vector_bytes=32, local_memory_bytes=16 * 1024)


def test_graph_growing_after_compile_is_reanalysed():
    g = Graph()
    x = g.input(2)
    y = g.exp(x)
    g.output(y)
    a = np.random.default_rng(0).standard_normal((7, 9)).astype(np.float32)
    (o1,) = compile_graph(g, [a.shape], T)(a)
    g.output(y + x)  # a second output and a new node
    k = compile_graph(g, [a.shape], T)
    o2, o3 = k(a)
    np.testing.assert_allclose(o1, np.exp(a), rtol=1e-6)
    np.testing.assert_array_equal(o2, o1)
    np.testing.assert_allclose(o3, np.exp(a) + a, rtol=1e-6)
    # the same graph at another rank padding (broadcast input of lower rank) and shape
    for shp in [(3, 4), (1, 1), (40, 2)]:
        b = np.ones(shp, np.float32)
        np.testing.assert_allclose(compile_graph(g, [shp], T)(b)[1], np.exp(b) + b, rtol=1e-6)


def test_shape_inference_broadcasts_like_numpy():
    g = Graph()
    g.output(g.input(3) + g.input(2))
    assert g.infer_shapes([(4, 1, 5), (3, 1)])[-1] == (4, 3, 5)
    with pytest.raises(GraphError, match="do not broadcast"):
        g.infer_shapes([(4, 2, 5), (3, 5)])
