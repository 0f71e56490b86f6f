"""A contraction runs its accumulator's fill and its elementwise epilogue in its outer tiles
(`codegen.fusion`, `ContractionSchedule.fuse_neighbours`, docs/codegen.md): bitwise the unfused
schedules' values for any thread count, within tolerance of PyTorch, and refused where a neighbour
reads C otherwise than element by element or another kernel reads C in between."""

from __future__ import annotations

import pytest
import torch
from torch_mlir import ir

import vtmlir
from vtmlir.codegen import attach_schedules
from vtmlir.codegen.kernels import FMA_ATTR
from vtmlir.context import make_context
from vtmlir.passes import run_pipeline

UNFUSED = {"contraction": {"fuse_neighbours": False}}


def _compile(model, *inputs, **options):
    # The codegen layer alone: opt level 0 (no layout passes).
    return vtmlir.compile(model, *inputs, **{"opt_level": 0, **options})


class _LinearBiasRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(96, 512)

    def forward(self, x):
        return torch.relu(self.linear(x))


class _MatmulResidual(torch.nn.Module):
    def forward(self, a, b, r):
        return a @ b + r


class _BmmResidualRelu(torch.nn.Module):
    def forward(self, a, b, r):
        return torch.relu(torch.bmm(a, b) + r)


class _ConvBnRelu(torch.nn.Module):
    def __init__(self, kernel: int, channels: int = 32, features: int = 64):
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, features, kernel, padding=kernel // 2, bias=False)
        self.bn = torch.nn.BatchNorm2d(features)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class _ReadBetween(torch.nn.Module):
    # C is read by a row sum and by the ReLU: whichever comes first, the values stay the unfused ones.
    def forward(self, a, b):
        c = a @ b
        return c.sum(-1), torch.relu(c)


def _cases():
    torch.manual_seed(0)
    conv = []
    # (The last: one K chunk and 3.2 MB of C, whose outer tiles on one thread are cut to
    # `fused_c_bytes`: several per image.)
    for name, kernel, channels, features, shape in (("conv1x1_bn_relu", 1, 32, 64, (2, 32, 16, 16)),
                                                    ("conv3x3_bn_relu", 3, 32, 64, (2, 32, 16, 16)),
                                                    ("conv1x1_bn_relu_large", 1, 64, 256, (1, 64, 56, 56))):
        model = _ConvBnRelu(kernel, channels, features)
        for p in model.bn.parameters():
            p.data.copy_(torch.rand_like(p) + 0.5)
        model.bn.running_mean.copy_(torch.randn(features))
        model.bn.running_var.copy_(torch.rand(features) + 0.5)
        conv.append((name, model.eval(), (torch.randn(*shape),)))
    return [
        ("linear_bias_relu", _LinearBiasRelu().eval(), (torch.randn(8, 96),)),
        ("matmul_residual", _MatmulResidual(), (torch.randn(24, 80), torch.randn(80, 512), torch.randn(24, 512))),
        # K in three chunks (256, 256, 88 peeled), one N tile of 32: on two threads the tiles split M.
        ("matmul_k_chunks_residual", _MatmulResidual(),
         (torch.randn(64, 600), torch.randn(600, 32), torch.randn(64, 32))),
        ("bmm_residual_relu", _BmmResidualRelu(),
         (torch.randn(4, 32, 64), torch.randn(4, 64, 256), torch.randn(4, 32, 256))),
        *conv,
        ("read_between", _ReadBetween(), (torch.randn(16, 64), torch.randn(64, 256))),
    ]


CASES = _cases()


@pytest.mark.parametrize("name, model, inputs", CASES, ids=[c[0] for c in CASES])
def test_fused_neighbours_are_bitwise_the_unfused_kernels(name, model, inputs):
    results = {}
    for threads in (1, 2):
        for fused in (True, False):
            compiled = _compile(model, *inputs, threads=threads, schedules=None if fused else UNFUSED)
            report = compiled.report()
            assert not report.fallbacks, str(report)
            if not fused:
                assert not report.fused
            out = compiled(*inputs)
            results[threads, fused] = out if isinstance(out, tuple) else (out,)
            if fused and threads == 1:
                fused_report = report
    reference = results[1, False]
    for key, got in results.items():
        assert all(torch.equal(g, r) for g, r in zip(got, reference)), key
    with torch.no_grad():
        expected = model(*inputs)
    for g, e in zip(reference, expected if isinstance(expected, tuple) else (expected,)):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
    roles = sorted(role for _, role in fused_report.fused.values())
    if name in ("linear_bias_relu", "matmul_residual", "matmul_k_chunks_residual", "bmm_residual_relu", "conv1x1_bn_relu",
                "conv1x1_bn_relu_large"):
        assert roles == ["epilogue", "prologue"], str(fused_report)
        host = next(iter(fused_report.fused.values()))[0]
        assert fused_report.kernels[host].kind == "contraction"
        assert "fused into kernel" in str(fused_report)


def _loops_holding(module, predicate) -> list:
    """The outermost `scf.forall`s of each function holding an op for which `predicate` holds."""
    found = []

    def visit(op):
        if op.name == "scf.forall":
            hits = []

            def inner(o):
                if predicate(o):
                    hits.append(o)
                return ir.WalkResult.ADVANCE

            op.walk(inner)
            if hits:
                found.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _is_product(op) -> bool:
    return op.name == "arith.mulf" and FMA_ATTR in op.attributes


def _is_relu(op) -> bool:
    return op.name == "arith.select" and isinstance(op.results[0].type, ir.VectorType)  # (ReLU: cmpf + select)


def _is_zero_store(op) -> bool:
    if op.name != "vector.transfer_write" or not isinstance(op.operands[0].owner, ir.OpView):
        return False
    value = op.operands[0].owner
    if value.name != "arith.constant":
        return False
    try:
        splat = ir.DenseFPElementsAttr(value.attributes["value"])
    except ValueError:
        return False
    return splat.is_splat and splat.get_splat_value().value == 0.0


@pytest.mark.parametrize("threads", [1, 2])
def test_fill_and_epilogue_run_in_the_contractions_loop(threads):
    # Read through the bindings in the "vectors" stage: the loop holding the contraction's register
    # tiles (its FMA-marked products) holds the fill's zero stores and the ReLU's too. (A batched
    # product: one thread takes all N tiles of a matrix in one iteration, GotoBLAS's order, and a
    # loop of one iteration is inlined; over the batch it has several.)
    _, model, inputs = next(c for c in CASES if c[0] == "bmm_residual_relu")
    for schedules, fused in ((None, True), (UNFUSED, False)):
        compiled = _compile(model, *inputs, threads=threads, schedules=schedules)
        module = ir.Module.parse(compiled.stages["vectors"], context=make_context())
        (loop,) = _loops_holding(module, _is_product)
        for member in (_is_relu, _is_zero_store):
            holding = _loops_holding(module, member)
            assert any(h == loop for h in holding) == fused
            if fused:
                assert len(holding) == 1


_READ_BETWEEN = """
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @between(%A: memref<24x64xf32>, %B: memref<64x512xf32>, %R: memref<24xf32>, %O: memref<24x512xf32>) {
  %zero = arith.constant 0.0 : f32
  %C = memref.alloc() : memref<24x512xf32>
  linalg.fill ins(%zero : f32) outs(%C : memref<24x512xf32>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<24x64xf32>, memref<64x512xf32>) outs(%C : memref<24x512xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%C : memref<24x512xf32>) outs(%R : memref<24xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %o, %x : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%C : memref<24x512xf32>) outs(%O : memref<24x512xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    linalg.yield %r : f32
  }
  memref.dealloc %C : memref<24x512xf32>
  return
}
func.func @transposed(%A: memref<48x64xf32>, %B: memref<64x48xf32>, %O: memref<48x48xf32>) {
  %zero = arith.constant 0.0 : f32
  %C = memref.alloc() : memref<48x48xf32>
  linalg.fill ins(%zero : f32) outs(%C : memref<48x48xf32>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<48x64xf32>, memref<64x48xf32>) outs(%C : memref<48x48xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%C : memref<48x48xf32>) outs(%O : memref<48x48xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    linalg.yield %r : f32
  }
  memref.dealloc %C : memref<48x48xf32>
  return
}
"""


def test_neighbours_reading_c_otherwise_or_after_another_reader_are_not_fused():
    # @between: a row sum reads C between the contraction and its ReLU (the contraction cannot move
    # past it); @transposed: the ReLU reads C transposed (another tile's elements). The fills are
    # prologues either way; the ReLUs keep schedules of their own. (The values: `read_between` above.)
    for threads in (1, 2):
        module = ir.Module.parse(_READ_BETWEEN, context=make_context())
        plans = attach_schedules(module.operation, threads=threads)
        relus = [p for p in plans if p.kind == "elementwise"]
        assert len(relus) == 2 and all(p.fused_into is None for p in relus), plans
        fills = [p for p in plans if p.kind == "data-movement"]
        assert len(fills) == 2 and all(p.fused_role == "prologue" for p in fills), plans
        contractions = [p for p in plans if p.kind == "contraction"]
        assert [p.neighbours for p in contractions] == [(f.id,) for f in fills]


def test_fusion_is_reported_and_profiled_with_its_contraction():
    model, inputs = CASES[0][1], CASES[0][2]
    compiled = _compile(model, *inputs, threads=1, profile=True)
    report = compiled.report()
    host = {c for c, _ in report.fused.values()}
    assert len(host) == 1
    profile = compiled.profile(*inputs, repeat=2)
    calls = {k.id: k.calls for k in profile.kernels}
    (cid,) = host
    assert calls[cid] == 1 and all(calls[m] == 0 for m in report.fused)
    assert torch.equal(compiled(*inputs), _compile(model, *inputs, threads=1)(*inputs))


_IN_PARALLEL_LOOP = """
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @panels(%A: memref<4x24x64xf32>, %B: memref<64x512xf32>, %O: memref<4x24x512xf32>) {
  %zero = arith.constant 0.0 : f32
  scf.forall (%i) in (4) {
    %a = memref.subview %A[%i, 0, 0] [1, 24, 64] [1, 1, 1]
        : memref<4x24x64xf32> to memref<24x64xf32, strided<[64, 1], offset: ?>>
    %o = memref.subview %O[%i, 0, 0] [1, 24, 512] [1, 1, 1]
        : memref<4x24x512xf32> to memref<24x512xf32, strided<[512, 1], offset: ?>>
    %C = memref.alloca() : memref<24x512xf32>
    linalg.fill ins(%zero : f32) outs(%C : memref<24x512xf32>)
    linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%a, %B : memref<24x64xf32, strided<[64, 1], offset: ?>>, memref<64x512xf32>)
        outs(%C : memref<24x512xf32>) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %m = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }
    linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%C : memref<24x512xf32>) {
    ^bb0(%x: f32):
      %r = arith.maximumf %x, %zero : f32
      linalg.yield %r : f32
    }
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%C : memref<24x512xf32>) outs(%o : memref<24x512xf32, strided<[512, 1], offset: ?>>) {
    ^bb0(%x: f32, %y: f32):
      linalg.yield %x : f32
    }
  }
  return
}
"""


def test_neighbours_of_a_contraction_inside_a_parallel_loop_fuse_with_its_for_tiles():
    # Inside a parallel loop (an im2col convolution's loop over panels) a contraction's tiles are
    # `scf.for`s, which fuse only with the same SSA bounds (the block is CSE'd first). The copy out
    # through a view at a dynamic offset is no member.
    module = ir.Module.parse(_IN_PARALLEL_LOOP, context=make_context())
    plans = attach_schedules(module.operation, threads=2)
    assert [(p.kind, p.fused_role) for p in plans] == [
        ("data-movement", "prologue"), ("contraction", ""), ("elementwise", "epilogue"), ("data-movement", "")]
    run_pipeline(module, "builtin.module(transform-interpreter)")
    holding = {}

    def visit(op):
        if op.name == "scf.for" and op.parent.name == "scf.forall":
            found = []

            def inner(o):
                found.append(o)
                return ir.WalkResult.ADVANCE

            op.walk(inner)
            holding[len(holding)] = found
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    fused = [ops for ops in holding.values() if any(_is_product(o) for o in ops)]
    assert len(fused) == 1
    assert any(o.name == "arith.maximumf" and isinstance(o.results[0].type, ir.VectorType) for o in fused[0])
    assert any(_is_zero_store(o) for o in fused[0])


def test_a_fusion_that_fails_leaves_its_kernels_scheduled_alone(monkeypatch):
    # The contraction's schedule fails where it would fuse (the epilogue tiled otherwise: loops of
    # other bounds, a silenceable failure, suppressed): each neighbour's own vector schedule runs
    # after it on what is left of it instead, the report says so, and the values are the unfused ones.
    from vtmlir.codegen import schedules, transform_ir

    def failing(kernel, target, loop, scope, members):
        last = members[-1]
        _, other = transform_ir.tile_forall(transform_ir.match_kernel(scope, last.id), [1] * last.kernel.rank)
        transform_ir.fuse_sibling(loop, other)

    _, model, inputs = next(c for c in CASES if c[0] == "linear_bias_relu")
    expected = _compile(model, *inputs, threads=1, schedules=UNFUSED)(*inputs)
    monkeypatch.setattr(schedules, "_fuse_members", failing)
    compiled = _compile(model, *inputs, threads=1)
    report = compiled.report()
    assert not report.fallbacks and not report.fused, str(report)
    assert "fused into" not in str(report)
    assert torch.equal(compiled(*inputs), expected)


@pytest.mark.parametrize("name, decomposed", [("mlp", False), ("resnet_basic_block", True),
                                              ("conv_bn_relu_residual", True)])
def test_groups_with_moved_frees_keep_the_measured_peak(name, decomposed):
    # A group runs at its last member's place, so a buffer freed between its members (the
    # contraction's input) is freed after it. That is done only where it keeps the block's peak
    # (`fusion.frees_keep_peak`): mlp fuses such groups (its peak is elsewhere); the decomposed
    # blocks' would raise theirs (18688 -> 20800 B measured when they were fused). Same peak and
    # same values as without fused neighbours, bitwise.
    from zoo_graphs import zoo_graph
    _, inputs, module = zoo_graph(name, decomposed)
    text = str(module)
    # (Opt level 0, as `measure_peak_memory` compiles: blocked layouts would make the 3x3 convolutions
    # per-tap contractions, which fuse nothing.)
    fused = vtmlir.compile(text, opt_level=0, track_memory=True)
    alone = vtmlir.compile(text, opt_level=0, track_memory=True, schedules={"contraction": {"fuse_neighbours": False}})
    got, expected = fused(*inputs), alone(*inputs)
    assert torch.equal(torch.as_tensor(got), torch.as_tensor(expected))
    assert fused.memory_stats().peak_internal_bytes == alone.memory_stats().peak_internal_bytes
    if name == "mlp":
        assert len(fused.report().fused) >= 4  # (2 before groups with frees were fused at all)


def test_a_fill_of_a_concat_slice_fuses_with_the_product_written_through_its_expansion():
    # EfficientViT's grouped 1x1 convolution at opt level 2 writes into its slice of the multi-scale
    # concat, which it reads as [batch, groups, channels, rows, columns] (`expand_shape`): the slice's
    # zero fill, over [batch, channels, pixels], gets the same expansion (`fusion.split_to_output`) and
    # runs in the contraction's tiles; bitwise the unfused kernels. (Its filter's unit taps keep a
    # window, `codegen-delinearize-loops`: the product is one contraction, not a loop per output row.)
    from vtmlir.models import get

    model, inputs = get("vtc_efficientvit_block").build(batch=1)
    fused = vtmlir.compile(model, *inputs, threads=1)
    grouped = [p for p in fused.report().kernels if p.description == "contraction 1x12x16x32x32x16"]
    assert len(grouped) == 1, [p.description for p in fused.report().kernels]
    fills = [p for p in fused.report().kernels if p.fused_into == grouped[0].id]
    assert [p.description for p in fills] == ["data-movement 1x12x16x32x32"], fused.report()
    alone = vtmlir.compile(model, *inputs, threads=1, schedules={"contraction": {"fuse_neighbours": False}})
    assert not any(p.fused_into for p in alone.report().kernels)
    assert torch.equal(fused(*inputs), alone(*inputs))
