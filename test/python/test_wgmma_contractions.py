"""The sm_90a `wgmma` kernel (codegen/gpu/wgmma_kernel.py) and `codegen-gpu-wgmma-contractions`
(issue 22: "wgmma on sm_90a where the bindings reach it"). No GPU here: the staging layout is
checked against the PTX ISA's canonical layouts, each case's PTX is assembled by ptxas for sm_90a
and its instructions checked; a Hopper GPU, when there is one, runs them against torch."""

from __future__ import annotations

import copy
import re

import pytest
import torch

import vtmlir
from vtmlir.backend.cuda import cuda_available
from vtmlir.codegen.gpu.wgmma_kernel import (LBO, SBO, TILE_K, TILE_M, descriptor_address, refusal,
                                             tile_offset)

from test_cuda_schedules import _check_resources


class MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


class BatchMatMul(torch.nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)


def _linear_gelu():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(128, 192), torch.nn.GELU())


def _conv():
    """A 3x3 convolution, 8 -> 16 channels on 32x32 images: an im2col batch matmul whose K (72) is
    no multiple of the k tile and whose output channels (16) are too few for a 128-row tile, so it
    runs with the output pixels as rows (A' is the im2col buffer, contiguous along them)."""
    torch.manual_seed(0)
    return torch.nn.Conv2d(8, 16, 3, padding=1, bias=False)


def _cases():
    f16, bf16 = torch.float16, torch.bfloat16
    r = torch.randn
    return {
        # name: (model, inputs, kernels, wgmma shape, transpose flags (A, B), epilogue/prologue words)
        "matmul": (MatMul(), (r(256, 128, dtype=f16), r(128, 256, dtype=f16)), 1, "m64n128k16", (0, 1),
                   ["zero fill dropped", "epilogue in registers"]),
        "linear-gelu": (_linear_gelu().to(f16), (r(256, 128, dtype=f16),), 1, "m64n64k16", (0, 0),
                        ["epilogue in registers"]),
        "bmm-bf16": (BatchMatMul(), (r(3, 128, 64, dtype=bf16), r(3, 64, 128, dtype=bf16)), 1, "m64n128k16",
                     (0, 1), ["zero fill dropped"]),
        "partial-rows": (MatMul(), (r(200, 64, dtype=f16), r(64, 64, dtype=f16)), 1, "m64n64k16", (0, 1),
                         ["zero fill dropped"]),
        "conv": (_conv().to(f16), (r(2, 8, 32, 32, dtype=f16),), None, "m64n16k16", (1, 0), []),
    }


CASES = _cases()


def _compile(name, **options):
    model, inputs, *_ = CASES[name]
    return vtmlir.compile(model, *inputs, target="cuda", **options)


def test_staging_layout_is_the_descriptors_canonical_layout():
    """Every element of an operand tile, where the 16-byte copies put it (`tile_offset`), is where
    the wgmma descriptor of the no-swizzle canonical layout (LBO 128 between core matrices along k,
    SBO 512 along the rows) reads it -- K-major and MN-major, for each 64-row half and k16 step the
    kernel's descriptors start at."""
    for k_major in (True, False):
        for r in range(TILE_M):
            for k in range(TILE_K):
                if k_major:
                    staged = tile_offset(r, k // 8, True) + (k % 8) * 2
                else:
                    staged = tile_offset(k, r // 8, False) + (r % 8) * 2
                half, step = r // 64, k // 16
                start = half * (64 // 8) * SBO + 2 * step * LBO   # the kernel's descriptor offsets
                assert staged == descriptor_address(r % 64, k % 16, k_major, start), (k_major, r, k)


@pytest.mark.parametrize("name", list(CASES))
def test_contraction_takes_the_wgmma_kernel(name):
    """On sm_90a the contraction is one `wgmma` kernel: the instructions the layout needs (the
    m64nNk16 shape, the transpose flags of MN-major operands, 16-byte cp.async with L1 bypassed, the
    async-proxy fence, wgmma fence / commit / wait), assembled by ptxas for sm_90a without spills
    within the chip's limits; its neighbours run in its registers where it says so."""
    _, _, kernels, shape, (ta, tb), words = CASES[name]
    exe = _compile(name, chip="sm_90a")
    wgmma = [k for k in exe.kernels if k.schedule == "wgmma"]
    assert len(wgmma) == 1, [(k.name, k.schedule, k.plan and k.plan.reason) for k in exe.kernels]
    if kernels is not None:
        assert len(exe.kernels) == kernels, [(k.name, k.schedule) for k in exe.kernels]
    (kernel,) = wgmma
    element = "bf16" if "bf16" in name else "f16"
    found = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.{shape}\.f32\.{element}\.{element} \{{[^}}]*\}}, "
                       r"%rd\d+, %rd\d+, p, 1, +1, (\d), +(\d);", kernel.ptx)
    assert found and set(found) == {(str(ta), str(tb))}, found
    for instruction in ("cp.async.cg.shared.global", "fence.proxy.async.shared::cta", "wgmma.fence.sync.aligned",
                        "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned", "bar.sync"):
        assert instruction in kernel.ptx, instruction
    usage = _check_resources(kernel, "sm_90a")
    assert usage.barriers >= 1
    detail = kernel.plan.detail
    assert all(word in detail for word in words), detail
    row = next(r for r in exe.report().kernels if r.schedule == "wgmma")
    assert row.flops > 0 and "sm_90a" in row.resources


def test_other_chips_and_the_switch_keep_mma_sync():
    """wgmma is sm_90a's (PTX for sm_90 has none): other chips, and `contraction.wgmma: false`, keep
    the `mma-sync` schedule."""
    for options in ({"chip": "sm_90"}, {"chip": "sm_80"},
                    {"chip": "sm_90a", "schedules": {"contraction": {"wgmma": False}}}):
        schedules = [k.schedule for k in _compile("matmul", **options).kernels]
        assert "wgmma" not in schedules and "mma-sync" in schedules, (options, schedules)


def test_small_products_keep_mma_sync():
    """Fewer than a block's 128 rows either way: the mma-sync tiles fit it better."""
    assert refusal(64, 64, 64) and refusal(128, 12, 64) and refusal(128, 64, 20) and not refusal(128, 8, 8)
    a, b = torch.randn(64, 64, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16)
    exe = vtmlir.compile(MatMul(), a, b, target="cuda", chip="sm_90a")
    assert [k.schedule for k in exe.kernels] == ["mma-sync"]


def _hopper() -> bool:
    if not cuda_available():
        return False
    from vtmlir.backend.cuda.runtime import device_arch
    return device_arch() == "sm_90"


@pytest.mark.skipif(not _hopper(), reason="needs an sm_90 GPU (H100/H200)")
@pytest.mark.parametrize("name", list(CASES))
def test_wgmma_kernels_match_torch_on_a_hopper_gpu(name):
    """The kernels run: the same results as torch (f32 sums of f16/bf16 products)."""
    model, inputs, *_ = CASES[name]
    got = _compile(name, chip="sm_90a")(*inputs)
    want = copy.deepcopy(model).float()(*(x.float() for x in inputs))
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2 * want.abs().max().item())
