"""The GPU quantised-matmul kernels (lowbit/gpu_matmul.py, gpu_kernels.py): the mma rule that picks
tensor cores or CUDA cores, PTX of both through ptxas (sm_80, sm_90) for every type each applies to,
the Fig. 8 per-thread packing of both B-tile layouts, the FMA kernel run on the CPU (block and thread
ids turned into loops) against the numpy reference, and GPU runs where a device exists."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
import torch

from vtmlir.errors import VtmlirError
from vtmlir.lowbit import all_types, parse_dtype, quantize_weight, unpack_bits
from vtmlir.lowbit.gpu_matmul import QuantizedMatmulKernel, ptx_batch, reference
from vtmlir.lowbit.mma_rule import mma_operand_exact, mma_refusal

ISSUE_TYPES = ([f"i{n}" for n in range(2, 9)] + [f"u{n}" for n in range(1, 9)]
               + ["e4m3", "e5m2", "e3m3", "e3m2", "e2m3", "e2m2", "e2m1", "e1m1"])
WIDE_FLOATS = ["f6e5m0", "f7e5m1", "f7e6m0", "f8e6m1", "f8e7m0"]  # values beyond f16


def _weights(types, n=8, k=32, group=16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [quantize_weight(torch.randn(n, k, generator=gen), t, group) for t in types]


def test_mma_rule_picks_tensor_cores_exactly_where_f16_holds_the_values():
    wide = {t.name for t in all_types() if not mma_operand_exact(t)}
    assert wide == set(WIDE_FLOATS)
    for w in _weights(ISSUE_TYPES + WIDE_FLOATS):
        kernel = QuantizedMatmulKernel.build(w, m=16)
        assert kernel.mode == ("fma" if w.dtype.name in WIDE_FLOATS else "mma"), (w.dtype.name, kernel.reason)
    (w8,) = _weights(["u4"], group=8)
    assert "group size 8 is not a multiple of 16" in mma_refusal(w8, 16)
    assert QuantizedMatmulKernel.build(w8, m=16).mode == "fma"
    (w16,) = _weights(["u4"])
    assert "does not tile" in mma_refusal(w16, 4) and QuantizedMatmulKernel.build(w16, m=4).mode == "fma"
    assert QuantizedMatmulKernel.build(w16, m=16, mode="fma").mode == "fma"  # forcing CUDA cores


def test_forcing_mma_where_the_rule_fails_is_an_error():
    (w,) = _weights(["e6m1"])
    with pytest.raises(VtmlirError, match="cannot compute f8e6m1 exactly: the values of f8e6m1 are not all exact in f16"):
        QuantizedMatmulKernel.build(w, m=16, mode="mma")
    with pytest.raises(VtmlirError, match="unknown kernel mode 'simt'"):
        QuantizedMatmulKernel.build(w, m=16, mode="simt")
    (w16,) = _weights(["u4"])
    with pytest.raises(VtmlirError, match="warps 3 x 1 do not tile the 1 x 1 mma tiles"):
        QuantizedMatmulKernel.build(w16, m=16, warps=(3, 1))
    (odd,) = _weights(["u3"], k=30, group=10)
    with pytest.raises(VtmlirError, match="K % 4 == 0; got K=30"):
        QuantizedMatmulKernel.build(odd, m=2)


def test_ptx_of_both_kernels_assembles_for_every_type():
    """Every one of the 42 types (all 1-8 bit ints/uints, every 3-8 bit float split): the mma kernel
    (4 x 2 warps per block, B tiles staged in shared memory) for each of the 37 the rule allows, the
    FMA kernel for all 42; one translation subprocess; sm_80 and sm_90."""
    from vtmlir.backend.cuda.ptxas import assemble

    weights = _weights([t.name for t in all_types()], n=16)
    exact = [w for w in weights if mma_operand_exact(w.dtype)]
    assert len(weights) == 42 and len(exact) == 37
    kernels = [QuantizedMatmulKernel.build(w, m=64, mode="mma") for w in exact]
    assert {k.block for k in kernels} == {(256, 1, 1)} and {k.grid for k in kernels} == {(1, 1, 1)}
    kernels += [QuantizedMatmulKernel.build(w, m=4, mode="fma") for w in weights]
    ptx = ptx_batch(kernels, "sm_80")
    for kernel, w in zip(kernels, exact + weights):
        text = ptx[kernel.name]
        if kernel.mode == "mma":
            assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in text, kernel.name
            stride = 16 * w.dtype.bits + 8  # one packed 16 x 8 B tile + the last thread's 8-byte window
            assert f".shared .align 1 .b8 __wg_{kernel.name}_0[{2 * stride}]" in text, kernel.name
            assert text.count("bar.sync") >= 2 and "st.shared" in text and "ld.shared" in text, kernel.name
        else:
            assert "mma.sync" not in text and text.count("fma.rn.f32") >= 16, kernel.name
        for arch in ("sm_80", "sm_90"):
            assert assemble(text, arch, kernel.name)


def test_each_threads_codes_are_contiguous_in_both_layouts():
    """Fig. 8: mma thread t of the first tile holds B[k, n] at k = 2(t mod 4) + {0, 1, 8, 9},
    n = t / 4; FMA thread t holds its column: B[0..3, t]. Both are bits [4tn, 4tn + 4n)."""
    (w,) = _weights(["u3"], n=32, k=32)
    codes = w.codes.T
    mma = QuantizedMatmulKernel.build(w, m=16, mode="mma")
    fma = QuantizedMatmulKernel.build(w, m=16, mode="fma")
    assert fma.block == (32, 1, 1)
    mma_stream, fma_stream = (unpack_bits(kern.packed, 3, 32 * 32) for kern in (mma, fma))
    for t in range(32):
        k0, n0 = 2 * (t % 4), t // 4
        assert list(mma_stream[4 * t: 4 * t + 4]) == [codes[k0 + d, n0] for d in (0, 1, 8, 9)]
        assert list(fma_stream[4 * t: 4 * t + 4]) == [codes[d, t] for d in range(4)]
    assert list(fma_stream[128: 132]) == [codes[4 + d, 0] for d in range(4)]  # the next k tile


def _run_on_cpu(kernel: QuantizedMatmulKernel, x: np.ndarray) -> np.ndarray:
    y = np.zeros(kernel.shape[:2], np.float32)
    arrays = [np.ascontiguousarray(x, np.float16), kernel.packed, kernel.scales]
    arrays += ([kernel.zeros] if kernel.zeros is not None else []) + [y]
    run_gpu_func_on_cpu(kernel.mlir, kernel.grid, kernel.block, arrays)
    return y


def run_gpu_func_on_cpu(text: str, grid, block, arrays: list[np.ndarray]) -> None:
    """A gpu.module's kernel (its printed MLIR `text`) run on the host: the gpu.func becomes a function
    of (thread, block x, block y) called from loops over the grid and block; everything else is
    unchanged. `arrays` are its memref arguments in order (written in place)."""
    from torch_mlir import ir
    from torch_mlir.execution_engine import ExecutionEngine
    from torch_mlir.runtime import get_ranked_memref_descriptor

    from vtmlir.backend.cpu.lower import lower_to_llvm
    from vtmlir.context import make_context

    (gx, gy, _), threads = grid, block[0]
    text = text.replace("gpu.return", "return")
    sig = re.search(r"gpu\.func @\w+\((.*)\) kernel \{", text)
    text = text.replace(sig.group(0), "func.func @body(%thread_id_x: index, %block_id_x: index, "
                        f"%block_id_y: index, {sig.group(1)}) {{")
    text = re.sub(r"\n\s*%(thread_id_x|block_id_x|block_id_y) = gpu\.\w+ [xy]", "", text)
    body = text[text.index("{", text.index("gpu.module")) + 1: text.rindex("}")]
    body = body[: body.rindex("}")]
    args = re.findall(r"(%arg\d+): (memref<[^>]*>)", sig.group(1))
    names, types = ", ".join(a for a, _ in args), ", ".join(t for _, t in args)
    driver = f"""
  func.func @main({", ".join(f"{a}: {t}" for a, t in args)}) attributes {{llvm.emit_c_interface}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %gx = arith.constant {gx} : index
    %gy = arith.constant {gy} : index
    %tx = arith.constant {threads} : index
    scf.for %by = %c0 to %gy step %c1 {{
      scf.for %bx = %c0 to %gx step %c1 {{
        scf.for %t = %c0 to %tx step %c1 {{
          func.call @body(%t, %bx, %by, {names}) : (index, index, index, {types}) -> ()
        }}
      }}
    }}
    return
  }}"""
    with make_context():
        module = ir.Module.parse("module {" + body + driver + "\n}")
        lower_to_llvm(module)
        engine = ExecutionEngine(module, opt_level=2)
        engine.invoke("main", *[ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a))) for a in arrays])


@pytest.mark.parametrize("dtype, group, m, n", [("f8e6m1", 8, 4, 48), ("u5", 16, 3, 48), ("i3", 4, 16, 48),
                                                ("e2m1", 32, 1, 128)])
def test_fma_kernel_run_on_cpu_matches_reference(dtype, group, m, n):
    """Wide float (values beyond f16), zero points, odd group sizes, M not a multiple of 16, N = 48
    (16-thread blocks) and 128 (one block of 4 warps): the FMA kernel's result equals the exact
    reference to f32 rounding."""
    (w,) = _weights([dtype], n=n, k=64, group=group)
    kernel = QuantizedMatmulKernel.build(w, m=m)
    assert kernel.mode == "fma" and kernel.block == (min(n, 128) if n != 48 else 16, 1, 1)
    x = np.random.default_rng(0).standard_normal((m, 64)).astype(np.float16)
    want = reference(w, x)
    np.testing.assert_allclose(_run_on_cpu(kernel, x), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_kernels_run_on_gpu_and_match_reference():
    from vtmlir.backend.cuda import cuda_available

    if not cuda_available():
        pytest.skip("no CUDA device")
    x = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float16)
    for w in _weights(["i4", "u3", "e2m1", "e4m3", "e1m1", "u8", "f8e6m1"], n=16, k=64):
        for mode in ("auto", "fma"):
            kernel = QuantizedMatmulKernel.build(w, m=32, mode=mode)
            want = reference(w, x)
            np.testing.assert_allclose(kernel.run(x), want, rtol=1e-3, atol=1e-3 * np.abs(want).max())


def test_type_names_of_wide_floats_parse():
    assert [parse_dtype(t).name for t in WIDE_FLOATS] == WIDE_FLOATS
