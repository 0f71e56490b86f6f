"""layout-materialize{views=...}: run-time conversions as free VTC views (or reshapes), and constant
subgraphs re-laid out at compile time; results bitwise those of the unoptimised pipeline."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import vtmlir
from vtmlir.codegen import EXACT_SCHEDULES
from vtmlir.errors import VtmlirError
from vtmlir.frontend import as_module
from vtmlir.ir_utils import walk_ops
from vtmlir.passes import get_pass, run_pipeline

# A 1x1 conv (16 output channels) whose result a reduction (a global sum pool) reads once: under
# cpu-nhwc the input conversion feeds the conv (read C·F times per element: a copy pays less) and the
# output conversion feeds the reduction (read once: the view pays less than the copy).
CONV_POOL = """
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#red = affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>
func.func @conv_pool(%x: tensor<1x8x6x6xf32>) -> tensor<1x16x1x1xf32> {
  %w = arith.constant dense<[[[[1.0]], [[2.0]], [[-1.0]], [[0.5]], [[3.0]], [[-2.0]], [[1.5]], [[0.25]]]]> : tensor<1x8x1x1xf32>
  %w16 = tensor.empty() : tensor<16x8x1x1xf32>
  %wb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (0, d1, d2, d3)>, #id],
                        iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%w : tensor<1x8x1x1xf32>) outs(%w16 : tensor<16x8x1x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<16x8x1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x6x6xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %wb : tensor<1x8x6x6xf32>, tensor<16x8x1x1xf32>) outs(%init : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %e2 = tensor.empty() : tensor<1x16x1x1xf32>
  %i2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x16x1x1xf32>) -> tensor<1x16x1x1xf32>
  %s = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%c : tensor<1x16x6x6xf32>) outs(%i2 : tensor<1x16x1x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<1x16x1x1xf32>
  return %s : tensor<1x16x1x1xf32>
}
"""


def _materialize(text: str, target: str, views: str):
    module = as_module(text)
    run_pipeline(module, f"builtin.module(layout-select-ilp{{target={target}}})")
    p = get_pass("layout-materialize")(views=views)
    report = p.run(module.operation)
    assert module.operation.verify()
    assert not [op for op in walk_ops(module.operation) if op.name.split(".")[0] in ("vt", "layout")]
    return module, report


# The layouts move the pooled (H, W) sum between the innermost loops (NCHW) and outer ones (NCHW8c):
# the row-reduction schedule would sum in a tree in one and in order in the other. Layouts are
# bitwise under the schedules that do not reassociate (docs/codegen.md), so the sums stay loops here.
EXACT = EXACT_SCHEDULES


@pytest.fixture(scope="module")
def conv_pool_reference():
    x = torch.randn(1, 8, 6, 6, generator=torch.Generator().manual_seed(3))
    return x, vtmlir.compile(as_module(CONV_POOL), schedules=EXACT, opt_level=0)(x)


@pytest.mark.parametrize("target", ["cpu-nhwc", "cpu"])
def test_auto_views_the_reduction_and_copies_for_the_conv(conv_pool_reference, target):
    x, expected = conv_pool_reference
    results = {}
    for views in ("never", "auto", "always"):
        module, report = _materialize(CONV_POOL, target, views)
        totals = report.totals()
        assert totals["conversions"] == 2
        results[views] = (module, totals, report.functions[0].choices)
        assert torch.equal(vtmlir.compile(module, schedules=EXACT, opt_level=0)(x), expected), views
    assert results["never"][1]["views"] == 0 and results["always"][1]["views"] == 2
    auto = results["auto"][2]
    # input -> conv: a copy (read C·F times per element); conv -> reduction (read once): a view
    # through NHWC's permutation, but a copy through NCHW8c's floordiv/mod (index arithmetic).
    assert [c.view for c in auto] == [False, target == "cpu-nhwc"]
    assert "strided reads" in auto[0].reason and auto[0].contiguity == "none"
    assert auto[1].reads == 16 * 36                      # the reduction reads each element once
    copies = {v: len(walk_ops(results[v][0].operation, "linalg.transpose")) for v in results}
    assert copies == {"never": 2, "auto": 1 if target == "cpu-nhwc" else 2, "always": 0}
    # The reduction reads the conv's physical output through the folded map.
    folded = "(d0, d2, d3, d1)" if target == "cpu-nhwc" else "(d0, d1 floordiv 8, d2, d3, d1 mod 8)"
    assert folded in str(results["auto" if target == "cpu-nhwc" else "always"][0])


def test_fully_contiguous_conversions_become_reshapes():
    """NCHW <-> NHWC of a 1x1 map is the same bytes in the same order (VTC Type I): a reshape,
    whatever reads it (here the function's return), in every mode but `never`."""
    text = """
    func.func @f(%x: tensor<1x8x1x1xf32>) -> tensor<1x16x1x1xf32> {
      %w = arith.constant dense<0.5> : tensor<16x8x1x1xf32>
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<1x16x1x1xf32>
      %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x1x1xf32>) -> tensor<1x16x1x1xf32>
      %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
          ins(%x, %w : tensor<1x8x1x1xf32>, tensor<16x8x1x1xf32>) outs(%init : tensor<1x16x1x1xf32>) -> tensor<1x16x1x1xf32>
      return %c : tensor<1x16x1x1xf32>
    }"""
    x = torch.randn(1, 8, 1, 1)
    expected = vtmlir.compile(as_module(text), opt_level=0)(x)
    module, report = _materialize(text, "cpu-nhwc", "auto")
    assert [(c.contiguity, c.view) for c in report.functions[0].choices] == [("full", True), ("full", True)]
    assert not walk_ops(module.operation, "linalg.transpose")
    assert len(walk_ops(module.operation, "tensor.collapse_shape")) == 2
    assert torch.equal(vtmlir.compile(module, opt_level=0)(x), expected)
    never, _ = _materialize(text, "cpu-nhwc", "never")
    assert len(walk_ops(never.operation, "linalg.transpose")) == 2


def test_bad_views_option_is_an_error():
    with pytest.raises(VtmlirError, match="views must be one of auto, never, always, got 'sometimes'"):
        run_pipeline(as_module(CONV_POOL), "builtin.module(layout-materialize{views=sometimes})")


# -- constant subgraphs --------------------------------------------------------------------------


class ComputedWeights(nn.Module):
    """Conv weights computed by ops other than a single generic: a flat parameter viewed
    (expand_shape), a slice of a larger one (extract_slice), a concatenation of two scaled ones
    (generics + concat), and a concatenation with a part normalised by a reduction (which the
    compile-time evaluator does not run)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.flat = nn.Parameter(torch.randn(16 * 8 * 9, generator=g))
        self.big = nn.Parameter(torch.randn(24, 16, 3, 3, generator=g))
        self.a = nn.Parameter(torch.randn(4, 16, 3, 3, generator=g))
        self.b = nn.Parameter(torch.randn(4, 16, 3, 3, generator=g))

    def forward(self, x):
        y = torch.relu(F.conv2d(x, self.flat.view(16, 8, 3, 3), padding=1))
        y = torch.relu(F.conv2d(y, self.big[4:20], padding=1))
        # (scaled: the importer takes no list of parameters)
        y = torch.relu(F.conv2d(y, torch.cat([self.a * 2.0, self.b * 0.5, -self.a, self.b * 3.0]), padding=1))
        return F.conv2d(y, torch.cat([self.a * 2.0, self.b / self.b.abs().sum()]), padding=1)


def test_constant_subgraphs_are_laid_out_at_compile_time():
    model = ComputedWeights().eval()
    x = torch.randn(1, 8, 6, 6)
    text = str(vtmlir.import_torch(model, x))
    module = as_module(text)
    for name in ("tensor.expand_shape", "tensor.extract_slice"):
        assert walk_ops(module.operation, name), name
    assert len(walk_ops(module.operation, "tensor.concat")) == 2
    expected = vtmlir.compile(as_module(text), opt_level=0)(x)
    module, report = _materialize(text, "cpu-nhwc", "auto")
    # The viewed, sliced and first concatenated weights are evaluated into HWIO constants (their
    # subgraphs are gone); the last weight needs a reduction, which the evaluator does not run: it
    # is the one constant transposed at run time (beside the two activation transposes).
    assert report.totals()["constants_at_run_time"] == 1
    assert len(walk_ops(module.operation, "linalg.transpose")) == 3
    for name in ("tensor.expand_shape", "tensor.extract_slice"):
        assert not walk_ops(module.operation, name), name
    assert len(walk_ops(module.operation, "tensor.concat")) == 1
    assert torch.equal(vtmlir.compile(module, opt_level=0)(x), expected)
    torch.testing.assert_close(expected, model(x), rtol=1e-4, atol=1e-4)
