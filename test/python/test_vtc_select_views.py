"""The per-element select form of reading a multi-piece view (`vtc/select_views.py`, issue 3
point 5): one loop nest selects each element's piece where the pieces are finer than a tile
(`vt-lower-views{min-piece=N}`). Bitwise identical to the split-loop / gather lowering, on the
CPU and through ptxas."""

import numpy as np
import pytest
import torch

import vtmlir

CONCAT_ROWS = """
func.func @main(%a: tensor<2x8xf32>, %b: tensor<4x8xf32>) -> tensor<6x8xf32> {
  %c = "vt.view"(%a, %b) {mapping = [{dims = array<i64: 0>, hi = array<i64: 2>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 0>, hi = array<i64: 6>, lo = array<i64: 2>, map = affine_map<(d0, d1) -> (d0 - 2, d1)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %e = tensor.empty() : tensor<6x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<6x8xf32>) outs(%e : tensor<6x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<6x8xf32>
  return %r : tensor<6x8xf32>
}
"""

MATMUL_OVER_CONCAT = """
func.func @main(%a: tensor<3x2xf32>, %b: tensor<3x2xf32>, %w: tensor<4x5xf32>) -> tensor<3x5xf32> {
  %c = "vt.view"(%a, %b) {mapping = [{dims = array<i64: 1>, hi = array<i64: 2>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 1>, hi = array<i64: 4>, lo = array<i64: 2>, map = affine_map<(d0, d1) -> (d0, d1 - 2)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x5xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<3x5xf32>) -> tensor<3x5xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%c, %w : tensor<3x4xf32>, tensor<4x5xf32>) outs(%acc : tensor<3x5xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<3x5xf32>
  return %r : tensor<3x5xf32>
}
"""

SELECT = "vt-lower-views{min-piece=4}"


@pytest.mark.parametrize("text, shapes, reference", [
    (CONCAT_ROWS, [(2, 8), (4, 8)], lambda a, b: np.exp(np.concatenate([a, b], 0))),
    (MATMUL_OVER_CONCAT, [(3, 2), (3, 2), (4, 5)], lambda a, b, w: np.concatenate([a, b], 1) @ w),
], ids=["rows", "reduction-dim"])
def test_select_form_bitwise_with_split_lowering(text, shapes, reference):
    g = torch.Generator().manual_seed(0)
    args = [torch.randn(*s, generator=g) for s in shapes]
    split = vtmlir.compile(text, opt_level=0)                 # split loops (rows) / a gather (reduction dim)
    select = vtmlir.compile(text, pipeline=SELECT)
    lowered = select.stages["optimized"]   # the pipeline ran vt-lower-views itself
    assert "arith.select" in lowered and "tensor.insert_slice" not in lowered
    assert '"vt.' not in lowered
    out = select(*args)
    assert torch.equal(out, split(*args))
    np.testing.assert_allclose(out.numpy(), reference(*[a.numpy() for a in args]), rtol=1e-5, atol=1e-6)


def test_select_form_ptx_assembles():
    exe = vtmlir.compile(MATMUL_OVER_CONCAT, target="cuda", chip="sm_80", pipeline=SELECT)
    cubins = exe.assemble("sm_80")
    assert exe.kernels and set(cubins) == set(exe.ptx)
    assert all(c[:4] == b"\x7fELF" for c in cubins.values())
