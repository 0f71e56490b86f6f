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


def test_conversion_bit_exact_for_every_code_of_every_type():
    """The in-register conversion (sign extension / uitofp / exponent-mantissa rebuild) equals the
    type's value table bit for bit for all 2^n codes of all 42 types (NaN codes: NaN)."""
    types = all_types()
    compiled = vtmlir.compile(_conversion_module(types))
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
    assert "lowbit.dequantize" not in stage and "unrealized_conversion_cast" not in stage
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


def test_fig8_relayout_and_compact_storage():
    """With the mma B-fragment tile layout, each thread's 4 codes are consecutive in the stream
    (tiles n-major), the stream is packed with no gaps (+1 slack byte for 3-bit codes)."""
    q = quantize(nn.Linear(32, 16, bias=False), dtype="i3", group_size=16)
    graph = vtmlir.import_torch(q, torch.randn(1, 32))
    run_pipeline(graph, f"subbyte-pack{{tile-layout='{MMA_B}'}}")
    from vtmlir.temco.weights import constant_array

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


def _mma_kernels(types, m=16, n=8, k=32, group=16):
    from vtmlir.lowbit import quantize_weight
    from vtmlir.lowbit.gpu_matmul import QuantizedMatmulKernel

    gen = torch.Generator().manual_seed(0)
    weights = [quantize_weight(torch.randn(n, k, generator=gen), t, group) for t in types]
    return weights, [QuantizedMatmulKernel.build(w, m=m) for w in weights]


def test_mma_kernel_ptx_assembles_for_every_type():
    """The warp mma.sync kernel (f16 x n-bit, f32 accumulate): PTX through ptxas, sm_80 and sm_90,
    for every type of issue 6 (one translation for all kernels; sm_80 PTX assembles forward)."""
    from vtmlir.backend.cuda.ptxas import assemble
    from vtmlir.lowbit.gpu_matmul import ptx_batch

    _, kernels = _mma_kernels(ISSUE_TYPES)
    ptx = ptx_batch(kernels, "sm_80")
    for kernel in kernels:
        text = ptx[kernel.name]
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in text, kernel.name
        for arch in ("sm_80", "sm_90"):
            assert assemble(text, arch, kernel.name)


def test_mma_kernel_packs_each_threads_codes_contiguously():
    """Fig. 8: thread t of the first tile holds codes B[k, n] at k in 2(t mod 4) + {0, 1, 8, 9},
    n = t / 4 — bits [4tn, 4tn + 4n) of the packed stream."""
    from vtmlir.lowbit import unpack_bits

    weights, kernels = _mma_kernels(["u3"])
    codes = weights[0].codes.T
    stream = unpack_bits(kernels[0].packed, 3, 32 * 8)
    for t in range(32):
        k0, n0 = 2 * (t % 4), t // 4
        assert list(stream[4 * t: 4 * t + 4]) == [codes[k0 + d, n0] for d in (0, 1, 8, 9)]


def test_mma_kernel_runs_and_matches_reference():
    from vtmlir.backend.cuda import cuda_available
    from vtmlir.lowbit.gpu_matmul import reference

    if not cuda_available():
        pytest.skip("no CUDA device")
    weights, kernels = _mma_kernels(["i4", "u3", "e2m1", "e4m3", "e1m1", "u8"], m=32, n=16, k=64)
    x = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float16)
    for w, kernel in zip(weights, kernels):
        np.testing.assert_allclose(kernel.run(x), reference(w, x), rtol=2e-3, atol=2e-3)
