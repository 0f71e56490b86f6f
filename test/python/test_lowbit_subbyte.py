"""subbyte-pack / subbyte-lower (Tilus §6): recognition of quantised weights, compact re-laid-out
storage (Fig. 8), the in-register conversion bit for bit for every type, fused CPU numerics vs the
PyTorch reference, and the CUDA path through ptxas for every type."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import vtmlir
from vtmlir.dialects.register_layout import parse_register_layout
from vtmlir.errors import VtmlirError
from vtmlir.ir_utils import walk_ops
from vtmlir.lowbit import QuantizedLinear, all_types, pack_bits, parse_dtype, quantize
from vtmlir.lowbit.recognize import recognize_weight
from vtmlir.passes import run_pipeline

PIPELINE = "subbyte-pack, subbyte-lower"
MMA_B = "local(2, 1).column_spatial(4, 8).local(2, 1)"  # mma.m16n8k16 B fragment over (k, n)
ISSUE_TYPES = ([f"i{n}" for n in range(2, 9)] + [f"u{n}" for n in range(1, 9)]
               + ["e4m3", "e5m2", "e3m3", "e3m2", "e2m3", "e2m2", "e2m1", "e1m1"])


class Layers(nn.Module):
    """One quantised linear per type, outputs concatenated: one compile covers every type."""

    def __init__(self, types, k=16, n=8, group=8, bias=False):
        super().__init__()
        self.layers = nn.ModuleList(quantize(nn.Linear(k, n, bias=bias), dtype=t, group_size=group) for t in types)

    def forward(self, x):
        return torch.cat([layer(x) for layer in self.layers], dim=-1)


def _weights(model):
    return [m.quantized_weight().dequantize() for m in model.modules() if isinstance(m, QuantizedLinear)]


def _conversion_module(types) -> str:
    """One generic per type: code (i32 0..255) -> f32 by convert.emit_code_to_f32."""
    from torch_mlir import ir
    from torch_mlir.dialects import func, linalg, tensor

    from vtmlir.context import make_context
    from vtmlir.lowbit.convert import emit_code_to_f32

    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        i32, f32 = ir.IntegerType.get_signless(32), ir.F32Type.get()
        src, dst = ir.RankedTensorType.get([256], i32), ir.RankedTensorType.get([256], f32)
        identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(1))
        with ir.InsertionPoint(module.body):
            @func.FuncOp.from_py_func(src, name="main")
            def main(codes):
                outs = []
                for t in types:
                    empty = tensor.EmptyOp([256], f32)
                    g = linalg.GenericOp([dst], [codes], [empty.result], ir.ArrayAttr.get([identity] * 2),
                                         ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")]))
                    block = g.regions[0].blocks.append(i32, f32)
                    with ir.InsertionPoint(block):
                        linalg.YieldOp([emit_code_to_f32(block.arguments[0], t)])
                    outs.append(g.results[0])
                return tuple(outs)
        return str(module)


def _vector_conversion_module(types) -> str:
    """One loop per type: 32 words of 8 codes, each converted as a vector<8xi32> (cpu_matmul's form)."""
    from torch_mlir import ir
    from torch_mlir.dialects import arith, bufferization, func, scf, tensor, vector

    from vtmlir.context import make_context
    from vtmlir.lowbit.convert import emit_code_to_f32

    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        i32, f32, index = ir.IntegerType.get_signless(32), ir.F32Type.get(), ir.IndexType.get()
        v_i32 = ir.VectorType.get([8], i32)
        with ir.InsertionPoint(module.body):
            @func.FuncOp.from_py_func(ir.RankedTensorType.get([256], i32), name="main")
            def main(codes):
                mem = bufferization.ToBufferOp(ir.MemRefType.get([256], i32), codes, read_only=True).result
                c = [arith.ConstantOp(index, v).result for v in (0, 1, 32, 8)]
                outs = []
                for t in types:
                    loop = scf.ForOp(c[0], c[2], c[1], [tensor.EmptyOp([256], f32).result])
                    with ir.InsertionPoint(loop.body):
                        base = arith.muli(loop.induction_variable, c[3])
                        values = emit_code_to_f32(vector.LoadOp(v_i32, mem, [base]).result, t)
                        out = loop.inner_iter_args[0]
                        for lane in range(8):
                            at = arith.addi(base, arith.ConstantOp(index, lane).result)
                            out = tensor.insert(vector.extract(values, [], [lane]), out, [at])
                        scf.YieldOp([out])
                    outs.append(loop.results[0])
                return tuple(outs)
        return str(module)


@pytest.mark.parametrize("form", ["scalar", "vector"])
def test_conversion_bit_exact_for_every_code_of_every_type(form):
    """The in-register conversion (sign extension / uitofp / exponent-mantissa rebuild) equals the
    type's value table bit for bit for all 2^n codes of all 42 types (NaN codes: NaN), on i32 codes
    (portable lowering, GPU kernels) and lane-wise on vector<8xi32> (CPU vector loops)."""
    types = all_types()
    build = _conversion_module if form == "scalar" else _vector_conversion_module
    compiled = vtmlir.compile(build(types))
    results = compiled(np.arange(256, dtype=np.int32))
    for t, got in zip(types, results):
        got, want = got.numpy()[: t.num_codes], t.table
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan), t.name
        assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32)), t.name


def test_dequantisation_bit_exact_and_fused():
    """x = I: the fused quantised matmul returns W'^T, equal to the numpy reference bit for bit;
    the codes recognised are the quantiser's; no dequantised weight is left in the graph."""
    types = ["i3", "u5", "e2m1", "e3m3"]
    model = Layers(types).eval()
    x = torch.eye(16)
    graph = vtmlir.import_torch(model, x)
    layers = [m for m in model.modules() if isinstance(m, QuantizedLinear)]
    for matmul, layer in zip(walk_ops(graph, "linalg.matmul"), layers):
        found = recognize_weight(matmul)
        assert np.array_equal(found.codes, layer.quantized_weight().codes.T)
        assert found.bits == layer.dtype_spec.bits
        assert [s.group for st in found.steps for s in st.sides.values()] == [8] * len(found.steps)
    compiled = vtmlir.compile(graph, pipeline=PIPELINE)
    stage = compiled.stages["optimized"]
    assert stage.count("lowbit.fused") == len(types)
    assert "lowbit.dequantize" not in stage and "lowbit.unpack" not in stage
    got = compiled(x.numpy()).numpy()
    want = np.concatenate([w.T for w in _weights(model)], axis=1)
    # exact equality; only the sign of zero differs (the accumulator starts at +0: +0 + -0 = +0)
    assert np.array_equal(got, want) and not np.array_equal(got, want + np.float32(1e-6))


def test_quantised_linear_matches_pytorch():
    layout = MMA_B  # the default layout is covered by the bit-exact test
    model = Layers(["i4", "u3", "e2m1", "e3m3", "e4m3"], k=32, n=16, group=16, bias=True).eval()
    x = torch.randn(2, 3, 32)  # [batch, seq, K]: the importer flattens to a 2-D matmul
    pipeline = PIPELINE if not layout else f"subbyte-pack{{tile-layout='{layout}'}}, subbyte-lower"
    compiled = vtmlir.compile(model, x, pipeline=pipeline)
    with torch.no_grad():
        ref = model(x)
    torch.testing.assert_close(compiled(x), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype, bias", [("u4", True), ("u4", False), ("e3m2", True)])
def test_half_model_is_fused_and_matches_pytorch(dtype, bias):
    """A half model (`.half()`: f16 activations, scales and dequantised weight, an f32-accumulating
    matmul on widened activations): subbyte-pack recognises the f16 weight chain and subbyte-lower
    fuses it, reading the f16 activations themselves (no f32 copy of them; the kernel keeps its
    lowbit.fused mark through the elementwise fusion of bufferization). Without a bias (Llama's
    Linears) the importer's matmul takes the f16 operands straight into f32 sums: the dequantised
    weight is f16 (the chain's last step, a truncf, gives the element type) and the fused body
    widens both operands, as linalg.matmul does (subbyte-pack built an f32 generic yielding f16).
    A float type's decoding table is f16 in a half model: the f32 lookup is rounded back to f16
    (exactly) before the rest of the chain (it was an f32 x f16 multiply)."""
    model = quantize(nn.Linear(64, 32, bias=bias), dtype=dtype, group_size=16).half().eval()
    x = torch.randn(3, 64).half()
    compiled = vtmlir.compile(model, x, pipeline=PIPELINE)
    optimized = compiled.stages["optimized"]
    assert optimized.count("lowbit.fused") == 1 and "tensor<3x64xf32>" not in optimized
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=2e-3, atol=2e-3)


def test_fig8_relayout_and_compact_storage():
    """With the mma B-fragment tile layout, each thread's 4 codes are consecutive in the stream
    (tiles n-major), the stream is packed with no gaps (+1 slack byte for 3-bit codes)."""
    q = quantize(nn.Linear(32, 16, bias=False), dtype="i3", group_size=16)
    graph = vtmlir.import_torch(q, torch.randn(1, 32))
    run_pipeline(graph, f"subbyte-pack{{tile-layout='{MMA_B}'}}")
    from vtmlir.ir_constants import constant_array

    packed = next(constant_array(op) for op in walk_ops(graph, "arith.constant")
                  if "xi8>" in str(op.results[0].type))
    codes = q.quantized_weight().codes.T  # [K, N]
    layout = parse_register_layout(MMA_B)
    stream = [layout.distribute(codes[k:k + 16, n:n + 8]).reshape(-1)
              for n in range(0, 16, 8) for k in range(0, 32, 16)]
    want = np.concatenate([pack_bits(np.concatenate(stream), 3), np.zeros(1, np.uint8)])
    assert packed.size == 32 * 16 * 3 // 8 + 1
    assert np.array_equal(packed.view(np.uint8), want)


def test_non_quantised_matmul_left_alone():
    model = nn.Linear(8, 4).eval()
    graph = vtmlir.import_torch(model, torch.randn(2, 8))
    before = str(graph)
    run_pipeline(graph, PIPELINE)
    assert str(graph) == before


def test_bad_tile_layout_is_a_diagnostic():
    q = quantize(nn.Linear(16, 8), dtype="u4", group_size=8)
    graph = vtmlir.import_torch(q, torch.randn(1, 16))
    with pytest.raises(VtmlirError, match="not a whole number of 16x16 tiles"):
        run_pipeline(graph, "subbyte-pack{tile-layout='local(16, 16)'}")


CUDA_TYPES = ["i3", "u5", "e2m1", "e3m3", "e4m3", "e5m2"]  # each code path: spanning int, zero point,
# builtin / vt / NaN / IEEE floats (the conversion itself is checked for all types above and in the mma test)


def test_cuda_ptx_assembles_through_compile():
    model = Layers([parse_dtype(t) for t in CUDA_TYPES], k=16, n=8, group=8).eval()
    x = torch.randn(2, 16)
    compiled = vtmlir.compile(model, x, target="cuda", pipeline=PIPELINE)
    assert compiled.stages["optimized"].count("lowbit.fused") == len(CUDA_TYPES)
    for arch in ("sm_80", "sm_90"):
        assert len(compiled.assemble(arch)) == len(compiled.kernels)


def test_cuda_runs_and_matches_reference():
    from vtmlir.backend.cuda import cuda_available

    if not cuda_available():
        pytest.skip("no CUDA device")
    model = Layers(["i4", "u3", "e2m1", "e4m3", "e1m1"], k=32, n=16, group=16, bias=True).eval()
    x = torch.randn(4, 32)
    compiled = vtmlir.compile(model, x, target="cuda", pipeline=PIPELINE)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)


VECTOR_PIPELINE = "subbyte-pack, subbyte-lower{cpu-vectorize=1}"


def test_cpu_vector_loops_bit_exact_dequantisation():
    """cpu-vectorize: x = I returns W'^T bit for bit (ints by shift-pair sign extension, uints with
    zero points, floats by the lane-wise rebuild or the lookup table); the matmuls became vector loops."""
    types = ["i3", "u5", "e2m1", "e3m3", "e4m3"]
    model = Layers(types).eval()
    x = torch.eye(16)
    compiled = vtmlir.compile(model, x, pipeline=VECTOR_PIPELINE)
    stage = compiled.stages["optimized"]
    assert "lowbit.fused" not in stage and "linalg.matmul" not in stage
    # 16 rows: blocks of 8, so e4m3 (NaN code) uses the lookup table, the other floats the rebuild
    assert stage.count("vector.bitcast") == len(types) and stage.count("vector.gather") == 1
    got = compiled(x).numpy()
    want = np.concatenate([w.T for w in _weights(model)], axis=1)
    assert np.array_equal(got, want) and not np.array_equal(got, want + np.float32(1e-6))


@pytest.mark.parametrize("rows", [1, 6])
def test_cpu_vector_loops_match_pytorch(rows):
    """GEMV and a block of 6 rows (x = I of the bit-exact test has two blocks of 8); every kind of
    conversion (e5m2: the rebuild with inf/NaN for GEMV, the lookup table for 6 rows)."""
    model = Layers(["i2", "i8", "u1", "u3", "u8", "e5m2", "e3m2", "e1m1"], k=32, n=16, group=16, bias=True).eval()
    x = torch.randn(rows, 32)
    compiled = vtmlir.compile(model, x, pipeline=VECTOR_PIPELINE)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)


def test_cpu_vectorize_keeps_the_portable_form_where_it_does_not_apply(capfd):
    """A re-laid-out weight (mma tile layout) is not in word order: a report line says so and the
    portable fused loop computes it."""
    model = Layers(["u4"], k=32, n=16, group=16).eval()
    x = torch.randn(2, 32)
    pipeline = f"subbyte-pack{{tile-layout='{MMA_B}'}}, subbyte-lower{{cpu-vectorize=1 report=-}}"
    compiled = vtmlir.compile(model, x, pipeline=pipeline)
    err = capfd.readouterr().out  # report=- is stdout
    assert "u4 matmul: not vectorized: the weight is not in the default stream order" in err
    assert "u4 matmul: fused linalg.generic" in err
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)


def test_compile_lowers_quantised_weights_to_cpu_vector_loops_by_default():
    """`vtmlir.compile(target="cpu")` packs quantised weights and uses the vector loops unasked
    (stage "lowbit"); `lowbit="portable"` gives the fused scalar loop and `lowbit=None` the imported
    dequantise-then-matmul graph. All three match the PyTorch reference."""
    model = Layers(["u4", "e2m1"], k=32, n=16, group=16, bias=True).eval()
    x = torch.randn(3, 32)
    with torch.no_grad():
        want = model(x)
    default = vtmlir.compile(model, x)
    stage = default.stages["lowbit"]
    assert "vector.bitcast" in stage and "linalg.matmul" not in stage
    portable = vtmlir.compile(model, x, lowbit="portable")
    assert "vector.bitcast" not in portable.stages["lowbit"]
    assert "lowbit.fused" in portable.stages["lowbit"]
    unfused = vtmlir.compile(model, x, lowbit=None)
    assert "lowbit" not in unfused.stages
    for compiled in (default, portable, unfused):
        torch.testing.assert_close(compiled(x), want, rtol=1e-5, atol=1e-5)


def test_compile_leaves_models_without_quantised_weights_and_rejects_unknown_lowbit():
    model = nn.Linear(16, 8).eval()
    x = torch.randn(2, 16)
    assert "lowbit" not in vtmlir.compile(model, x).stages
    with pytest.raises(VtmlirError, match="unknown lowbit 'fast'; expected one of: vector, portable"):
        vtmlir.compile(model, x, lowbit="fast")
