"""The per-kernel CPU profiler (`compile(..., profile=True)`, `CpuExecutable.profile`; docs/codegen.md
"Profiling"): every kernel of the report is timed once, the times add up, and the profiling build
computes the same values, bitwise. No assertion here depends on how long anything takes."""

from __future__ import annotations

import pytest
import torch

import vtmlir
from vtmlir.cli.main import main
from vtmlir.errors import VtmlirError
from vtmlir.models import get
from vtmlir.models.vtc_workloads import SMALL_SIZES


def _small(name):
    return get(name).builder(batch=1, seed=0, **SMALL_SIZES[name])


def test_no_kernel_is_timed_inside_another_kernels_marks():
    """The marks nest only inside the function's: a contraction fused with its fill and epilogue
    is bracketed at its loop's place (the last member's), so a kernel the group skipped over (a copy
    between the fill and the product, EfficientViT's attention) is not timed in the group's slot
    too (its time counted twice: the kernels' sum could exceed the function's time)."""
    from torch_mlir import ir
    from vtmlir.codegen.insert_profile_marks import BEGIN, END
    from vtmlir.context import make_context
    from vtmlir.ir_utils import walk_ops
    model, inputs = get("vtc_efficientvit_block").builder(batch=2, seed=0, **SMALL_SIZES["vtc_efficientvit_block"])
    exe = vtmlir.compile(model, *inputs, opt_level=1, threads=2, profile=True)
    depth, deepest = 0, 0
    with make_context():
        module = ir.Module.parse(exe.stages["schedule"])
        for call in walk_ops(module, "func.call"):
            callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
            depth += {BEGIN: 1, END: -1}.get(callee, 0)
            deepest = max(deepest, depth)
    assert depth == 0 and deepest == 2, deepest   # the function's marks, one kernel's inside


@pytest.fixture(scope="module")
def yolo():
    model, inputs = _small("vtc_yolo_c3k2")
    return model, inputs, vtmlir.compile(model, *inputs, opt_level=0, threads=1, profile=True)


@pytest.mark.parametrize("threads", [1, 2])
def test_profile_lists_every_kernel_of_the_report_once_with_the_same_values(threads):
    model, inputs = _small("vtc_efficientvit_block")
    plain = vtmlir.compile(model, *inputs, opt_level=1, threads=threads)
    profiled = vtmlir.compile(model, *inputs, opt_level=1, threads=threads, profile=True)
    assert torch.equal(profiled(*inputs), plain(*inputs))
    with pytest.raises(VtmlirError, match="compile with profile=True"):
        plain.profile(*inputs)

    report = profiled.report().codegen
    assert [k.id for k in report.kernels] == [k.id for k in plain.report().codegen.kernels]
    p = profiled.profile(*inputs, repeat=1, warmup=0)
    assert [k.id for k in p.kernels] == [k.id for k in report.kernels]
    assert [(k.kind, k.description, k.location) for k in p.kernels] == \
        [(k.kind, k.description, k.location) for k in report.kernels]
    assert all(k.time_ns >= 0 and k.calls >= 0 for k in p.kernels)
    # one call: the kernels' marks lie inside the function's, and no two kernels overlap
    assert p.total_ns > 0 and p.kernel_ns <= p.total_ns
    assert any(k.calls > 0 for k in p.kernels)
    vectorised = {k.id for k in p.kernels if k.schedule is not None}
    assert vectorised == set(report.vectorized)
    assert p.threads == threads and p.clock == "wall" and p.mark_ns >= 0

    table = p.to_text()
    assert len([line for line in table.splitlines()[2:] if line.split()[0].isdigit()]) == len(report.kernels)
    top = p.top(3)
    assert [k.time_ns for k in top] == sorted((k.time_ns for k in p.kernels), reverse=True)[:3]
    assert p.to_dict()["kernels"][0]["id"] == 0


@pytest.mark.parametrize("threads", [1, 2])
def test_a_loop_over_row_blocks_is_timed_whole_in_its_first_reductions_slot(threads):
    # codegen-fuse-rows: LayerNorm's kernels run in one (parallel) loop over row blocks; marks inside
    # it would run on the worker threads, so the loop is bracketed once per call.
    module, x = torch.nn.LayerNorm(1024).eval(), torch.randn(64, 1024)
    plain = vtmlir.compile(module, x, threads=threads)
    profiled = vtmlir.compile(module, x, threads=threads, profile=True)
    assert "codegen.row_loop" in profiled.stages["schedule"]
    assert torch.equal(profiled(x), plain(x))
    p = profiled.profile(x, repeat=1, warmup=0)
    timed = [k for k in p.kernels if k.calls]
    reductions = ("row-reduction", "outer-reduction")  # (a row's partial sums are an outer reduction)
    assert len(timed) == 1 and timed[0].calls == 1 and timed[0].kind in reductions
    assert timed[0].id == min(k.id for k in p.kernels if k.kind in reductions)


def test_a_parallel_im2col_loop_is_timed_once_in_its_contraction_slot():
    # At two threads conv_bn_relu_residual's im2col loops over images and panels are the parallel
    # loops: each is bracketed as a whole (per kernel, both threads would time into one slot), in the
    # slot of its contraction; the panel copies inside count no calls. Opt level 1: NCHW convolutions
    # (level 2's time model lays these two out in nChw16c, one contraction call per tap).
    model, inputs = get("conv_bn_relu_residual").build(batch=8, seed=0)
    plain = vtmlir.compile(model, *inputs, threads=2, opt_level=1)
    profiled = vtmlir.compile(model, *inputs, threads=2, profile=True, opt_level=1)
    assert torch.equal(profiled(*inputs), plain(*inputs))
    p = profiled.profile(*inputs, repeat=1, warmup=0)
    contractions = [k for k in p.kernels if k.kind == "contraction"]
    assert len(contractions) == 2 and all(k.calls == 1 for k in contractions)
    assert sum(k.kind == "data-movement" and k.calls == 0 for k in p.kernels) == 2
    assert p.kernel_ns <= p.total_ns


def test_repeated_profile_reports_medians_and_the_call_time(yolo):
    model, inputs, exe = yolo
    p = exe.profile(*inputs, repeat=3, clock="cpu")
    assert p.repeat == 3 and p.clock == "cpu" and p.total_ns > 0
    assert any(k.calls > 1 for k in p.kernels)
    # the calls per kernel do not depend on the repeat; a kernel in a per-tap loop runs more than once
    assert [k.calls for k in exe.profile(*inputs, repeat=1).kernels] == [k.calls for k in p.kernels]
    assert abs(sum(k.share for k in p.kernels) - p.kernel_ns / p.total_ns) < 1e-9
    assert exe(*inputs).shape == model(*inputs).shape  # an ordinary call still works


def test_profile_errors(yolo):
    model, inputs, profiled = yolo
    with pytest.raises(VtmlirError, match="repeat must be a positive integer"):
        profiled.profile(*inputs, repeat=0)
    with pytest.raises(VtmlirError, match="unknown clock 'gpu'"):
        profiled.profile(*inputs, clock="gpu")
    with pytest.raises(VtmlirError, match="applies to target='cpu'"):
        vtmlir.compile(model, *inputs, target="cuda", profile=True)
    with pytest.raises(VtmlirError, match="profile must be True or False"):
        vtmlir.compile(model, *inputs, profile="yes")


def test_cli_profile_prints_the_table(capsys, tmp_path):
    source = tmp_path / "mm.mlir"
    source.write_text(
        "func.func @main(%a: tensor<16x32xf32>, %b: tensor<32x8xf32>) -> tensor<16x8xf32> {\n"
        "  %z = arith.constant 0.0 : f32\n"
        "  %e = tensor.empty() : tensor<16x8xf32>\n"
        "  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x8xf32>) -> tensor<16x8xf32>\n"
        "  %m = linalg.matmul ins(%a, %b : tensor<16x32xf32>, tensor<32x8xf32>) outs(%f : tensor<16x8xf32>)"
        " -> tensor<16x8xf32>\n"
        "  return %m : tensor<16x8xf32>\n}\n")
    assert main(["compile", str(source), "--profile", "2", "--threads", "1", "--emit", "stages"]) == 0
    err = capsys.readouterr().err
    assert "median of 2 calls, 1 thread" in err
    assert "contraction 16x8x32" in err
