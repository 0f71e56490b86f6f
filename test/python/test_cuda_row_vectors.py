"""128-bit accesses in the row kernels of `codegen-gpu-reduce-rows` (docs/codegen_gpu.md, "Row
groups"): a softmax's, LayerNorm's and RMSNorm's row group (and row reductions as kernels of their
own) read and write their rows in chunks of 16 bytes per thread -- `ld.global.v4` / `st.global.v4`
(4 f32, or 8 f16 as `.v4.b32`), `ld.shared.v4` / `st.shared.v4` on the rows kept in shared memory --
where every access along the row is contiguous and aligned; rows whose length the vector does not
divide keep narrower chunks or scalar code. Checked statically with `ptxas -v` for sm_80 and sm_90
(no spills); on a GPU (skipped here) the kernels match PyTorch."""

from __future__ import annotations

import re

import pytest
import torch
from test_cuda_schedules import ARCHS, _check_resources

import vtmlir
from vtmlir.backend.cuda import cuda_available

DTYPES = {"f32": torch.float32, "f16": torch.float16}


def _module(kind: str, row: int, dtype):
    return {"softmax": torch.nn.Softmax(-1), "layernorm": torch.nn.LayerNorm(row),
            "rmsnorm": torch.nn.RMSNorm(row, eps=1e-6)}[kind].eval().to(dtype)


def _accesses(ptx: str) -> dict[str, int]:
    """Counts of the PTX memory instructions, by opcode with its modifiers (`ld.global.v4.b32`;
    `.nc` read-only loads counted as plain ones)."""
    found: dict[str, int] = {}
    for line in ptx.splitlines():
        m = re.match(r"\s*(?:@%p\d+\s+)?((?:ld|st)\.(?:global|shared)(?:\.nc)?(?:\.v[24])?\.\w+)", line)
        if m:
            op = m.group(1).replace(".nc", "")
            found[op] = found.get(op, 0) + 1
    return found


def _vector(found: dict[str, int], prefix: str, lanes: str = "v4") -> int:
    return sum(n for op, n in found.items() if op.startswith(f"{prefix}.{lanes}."))


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("kind", ["softmax", "layernorm", "rmsnorm"])
def test_norm_rows_of_4096_take_128_bit_accesses(kind, dtype):
    """The 4096x4096 softmax / LayerNorm / RMSNorm of `benchmarks/gpu.py`, one row-group kernel
    each (128 threads per row): its row loops read x with `ld.global.v4` (f32: `.v4.b32` or
    `.v4.f32`, 4 elements; f16: 8 halves packed in `.v4.b32`), write the output with
    `st.global.v4`, and keep and re-read the cached rows with `st.shared.v4` / `ld.shared.v4`; the
    global loads left scalar are the per-row values (max, sum, mean, ...), a handful. No spills."""
    exe = vtmlir.compile(_module(kind, 4096, DTYPES[dtype]), torch.randn(4096, 4096).to(DTYPES[dtype]),
                         target="cuda", chip="sm_80")
    (kernel,) = exe.kernels
    assert kernel.schedule == "block-reduce" and kernel.block == (128, 1, 1), kernel.plan.detail
    assert "vector loads of" in kernel.plan.detail, kernel.plan.detail
    found = _accesses(kernel.ptx)
    element = "b32" if dtype == "f16" else ("b32", "f32")
    loads = [op for op in found if op.startswith("ld.global.v4.")]
    assert loads and all(op.endswith(element) for op in loads), found
    # x's 4096 elements (16 KiB f32, 8 KiB f16) over 128 threads: 8 or 4 chunks of 16 bytes each,
    # in trips of at most 4 (a loop of 2 trips for f32), the weight's chunks too for the norms.
    assert _vector(found, "ld.global") >= 4, found
    assert _vector(found, "st.global") >= (4 if dtype == "f32" else 2), found
    assert _vector(found, "ld.shared") + _vector(found, "ld.shared", "v2") >= 4, found
    assert _vector(found, "st.shared") + _vector(found, "st.shared", "v2") >= 4, found
    scalar_loads = sum(n for op, n in found.items() if op.startswith("ld.global.") and ".v" not in op)
    assert scalar_loads <= 6, found
    for arch in ARCHS:
        _check_resources(kernel, arch)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("kind", ["softmax", "layernorm", "rmsnorm"])
def test_rows_the_vector_does_not_divide_stay_scalar(kind, dtype):
    """Rows of 4095 elements (odd: no vector of 2 or more divides them) keep the scalar row loops:
    no vector access of global or shared memory, the same kernel shape, no spills."""
    exe = vtmlir.compile(_module(kind, 4095, DTYPES[dtype]), torch.randn(64, 4095).to(DTYPES[dtype]),
                         target="cuda", chip="sm_80")
    (kernel,) = exe.kernels
    assert kernel.schedule == "block-reduce" and kernel.block == (128, 1, 1), kernel.plan.detail
    assert "scalar loads" in kernel.plan.detail, kernel.plan.detail
    found = _accesses(kernel.ptx)
    assert not [op for op in found if ".v2." in op or ".v4." in op], found
    for arch in ARCHS:
        _check_resources(kernel, arch)


def test_rows_of_a_multiple_of_two_take_chunks_of_two():
    """Rows of 4094 f32 (8-byte aligned, not 16): the widest legal chunk, 2 elements
    (`ld.global.v2`, one chunk a trip: 2047 chunks have no power-of-two divisor), no 128-bit
    access."""
    exe = vtmlir.compile(_module("softmax", 4094, torch.float32), torch.randn(64, 4094),
                         target="cuda", chip="sm_80")
    (kernel,) = exe.kernels
    found = _accesses(kernel.ptx)
    assert _vector(found, "ld.global", "v2") >= 1 and not _vector(found, "ld.global"), found
    for arch in ARCHS:
        _check_resources(kernel, arch)


def test_unfused_row_reductions_take_the_same_chunks():
    """With row groups off, each reduction is a kernel of its own, and reads its row in the same
    128-bit chunks as in the group (`row_vector_width` is a function of the kernel alone: the same
    order of additions, so the group's values stay the unfused kernels')."""
    exe = vtmlir.compile(_module("softmax", 4096, torch.float32), torch.randn(256, 4096), target="cuda",
                         chip="sm_80", schedules={"row-reduction": {"fuse": False}})
    rows = [k for k in exe.kernels if k.schedule == "block-reduce"]
    assert len(rows) == 2, [(k.name, k.schedule) for k in exe.kernels]   # the max and the sum
    for kernel in rows:
        assert _vector(_accesses(kernel.ptx), "ld.global") >= 4, kernel.name
        assert "vector loads of 4 elements" in kernel.plan.detail
        for arch in ARCHS:
            _check_resources(kernel, arch)


def test_row_vectors_can_be_turned_off():
    """`schedules={"row-reduction": {"vectorize": False}}`: the scalar row loops of before."""
    exe = vtmlir.compile(_module("layernorm", 4096, torch.float32), torch.randn(64, 4096), target="cuda",
                         chip="sm_80", schedules={"row-reduction": {"vectorize": False}})
    (kernel,) = exe.kernels
    found = _accesses(kernel.ptx)
    assert not [op for op in found if ".v2." in op or ".v4." in op], found
    assert "scalar loads" in kernel.plan.detail


@pytest.mark.skipif(not cuda_available(), reason="no CUDA device")
@pytest.mark.parametrize("row", [4096, 4095])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("kind", ["softmax", "layernorm", "rmsnorm"])
def test_row_kernels_match_pytorch_on_a_gpu(kind, dtype, row):
    """On a GPU: the vectorised (4096) and scalar (4095) row kernels against eager PyTorch (f32
    1e-5, f16 2e-3 of the output's magnitude: reassociated sums, docs/codegen_gpu.md)."""
    model = _module(kind, row, DTYPES[dtype])
    x = (torch.randn(512, row) * 3).to(DTYPES[dtype])
    exe = vtmlir.compile(model, x, target="cuda")
    got = exe(x).float()
    with torch.no_grad():
        want = model.float()(x.float())
    tolerance = 1e-5 if dtype == "f32" else 2e-3
    torch.testing.assert_close(got, want, rtol=0, atol=tolerance * max(1.0, want.abs().max().item()))
