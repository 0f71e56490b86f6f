"""The CPU code generation strategy layer (vtmlir.codegen): classification, schedules, threads,
the kernel report, and the numerics each schedule promises (docs/codegen.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch_mlir import ir

import vtmlir
from vtmlir.codegen import KernelKind, classify, resolve_schedules
from vtmlir.codegen.kernels import structured_ops
from vtmlir.codegen.schedules import PARALLEL_MIN_ITERATIONS
from vtmlir.context import make_context
from vtmlir.errors import VtmlirError
from vtmlir.models import ZOO

_KERNELS = """
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#bt = affine_map<(d0, d1, d2) -> (d1, d2)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#in = affine_map<(n, f, h, w, c, kh, kw) -> (n, c, h + kh, w + kw)>
#wt = affine_map<(n, f, h, w, c, kh, kw) -> (f, c, kh, kw)>
#out = affine_map<(n, f, h, w, c, kh, kw) -> (n, f, h, w)>
func.func @k(%A: memref<8x32xf32>, %W: memref<16x32xf32>, %C: memref<8x16xf32>, %T: memref<16x8xf32>,
             %R: memref<8xf32>, %K: memref<16xf32>, %X: memref<1x4x10x10xf32>, %F: memref<8x4x3x3xf32>,
             %Y: memref<1x8x8x8xf32>) {
  linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %W : memref<8x32xf32>, memref<16x32xf32>) outs(%C : memref<8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%C : memref<8x16xf32>) outs(%T : memref<16x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%C : memref<8x16xf32>) outs(%C : memref<8x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%C : memref<8x16xf32>) outs(%R : memref<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.maximumf %x, %o : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%C : memref<8x16xf32>) outs(%K : memref<16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#in, #wt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%X, %F : memref<1x4x10x10xf32>, memref<8x4x3x3xf32>) outs(%Y : memref<1x8x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}
"""


def _kernels():
    module = ir.Module.parse(_KERNELS, context=make_context())
    return [classify(op) for op in structured_ops(module.operation)]


def test_classification_reads_the_generics_the_bufferizer_leaves():
    linear, transpose, exp, row_max, col_sum, conv = _kernels()
    assert linear.kind is KernelKind.CONTRACTION and linear.b_transposed  # x @ W^T, as nn.Linear imports
    assert (linear.m, linear.n, linear.k, linear.loop_ranges) == ((0,), (1,), (2,), (8, 16, 32))
    assert transpose.kind is KernelKind.DATA_MOVEMENT
    assert exp.kind is KernelKind.ELEMENTWISE
    assert row_max.kind is KernelKind.REDUCTION and row_max.innermost_is_reduction
    assert col_sum.kind is KernelKind.REDUCTION and not col_sum.innermost_is_reduction
    assert conv.kind is KernelKind.CONVOLUTION and conv.n == (1,) and set(conv.k) == {4, 5, 6}


_UNIT_K = """
#a = affine_map<(n, g, f, w, c, kh, kw) -> (n, g, c, w, kh, kw)>
#b = affine_map<(n, g, f, w, c, kh, kw) -> (g, f, c, kh, kw)>
#o = affine_map<(n, g, f, w, c, kh, kw) -> (n, g, f, w)>
func.func @grouped_1x1(%X: memref<1x12x16x32x1x1xf32>, %W: memref<12x16x16x1x1xf32>, %Y: memref<1x12x16x32xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #o],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%X, %W : memref<1x12x16x32x1x1xf32>, memref<12x16x16x1x1xf32>) outs(%Y : memref<1x12x16x32xf32>) {
  ^bb0(%x: f32, %w: f32, %o: f32):
    %m = arith.mulf %x, %w : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}
"""


def test_a_contractions_register_k_is_a_reduction_of_more_than_one_trip():
    # A grouped 1x1 convolution read through a VTC view (efficientvit): a plain contraction whose
    # innermost reductions, kh and kw, have one trip. The schedule's register-tile k is k[-1]: the
    # 16 channels, not kw (then every channel was a packed panel of its own: 7x slower).
    module = ir.Module.parse(_UNIT_K, context=make_context())
    (kernel,) = [classify(op) for op in structured_ops(module.operation)]
    assert kernel.kind is KernelKind.CONTRACTION
    assert kernel.k == (5, 6, 4) and kernel.loop_ranges[kernel.k[-1]] == 16


def _compile(model, *inputs, **options):
    # The codegen layer alone: opt level 0 (layout selection would add blocked pad kernels).
    return vtmlir.compile(model, *inputs, **{"opt_level": 0, **options})


class _MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


@pytest.mark.parametrize("shape", [(64, 48, 40), (37, 50, 29)])  # divisible, and ragged edges everywhere
def test_matmul_schedule_is_bitwise_the_scalar_loops_without_fma(shape):
    m, n, k = shape
    a, b = torch.randn(m, k), torch.randn(k, n)
    vectorised = _compile(_MatMul(), a, b, threads=1, schedules={"contraction": {"fma": False}})
    loops = _compile(_MatMul(), a, b, threads=1, schedules={"contraction": None})
    assert [p.kind for p in vectorised.report().kernels if p.id in vectorised.report().vectorized] \
        == ["data-movement", "contraction"]
    assert "contraction" in [p.kind for p in loops.report().fallbacks]
    got, want = vectorised(a, b), loops(a, b)
    assert torch.equal(got, want)  # same sum order per element: a register tile only reorders elements
    torch.testing.assert_close(got, a @ b, rtol=1e-5, atol=1e-5)


def _packed_views(stage: str) -> set[tuple[int, ...]]:
    """Shapes of the packed stack buffers of a "vectors" stage (the `memref.view`s of promote's allocas)."""
    module = ir.Module.parse(stage, context=make_context())
    shapes = set()

    def visit(op):
        if op.name == "memref.view":
            shapes.add(tuple(ir.MemRefType(op.results[0].type).shape))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return shapes


@pytest.mark.parametrize("shape, threads, a_block_bytes, a_block", [
    ((37, 520, 300), 1, None, (37, 256)),     # 4 N tiles of 130 on one thread; K = 256 + 44
    ((37, 520, 300), 2, None, (37, 256)),     # 2 tiles per thread
    ((200, 768, 513), 1, None, (200, 256)),   # K = 2 x 256 + 1
    ((200, 768, 513), 1, 65536, (40, 256)),   # rows in blocks of 40 (the largest divisor of 200 that fits)
])
def test_a_blocks_are_packed_once_per_k_chunk_for_all_n_tiles(shape, threads, a_block_bytes, a_block):
    # GotoBLAS order (ContractionSchedule.a_block_bytes): a thread with several N tiles packs the A
    # block (rows x k-chunk) once per K chunk and every N tile reads it; before, each register
    # tile's A block (register_m x k-chunk) was packed again for every N tile. Same sum per element,
    # in the same order: bitwise the old schedule, with and without FMA.
    m, n, k = shape
    a, b = torch.randn(m, k), torch.randn(k, n)
    new = {} if a_block_bytes is None else {"a_block_bytes": a_block_bytes}
    blocked = _compile(_MatMul(), a, b, threads=threads, schedules={"contraction": new})
    per_tile = _compile(_MatMul(), a, b, threads=threads, schedules={"contraction": {"a_block_bytes": 0}})
    views = _packed_views(blocked.stages["vectors"])
    assert a_block in views and (256, n // 4 if n == 520 else 256) in views   # the A block and B's panels
    from vtmlir.codegen import ContractionSchedule, host_target
    register_m = ContractionSchedule().register_tile(host_target(), m, n)[0]
    assert (register_m, 256) in _packed_views(per_tile.stages["vectors"])   # an A block per register tile
    assert (register_m, 256) not in views
    assert torch.equal(blocked(a, b), per_tile(a, b))
    exact = {"fma": False}
    loops = _compile(_MatMul(), a, b, threads=threads, schedules={"contraction": None})
    assert torch.equal(_compile(_MatMul(), a, b, threads=threads, schedules={"contraction": {**new, **exact}})(a, b),
                       loops(a, b))
    torch.testing.assert_close(blocked(a, b), a @ b, rtol=1e-4, atol=1e-4)


_TWO_REDUCTIONS = """
#a = affine_map<(m, n, g, c) -> (m, g, c)>
#b = affine_map<(m, n, g, c) -> (g, c, n)>
#c = affine_map<(m, n, g, c) -> (m, n)>
func.func @shuffled(%A: memref<58x{g}x29xf32>, %B: memref<{g}x29x784xf32>, %C: memref<58x784xf32>) {{
  linalg.generic {{indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}}
      ins(%A, %B : memref<58x{g}x29xf32>, memref<{g}x29x784xf32>) outs(%C : memref<58x784xf32>) {{
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }}
  return
}}
"""


@pytest.mark.parametrize("groups, grouped", [(1, True), (2, False)])
def test_n_tiles_visiting_c_in_short_steps_keep_their_own_a_blocks(groups, grouped):
    # A channel-shuffled 1x1 convolution (vtc_shufflenet_unit: 2 groups of 29 channels, 784 pixels
    # in 4 N tiles): over 2 short K steps each N tile's C block stays in L1 from one to the next, so
    # the N tiles keep their order and their per-register-tile A blocks; over one step, one A block.
    from vtmlir.passes import run_pipeline
    module = ir.Module.parse(_TWO_REDUCTIONS.format(g=groups), context=make_context())
    run_pipeline(module, "builtin.module(codegen-attach-schedule{threads=1 vector-bits=512 strict=true}, "
                         "transform-interpreter)")
    views = _packed_views(str(module))
    assert ((58, 1, 29) in views) == grouped
    assert any(v[0] < 58 and v[1:] == (1, 29) for v in views) == (not grouped)


def test_n_tiles_are_grouped_only_where_the_threads_stay_balanced():
    from vtmlir.codegen.schedules import _a_block_rows, _n_tiles_per_thread
    assert _n_tiles_per_thread(8, 1, 1) == 8 and _n_tiles_per_thread(8, 1, 2) == 4
    assert _n_tiles_per_thread(8, 1, 3) == 1    # 4 groups of 2 on 3 threads: 4 + 2 + 2 tiles, not 3 + 3 + 2
    assert _n_tiles_per_thread(6, 1, 3) == 2 and _n_tiles_per_thread(1, 1, 1) == 1
    assert _n_tiles_per_thread(8, 4, 2) == 8    # 4 batch tiles give the 2 threads work already
    assert _a_block_rows(2048, 8, 1024, 2 << 20) == 2048
    assert _a_block_rows(4096, 8, 1024, 2 << 20) == 2048
    assert _a_block_rows(200, 8, 1024, 65536) == 40
    assert _a_block_rows(2 * 1009, 8, 1024, 65536) == 0   # no multiple of 8 divides it: per register tile
    assert _a_block_rows(2048, 8, 1024, 0) == 0


def _fused_multiply_adds(stage: str) -> tuple[int, int]:
    """(llvm.intr.fma ops, llvm.fmul ops) of an LLVM stage."""
    module = ir.Module.parse(stage, context=make_context())
    counts = {"llvm.intr.fma": 0, "llvm.fmul": 0}

    def visit(op):
        if op.name in counts:
            counts[op.name] += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return counts["llvm.intr.fma"], counts["llvm.fmul"]


@pytest.mark.parametrize("threads", [1, 2])
def test_contractions_accumulate_with_fused_multiply_adds(threads):
    # ContractionSchedule.fma (default): each k step is one llvm.fma (a multiply and an add are half
    # the peak of two FMA pipes). One rounding per step: close to the loops' two, not bitwise; the
    # same bits for any thread count and LLVM level.
    a, b = torch.randn(37, 29), torch.randn(29, 50)
    fused = _compile(_MatMul(), a, b, threads=threads)
    assert _fused_multiply_adds(fused.stages["llvm"])[0] >= 12 and _fused_multiply_adds(fused.stages["llvm"])[1] == 0
    exact = _compile(_MatMul(), a, b, threads=threads, schedules={"contraction": {"fma": False}})
    assert _fused_multiply_adds(exact.stages["llvm"])[0] == 0
    torch.testing.assert_close(fused(a, b), exact(a, b), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fused(a, b), a @ b, rtol=1e-5, atol=1e-5)
    assert not torch.equal(fused(a, b), exact(a, b))   # (the rounding differs somewhere)
    for other in (_compile(_MatMul(), a, b, threads=3 - threads), _compile(_MatMul(), a, b, llvm_opt_level=0)):
        assert torch.equal(fused(a, b), other(a, b))


def test_threads_do_not_change_results():
    model, inputs = ZOO["resnet_basic_block"].build(batch=2, seed=3)
    one = _compile(model, *inputs, threads=1)
    two = _compile(model, *inputs, threads=2)
    assert "omp.parallel" not in one.stages["llvm"] and "omp.parallel" in two.stages["llvm"]
    assert torch.equal(one(*inputs), two(*inputs))


def test_convolutions_are_contractions_per_tap_and_match_pytorch():
    conv = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.Conv2d(16, 8, 3, stride=2)).eval()
    x = torch.randn(2, 8, 13, 13)
    compiled = _compile(conv, x)
    report = compiled.report()
    assert not report.fallbacks, str(report)
    assert sum(p.kind == "contraction" for p in report.kernels) == 2
    with torch.no_grad():
        # taps outer, channels inner: a reordered f32 sum (docs/codegen.md)
        torch.testing.assert_close(compiled(x), conv(x), rtol=1e-5, atol=1e-5)


def _depthwise_reference(x, weight, stride, padding, dilation):
    """A depthwise convolution in f32 numpy, each output summed over the taps in the loops' order
    (kh, kw), one rounded multiply and one rounded add per tap, from 0."""
    x, w = x.numpy(), weight.numpy()[:, 0]
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    k = w.shape[-1]
    oh = (xp.shape[2] - dilation * (k - 1) - 1) // stride + 1
    ow = (xp.shape[3] - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((x.shape[0], x.shape[1], oh, ow), np.float32)
    for kh in range(k):
        for kw in range(k):
            tap = xp[:, :, kh * dilation:kh * dilation + stride * (oh - 1) + 1:stride,
                     kw * dilation:kw * dilation + stride * (ow - 1) + 1:stride]
            out = out + tap * w[None, :, kh, kw, None, None]
    return torch.from_numpy(out)


@pytest.mark.parametrize("channels, size, k, stride, dilation, vectorized", [
    (32, 29, 3, 1, 1, True),
    (96, 14, 5, 1, 1, True),
    (8, 13, 3, 1, 2, True),
    (24, 19, 3, 2, 1, False),  # a strided tap along the vectors: loops, one pass over the output
])
def test_depthwise_convolutions_are_one_kernel_in_the_loops_order(channels, size, k, stride, dilation, vectorized):
    # nn.Conv2d(groups=C) arrives as linalg.depthwise_conv_2d_nchw_chw: one elementwise kernel reads
    # all k*k taps (a shifted view and a filter slice each) and applies the multiply-add per tap in
    # the loops' order, so the output makes one trip through memory and every element is bitwise
    # the loops' sum -- for any thread count.
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(channels, channels, k, stride=stride, padding=k // 2 * dilation, dilation=dilation,
                           groups=channels, bias=False).eval()
    x = torch.randn(2, channels, size, size)
    one, two = _compile(conv, x, threads=1), _compile(conv, x, threads=2)
    report = two.report()
    depthwise = [p for p in report.kernels if p.kind in ("elementwise", "unknown") and p.id not in
                 [q.id for q in report.kernels if q.kind == "data-movement"]]
    assert not any(p.kind in ("convolution", "pooling") for p in report.kernels), str(report)
    assert len(depthwise) == 1, str(report)
    # The padded input's fill and copy; no fill of the output: the first tap adds to its zero.
    assert sum(p.kind == "data-movement" for p in report.kernels) == 2, str(report)
    assert (depthwise[0].id in report.vectorized) == vectorized, str(report)
    if vectorized and 2 * channels * size * size >= PARALLEL_MIN_ITERATIONS:
        assert "omp.parallel" in two.stages["llvm"]  # batch x channels split over the threads
    module = ir.Module.parse(two.stages["schedule"], context=make_context())
    kernel = next(op for op in structured_ops(module.operation)
                  if op.attributes["codegen.kernel"].value == depthwise[0].id)
    assert len(kernel.operands) == 2 * k * k + 1  # a view and a filter slice per tap, the output
    want = _depthwise_reference(x, conv.weight.detach(), stride, k // 2 * dilation, dilation)
    assert torch.equal(one(x), want)
    assert torch.equal(two(x), want)
    with torch.no_grad():
        torch.testing.assert_close(two(x), conv(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_depthwise_convolution_pads_one_plane_at_a_time(monkeypatch, threads):
    # The padded input (a fill, then the BatchNorm + ReLU writing its interior) is staged one plane
    # at a time on the stack (codegen-decompose-convolutions, `_stage_padded_input`): the producer
    # writes a plain buffer, no kernel touches the whole padded buffer. Each output reads the same
    # values with the same operations: bitwise the program with the padded buffer.
    from vtmlir.codegen import decompose_convolutions as decompose
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
                                torch.nn.Conv2d(16, 16, 3, padding=1, groups=16), torch.nn.ReLU(),
                                torch.nn.MaxPool2d(3, 1, 1)).eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
    x = torch.randn(2, 8, 20, 20)
    staged = _compile(model, x, threads=threads)
    shapes = [p.description.split()[-1] for p in staged.report().kernels]
    assert "2x16x22x22" not in shapes and shapes.count("1x1x22x22") == 2, shapes  # per plane: depthwise, pool
    monkeypatch.setattr(decompose, "MAX_STAGED_PLANE_BYTES", 0)
    padded = _compile(model, x, threads=threads)
    assert [p.description.split()[-1] for p in padded.report().kernels].count("2x16x22x22") == 2
    assert torch.equal(staged(x), padded(x))
    with torch.no_grad():
        torch.testing.assert_close(staged(x), model(x), rtol=1e-5, atol=1e-5)


def test_grouped_convolutions_keep_the_per_tap_products():
    # Two channels per group: a channel reduction as well as the window. The taps stay loops around
    # a contraction per tap (taps outer, channels inner: the documented tolerance).
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(8, 8, 3, padding=1, groups=4, bias=False).eval()
    x = torch.randn(1, 8, 12, 12)
    compiled = _compile(conv, x)
    assert "scf.for" in compiled.stages["schedule"], str(compiled.report())
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), conv(x), rtol=1e-5, atol=1e-5)


def test_depthwise_schedule_replays_with_the_transform_interpreter():
    from vtmlir.passes import run_pipeline

    conv = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16).eval()
    compiled = _compile(conv, torch.randn(1, 16, 20, 20))
    module = ir.Module.parse(compiled.stages["schedule"], context=make_context())
    run_pipeline(module, "builtin.module(transform-interpreter, codegen-erase-schedule, canonicalize)")
    text = str(module)
    assert "linalg.generic" not in text and "vector.transfer_read" in text
    assert text.count("arith.mulf") == 9  # the taps unrolled in one vector body


@pytest.mark.parametrize("norm", ["layernorm", "softmax", "rmsnorm"])
def test_row_reductions_stay_within_the_documented_tolerance(norm):
    torch.manual_seed(1)
    rows = torch.randn(64, 1000) * 3 + 1
    module = {"layernorm": torch.nn.LayerNorm(1000), "softmax": torch.nn.Softmax(-1),
              "rmsnorm": torch.nn.RMSNorm(1000, eps=1e-6)}[norm].eval()
    compiled = _compile(module, rows)
    loops = _compile(module, rows, schedules={"row-reduction": None})
    assert any(p.kind == "row-reduction" for p in compiled.report().kernels if p.id in compiled.report().vectorized)
    with torch.no_grad():
        want = module(rows)
    got = compiled(rows)
    # Reassociated sums: a few ulp of the row sum (documented bound: 1e-5 relative, 1e-6 absolute).
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got, loops(rows), rtol=1e-5, atol=1e-6)


def _norm(name: str, cols: int) -> torch.nn.Module:
    from vtmlir.models.llama import RMSNorm

    module = {"layernorm": torch.nn.LayerNorm(cols), "softmax": torch.nn.Softmax(-1),
              "rmsnorm": torch.nn.RMSNorm(cols, eps=1e-6), "llama_rmsnorm": RMSNorm(cols)}[name]
    torch.manual_seed(2)
    for p in module.parameters():
        p.data.copy_(torch.randn_like(p))
    return module.eval()


@pytest.mark.parametrize("norm", ["layernorm", "softmax", "rmsnorm", "llama_rmsnorm"])
def test_row_reductions_run_in_one_loop_over_row_blocks(norm, monkeypatch):
    # codegen-fuse-rows: the reductions and the elementwise kernels of a row run in one loop over
    # blocks of rows (the parallel loop at 2 threads). Each row is summed in the same order as by the
    # kernels one by one: bitwise the unfused values under the same schedules. With partial sums per
    # lane (codegen-split-row-reductions, the default) another reassociation, within the documented
    # tolerance; any thread count gives the same values.
    from vtmlir.codegen import EXACT_SCHEDULES, fuse_rows

    module = _norm(norm, 1024)
    x = torch.randn(64, 1024) * 3 + 1
    one, two = _compile(module, x, threads=1), _compile(module, x, threads=2)
    kernels = one.stages["schedule"]
    kernels = kernels[:kernels.index("transform.named_sequence")]
    assert kernels.count("codegen.row_loop") == 1  # every row reduction inside the one loop
    loop = kernels[kernels.index("scf.forall"):kernels.index("codegen.row_loop")]
    assert loop.count('"reduction"]') == kernels.count('"reduction"]') >= 1
    assert loop.count("memref.alloca") >= 1  # a row reduction's partial sums
    assert "omp.parallel" in two.stages["llvm"]
    report = one.report()
    assert not report.fallbacks and any(p.kind == "row-reduction" for p in report.kernels)
    in_order = {"row-reduction": {"partial_sums": False}}
    fused, exact = _compile(module, x, schedules=in_order), _compile(module, x, schedules=EXACT_SCHEDULES)
    assert "memref.alloca" not in fused.stages["schedule"] and "memref.alloca" not in exact.stages["schedule"]
    monkeypatch.setattr(fuse_rows, "BLOCK_BYTES", 1 << 40)  # every row in one block: nothing fused
    apart, exact_apart = _compile(module, x, schedules=in_order), _compile(module, x, schedules=EXACT_SCHEDULES)
    assert "codegen.row_loop" not in apart.stages["schedule"]
    assert torch.equal(fused(x), apart(x)) and torch.equal(exact(x), exact_apart(x))
    got = one(x)
    assert torch.equal(got, two(x))
    with torch.no_grad():
        torch.testing.assert_close(got, module(x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got, exact(x), rtol=1e-5, atol=1e-6)


def _vector_divisions_in_loops(stage: str) -> int:
    """Vector arith.divf ops inside a loop, in a "loops" stage (but reciprocals: 1 / d)."""
    module = ir.Module.parse(stage, context=make_context())
    count = 0

    def visit(op):
        nonlocal count
        numerator = op.operands[0].owner if op.name == "arith.divf" else None
        if (op.name == "arith.divf" and isinstance(op.results[0].type, ir.VectorType)
                and not (isinstance(numerator, ir.OpView) and numerator.name == "arith.constant")):
            parent = op.parent
            while parent is not None and parent.name not in ("scf.for", "scf.forall", "func.func"):
                parent = parent.parent
            count += parent is not None and parent.name != "func.func"
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return count


@pytest.mark.parametrize("threads", [1, 2])
def test_softmax_multiplies_by_the_reciprocal_of_its_row_sum(threads):
    # VectorSchedule.reciprocal (default): the division by the row's sum is a multiplication by its
    # reciprocal, computed once per row (codegen-reciprocal-divisions). One rounding more: within
    # 2 ulp of the division; off, the loops' division, bitwise the scalar loops.
    module = _norm("softmax", 1024)
    x = torch.randn(64, 1024) * 3 + 1
    fast = _compile(module, x, threads=threads)
    divide = {"elementwise": {"reciprocal": False}}
    exact = _compile(module, x, threads=threads, schedules=divide)
    assert _vector_divisions_in_loops(fast.stages["loops"]) == 0
    assert _vector_divisions_in_loops(exact.stages["loops"]) >= 1
    got, divided = fast(x), exact(x)
    assert not torch.equal(got, divided)  # (some quotient is rounded differently)
    ulp = torch.finfo(torch.float32).eps * divided.abs()
    assert ((got - divided).abs() <= 2 * ulp).all()
    with torch.no_grad():
        torch.testing.assert_close(got, module(x), rtol=1e-5, atol=1e-6)
    loops = _compile(module, x, threads=threads, schedules={kind: None for kind in ("row-reduction", "elementwise")})
    in_order = _compile(module, x, threads=threads, schedules={**divide, "row-reduction": None})
    assert torch.equal(in_order(x), loops(x))


class _Upsample(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)


def test_kernels_left_as_loops_are_split_over_the_threads():
    """A bilinear upsampling gathers (an 'unknown' kernel no schedule covers): it keeps its scalar
    loops and the report names it so, but at two threads its outer parallel loop is split over them
    (an OpenMP region that one thread does not have); the results are bitwise the same."""
    x = torch.randn(8, 16, 32, 32)
    one = _compile(_Upsample(), x, threads=1)
    two = _compile(_Upsample(), x, threads=2)
    for exe in (one, two):
        assert [(p.kind, p.reason) for p in exe.report().fallbacks] == [("unknown", "body holds 'memref.load'")]
    assert "omp.parallel" not in one.stages["llvm"] and "omp.parallel" in two.stages["llvm"]
    # With the elementwise kernel's schedule off (its loops are not split), the parallel region left
    # is the gather's.
    gather_only = _compile(_Upsample(), x, threads=2, schedules={"elementwise": None})
    assert "omp.parallel" in gather_only.stages["llvm"]
    assert torch.equal(one(x), two(x)) and torch.equal(one(x), gather_only(x))
    torch.testing.assert_close(two(x), _Upsample()(x), rtol=1e-5, atol=1e-5)


def test_report_names_kernels_left_as_loops():
    embedding = torch.nn.Embedding(10, 16).eval()  # a gather (its bounds check moves to a check kernel)
    compiled = _compile(embedding, torch.tensor([[1, 2, 3]]))
    fallbacks = compiled.report().fallbacks
    assert [(p.kind, p.reason) for p in fallbacks] == [("unknown", "body holds 'memref.load'")]
    assert "-> loops (body holds 'memref.load') at " in str(compiled.report())
    assert any(p.kind == "check" for p in compiled.report().kernels)
    assert "sparse.py" in fallbacks[0].location  # the source line the kernel came from


def test_schedule_stage_replays_with_the_transform_interpreter():
    from vtmlir.passes import run_pipeline

    model, inputs = ZOO["mlp"].build(batch=1, seed=0)
    compiled = _compile(model, *inputs)
    module = ir.Module.parse(compiled.stages["schedule"], context=make_context())
    run_pipeline(module, "builtin.module(transform-interpreter, codegen-erase-schedule, canonicalize)")
    text = str(module)
    assert "linalg.generic" not in text and "vector.transfer_read" in text


def test_schedule_overrides_are_checked():
    assert resolve_schedules({"contraction": {"register_m": 4}})["contraction"].register_m == 4
    assert resolve_schedules(["elementwise:none"])["elementwise"] is None
    with pytest.raises(VtmlirError, match="unknown kernel kind 'matmul'"):
        resolve_schedules({"matmul": None})
    with pytest.raises(VtmlirError, match="no parameter 'tile'"):
        resolve_schedules({"contraction": {"tile": 4}})
    with pytest.raises(VtmlirError, match="threads must be"):
        vtmlir.compile(_MatMul(), torch.randn(2, 2), torch.randn(2, 2), threads=-1)


def test_openmp_runtime_is_found():
    from vtmlir.codegen.openmp import openmp_library

    assert openmp_library().endswith("libomp.so")


@pytest.mark.parametrize("preset, expected", [(None, "1 2"), ("50", "50 2")])
def test_openmp_workers_sleep_soon_after_a_call_unless_the_user_says(preset, expected):
    # libomp's own defaults (200 ms of spinning after each call, sched_yield in every wait round)
    # take the cores from torch's threads in the same process and stall a woken team; a value the
    # user set is kept.
    env = {k: v for k, v in os.environ.items() if k not in ("KMP_BLOCKTIME", "KMP_USE_YIELD")}
    if preset is not None:
        env["KMP_BLOCKTIME"] = preset
    code = ("import os; from vtmlir.codegen.openmp import openmp_library; openmp_library(); "
            "print(os.environ['KMP_BLOCKTIME'], os.environ['KMP_USE_YIELD'])")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected


def test_numpy_reference_for_a_ragged_elementwise_kernel():
    class Gelu(torch.nn.Module):
        def forward(self, x, y):
            return torch.nn.functional.gelu(x) * y.t()

    x, y = torch.randn(37, 45), torch.randn(45, 37)
    compiled = _compile(Gelu(), x, y)
    loops = _compile(Gelu(), x, y, schedules={"elementwise": None, "data-movement": None})
    assert torch.equal(compiled(x, y), loops(x, y))  # elementwise vector code: the same operations per element
    np.testing.assert_allclose(compiled(x, y).numpy(), Gelu()(x, y).numpy(), rtol=1e-5, atol=1e-6)


def _nested_in_forall(op) -> bool:
    parent = op.parent
    while parent is not None:
        if parent.name == "scf.forall":
            return True
        parent = parent.parent
    return False


def _ops_named(module, name):
    found = []

    def visit(op):
        if op.name == name:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


@pytest.mark.parametrize("batch", [1, 8])
def test_im2col_panels_are_the_parallel_loop_and_bitwise_any_thread_count(batch):
    # conv_bn_relu_residual: 16-channel 3x3 convolutions over 16x16 images, im2col panels of 8 rows
    # (2 per image). On two threads the images x panels loop (2 iterations at batch 1, 16 at batch 8)
    # is the parallel loop: each iteration fills its own panel and runs its copies and contraction on
    # its thread (tiled by sequential loops: no forall inside another). Each output is the same sum as
    # on one thread, where the loops stay sequential: bitwise.
    model, inputs = ZOO["conv_bn_relu_residual"].build(batch=batch, seed=5)
    one, two = _compile(model, *inputs, threads=1), _compile(model, *inputs, threads=2)
    assert not two.report().fallbacks, str(two.report())
    context = make_context()
    scheduled = ir.Module.parse(two.stages["schedule"], context=context)
    inside = [k for k in map(classify, structured_ops(scheduled.operation)) if k.in_parallel_loop]
    assert sum(k.kind is KernelKind.CONTRACTION for k in inside) == 2, [k.describe() for k in inside]
    assert sum(k.kind is KernelKind.DATA_MOVEMENT for k in inside) == 2  # the panels' copies
    vectors = ir.Module.parse(two.stages["vectors"], context=context)
    foralls = _ops_named(vectors, "scf.forall")
    assert foralls and not any(_nested_in_forall(f) for f in foralls)
    assert "scf.forall" not in one.stages["schedule"] and "omp.parallel" not in one.stages["llvm"]
    got = two(*inputs)
    assert torch.equal(one(*inputs), got)
    with torch.no_grad():
        torch.testing.assert_close(got, model(*inputs), rtol=1e-5, atol=1e-5)


def test_large_panels_are_cut_to_fit_a_threads_stack():
    # K = 3x3x512: a panel of the 14 rows of 14 pixels is 3.6 MiB, over the 2 MiB a thread's panel
    # may take (its stack is 8 MiB, the contraction's packed buffers beside it): panels of 7 rows
    # (1.8 MiB), 4 over 2 images, each allocated on its thread's stack.
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(512, 32, 3, padding=1, bias=False).eval()
    x = torch.randn(2, 512, 14, 14)
    one, two = _compile(conv, x, threads=1), _compile(conv, x, threads=2)
    assert "scf.forall" in two.stages["schedule"] and "memref<3x3x512x7x14xf32>" in two.stages["schedule"]
    assert torch.equal(one(x), two(x))
    with torch.no_grad():
        torch.testing.assert_close(two(x), conv(x), rtol=1e-4, atol=1e-4)


def test_one_panel_keeps_the_contraction_split_over_the_threads():
    # One image of 7x7 pixels, one panel (smaller panels of 1 row would be under 32 pixels): no work
    # for a parallel outer loop, so the panel's contraction is the kernel split over the threads.
    conv = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False).eval()
    x = torch.randn(1, 64, 7, 7)
    one, two = _compile(conv, x, threads=1), _compile(conv, x, threads=2)
    assert "scf.forall" not in two.stages["schedule"]
    assert "scf.forall" in two.stages["vectors"] and "omp.parallel" in two.stages["llvm"]
    assert torch.equal(one(x), two(x))
    with torch.no_grad():
        torch.testing.assert_close(two(x), conv(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
def test_packed_buffers_do_not_grow_the_stack(threads):
    # 9 taps x 56 rows x 18 KiB of packed panels: 9 MB if each tile kept its stack buffers (the
    # 8 MB stack overflowed); one set per tile (OpenMP) or per function (one thread) instead.
    conv = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False).eval()
    x = torch.randn(1, 64, 56, 56)
    compiled = _compile(conv, x, threads=threads)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), conv(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
def test_hoisted_accumulator_of_a_k_panel_loop_lowers(threads):
    # K > 256 (a packed k panel loop) and M < a register tile: the accumulator is hoisted out of the
    # panel loop, which yields a vector<8x16xf32>; the alloca scope around the kernel must not
    # return it (an llvm.br carrying an n-D vector failed the LLVM stage: temco_resnet18 at batch 8).
    linear = torch.nn.Linear(512, 16).eval()
    x = torch.randn(8, 512)
    compiled = _compile(linear, x, threads=threads)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), linear(x), rtol=1e-5, atol=1e-5)


def test_a_row_of_13_or_14_is_one_register_tile():
    # 12 + 2 rows would read every B vector twice for a 14-pixel row (a blocked 3x3 convolution's
    # tap over a 14x14 image); wider M and AVX2's 6 x 2 tile keep their defaults.
    from vtmlir.codegen import ContractionSchedule, HostTarget
    avx512 = HostTarget("x86_64", 512, 2, frozenset())
    avx2 = HostTarget("x86_64", 256, 2, frozenset())
    schedule = ContractionSchedule()
    assert [schedule.register_tile(avx512, m, 16)[0] for m in (7, 12, 13, 14, 28, 56)] == [12, 12, 13, 14, 12, 12]
    assert schedule.register_tile(avx2, 14, 16) == (6, 2)
    assert ContractionSchedule(register_m=8).register_tile(avx512, 14, 16) == (8, 1)
    # With FMA and an N of two registers, 8 x 2 (fewer loads than FMAs per k step); without FMA 12 x 1.
    assert schedule.register_tile(avx512, 56, 64) == (8, 2)
    assert schedule.register_tile(avx512, 56, 45) == (12, 1)   # (a remainder of 13 lanes)
    assert ContractionSchedule(fma=False).register_tile(avx512, 56, 64) == (12, 1)
    # A remainder of one power-of-two vector keeps 8 x 2 (a 14x14 im2col panel: 196 = 6 x 32 + 4).
    assert schedule.register_tile(avx512, 256, 196) == (8, 2)
    assert schedule.register_tile(avx512, 256, 40) == (8, 2)
    assert schedule.register_tile(avx512, 256, 44) == (12, 1)  # (12 lanes)


@pytest.mark.parametrize("lanes, hw, rows", [(16, 28, 4), (8, 28, 4), (1, 28, 7), (16, 56, 4), (16, 14, 14),
                                             (16, 20, 4), (16, 12, 12)])
def test_im2col_panels_are_whole_vectors_wide(lanes, hw, rows):
    # The fewest whole rows of at least 128 pixels; where those are no whole number of vectors (a
    # partial vector in every register tile, and no 8 x 2 tile), the most rows below that make one,
    # down to 64 pixels: 28x28 in 4 rows (112 pixels), not 7 (196). 14x14 has none: one panel.
    from vtmlir.codegen.decompose_convolutions import Im2col, _panel_rows
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.parse(f'''
#in = affine_map<(n, f, h, w, c, kh, kw) -> (n, c, h + kh, w + kw)>
#wt = affine_map<(n, f, h, w, c, kh, kw) -> (f, c, kh, kw)>
#out = affine_map<(n, f, h, w, c, kh, kw) -> (n, f, h, w)>
func.func @conv(%X: memref<1x8x{hw + 2}x{hw + 2}xf32>, %F: memref<8x8x3x3xf32>, %Y: memref<1x8x{hw}x{hw}xf32>) {{
  linalg.generic {{indexing_maps = [#in, #wt, #out], iterator_types = ["parallel", "parallel", "parallel",
      "parallel", "reduction", "reduction", "reduction"]}}
      ins(%X, %F : memref<1x8x{hw + 2}x{hw + 2}xf32>, memref<8x8x3x3xf32>) outs(%Y : memref<1x8x{hw}x{hw}xf32>) {{
  ^bb0(%x: f32, %w: f32, %o: f32):
    %m = arith.mulf %x, %w : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }}
  return
}}''')
        ops = [op for op in module.body.operations[0].regions[0].blocks[0].operations if op.name == "linalg.generic"]
        conv = Im2col(ops[0].operation)
        assert conv.ok
        assert _panel_rows(conv, 72 * 4, 1, lanes) == (rows, False)


class _SplitProjection(torch.nn.Module):
    # A fused QKV projection whose output is read through views (attention's split into heads).
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(64, 192)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (h.reshape(b, t, 4, 16).transpose(1, 2) for h in self.qkv(x).chunk(3, dim=-1))
        return (q @ k.transpose(-1, -2)) @ v


def _k_loops_without_carried_vectors(stage: str) -> tuple[int, int]:
    """(k loops, those among them that carry no vector): an `scf.for` whose own body multiplies
    register tiles (2-D vectors: a row kernel's vectors are 1-D)."""
    module = ir.Module.parse(stage, context=make_context())
    loops = carried = 0

    def visit(op):
        nonlocal loops, carried
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    visit(inner.operation)
        if op.name == "scf.for":
            body = op.regions[0].blocks[0].operations
            if any(o.operation.name in ("arith.mulf", "math.fma") and isinstance(o.operation.results[0].type, ir.VectorType)
                   and ir.VectorType(o.operation.results[0].type).rank == 2 for o in body):
                loops += 1
                carried += any(isinstance(r.type, ir.VectorType) for r in op.results)

    visit(module.operation)
    return loops, loops - carried


def test_accumulators_of_a_sliced_output_stay_in_registers(monkeypatch):
    # Upstream hoisting refuses a buffer that has views (the QKV output): `codegen-hoist-accumulators`
    # carries each register tile in the k loop as a vector, with the loops' values bitwise.
    from vtmlir.backend.cpu import lower
    model, x = _SplitProjection().eval(), torch.randn(8, 16, 64)
    hoisted = _compile(model, x, threads=1)
    loops, uncarried = _k_loops_without_carried_vectors(hoisted.stages["loops"])
    assert loops >= 2 and uncarried == 0
    monkeypatch.setattr(lower, "LOOPS_STAGE", lower.LOOPS_STAGE.replace("codegen-hoist-accumulators, ", ""))
    plain = _compile(model, x, threads=1)
    assert _k_loops_without_carried_vectors(plain.stages["loops"])[1] == loops  # (what the pass changes)
    assert torch.equal(hoisted(x), plain(x))
    with torch.no_grad():
        torch.testing.assert_close(hoisted(x), model(x), rtol=1e-5, atol=1e-5)


def _scalar_memory_ops(stage: str) -> int:
    """Scalar (not vector) llvm.load and llvm.store ops of an LLVM stage."""
    module = ir.Module.parse(stage, context=make_context())
    count = 0

    def visit(op):
        nonlocal count
        if op.name == "llvm.load" and not isinstance(op.results[0].type, ir.VectorType):
            count += 1
        elif op.name == "llvm.store" and not isinstance(op.operands[0].type, ir.VectorType):
            count += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return count


@pytest.mark.parametrize("threads", [1, 2])
def test_one_pixel_1x1_convolution_is_the_linear_kernel(threads):
    # A 1x1 convolution over one pixel (DenseNet's last block) works on N x C x 1 x 1 buffers, whose
    # transfers the alias folding left with maps that are no minor identity: element by element, 12x
    # the Linear's time (DenseNet-169 b8). Through views without the unit dimensions
    # (`codegen-drop-transfer-unit-dims`) and with its accumulators carried in registers
    # (`codegen-hoist-accumulators`), it is the Linear's kernel: the same memory ops, the same values.
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(752, 64, 1, bias=False).eval()
    linear = torch.nn.Linear(752, 64, bias=False).eval()
    with torch.no_grad():
        linear.weight.copy_(conv.weight.flatten(1))
    x = torch.randn(8, 752, 1, 1)
    as_conv, as_linear = _compile(conv, x, threads=threads), _compile(linear, x.flatten(1), threads=threads)
    assert torch.equal(as_conv(x).flatten(1), as_linear(x.flatten(1)))
    assert _scalar_memory_ops(as_conv.stages["llvm"]) == _scalar_memory_ops(as_linear.stages["llvm"])
    assert _k_loops_without_carried_vectors(as_conv.stages["loops"])[1] == 0
    with torch.no_grad():
        torch.testing.assert_close(as_conv(x), conv(x), rtol=1e-4, atol=1e-4)


def _register_tile_columns(stage: str) -> tuple[int, int]:
    """(multiplies or multiply-adds of a 2-D register tile by a vector.broadcast of an Mx1 column,
    vector.shuffle ops)."""
    module = ir.Module.parse(stage, context=make_context())
    splats = shuffles = 0

    def visit(op):
        nonlocal splats, shuffles
        shuffles += op.name == "vector.shuffle"
        if op.name in ("arith.mulf", "math.fma") and isinstance(op.results[0].type, ir.VectorType) \
                and op.results[0].type.rank == 2:
            for operand in op.operands:
                owner = operand.owner
                if (isinstance(owner, ir.OpView) and owner.operation.name == "vector.broadcast"
                        and list(owner.operation.operands[0].type.shape) == [op.results[0].type.shape[0], 1]):
                    splats += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return splats, shuffles


@pytest.mark.parametrize("case", ["matmul", "conv"])
def test_register_tile_columns_are_splats_not_shuffles(monkeypatch, case):
    # codegen-fold-row-broadcasts: the A column of a register tile, which the vectoriser broadcasts
    # along a new leading dimension and transposes (a flattened shuffle of rows x lanes elements),
    # is one broadcast of the column (compile time: LLVM got 192 insert/extractelements per k step).
    # Bitwise the build without the pass.
    from vtmlir.backend.cpu import lower
    if case == "matmul":
        model, inputs = _MatMul(), (torch.randn(37, 29), torch.randn(29, 45))
    else:
        model, inputs = torch.nn.Conv2d(3, 16, 3, padding=1).eval(), (torch.randn(1, 3, 20, 20),)
    folded = _compile(model, *inputs, threads=1)
    splats, shuffles = _register_tile_columns(folded.stages["loops"])
    assert splats >= 1 and shuffles == 0
    monkeypatch.setattr(lower, "LOOPS_STAGE", lower.LOOPS_STAGE.replace("codegen-fold-row-broadcasts, ", ""))
    plain = _compile(model, *inputs, threads=1)
    assert _register_tile_columns(plain.stages["loops"])[1] >= 1   # (what the pass removes)
    assert torch.equal(folded(*inputs), plain(*inputs))
    with torch.no_grad():
        torch.testing.assert_close(folded(*inputs), model(*inputs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["exp", "erf", "tanh", "sin", "cos"])
def test_polynomial_math_stays_within_its_ulp_bound(name):
    # codegen-approximate-math (docs/codegen.md): exp, sin and cos within 2 ulp, erf and tanh within
    # 3 ulp of the correctly rounded f32 result, over the range where the result is neither 0, ±1 nor
    # inf; sin and cos also over magnitudes 2^-30 .. 2^30 and, at 2^30 and above, libm's.
    fn, low, high, bound = {"exp": (torch.exp, -103.0, 88.7, 2), "erf": (torch.erf, -4.0, 4.0, 3),
                            "tanh": (torch.tanh, -9.5, 9.5, 3), "sin": (torch.sin, -1e4, 1e4, 2),
                            "cos": (torch.cos, -1e4, 1e4, 2)}[name]
    x = [torch.linspace(low, high, 1 << 18), torch.linspace(-1.5, 1.5, 1 << 16),
         torch.tensor([0.0, -0.0, 1e-30, -1e-40, float("inf"), -float("inf"), float("nan")])]
    if name in ("sin", "cos"):
        generator = torch.Generator().manual_seed(0)
        magnitudes = torch.exp2(torch.rand(1 << 16, generator=generator) * 60 - 30)
        x += [magnitudes * torch.sign(torch.randn(1 << 16, generator=generator)),
              torch.tensor([2.0 ** 30, -2.0 ** 30, 3e30, -1e38])]
    x = torch.cat(x)
    compiled = _compile(_Unary(fn), x)
    got = compiled(x)
    reference = fn(x.double())
    exact = reference.float()
    finite = torch.isfinite(exact) & (exact != 0)
    ulp = torch.from_numpy(np.spacing(np.abs(exact[finite].numpy()))).double()
    errors = (got[finite].double() - reference[finite]).abs() / ulp
    assert errors.max() <= bound, f"{name}: {errors.max():.2f} ulp at x = {x[finite][errors.argmax()]}"
    special = ~finite
    assert torch.equal(got[special].isnan(), exact[special].isnan())
    assert torch.equal(got[special].nan_to_num(), exact[special].nan_to_num())  # ±0, ±1, ±inf, exactly
    assert torch.equal(got[special].signbit(), exact[special].signbit())
    loops = compiled.stages["loops"]
    if name in ("sin", "cos"):  # kept only as the libm branch of large arguments
        assert loops.count("math." + name) == loops.count("scf.if") >= 1
    else:
        assert "math." + name not in loops


def test_sin_and_cos_of_constants_are_the_values_computed_at_run_time():
    # A rotary table is cos/sin of constants. As libm calls LLVM folded them at compile time in
    # double precision, which for these angles is 1 ulp from glibc's f32 result at run time, so a
    # table read from a constant and the same table passed in differed (and opt levels 0 and 2 of
    # vtc_llama3_decode, whose data movement decides what LLVM sees as constant). The polynomial
    # folds exactly.
    angles = torch.tensor([17.974005, 16.664009, 17.992119, 95.1066, -64.18746, -43.82578, -48.37396, -67.75844,
                           -22.215715, -31.140854, -85.54694, -81.4509, 22.267736, 66.54357, 44.23316, 60.44923])
    x = torch.ones(16)
    constant = _compile(_RotaryOf(angles), x)
    passed_in = _compile(_RotaryOf(None), angles, x)
    for a, b in zip(constant(x), passed_in(angles, x)):
        assert torch.equal(a, b)
    torch.testing.assert_close(constant(x)[0], torch.cos(angles), rtol=0, atol=2e-7)


class _RotaryOf(torch.nn.Module):
    """cos and sin of a table of angles, a constant buffer or (with `angles` None) an argument."""

    def __init__(self, angles):
        super().__init__()
        if angles is not None:
            self.register_buffer("angles", angles.clone())

    def forward(self, *args):
        angles, x = (self.angles, args[0]) if hasattr(self, "angles") else args
        return torch.cos(angles) * x, torch.sin(angles) * x


class _Unary(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def _exact_and_loops(model, *inputs):
    """`model` compiled with the exact schedules and with every kernel as scalar loops."""
    from vtmlir.codegen import DEFAULT_SCHEDULES, EXACT_SCHEDULES

    scheduled = _compile(model, *inputs, schedules=EXACT_SCHEDULES)
    loops = _compile(model, *inputs, schedules={kind: None for kind in DEFAULT_SCHEDULES})
    return scheduled, loops


def test_fused_prologues_are_split_from_their_contractions():
    # LayerNorm -> Linear and BatchNorm + ReLU -> 1x1 convolution: linalg-fuse-elementwise-ops puts the
    # normalisation inside the product; codegen-split-prologues computes it once in its own kernel.
    torch.manual_seed(0)
    linear = torch.nn.Sequential(torch.nn.LayerNorm(40), torch.nn.Linear(40, 24)).eval()
    conv = torch.nn.Sequential(torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Conv2d(8, 16, 1)).eval()
    with torch.no_grad():
        conv[0].running_mean.uniform_(-1, 1)
        conv[0].running_var.uniform_(0.5, 2)
    for model, x, product in ((linear, torch.randn(3, 5, 40), "contraction 3x5x24x40"),
                              (conv, torch.randn(2, 8, 9, 9), "contraction 2x16x81x8")):
        scheduled, loops = _exact_and_loops(model, x)
        report = scheduled.report()
        assert all(p.kind == "row-reduction" for p in report.fallbacks), str(report)  # (exact: loops)
        assert any(p.description == product and p.id in report.vectorized for p in report.kernels), str(report)
        assert torch.equal(scheduled(x), loops(x))  # the same operations per element, in the same order
        with torch.no_grad():
            torch.testing.assert_close(scheduled(x), model(x), rtol=1e-5, atol=1e-5)


class _CatBatchNormConv(torch.nn.Module):
    """DenseNet's transition: BatchNorm + ReLU + 1x1 convolution of a concat of many pieces."""

    def __init__(self, pieces: int, channels: int, out: int):
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(pieces * channels)
        self.conv = torch.nn.Conv2d(pieces * channels, out, 1, bias=False)

    def forward(self, *pieces):
        return self.conv(torch.relu(self.bn(torch.cat(pieces, 1))))


def _cat_batchnorm_conv():
    """A `_CatBatchNormConv` of 18 pieces (more than VTC splits loops for) and its inputs."""
    torch.manual_seed(0)
    model = _CatBatchNormConv(18, 2, 8).eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    return model, [torch.randn(2, 2, 3, 3) for _ in range(18)]


def test_a_prologue_gathering_a_virtual_concat_is_split_from_its_convolution():
    # At opt level 2 VTC reads a concat of more than 16 pieces (function arguments: no producer
    # writes into it) element by element: `memref.load` from each piece at indices computed from
    # `linalg.index`, `arith.select` choosing one. Fused into the 1x1 convolution with the
    # BatchNorm (and its cf.assert) and the ReLU, that gather was recomputed per output channel and
    # the kernel was 'unknown (body holds affine.apply)' loops; codegen-split-prologues computes it
    # once over (n, h, w, c) and the product is a scheduled contraction, bitwise the loops.
    from vtmlir.codegen import DEFAULT_SCHEDULES, EXACT_SCHEDULES

    model, pieces = _cat_batchnorm_conv()
    scheduled = vtmlir.compile(model, *pieces, opt_level=2, schedules=EXACT_SCHEDULES)
    loops = vtmlir.compile(model, *pieces, opt_level=2, schedules={kind: None for kind in DEFAULT_SCHEDULES})
    report = scheduled.report()
    assert "contraction 2x8x3x3x36x1x1" in [p.description for p in report.kernels if p.id in report.vectorized], str(report)
    assert not any(p.description.endswith("2x8x3x3x36x1x1") for p in report.fallbacks), str(report)
    assert "cf.assert" in scheduled.stages["schedule"]  # the BatchNorm's check is still made
    assert torch.equal(scheduled(*pieces), loops(*pieces))
    with torch.no_grad():
        torch.testing.assert_close(scheduled(*pieces), model(*pieces), rtol=1e-5, atol=1e-5)


def test_piece_gathers_become_one_elementwise_kernel_per_piece(monkeypatch):
    # DenseNet's BatchNorm + ReLU of a concat of more than 16 pieces (opt level 2): VTC reads the
    # concat element by element, so the prologue codegen-split-prologues moves out of the 1x1
    # convolution (and the BatchNorm's own kernels) load every piece at clamped indices and keep one
    # with a chain of selects: 'unknown (body holds affine.apply)' loops. codegen-split-piece-gathers
    # makes one elementwise kernel per piece over subviews: vector code, bitwise the gathering kernels.
    from vtmlir.backend.cpu import lower

    model, pieces = _cat_batchnorm_conv()
    split = vtmlir.compile(model, *pieces)
    report = split.report()
    assert not any("affine.apply" in p.description for p in report.kernels), str(report)
    per_piece = [p for p in report.kernels if p.description == "elementwise 2x3x3x2x1x1"]  # (n, h, w, c, kh, kw)
    assert len(per_piece) == 18 and all(p.id in report.vectorized for p in per_piece), str(report)
    assert "memref.load" not in split.stages["schedule"].split("transform.named_sequence")[0]
    with monkeypatch.context() as patch:  # the pipeline before the pass
        preparation = lower.kernel_preparation
        patch.setattr(lower, "kernel_preparation",
                      lambda threads=0: preparation(threads).replace(" codegen-split-piece-gathers,", ""))
        gathered = vtmlir.compile(model, *pieces)
    assert any("affine.apply" in p.description for p in gathered.report().fallbacks), str(gathered.report())
    assert torch.equal(split(*pieces), gathered(*pieces))
    with torch.no_grad():
        torch.testing.assert_close(split(*pieces), model(*pieces), rtol=1e-5, atol=1e-5)


def test_blocked_convolution_with_a_fused_batchnorm_check_is_scheduled():
    # EfficientViT's MBConv in the blocked layout (opt level 2): BatchNorm + Hardswish fused into the
    # last 1x1 convolution read the BatchNorm's vectors at the linear index c * 16 + cb, and the
    # fused body held the BatchNorm's cf.assert. codegen-delinearize-loops views those vectors as
    # (c, cb), so the assert moves to a check kernel and the normalisation to a prologue kernel: the
    # product is a scheduled contraction, not an 'unknown' kernel left as loops.
    from vtmlir.models.vtc_workloads import MBConv

    torch.manual_seed(0)
    model = MBConv(16, expand=2).eval()
    with torch.no_grad():
        for bn in (m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
    x = torch.randn(1, 16, 6, 6)
    from vtmlir.codegen import DEFAULT_SCHEDULES, EXACT_SCHEDULES

    # The blocked layout (level 2 selects it on networks of 16 convolutions and more; a block asks).
    blocked = "layout-select-ilp{target=cpu}, layout-materialize, vt-eliminate-data-movement{target=cpu}, vt-lower-views"
    scheduled = vtmlir.compile(model, x, pipeline=blocked, schedules=EXACT_SCHEDULES)
    loops = vtmlir.compile(model, x, pipeline=blocked, schedules={kind: None for kind in DEFAULT_SCHEDULES})
    report = scheduled.report()
    assert not report.fallbacks, str(report)
    assert not any(p.kind == "unknown" for p in report.kernels), str(report)
    vectorized = [p.description for p in report.kernels if p.id in report.vectorized]
    assert "contraction 1x1x6x6x2x16x16" in vectorized, str(report)  # 32 -> 16 channels, 16-blocked
    assert torch.equal(scheduled(x), loops(x))
    with torch.no_grad():
        torch.testing.assert_close(scheduled(x), model(x), rtol=1e-5, atol=1e-5)


def test_convolutions_reading_a_channel_slice_or_shuffle_are_scheduled():
    # ShuffleNet's 1x1 convolutions read their input through views VTC folds into the maps: the
    # second half of the channels (torch.chunk: `c + C/2`) and, after the channel shuffle,
    # `(c floordiv 2 + C/4, c mod 2)`. No convolution for linalg's interface, so they were 'pooling'
    # kernels left as loops; codegen-delinearize-loops views the channels, so they are convolutions
    # and then contractions. One tap: bitwise the loops.
    from vtmlir.codegen import DEFAULT_SCHEDULES, EXACT_SCHEDULES
    from vtmlir.models import get
    from vtmlir.models.vtc_workloads import SMALL_SIZES

    model, inputs = get("vtc_shufflenet_unit").builder(batch=2, seed=0, **SMALL_SIZES["vtc_shufflenet_unit"])
    model = model.eval()
    scheduled = vtmlir.compile(model, *inputs, schedules=EXACT_SCHEDULES)
    loops = vtmlir.compile(model, *inputs, schedules={kind: None for kind in DEFAULT_SCHEDULES})
    report = scheduled.report()
    assert not any(p.kind in ("pooling", "contraction") for p in report.fallbacks), str(report)
    assert sum(p.kind == "contraction" and p.id in report.vectorized for p in report.kernels) == 4, str(report)
    assert torch.equal(scheduled(*inputs), loops(*inputs))
    with torch.no_grad():
        torch.testing.assert_close(scheduled(*inputs), model(*inputs), rtol=1e-5, atol=1e-5)


def test_a_shuffled_channel_read_keeps_one_sum_loop():
    """At full size VTC reads the shuffled channels as `(c floordiv 2 + 29, c mod 2)` of a [58, 2]
    view of the concatenation's 116 contiguous channels: that is channel c + 58 of one dimension
    (`_merge_divided_dims`), so the 1x1 convolution sums over one loop c like the other three (split
    into (29, 2) loops it ran 2x slower than level 0's product on a copy, batch 16), bitwise as
    level 0 with the exact schedules."""
    from vtmlir.codegen import EXACT_SCHEDULES
    from vtmlir.models import get

    model, inputs = get("vtc_shufflenet_unit").builder(batch=1, seed=0)
    model = model.eval()
    level2 = vtmlir.compile(model, *inputs)
    assert "vtc" in [s.step.system for s in level2.report().optimization.steps]
    products = [p.description for p in level2.report().codegen.kernels if p.kind == "contraction"]
    assert products == ["contraction 1x58x784x58"] * 4, products
    exact = [vtmlir.compile(model, *inputs, opt_level=level, schedules=EXACT_SCHEDULES) for level in (0, 2)]
    assert torch.equal(exact[0](*inputs), exact[1](*inputs))


class _UpsampledConv(torch.nn.Module):
    """UNet's decoder step: conv3x3 -> BatchNorm -> ReLU -> nearest 2x upsampling -> conv3x3."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(16, 32, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(32)
        self.up = torch.nn.Upsample(scale_factor=2, mode="nearest")
        self.reduce = torch.nn.Conv2d(32, 16, 3, padding=1, bias=False)

    def forward(self, x):
        return self.reduce(self.up(torch.relu(self.bn(self.conv(x)))))


def test_a_fused_group_reading_an_upsampled_tile_computes_its_batchnorm_once_in_place():
    # UNet's decoder at opt level 2: TeMCO decomposes both convolutions and fuses lconv -> BatchNorm
    # -> ReLU -> upsampling -> fconv per tile of two output rows. The fconv (1x1) reads the lconv's
    # tile at ((h + kh) floordiv 2, (w + kw) floordiv 2), the BatchNorm and ReLU in its body, and
    # writes a tile of the group's output (a subview at the tile's row: a dynamic offset). It was a
    # 'pooling' kernel of scalar loops recomputing the BatchNorm per output channel and pixel.
    # codegen-delinearize-loops views it (w split into (W/2, 2)), so codegen-split-prologues
    # computes the BatchNorm + ReLU once per tile element, vectorised and in the tile's own memory
    # (the product is its last reader: no buffer added, the peak stays); the product is a plain
    # multiply-add. Bitwise the loops and the decomposed model at opt level 0.
    from vtmlir.codegen import DEFAULT_SCHEDULES
    from vtmlir.models._spec import randomize_batchnorm
    from vtmlir.temco import decompose_convs
    from vtmlir.temco.fuse_activation import fuse_activations

    torch.manual_seed(0)
    model = _UpsampledConv().eval()
    randomize_batchnorm(model, torch.Generator().manual_seed(0))
    x = torch.randn(1, 16, 8, 8)
    module = vtmlir.import_torch(model, x)
    decompose_convs(module, 0.25, True)
    decomposed = str(module)
    (fusion,) = fuse_activations(module)
    assert fusion.groups and "floordiv 2" in str(module), fusion.to_text()
    unfused_products = {"contraction": {"fma": False}}   # (the loops round the product, then add)
    fused = vtmlir.compile(str(module), opt_level=0, threads=1, schedules=unfused_products)
    loops = vtmlir.compile(str(module), opt_level=0, threads=1,
                           schedules={kind: None for kind in DEFAULT_SCHEDULES})
    reference = vtmlir.compile(decomposed, opt_level=0, threads=1, schedules=unfused_products)
    report = fused.report()
    assert not any(p.kind == "pooling" for p in report.kernels), str(report)
    # the BatchNorm + ReLU over the group's 32-channel tile of 8 source columns, vectorised
    assert any(p.description == "elementwise 32x8" and p.id in report.vectorized for p in report.kernels), str(report)
    got = fused(x)
    assert torch.equal(got, loops(x))
    assert torch.equal(got, reference(x))  # (the decomposition approximates the model: no torch reference)


class _ConvOfConcat(torch.nn.Module):
    def __init__(self, kernel: int, stride: int):
        super().__init__()
        self.conv = torch.nn.Conv2d(6, 4, kernel, stride=stride)

    def forward(self, x):
        return self.conv(torch.cat([x, x], 1))


@pytest.mark.parametrize("kernel, stride, route", [
    (3, 2, "pooling"),       # no convolution for linalg (c mod 3): loops
    (2, 2, "contraction"),   # delinearised into a contraction, c split (2, 3)
    (3, 1, "pooling"),       # delinearised, still no convolution: loops
])
def test_a_convolution_of_a_folded_concat_sums_as_the_copying_pipeline(kernel, stride, route):
    # VTC reads cat(x, x) inside the convolution (channel c at x's c mod 3); opt level 0 copies the
    # concat and im2col sums taps outer, channels inner. The view makes the convolution take
    # another route (the report's kernel), which codegen-order-window-taps orders the same way, and
    # the contraction schedule sums the channel block only the filter reads one at a time: bitwise
    # (fuzz seed 2611 case 5490: 1-2 ulp apart).
    from vtmlir.codegen import EXACT_SCHEDULES

    torch.manual_seed(0)
    model, x = _ConvOfConcat(kernel, stride).eval(), torch.randn(1, 3, 6, 6)
    copied = vtmlir.compile(model, x, opt_level=0, schedules=EXACT_SCHEDULES)
    viewed = vtmlir.compile(model, x, pipeline="vt-eliminate-data-movement", schedules=EXACT_SCHEDULES)
    assert route in [p.kind for p in viewed.report().kernels], str(viewed.report())
    assert torch.equal(viewed(x), copied(x))


def test_transposed_b_operands_are_laid_out_for_the_contraction():
    # A Linear's weight is transposed at compile time (a new constant global, the original gone);
    # attention's K^T is copied transposed at run time. Bitwise the loops either way.
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(32, 48)

        def forward(self, q, k):
            return torch.softmax(q @ k.transpose(-1, -2), -1) @ self.proj(k)

    torch.manual_seed(0)
    model = Attention().eval()
    q, k = torch.randn(2, 7, 32), torch.randn(2, 9, 32)
    scheduled, loops = _exact_and_loops(model, q, k)
    report = scheduled.report()
    assert not any("B transposed" in p.description for p in report.kernels), str(report)
    assert "_transposed : memref<32x48xf32>" in scheduled.stages["schedule"]
    assert "memref<48x32xf32> = dense_resource" not in scheduled.stages["schedule"]
    assert any(p.kind == "data-movement" and p.description.endswith("2x32x9") for p in report.kernels), str(report)
    assert torch.equal(scheduled(q, k), loops(q, k))
    with torch.no_grad():
        torch.testing.assert_close(scheduled(q, k), model(q, k), rtol=1e-5, atol=1e-5)


class _GqaDecodeAttention(torch.nn.Module):
    """A decode step's attention over a KV cache with grouped query heads (Llama 3's, 4 query heads
    per KV head), as `models.llama` writes it: `repeat_kv` by expand + reshape."""

    def forward(self, q, k, v):
        b, h, _, hd = q.shape
        kvh, t = k.shape[1], k.shape[2]
        keys = k[:, :, None].expand(b, kvh, h // kvh, t, hd).reshape(b, h, t, hd)
        values = v[:, :, None].expand(b, kvh, h // kvh, t, hd).reshape(b, h, t, hd)
        return torch.softmax(q @ keys.transpose(2, 3), -1) @ values


@pytest.mark.parametrize("threads", [1, 2])
def test_decode_attention_transposes_keys_per_panel(threads, monkeypatch):
    # q . K^T over the cache: K's panels (one KV head, 256 positions) are transposed into the stack
    # buffer the contraction reads in place, one iteration of a parallel loop each; no kernel writes
    # the whole K^T. The sums are those of the whole transposed copy (forced below), bitwise.
    from vtmlir.codegen import transpose_b_operands

    torch.manual_seed(0)
    model = _GqaDecodeAttention()
    q, k, v = torch.randn(1, 8, 1, 16), torch.randn(1, 2, 1024, 16), torch.randn(1, 2, 1024, 16)
    panels = vtmlir.compile(model, q, k, v, threads=threads)
    report = panels.report()
    moves = [p.description for p in report.kernels if p.kind == "data-movement"]
    assert not any(d.endswith("2x16x1024") for d in moves), str(report)  # the whole K^T
    assert any(d.endswith("1x16x256") for d in moves), str(report)  # a panel
    assert "contraction 1x4x1x256x16" in [p.description for p in report.kernels if p.id in report.vectorized], \
        str(report)
    # The panel is read where it is (no packed copy of it), and the 4 query heads of a KV head share
    # a register tile in both products (A blocks of 4 rows; tiled along the unit query length, each
    # tile held one row and B was packed and read once per query head).
    packed = _packed_views(panels.stages["vectors"])
    assert (1, 16, 256) not in packed and {(1, 4, 1, 16), (1, 4, 1, 256)} <= packed, packed
    monkeypatch.setattr(transpose_b_operands, "MIN_PANELS", 1 << 30)
    whole = vtmlir.compile(model, q, k, v, threads=threads)
    assert any(p.description.endswith("2x16x1024") for p in whole.report().kernels), str(whole.report())
    assert torch.equal(panels(q, k, v), whole(q, k, v))
    torch.testing.assert_close(panels(q, k, v), model(q, k, v), rtol=1e-5, atol=1e-5)


class _Masks(torch.nn.Module):
    """A bool output, a select by a bool per element and one by a bool per row (attention's)."""

    def forward(self, x, a, mask, row_mask):
        return x != 0, torch.where(mask, a, -a), torch.where(row_mask[:, None], a, 0.0)


def test_bool_buffers_are_never_vectors_of_several_i1():
    # LLVM lays out a vector<8xi1> bit-packed; a memref (and torch) keeps a byte per bool. A vectorised
    # `x != 0` stored 8 flags into one byte and left the other 7 uninitialised (GPT-2's attention mask:
    # wrong logits, different per compile). Such kernels keep loops; a mask read once per row does not.
    torch.manual_seed(0)
    x = torch.randint(-2, 3, (5, 77))
    a, mask, row_mask = torch.randn(5, 77), torch.rand(5, 77) > 0.5, torch.rand(5) > 0.5
    inputs = (x, a, mask, row_mask)
    compiled = _compile(_Masks(), *inputs, threads=1)
    loops = _compile(_Masks(), *inputs, threads=1, schedules={"elementwise": None})
    report = compiled.report()
    assert sorted(p.reason.split(" ", 1)[0] for p in report.fallbacks) == ["i1", "i1"]  # x != 0, where(mask)
    assert any(p.kind == "elementwise" for p in report.kernels if p.id in report.vectorized)  # where(row_mask)
    for got, same, want in zip(compiled(*inputs), loops(*inputs), _Masks()(*inputs)):
        assert torch.equal(got, want) and torch.equal(got, same)


class _IntAbs(torch.nn.Module):
    def forward(self, x):
        return torch.abs(x) * 2


@pytest.mark.parametrize("schedules", [None, {"elementwise": None}])
def test_integer_abs_lowers_with_threads(schedules):
    # convert-openmp-to-llvm makes every function an llvm.func: the math lowering must come first
    # (math.absi, scalar or vector, failed to legalise with threads != 1; T5's position buckets).
    x = torch.randint(-50, 50, (8, 37))
    compiled = _compile(_IntAbs(), x, threads=2, schedules=schedules)
    assert torch.equal(compiled(x), torch.abs(x) * 2)


class _Permute(torch.nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.dims = dims

    def forward(self, x):
        return x.permute(*self.dims).contiguous()


@pytest.mark.parametrize("shape, dims, threads", [
    ((37, 53), (1, 0), 1),  # both dimensions peeled
    ((256, 192), (1, 0), 2),  # blocked (64 x 64), split over threads
    ((2, 24, 7, 9), (0, 2, 3, 1), 1),  # NCHW -> NHWC
    ((1, 4, 29, 5, 5), (0, 2, 1, 3, 4), 2),  # shufflenet's channel shuffle (contiguous 5x5 rows)
])
def test_transposing_copies_are_exact(shape, dims, threads):
    # Transposes are tiled into register-sized squares swapped with shuffles: data movement, bitwise.
    x = torch.randn(*shape)
    compiled = _compile(_Permute(dims), x, threads=threads)
    report = compiled.report()
    assert not report.fallbacks, str(report)
    assert torch.equal(compiled(x), x.permute(*dims).contiguous())


def _nontemporal_stores(stage: str) -> int:
    module = ir.Module.parse(stage, context=make_context())
    count = 0

    def visit(op):
        nonlocal count
        count += op.name == "llvm.store" and "nontemporal" in op.attributes
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return count


@pytest.mark.parametrize("threads", [1, 2])
def test_large_transposes_stream_their_stores(threads):
    # codegen-streaming-stores: an output of >= 4 MiB is written with non-temporal stores where a
    # row starts on a cache line (the call path's results do), with ordinary stores elsewhere.
    import ctypes

    from torch_mlir.runtime import get_ranked_memref_descriptor

    x = torch.randn(1100, 1040)
    compiled = _compile(_Permute((1, 0)), x, threads=threads)
    assert _nontemporal_stores(compiled.stages["llvm"]) >= 16
    assert torch.equal(compiled(x), x.t().contiguous())
    # The JIT function itself on a result array that starts 16 bytes into a cache line.
    raw = np.zeros(1040 * 1100 + 32, np.float32)
    start = (-raw.ctypes.data % 64) // 4 + 4
    out = raw[start:start + 1040 * 1100].reshape(1040, 1100)
    arrays = [x.numpy(), out]
    pointers = [ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a))) for a in arrays]
    compiled._engine.invoke(compiled.signature.name, *pointers)
    assert np.array_equal(out, x.t().numpy())
    small = _compile(_Permute((1, 0)), torch.randn(256, 192), threads=threads)
    assert _nontemporal_stores(small.stages["llvm"]) == 0   # read back from the cache by its consumer


class _Pool(torch.nn.Module):
    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def forward(self, x):
        return self.pool(x)


@pytest.mark.parametrize("pool, vectorized", [
    (torch.nn.MaxPool2d(3, 1, 1), True),  # one kernel: a vectorised max over the taps' shifted views
    (torch.nn.AvgPool2d(3, 1, 1), True),
    (torch.nn.MaxPool2d(3, 2, 1), False),  # a strided tap stays loops (gathered vectors are slower)
    (torch.nn.AvgPool2d(2), False),
])
def test_pooling_takes_the_taps_in_the_loops_order(pool, vectorized):
    # codegen-decompose-convolutions unrolls a pooling's window taps into one kernel (a view per
    # tap): each output still takes its taps in the loops' order, so max and average pooling stay
    # bitwise.
    torch.manual_seed(0)
    x = torch.randn(2, 5, 13, 37)
    compiled = _compile(_Pool(pool), x, threads=2)
    report = compiled.report()
    assert not any(p.kind == "pooling" for p in report.kernels), str(report)  # decomposed
    assert "scf.for " not in compiled.stages["schedule"]  # no tap loops (the planes' loop is an scf.forall)
    # The output is not filled first (max: -inf, average: 0): the first tap starts from the constant.
    # With padding, the padded input's fill and copy remain.
    assert sum(p.kind == "data-movement" for p in report.kernels) == (2 if pool.padding else 0), str(report)
    strided = [p for p in report.fallbacks if "strided" in p.reason]
    assert (not report.fallbacks) if vectorized else len(strided) == 1, str(report)
    assert torch.equal(compiled(x), pool(x))


def test_large_pooling_windows_stay_per_tap():
    # 64 taps (over MAX_UNROLLED_TAPS): the window loops stay outside, a kernel per tap.
    torch.manual_seed(0)
    pool = torch.nn.AvgPool2d(8)
    x = torch.randn(1, 4, 16, 16)
    compiled = _compile(_Pool(pool), x)
    assert "scf.for" in compiled.stages["schedule"]
    assert torch.equal(compiled(x), pool(x))


@pytest.mark.parametrize("name, products", [
    ("transformer_block", ["contraction 2x4x16x16x16", "contraction 2x16x64x4x16"]),
    ("llama_decoder_layer", ["contraction 2x2x1x8x16", "contraction 2x2x1x16x8"]),
])
def test_kernels_reading_folded_views_are_scheduled(name, products):
    # VTC folds attention's head split and transposes into the kernels' maps (floordiv/mod, a GQA
    # head's (h mod 4) floordiv 2): codegen-delinearize-loops gives them a loop per view dimension, so
    # the attention products and the output projection are contractions, not loops. Same sums in the
    # same order: bitwise the loops.
    from vtmlir import models

    model, inputs = models.get(name).build(batch=2 if name == "transformer_block" else 1, seed=0)
    model = model.eval()
    from vtmlir.codegen import DEFAULT_SCHEDULES, EXACT_SCHEDULES

    # opt level 1: VTC's views (level 0 copies instead, and level 2 adds blocked layouts).
    scheduled = vtmlir.compile(model, *inputs, opt_level=1, schedules=EXACT_SCHEDULES)
    loops = vtmlir.compile(model, *inputs, opt_level=1, schedules={kind: None for kind in DEFAULT_SCHEDULES})
    report = scheduled.report()
    assert not any(p.kind == "contraction" for p in report.fallbacks), str(report)
    vectorized = [p.description for p in report.kernels if p.id in report.vectorized]
    for product in products:
        assert product in vectorized, str(report)
    ours, reference = scheduled(*inputs), loops(*inputs)
    ours, reference = (ours, reference) if isinstance(ours, tuple) else ((ours,), (reference,))
    with torch.no_grad():
        expected = model(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for a, b, e in zip(ours, reference, expected):
        assert torch.equal(a, b)
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)


class _ResidualThenConv(torch.nn.Module):
    """MobileNetV2's block boundary: a residual sum of a BatchNorm'd projection, then a 1x1 expansion
    with BatchNorm + ReLU6 and another 1x1 convolution."""

    def __init__(self):
        super().__init__()
        self.proj, self.bn = torch.nn.Conv2d(8, 8, 1, bias=False), torch.nn.BatchNorm2d(8)
        self.expand, self.bn2 = torch.nn.Conv2d(8, 24, 1, bias=False), torch.nn.BatchNorm2d(24)
        self.head = torch.nn.Conv2d(24, 16, 1)

    def forward(self, x):
        y = x + self.bn(self.proj(x))
        return self.head(torch.nn.functional.relu6(self.bn2(self.expand(y))))


@pytest.mark.parametrize("size, batch, products", [
    (1, 1, ["contraction 1x8x8", "contraction 1x24x8", "contraction 1x16x24"]),
    (1, 3, ["contraction 3x8x8", "contraction 3x24x8", "contraction 3x16x24"]),
    (3, 2, ["contraction 2x8x9x8", "contraction 2x24x9x8", "contraction 2x16x9x24"]),
])
def test_convolutions_with_fused_prologues_over_small_images_are_contractions(size, batch, products):
    # Elementwise fusion puts the residual sum and the BatchNorm into the 1x1 convolution after them,
    # every input read through the convolution's window map (`(n, c, h + kh, w + kw)`): two such inputs
    # were no convolution and the kernel a 'pooling' left as loops. Over a 1x1 image the BatchNorm's
    # [C, 1, 1] vectors need no broadcast and are read as `(c, h + kh, w + kw)` too, with the
    # BatchNorm's cf.assert, which codegen-split-checks could not move: 'unknown' loops. A 1x1 image's
    # product is a Linear layer over the batch (vectors along the features). Same sums in the same
    # order: bitwise the loops.
    torch.manual_seed(0)
    model = _ResidualThenConv().eval()
    with torch.no_grad():
        for bn in (model.bn, model.bn2):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
    x = torch.randn(batch, 8, size, size)
    scheduled, loops = _exact_and_loops(model, x)
    report = scheduled.report()
    assert not report.fallbacks, str(report)
    vectorized = [p.description for p in report.kernels if p.id in report.vectorized]
    for product in products:
        assert product in vectorized, str(report)
    assert torch.equal(scheduled(x), loops(x))
    with torch.no_grad():
        torch.testing.assert_close(scheduled(x), model(x), rtol=1e-5, atol=1e-5)


class _Bf16Mix(torch.nn.Module):
    def forward(self, a, b):
        return (a * b + a) / (b + 2)


def test_bf16_arithmetic_is_done_in_f32_on_any_cpu():
    # LLVM legalises a bf16 fmul by promoting to f32 and calling compiler-rt's __truncsfbf2 on CPUs
    # without AVX512-BF16 (not in the process: "Symbols not found" from the JIT). The LLVM stage
    # computes in f32 and rounds after each op, as torch does: bitwise torch's result.
    a = (torch.rand(3, 37) * 10).bfloat16()
    b = (torch.rand(3, 37) * 10).bfloat16()
    compiled = _compile(_Bf16Mix(), a, b, threads=1)
    module = ir.Module.parse(compiled.stages["llvm"], context=make_context())
    bf16_arith = []

    def visit(op):
        if op.name in ("llvm.fadd", "llvm.fsub", "llvm.fmul", "llvm.fdiv", "llvm.fptrunc", "llvm.fpext"):
            types = [op.results[0].type, op.operands[0].type]
            elements = [t.element_type if isinstance(t, ir.VectorType) else t for t in types]
            if any(isinstance(e, ir.BF16Type) for e in elements):
                bf16_arith.append(op.name)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    assert bf16_arith == []
    assert torch.equal(compiled(a, b), _Bf16Mix()(a, b))
