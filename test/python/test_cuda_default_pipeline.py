"""The default pipeline on CUDA (issue 23, docs/pipeline.md "CUDA"): VTC's data-movement elimination
runs from opt level 1, its views keep the GPU schedules (checked statically: no GPU here), and the
graph it leaves computes bitwise what opt level 0 computes."""

from __future__ import annotations

import collections

import pytest
import torch

import vtmlir
from vtmlir.codegen import EXACT_SCHEDULES
from vtmlir.models import get
from vtmlir.models.vtc_workloads import SMALL_SIZES
from vtmlir.optimize import optimize, plan

from test_compose_opt_levels import _flat
from test_cuda_schedules import ARCHS, _check_resources


def _vtc_case(name, dtype=torch.float32, batch=2):
    model, inputs = get(name).builder(batch=batch, seed=0, **SMALL_SIZES[name])
    model = model.eval().to(dtype)
    return model, tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)


def _schedules(compiled) -> collections.Counter:
    return collections.Counter(k.schedule for k in compiled.report().kernels)


@pytest.mark.parametrize("name, dtype", [("vtc_llama3_decode", torch.float32),
                                         ("vtc_shufflenet_unit", torch.float32),
                                         ("vtc_efficientvit_block", torch.float16)])
def test_cuda_default_graph_is_bitwise_level_0(name, dtype):
    """The graph the CUDA default pipeline leaves, run by the CPU backend with exact schedules,
    equals opt level 0 bitwise (VTC with CUDA's 128-byte transfer unit picks its own views;
    EfficientViT in f16: its multi-scale concat's producers write the concat buffer)."""
    model, inputs = _vtc_case(name, dtype)
    graph = vtmlir.import_torch(model, *inputs)
    report = optimize(graph, target="cuda")
    assert [s.step.system for s in report.steps] == ["vtc"] and not report.steps[0].failed
    moved = report.steps[0].measures["data-movement ops"]
    assert moved[1] < moved[0], moved
    exact = dict(opt_level=0, schedules=EXACT_SCHEDULES, llvm_opt_level=0)
    got = _flat(vtmlir.compile(str(graph), **exact)(*inputs))
    want = _flat(vtmlir.compile(model, *inputs, **exact)(*inputs))
    assert len(got) == len(want) and all(torch.equal(g, w) for g, w in zip(got, want))


def test_cuda_views_keep_tensor_cores():
    """Llama decode's attention reads the KV cache's heads through VTC views (`h floordiv 2`: grouped
    query heads, no repeat_kv copy). `codegen-delinearize-loops` in the CUDA schedule stage gives the
    kernel a loop per view dimension, so both attention products stay tensor-core contractions (they
    were a 'pooling' kernel on one thread per block and a naive one); nothing falls back to the
    naive mapping that opt level 0 does not have, and every kernel assembles without spills."""
    model, inputs = _vtc_case("vtc_llama3_decode", torch.float16, batch=16)
    level0 = vtmlir.compile(model, *inputs, target="cuda", opt_level=0)
    level2 = vtmlir.compile(model, *inputs, target="cuda")
    assert [s.step.system for s in level2.report().optimization.steps] == ["vtc"]
    before, after = _schedules(level0), _schedules(level2)
    assert sum(after.values()) < sum(before.values()), (before, after)
    assert after["mma-sync"] >= before["mma-sync"] and after["naive"] <= before["naive"], (before, after)
    assert not any(p.kind == "pooling" for p in level2.plans), [p.description for p in level2.plans]
    assert level2.report().h100_estimate_s < level0.report().h100_estimate_s
    for kernel in level2.kernels:
        for arch in ARCHS:
            _check_resources(kernel, arch)


def test_cuda_efficientvit_runs_no_more_kernels_than_level_0():
    """EfficientViT's q, k and v are slices of the multi-scale concat. As views of the concat's
    two inputs, each reader ran once per piece (two kernels: 3 more than level 0 in f16); on CUDA
    the concat's producers write its buffer instead (`concat_stores.split_reader`), so level 2 runs
    no more kernels than level 0 (two fewer: the concat's copies are gone) at a lower estimate."""
    model, inputs = _vtc_case("vtc_efficientvit_block", torch.float16, batch=1)
    level0 = vtmlir.compile(model, *inputs, target="cuda", opt_level=0).report()
    level2 = vtmlir.compile(model, *inputs, target="cuda").report()
    assert len(level2.kernels) <= len(level0.kernels), (len(level0.kernels), len(level2.kernels))
    assert level2.h100_estimate_s <= level0.h100_estimate_s
    assert "would run (or gather it) once per piece" in level2.optimization.steps[0].to_text()
    assert level2.naive_contractions == [], [k.description for k in level2.naive_contractions]


def test_cuda_plan_leaves_out_what_is_not_for_the_gpu():
    """No layout time model for the GPU kernels: layouts stay off; TeMCO's fused groups are one
    thread per tile on the GPU: only with a memory budget; Tilus takes the portable lowering (the
    Tilus kernels' input), not the CPU's vector loops."""
    model, inputs = get("resnet_basic_block").build()
    graph = vtmlir.import_torch(model, *inputs)
    steps, skipped = plan(graph, target="cuda", opt_level=2)
    assert [s.system for s in steps] == ["vtc"] and "target=cuda" in steps[0].pipeline
    assert "layout time model" in skipped["layouts"]
    budget, _ = plan(graph, target="cuda", opt_level=1, memory_budget=1 << 20)
    assert [s.system for s in budget] == ["temco"]
    assert plan(graph, target="cuda", opt_level=0)[0] == []


@pytest.mark.parametrize("batch", [1, 16])
def test_cuda_vtc_stores_and_views_keep_f32_contractions_off_the_naive_mapping(batch):
    """Full-size f32 Llama decode through VTC: the K and V projections store into one position of
    the caches (a unit loop only C reads: an outer tile of 1, or at batch 1 a `gemv` whose unit m
    a strided view keeps), and the grouped-query `P V` (m = 4) takes the next SIMT tiling where the
    cheapest cannot spread its B tile over its 4 threads. Each of these was the naive mapping."""
    model, inputs = get("vtc_llama3_decode").build(batch=batch, seed=0)
    compiled = vtmlir.compile(model.eval(), *inputs, target="cuda")
    assert [s.step.system for s in compiled.report().optimization.steps] == ["vtc"]
    report = compiled.report()
    assert report.naive_contractions == [], [(k.description, k.detail) for k in report.naive_contractions]
    schedules = _schedules(compiled)
    assert schedules["simt"] >= 2 and (batch > 1 or schedules["gemv"] >= 5), schedules


def test_a_tiny_f32_contraction_takes_a_smaller_register_tile_not_the_naive_mapping():
    """llama_decoder_layer's per-head `q k^T` in f32 (batch 2 x heads 2, m 2, n 8, k 16, q read through
    a strided view): the cheapest SIMT tiling, one thread with a 2x8 register tile, cannot copy a
    2x16 tile of a strided operand; a 2x2 register tile's four threads can."""
    model, inputs = get("llama_decoder_layer").build(batch=1, seed=0)
    compiled = vtmlir.compile(model.eval(), *inputs, target="cuda", opt_level=0)
    assert compiled.report().naive_contractions == []


@pytest.mark.parametrize("half, bias", [(False, True), (True, False)])
def test_cuda_default_lowers_quantised_weights_to_tilus_kernels(half, bias):
    """A quantised Linear compiled for CUDA with no pipeline: the Tilus step runs its portable
    lowering and the schedule stage gives the fused matmul a Tilus kernel (no naive contraction);
    also a half Linear without a bias (Llama's), whose matmul widens f16 operands into f32 sums."""
    from vtmlir.lowbit import quantize

    model = quantize(torch.nn.Linear(64, 32, bias=bias), dtype="u4", group_size=16).eval()
    x = torch.randn(16, 64)
    if half:
        model, x = model.half(), x.half()
    graph = vtmlir.import_torch(model, x)
    steps, _ = plan(graph, target="cuda", opt_level=1)
    assert (steps[0].system, steps[0].pipeline) == ("lowbit", "subbyte-pack, subbyte-lower"), steps
    compiled = vtmlir.compile(model, x, target="cuda")
    schedules = _schedules(compiled)
    tilus = schedules["tilus-mma" if half else "tilus-fma"]
    assert tilus == 1 and not compiled.report().naive_contractions, schedules


STRIDED_SLICE = """
#sin = affine_map<(d0, d1, d2, d3) -> (d0, d1 * 48 + d2 + 32, d3)>
#sout = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @main(%x: tensor<1x384x8xf32>) -> tensor<1x8x16x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x16x8xf32>
  %r = linalg.generic {indexing_maps = [#sin, #sout], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : tensor<1x384x8xf32>) outs(%e : tensor<1x8x16x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x8x16x8xf32>
  return %r : tensor<1x8x16x8xf32>
}
"""


def test_a_strided_slice_through_a_view_is_a_vector_kernel():
    """A kernel reading 16 of every 48 channels through a VTC view (EfficientViT's multi-scale q, k,
    v in f16 on CUDA): `codegen-delinearize-loops` views the channels as (8, 48) digits and slices
    each, so the CUDA kernel is a `vector` one (it was `threads`: no projected permutation), and the
    CPU, which runs the same pass, computes the slice exactly."""
    x = torch.randn(1, 384, 8)
    got = vtmlir.compile(STRIDED_SLICE)(x)
    assert torch.equal(torch.as_tensor(got), torch.relu(x.reshape(1, 8, 48, 8)[:, :, 32:48, :]))
    cuda = vtmlir.compile(STRIDED_SLICE, target="cuda")
    assert [k.schedule for k in cuda.report().kernels] == ["vector"]


def test_a_fused_kernel_whose_schedule_fails_unfused_too_keeps_the_naive_mapping(monkeypatch):
    """A schedule that fails in a fused kernel is retried without its fusion, then (it failing again:
    a row group's leader is fused but no contraction) left to the naive mapping: the compile
    ends, with the kernel reported. (The second failure used to be retried unfused again, forever.)"""
    import vtmlir.backend.cuda as cuda
    from vtmlir.backend.cuda.lower import ScheduleFailure

    real = cuda.lower_to_nvvm
    calls = []

    def failing(module, *, exclude, unfused, **kw):
        calls.append((list(exclude), list(unfused)))
        assert len(calls) <= 3, calls
        if 0 not in exclude:
            raise ScheduleFailure(0, "kernel 0: injected failure", fused=True)
        return real(module, exclude=exclude, unfused=unfused, **kw)

    monkeypatch.setattr(cuda, "lower_to_nvvm", failing)
    model, inputs = get("mlp").build(batch=1, seed=0)
    compiled = vtmlir.compile(model.eval(), *inputs, target="cuda", opt_level=0)
    assert calls == [([], []), ([], [0]), ([0], [0])]
    assert any(p.id == 0 and p.schedule is None for p in compiled.plans)
