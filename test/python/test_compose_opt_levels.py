"""The default optimisation pipeline (issue 23, `vtmlir.optimize`, docs/pipeline.md).

Semantics: at every opt level a model computes what it computes at opt level 0 -- bitwise where only
data movement and layouts change (VTC, VTensor; compiled with `EXACT_SCHEDULES` so that no
reassociating schedule depends on which loop a view or layout makes innermost), within `TEMCO_RTOL` /
`TEMCO_ATOL` where TeMCO's fused loops sum a decomposed network's convolutions in another order than
the scheduled convolutions, and `LOWBIT_RTOL` / `LOWBIT_ATOL` where Tilus' fused low-bit matmul sums
in another order than the dequantised matmul. The default suite runs a sample (one model per
system); `-m slow` runs every model of `ZOO`, `VTC_ZOO`, `TEMCO_ZOO` and `LAYOUT_ZOO` and the
quantised layers.
"""

from __future__ import annotations

import pytest
import torch

import vtmlir
from vtmlir.codegen import EXACT_SCHEDULES
from vtmlir.models import LAYOUT_ZOO, TEMCO_ZOO, VTC_ZOO, ZOO, get
from vtmlir.models.temco_nets import TEMCO_MODELS
from vtmlir.models.vtc_workloads import SMALL_SIZES
from vtmlir.optimize import LAID_OUT, optimize, plan

# TeMCO fusion: fp32 sums of a few hundred products in another order (measured max |diff| <= 2e-6
# on outputs of magnitude ~1 for the TEMCO_ZOO models).
TEMCO_RTOL, TEMCO_ATOL = 1e-4, 1e-5
# Tilus: the fused dequantise-multiply sums each group in another order than the dequantised matmul.
LOWBIT_RTOL, LOWBIT_ATOL = 1e-5, 1e-5


def _flat(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _flat(o)]
    to_tuple = getattr(out, "to_tuple", None)
    return [t for o in to_tuple() for t in _flat(o)] if to_tuple else [torch.as_tensor(out)]


def _zoo_case(name):
    """(what to compile, inputs) at test size: VTC workloads at SMALL_SIZES, TeMCO models decomposed
    (`temco-decompose`, MLIR text) at their smallest image, the rest as built."""
    if name in VTC_ZOO:
        return get(name).builder(batch=1, seed=0, **SMALL_SIZES[name])
    if name in TEMCO_ZOO:
        from vtmlir.passes import run_pipeline

        torch.manual_seed(0)
        model, inputs = TEMCO_ZOO[name].builder(batch=1, size=TEMCO_MODELS[name][2])
        graph = vtmlir.import_torch(model, *inputs)
        run_pipeline(graph, "temco-decompose, temco-fold-weight-ops")
        return str(graph), inputs
    if name.startswith("quantized_"):
        # group 4: the Llama layer's down projection reads 172 features (172 = 4 x 43).
        base, dtype = name.removeprefix("quantized_").rsplit("_", 1)
        model, inputs = get(base).build(batch=1, seed=0)
        return vtmlir.quantize(model, dtype, group_size=4), inputs
    return get(name).build(batch=1, seed=0)


def _compile(subject, inputs, level, **kw):
    kw = dict(opt_level=level, schedules=EXACT_SCHEDULES, llvm_opt_level=0, **kw)
    if isinstance(subject, str):
        return vtmlir.compile(subject, **kw)
    return vtmlir.compile(subject, *inputs, **kw)


def check_levels_agree(name):
    subject, inputs = _zoo_case(name)
    reference = _compile(subject, inputs, 0)
    want = [t.clone() for t in _flat(reference(*inputs))]
    assert reference.report().optimization.steps == []
    planned = {}
    for level in (1, 2):
        compiled = _compile(subject, inputs, level)
        systems = tuple(s.step.system for s in compiled.report().optimization.steps)
        planned[level] = systems
        got = _flat(compiled(*inputs))
        assert len(got) == len(want)
        for w, g in zip(want, got):
            if "temco" in systems:
                torch.testing.assert_close(g, w, rtol=TEMCO_RTOL, atol=TEMCO_ATOL)
            elif "lowbit" in systems:
                torch.testing.assert_close(g, w, rtol=LOWBIT_RTOL, atol=LOWBIT_ATOL)
            else:
                assert torch.equal(g, w), f"{name} at opt level {level} ({systems}) is not bitwise opt level 0's"
    return planned


# One model per system; the quantised layers (minutes per compile of the vector low-bit loops at
# LLVM -O0) run in the slow test, test_lowbit_subbyte.py covers the default lowering's numerics.
SAMPLE = ["llama_decoder_layer", "vtc_shufflenet_unit", "resnet_basic_block", "temco_vgg11"]


@pytest.mark.parametrize("name", SAMPLE)
def test_opt_levels_agree_with_level_0(name):
    planned = check_levels_agree(name)
    expected = {"llama_decoder_layer": "vtc", "vtc_shufflenet_unit": "vtc", "resnet_basic_block": "vtc",
                "temco_vgg11": "temco"}[name]
    assert expected in planned[2], planned


ALL = [*ZOO, *VTC_ZOO, *TEMCO_ZOO, *LAYOUT_ZOO, "quantized_mlp_u4", "quantized_mlp_i8",
       "quantized_llama_decoder_layer_u4"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_opt_levels_agree_with_level_0_every_model(name):
    check_levels_agree(name)


class _ConvStack(torch.nn.Module):
    """`n` convolutions with ReLUs (`channels` in and out, `kernel` x `kernel`, same padding)."""

    def __init__(self, n, channels, kernel):
        super().__init__()
        self.convs = torch.nn.ModuleList(
            torch.nn.Conv2d(channels, channels, kernel, padding=kernel // 2) for _ in range(n))

    def forward(self, x):
        for conv in self.convs:
            x = torch.relu(conv(x))
        return x


def test_plan_by_level_and_graph():
    model, inputs = get("resnet_basic_block").build()
    graph = vtmlir.import_torch(model, *inputs)
    assert plan(graph, opt_level=0)[0] == []
    level1, skipped1 = plan(graph, opt_level=1)
    assert "layouts" not in [s.system for s in level1] and skipped1["layouts"] == "opt level < 2"
    level2, _ = plan(graph, opt_level=2)
    # Layouts first (docs/pipeline.md); the ILP's time model decides whether anything changes.
    assert [s.system for s in level2] == ["layouts", "vtc"] and "cost=time" in level2[0].pipeline
    budget, _ = plan(graph, opt_level=1, memory_budget=1 << 20)
    assert [s.system for s in budget] == ["temco"]
    # CUDA: VTC (its 128-byte transfer unit); no layout time model for the GPU kernels yet.
    cuda, cuda_skipped = plan(graph, target="cuda")
    assert [s.pipeline for s in cuda] == ["vt-eliminate-data-movement{target=cuda}"]
    assert cuda_skipped["layouts"].startswith("no layout time model for the cuda kernels")
    with pytest.raises(vtmlir.VtmlirError, match="unknown target 'tpu'"):
        plan(graph, target="tpu")
    with pytest.raises(vtmlir.VtmlirError, match="opt_level must be one of 0, 1, 2"):
        plan(graph, opt_level=3)


def _layout_step(model, x):
    graph = vtmlir.import_torch(model.eval(), x)
    before = str(graph)
    (step,) = optimize(graph, opt_level=2, only=("layouts",)).steps
    return step, before, str(graph)


def test_layout_cost_model_keeps_a_small_block_nchw():
    # A VTC-like block: its NCHW input and output would be converted (transposing copies) around
    # two 1x1 convolutions of a 32x32 image, whose NCHW kernels fill every vector lane already.
    torch.manual_seed(0)
    step, before, after = _layout_step(_ConvStack(2, 32, 1), torch.randn(1, 32, 32, 32))
    assert step.unchanged and not step.failed
    assert step.measures[LAID_OUT] == (0, 0)
    row_major, chosen = step.measures["time model, us (all row-major -> chosen)"]
    assert chosen == row_major
    assert after == before  # no attribute, no conversion, no generalised convolution: no change at all


def test_layout_cost_model_lays_out_a_deep_stack_and_stays_bitwise():
    # Sixteen 3x3 convolutions of 64 channels on a 2x2 image: NCHW vectorises along the image's
    # 4 pixels (a quarter of the lanes), nChw16c along 16 channels; the two conversions amortise.
    torch.manual_seed(0)
    model, x = _ConvStack(16, 64, 3).eval(), torch.randn(1, 64, 2, 2)
    step, before, after = _layout_step(model, x)
    assert not step.unchanged and step.measures[LAID_OUT][1] >= 16
    row_major, chosen = step.measures["time model, us (all row-major -> chosen)"]
    assert chosen < row_major and after != before
    want = _compile(model, [x], 0)(x)
    compiled = _compile(model, [x], 2)
    assert [s.step.system for s in compiled.report().optimization.steps][0] == "layouts"
    assert torch.equal(compiled(x), want)


def test_report_lists_each_step_and_the_kernels():
    model, inputs = get("vtc_llama3_decode").builder(batch=1, seed=0, **SMALL_SIZES["vtc_llama3_decode"])
    compiled = vtmlir.compile(model, *inputs, report=True, llvm_opt_level=0)
    report = compiled.report()
    (step,) = report.optimization.steps
    before, after = step.measures["data-movement ops"]
    assert after < before and step.measures["data-movement bytes"][1] < step.measures["data-movement bytes"][0]
    assert "points-to @main" in step.reports["vt-eliminate-data-movement"]
    peak_before, peak_after = report.optimization.peak_internal
    assert peak_after < peak_before
    text = str(report)
    assert "vtc: vt-eliminate-data-movement" in text and "peak internal memory" in text
    assert "codegen:" in text and report.kernels  # the codegen report reads through
    assert "vtc" in compiled.stages


def test_user_pipeline_replaces_the_graph_steps():
    model, inputs = get("llama_decoder_layer").build()
    compiled = vtmlir.compile(model, *inputs, pipeline="canonicalize", llvm_opt_level=0)
    opt = compiled.report().optimization
    assert opt.steps == [] and opt.skipped["vtc"] == "replaced by the user's pipeline"
    assert "optimized" in compiled.stages and "vtc" not in compiled.stages


def test_bad_options_are_clear_errors():
    model, inputs = get("mlp").build()
    with pytest.raises(vtmlir.VtmlirError, match="opt_level must be one of"):
        vtmlir.compile(model, *inputs, opt_level=5)
    with pytest.raises(vtmlir.VtmlirError, match="memory_budget must be a positive number"):
        vtmlir.compile(model, *inputs, memory_budget=-1)


SCALAR_BROADCAST = """
#map = affine_map<(d0, d1) -> ()>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<2x3xf32>, %s: f32) -> tensor<2x3xf32> {
  %e = tensor.empty() : tensor<2x3xf32>
  %b = linalg.generic {indexing_maps = [#map, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : f32) outs(%e : tensor<2x3xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x3xf32>
  %t = tensor.empty() : tensor<3x2xf32>
  %tr = linalg.transpose ins(%x : tensor<2x3xf32>) outs(%t : tensor<3x2xf32>) permutation = [1, 0]
  %r = tensor.empty() : tensor<2x3xf32>
  %back = linalg.transpose ins(%tr : tensor<3x2xf32>) outs(%r : tensor<2x3xf32>) permutation = [1, 0]
  %o = linalg.add ins(%back, %b : tensor<2x3xf32>, tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  return %o : tensor<2x3xf32>
}
"""


def test_default_pipeline_takes_a_broadcast_scalar():
    """A generic yielding a scalar operand (a fill by a scalar) is no view for VTC's catalogue; the
    default pipeline crashed on it (test_layout_hoist's graphs)."""
    x = torch.randn(2, 3)
    s = torch.tensor(1.5)
    want = vtmlir.compile(SCALAR_BROADCAST, opt_level=0, llvm_opt_level=0)(x, s)
    compiled = vtmlir.compile(SCALAR_BROADCAST, llvm_opt_level=0)
    assert [d.step.system for d in compiled.report().optimization.steps] == ["vtc"]
    assert torch.equal(compiled(x, s), want)


@pytest.mark.slow
def test_dynamic_shapes_run_every_shape_in_the_range_without_recompiling():
    """`compile(..., dynamic_shapes=...)`: one callable through DVM for every batch in [1, 8] (prebuilt:
    8 shapes), the static path where no dim is dynamic. ~1-2 min (the native VM's JIT)."""
    from torch.export import Dim

    from vtmlir.dynamic import DynamicExecutable

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    x = torch.randn(4, 16)
    compiled = vtmlir.compile(model, x, dynamic_shapes={"input": {0: Dim("batch", min=1, max=8)}})
    assert isinstance(compiled, DynamicExecutable) and compiled.prebuilt["points"] == 8
    for batch in (1, 3, 8, 3):
        xb = torch.randn(batch, 16)
        with torch.no_grad():
            torch.testing.assert_close(compiled(xb), model(xb), rtol=1e-5, atol=1e-6)
    text = str(compiled.report())
    assert "dvm (dynamic shapes)" in text and "batch in [1, 8]" in text
    # a never-seen batch inside the prebuilt range fills its words: no template is traced
    templates = compiled.function.template_count()
    compiled(torch.randn(6, 16))
    assert compiled.function.template_count() == templates
    # GELU's erf runs as the static path's polynomial (test_dvm_fuse.py measures its ulp)
    gelu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()
    dyn = vtmlir.compile(gelu, x, dynamic_shapes={"input": {0: Dim("batch", min=1, max=8)}}, threads=1)
    for batch in (2, 7):
        xb = torch.randn(batch, 16)
        with torch.no_grad():
            torch.testing.assert_close(dyn(xb), gelu(xb), rtol=1e-5, atol=1e-6)
    static = vtmlir.compile(model, x, dynamic_shapes={"input": {0: Dim.STATIC}}, llvm_opt_level=0)
    assert not isinstance(static, DynamicExecutable)
    # target="cuda": DVM's PTX VM (test_dvm_cuda.py); an unknown chip is refused before any work
    with pytest.raises(vtmlir.VtmlirError, match="unsupported CUDA chip"):
        vtmlir.compile(model, x, target="cuda", chip="sm_1", dynamic_shapes={"input": {0: Dim("batch", min=1, max=8)}})


def test_a_failing_step_leaves_the_graph_as_it_was():
    """A step runs on a copy: a pass that refuses the graph (here a bad option, as a pass refusing
    what an earlier step made would) leaves it untouched and the report says why."""
    from vtmlir.optimize import Step, run_step

    module = vtmlir.as_module(SCALAR_BROADCAST)
    before = str(module)
    result = run_step(module, Step("vtc", "vt-eliminate-data-movement{cost-model=guess}", "test"))
    assert "cost-model" in result.failed or "guess" in result.failed
    assert str(module) == before
    done = run_step(module, Step("vtc", "vt-eliminate-data-movement", "test", then="vt-lower-views"))
    assert not done.failed and done.measures["data-movement ops"] == (3, 1)  # the broadcast stays
    assert "linalg.transpose" not in str(module)


def test_cli_opt_level_and_report(tmp_path, capsys):
    from vtmlir.cli.main import main

    path = tmp_path / "t.mlir"
    path.write_text(SCALAR_BROADCAST)
    assert main(["compile", str(path), "-O", "0", "--report", "--llvm-opt-level", "0", "--emit", "stages"]) == 0
    out, err = capsys.readouterr()
    assert "vtc" not in out.split() and "opt level 0 (cpu): 0 step(s)" in err
    assert main(["compile", str(path), "-O", "1", "--report", "--llvm-opt-level", "0", "--emit", "vtc"]) == 0
    out, err = capsys.readouterr()
    assert "linalg.transpose" not in out and "vtc: vt-eliminate-data-movement" in err and "codegen:" in err
