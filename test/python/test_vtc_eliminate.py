"""VTC Alg. 2 (`vt-eliminate-data-movement`) and the lowering of virtual tensors (`vt-lower-views`).

Semantics (DESIGN.md §7, issue 3 point 6): a pass that only moves data never changes results, so on
every zoo model the compiled outputs with and without the pass are bitwise identical; and the pass
must actually remove data-movement bytes where the zoo has removable ones.
"""

import pytest
import torch

import vtmlir
from vtmlir.frontend import as_module
from vtmlir.models import ZOO, get
from vtmlir.passes.pipeline import run_pipeline
from vtmlir.passes.vt_stats import collect_stats
from vtmlir.vtc.eliminate import eliminate
from vtmlir.vtc.greedy import AnalyticCostModel, build_points_to_graph
from vtmlir.vtc.lower import lower_views
from vtmlir.vtc.vtog import build_vtogs

PASS = "vt-eliminate-data-movement{quiet=true}"

# Models whose imported graph holds data movement the rewrite can remove (transposes, slices,
# broadcasts between compute ops); the conv models only move data at graph inputs/outputs.
SAVES_BYTES = {"mlp", "llama_decoder_layer", "transformer_block"}


def _as_list(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _generalized_stats(module):
    """vt-stats at the stage both pipelines share (named ops generalized, views lowered)."""
    m = as_module(str(module))
    run_pipeline(m, "func.func(linalg-generalize-named-ops)")
    lower_views(m)
    return collect_stats(m.operation).totals()


@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_bitwise_identical_and_fewer_bytes(name):
    model, inputs = get(name).build(batch=1)
    graph = vtmlir.import_torch(model, *inputs)
    plain = _as_list(vtmlir.compile(graph)(*inputs))
    optimised_exe = vtmlir.compile(graph, pipeline=PASS)
    optimised = _as_list(optimised_exe(*inputs))
    assert len(plain) == len(optimised)
    for a, b in zip(plain, optimised):
        assert torch.equal(a, b)

    rewritten = as_module(str(graph))
    run_pipeline(rewritten, PASS)
    before = collect_stats(graph.operation).totals()
    after = collect_stats(rewritten.operation).totals()
    assert after["bytes_moved"] <= before["bytes_moved"]
    lowered_before, lowered_after = _generalized_stats(graph), _generalized_stats(rewritten)
    assert lowered_after["bytes_moved"] <= lowered_before["bytes_moved"]
    if name in SAVES_BYTES:
        assert after["bytes_moved"] < before["bytes_moved"]
        assert lowered_after["bytes_moved"] < lowered_before["bytes_moved"]
        assert "vt-lowered" in optimised_exe.stages


_FIG7 = """
func.func @f(%a: tensor<2x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x6xf32> {
  %c = tensor.concat dim(0) %a, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %et = tensor.empty() : tensor<4x6xf32>
  %d = linalg.transpose ins(%c : tensor<6x4xf32>) outs(%et : tensor<4x6xf32>) permutation = [1, 0]
  return %d : tensor<4x6xf32>
}
"""


def test_greedy_respects_conflict_sets_and_multi_piece_readers():
    m = as_module(_FIG7)
    (graph,) = build_vtogs(m.operation)
    concat = graph.by_name("%concat")
    # Readers can index multi-piece views: {e0, e1} (Type I) beats e2 (Type II); without: e2.
    for multi, expect in ((True, {"concat"}), (False, {"transpose"})):
        ptg = build_points_to_graph(graph, AnalyticCostModel(multi_piece_readers=multi),
                                    require_cover=False)
        chosen = ptg.chosen[concat.id]
        assert graph.compatible(chosen)
        assert {e.candidate.kind for e in chosen} == expect


def test_rewrite_composes_chains_and_runs():
    text = """
    #id = affine_map<(d0, d1) -> (d0, d1)>
    func.func @main(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<2x8xf32> {
      %e = tensor.empty() : tensor<4x8xf32>
      %a = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
          ins(%x, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
      ^bb0(%p: f32, %q: f32, %o: f32):
        %s = arith.addf %p, %q : f32
        linalg.yield %s : f32
      } -> tensor<4x8xf32>
      %et = tensor.empty() : tensor<8x4xf32>
      %t = linalg.transpose ins(%a : tensor<4x8xf32>) outs(%et : tensor<8x4xf32>) permutation = [1, 0]
      %s = tensor.extract_slice %t[2, 0] [4, 4] [1, 1] : tensor<8x4xf32> to tensor<4x4xf32>
      %r = tensor.collapse_shape %s [[0, 1]] : tensor<4x4xf32> into tensor<16xf32>
      %b = tensor.expand_shape %r [[0, 1]] output_shape [2, 8] : tensor<16xf32> into tensor<2x8xf32>
      %e3 = tensor.empty() : tensor<2x8xf32>
      %out = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
          ins(%b : tensor<2x8xf32>) outs(%e3 : tensor<2x8xf32>) {
      ^bb0(%p: f32, %o: f32):
        %s2 = math.exp %p : f32
        linalg.yield %s2 : f32
      } -> tensor<2x8xf32>
      return %out : tensor<2x8xf32>
    }
    """
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    ref = vtmlir.compile(text)(x, y)
    m = as_module(text)
    (ptg,) = eliminate(m.operation, AnalyticCostModel())
    assert ptg.total_saving > 0
    ops = [op.operation.name for op in m.body.operations[0].regions[0].blocks[0].operations]
    for name in ("linalg.transpose", "tensor.extract_slice", "tensor.collapse_shape",
                 "tensor.expand_shape"):
        assert name not in ops
    # The transpose, slice and both reshapes compose into one view of %a.
    views = [op for op in m.body.operations[0].regions[0].blocks[0].operations
             if op.operation.name == "vt.view"]
    assert any(len(v.operation.operands) == 1 and str(v.operation.operands[0].type) == "tensor<4x8xf32>"
               and str(v.operation.results[0].type) == "tensor<2x8xf32>" for v in views)
    got = vtmlir.compile(str(m))(x, y)
    assert torch.equal(ref, got)
    assert torch.equal(ref, torch.exp((x + y).T[2:6].reshape(2, 8)))
