"""The measured cost model (`vtc/measured_cost.py`, issue 3 point 4): VTC Alg. 2 with w(e) from
kernels timed on the CPU, re-profiling the edges into the newly anchored node (lines 18–19).

No timing is asserted (the machine is shared): the tests check that the decision is valid (chosen
edges conflict-free, a mapping for each, the rewrite bitwise identical), that every edge was
profiled, that the chain's slice edge is re-profiled once the transpose it reads is anchored virtual,
that kernels are cached by signature, and the errors.
"""

import pytest
import torch

import vtmlir
from vtmlir.backend.cuda.runtime import cuda_available
from vtmlir.frontend import as_module
from vtmlir.passes.pipeline import run_pipeline
from vtmlir.vtc.eliminate_data_movement import eliminate
from vtmlir.vtc.measured_cost import KernelTimer, MeasuredCostModel

# transpose -> slice -> exp·2: the slice's edge points at the transpose's result; once that result is
# anchored as a view of %a, the slice edge's mapping is composed through it and timed again. The
# reader's body uses a constant from above (as imported linalg bodies do): cloned into its kernel.
CHAIN = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<16x32xf32>, %y: tensor<16x32xf32>) -> tensor<8x16xf32> {
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %a = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<16x32xf32>, tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  %et = tensor.empty() : tensor<32x16xf32>
  %t = linalg.transpose ins(%a : tensor<16x32xf32>) outs(%et : tensor<32x16xf32>) permutation = [1, 0]
  %s = tensor.extract_slice %t[4, 0] [8, 16] [1, 1] : tensor<32x16xf32> to tensor<8x16xf32>
  %e3 = tensor.empty() : tensor<8x16xf32>
  %out = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<8x16xf32>) outs(%e3 : tensor<8x16xf32>) {
  ^bb0(%p: f32, %o: f32):
    %r0 = math.exp %p : f32
    %r = arith.mulf %r0, %two : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}
"""


def _model():
    # -O0 and 2 samples: a third of the JIT time; the decision only needs consistent timings.
    return MeasuredCostModel(timer=KernelTimer("cpu", repeat=2, opt_level=0), progress=False)


def test_measured_greedy_makes_a_valid_decision_and_reprofiles():
    model = _model()
    m = as_module(CHAIN)
    (ptg,) = eliminate(m.operation, model)
    assert ptg.cost_model == "measured"
    g = ptg.graph
    for node, edges in ptg.chosen.items():
        assert g.compatible(edges)
        for c in ptg.choices:
            if c.node == node:
                assert all(c.weights[e.id].mapping is not None for e in edges)
                assert abs(sum(c.weights[e.id].value for e in edges) - c.saving) < 1e-6
    # Alg. 2 line 6: every edge weighed once; lines 18-19: the slice edge again after the transpose
    # result was anchored (its mapping now composed down to %a: a different kernel).
    slice_lines = [line for line in model.log if " slice:" in line]
    transpose_lines = [line for line in model.log if " transpose:" in line]
    assert transpose_lines
    if ptg.chosen.get(g.by_name("%transposed").id):
        assert len(slice_lines) == 2
    profiled = model.timer.profiled
    assert profiled >= 4
    assert not any("not timed" in line for line in model.log)

    # The rewritten IR computes bit for bit what the original does.
    x, y = torch.randn(16, 32), torch.randn(16, 32)
    ref = vtmlir.compile(CHAIN, opt_level=0, llvm_opt_level=0)(x, y)
    got = vtmlir.compile(str(m), opt_level=0, llvm_opt_level=0)(x, y)
    assert torch.equal(ref, got)
    torch.testing.assert_close(ref, 2 * torch.exp((x + y).T[4:12]))

    # Same graph again with the same model: every kernel comes from the cache.
    eliminate(as_module(CHAIN).operation, model)
    assert model.timer.profiled == profiled
    assert model.timer.cached > 0
    assert "kernels timed" in model.summary()


@pytest.mark.skipif(cuda_available(), reason="a GPU is present: the CUDA timer works here")
def test_cuda_target_without_gpu_is_a_clear_error():
    with pytest.raises(vtmlir.VtmlirError, match="has none"):
        MeasuredCostModel("cuda")
    m = as_module(CHAIN)
    with pytest.raises(vtmlir.VtmlirError, match="target 'cuda' times kernels on an NVIDIA GPU"):
        run_pipeline(m, "vt-eliminate-data-movement{cost-model=measured target=cuda}")


def test_unknown_cost_model_lists_measured():
    with pytest.raises(vtmlir.VtmlirError, match="expected one of analytic, measured"):
        run_pipeline(as_module(CHAIN), "vt-eliminate-data-movement{cost-model=profiled}")
