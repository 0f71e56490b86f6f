"""DVM shape tiling (Alg. 1, hardware_align_div, the cost model, the MatMul template)."""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vtmlir.dvm import Graph, Target, TilingError, compile_graph, hardware_align_div, min_cost_tile, tile_cost
from vtmlir.dvm.tiling import matmul_candidates, matmul_chunk, matmul_tile_cost, tile_matmul, tile_vector


def brute_force_tile(extent, inner, outer, t_max, cores):
    best = None
    for t in range(1, min(extent, t_max // inner) + 1):
        c = tile_cost(outer * -(-extent // t), t * inner, cores)
        if best is None or c < best[0] or (c == best[0] and t > best[1]):
            best = (c, t)
    return best


def test_target_defaults():
    t = Target()
    assert t.cores == (os.cpu_count() or 1)
    assert t.vector_elems(4) == 8 and t.vector_elems(2) == 16


def test_figure6_example():
    """Fig. 6: fp16 [32, 1024] add on 40 cores with 32-byte instructions: min-cost tile 820
    (40 tiles, tail 788), rounded up to 832 (40 tiles, tail 320 elements = 640 bytes)."""
    target = Target(cores=40, vector_bytes=32, local_memory_bytes=192 * 1024)
    assert min_cost_tile(32768, 1, 1, 32768, 40) == 820
    g = Graph("add")
    a, b = g.input(2, "float16"), g.input(2, "float16")
    g.output(a + b)
    k = compile_graph(g, [(32, 1024)] * 2, target)
    assert k.tiling.shape == (32768,) and k.tiling.tile == 832 and k.tiling.tile_count == 40
    grid = k.program.grid[-1]
    assert (grid.count, grid.block, grid.extent - (grid.count - 1) * grid.block) == (40, 832, 320)


@settings(max_examples=300, deadline=None)
@given(extent=st.integers(1, 600), inner=st.sampled_from([1, 2, 3, 7, 8, 64, 300]),
       outer=st.integers(1, 40), cores=st.integers(1, 64), t_max=st.sampled_from([8, 64, 1000, 4096, 10**6]))
def test_min_cost_tile_matches_brute_force(extent, inner, outer, cores, t_max):
    if inner > t_max:
        with pytest.raises(TilingError):
            min_cost_tile(extent, inner, outer, t_max, cores)
        return
    t = min_cost_tile(extent, inner, outer, t_max, cores)
    assert (tile_cost(outer * -(-extent // t), t * inner, cores), t) == brute_force_tile(extent, inner, outer, t_max, cores)


@settings(max_examples=200, deadline=None)
@given(shape=st.lists(st.integers(1, 300), min_size=1, max_size=4), cores=st.integers(1, 64),
       vb=st.sampled_from([16, 32, 64]), mem=st.sampled_from([4096, 65536, 256 * 1024]),
       n_max=st.integers(1, 6), itemsize=st.sampled_from([2, 4]), data=st.data())
def test_tile_vector_properties(shape, cores, vb, mem, n_max, itemsize, data):
    target = Target(cores=cores, vector_bytes=vb, local_memory_bytes=mem)
    reduce_dims = data.draw(st.sets(st.integers(0, len(shape) - 1), max_size=2))
    try:
        tl = tile_vector(shape, reduce_dims, n_max, itemsize, target)
    except TilingError:
        # only when a reduction's whole extent cannot fit T_max (aligned down to the vector width)
        first = min(reduce_dims)
        t_max, align = mem // (n_max * itemsize), target.vector_elems(itemsize)
        assert math.prod(shape[first:]) > (t_max - t_max % align if t_max >= align else t_max)
        return
    d, t = tl.dim, tl.tile
    # tiles cover the shape exactly: full tiles plus one tail, nothing beyond
    assert 1 <= t <= shape[d]
    assert (tl.grid[-1] - 1) * t < shape[d] <= tl.grid[-1] * t
    assert tl.tile_count * 1 == math.prod(shape[:d]) * tl.grid[-1]
    # the tile respects the T_max limit, and never splits a reduction
    assert tl.tile_size <= tl.t_max and tl.t_max * n_max * itemsize <= mem
    assert all(r >= d for r in reduce_dims)
    if d in reduce_dims:
        assert t == shape[d]
    # alignment: a split tile is a multiple of the vector width unless no aligned tile fits
    align = target.vector_elems(itemsize)
    inner = math.prod(shape[d + 1:])
    if t < shape[d] and d not in reduce_dims:
        step = align // math.gcd(align, inner)
        assert t % step == 0 or step * inner > tl.t_max


def test_hardware_align_div_respects_limit():
    target = Target(cores=3, vector_bytes=32)
    for extent in range(1, 200):
        t = hardware_align_div(40, 1, extent, 1, target, 4)
        assert t <= 40 and (t % 8 == 0 or t == extent)


def test_reduction_too_large_is_an_error():
    with pytest.raises(TilingError, match="reduction"):
        tile_vector((4, 100000), {1}, 4, 4, Target(cores=2, local_memory_bytes=64 * 1024))


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 33, 5), (100, 64, 300), (513, 200, 4096), (8192, 4096, 4096)])
def test_matmul_template_is_min_cost(m, n, k):
    target = Target(cores=8, vector_bytes=32, local_memory_bytes=128 * 1024)
    tl = tile_matmul(m, n, k, 2, 4, target)
    tms, tns = matmul_candidates(m, n, target, 4)
    feasible = [(matmul_tile_cost(m, n, k, a, b, target), a, b) for a in tms for b in tns
                if matmul_chunk(k, a, b, 2, target, 4) >= 1]
    assert tl.cost == min(c for c, _, _ in feasible)
    assert (tl.m, tl.n, tl.k) == (m, n, k) and 1 <= tl.tk <= k
    assert (tl.tm * tl.tk + tl.tk * tl.tn + 2 * tl.tm * tl.tn) * 4 <= target.local_memory_bytes
    assert tl.tn == n or tl.tn % 8 == 0
