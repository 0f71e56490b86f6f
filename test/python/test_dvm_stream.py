"""Streaming fusion on dynamic graphs (DVM §5.2, Fig. 10): the op buffer, its flush conditions and
data-dependent branches, against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vtmlir.dvm.stream import StreamFuser
from vtmlir.errors import VtmlirError


def test_figure10_add_sqrt_print_is_one_kernel_storing_only_d():
    f = StreamFuser()
    rng = np.random.default_rng(0)
    a, b = (rng.random((7, 33), dtype=np.float32) for _ in range(2))
    c = f.tensor(a) + f.tensor(b)
    d = c.sqrt()
    del c  # Python dropped c: it stays in local memory, no Store
    out = d.numpy()  # host needs d: flush
    np.testing.assert_allclose(out, np.sqrt(a + b), rtol=1e-6)
    assert f.history == [("host needs a result", "vector", 2, 1)]


def test_live_intermediate_is_stored_by_the_same_kernel():
    f = StreamFuser()
    a = f.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    c = a * 2.0
    d = (c + 1.0).exp()
    d.numpy()
    assert not c.pending  # c was referenced: stored by the flush of d
    np.testing.assert_array_equal(c.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) * 2)
    assert f.kernels_run == 1 and f.history[0][3] == 2


@pytest.mark.parametrize("seed", range(4))
def test_if_else_add_random_shapes_and_branches(seed):
    """((a > b ? 2x : 4x) + y): the compare is flushed to decide the branch on the host, then the
    taken branch and the add fuse into one kernel."""
    rng = np.random.default_rng(seed)
    f = StreamFuser()
    for _ in range(3):
        m, n = int(rng.integers(1, 300)), int(rng.integers(1, 64))
        a, b = rng.standard_normal(1).astype(np.float32), rng.standard_normal(1).astype(np.float32)
        x, y = rng.standard_normal((m, n)).astype(np.float32), rng.standard_normal((m, n)).astype(np.float32)
        before = f.kernels_run
        X, Y = f.tensor(x), f.tensor(y)
        t = X * 2.0 if bool(f.tensor(a) > f.tensor(b)) else X * 4.0
        out = (t + Y).numpy()
        ta, tb, tx, ty = map(torch.from_numpy, (a, b, x, y))
        ref = (torch.where(ta > tb, 2 * tx, 4 * tx) + ty).numpy()
        np.testing.assert_allclose(out, ref, rtol=1e-6)
        assert f.kernels_run - before == 2
        assert f.history[-1][2] == 2  # branch op + add in one kernel


def test_matmul_epilogue_then_reduction_flushes_for_the_reduction():
    rng = np.random.default_rng(1)
    x, w, bias = (rng.standard_normal(s).astype(np.float32) for s in ((9, 16), (16, 8), (8,)))
    f = StreamFuser()
    h = (f.tensor(x) @ f.tensor(w) + f.tensor(bias)).maximum(0.0)
    mu = h.mean(-1)
    hc = h - mu
    out = (hc / ((hc * hc).mean(-1) + 1e-5).sqrt()).numpy()
    th = torch.relu(torch.from_numpy(x) @ torch.from_numpy(w) + torch.from_numpy(bias))
    ref = torch.nn.functional.layer_norm(th, (8,), eps=1e-5).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    # matmul + bias + relu; then mean, sub, mul, mean, add, sqrt, div
    assert [(r, k, n) for r, k, n, _ in f.history] == [
        ("cannot fuse", "cube-vector", 3), ("host needs a result", "vector", 7)]
    assert f.flushes == {"cannot fuse": 1, "host needs a result": 1}


def test_shape_change_means_a_new_kernel_but_same_shape_reuses_it():
    f = StreamFuser()
    for m in (5, 5, 6):
        (f.tensor(np.ones((m, 3), np.float32)) * 3.0).numpy()
    assert f.kernels_run == 3 and len(f._kernels) == 2


def test_bad_shapes_raise_clear_errors():
    f = StreamFuser()
    with pytest.raises(VtmlirError, match="do not broadcast"):
        f.tensor(np.ones((3, 4), np.float32)) + f.tensor(np.ones((5, 4), np.float32))
    with pytest.raises(VtmlirError, match="do not multiply"):
        f.tensor(np.ones((3, 4), np.float32)) @ f.tensor(np.ones((5, 4), np.float32))
    with pytest.raises(VtmlirError, match="ambiguous"):
        bool(f.tensor(np.ones((2,), np.float32)) > 0.0)


def test_compile_native_after_a_warm_up_gives_the_same_results():
    """After a warm-up, `compile_native` JIT-compiles every kernel structure's templates; new shapes
    of those structures then compile natively and compute the same results."""
    rng = np.random.default_rng(9)
    f = StreamFuser()

    def step(x, y, a, b):
        X, Y = f.tensor(x), f.tensor(y)
        t = X * 2.0 if bool(f.tensor(a) > f.tensor(b)) else X * 4.0
        return (t + Y).numpy()

    for i in range(4):  # both branches, a few shapes
        z = rng.standard_normal((3 + i, 5 + i)).astype(np.float32)
        step(z, z, np.float32([i % 2]), np.float32([0.5]))
    assert f.compile_native() >= 2  # the compare kernel and the branch + add kernel
    for _ in range(5):
        m, n = int(rng.integers(2, 300)), int(rng.integers(2, 64))
        a, b = rng.standard_normal(1).astype(np.float32), rng.standard_normal(1).astype(np.float32)
        x, y = rng.standard_normal((m, n)).astype(np.float32), rng.standard_normal((m, n)).astype(np.float32)
        np.testing.assert_allclose(step(x, y, a, b), (2 * x if a > b else 4 * x) + y, rtol=1e-6)
