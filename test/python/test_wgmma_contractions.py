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
        "conv": (_conv().to(f16), (r(2, 8, 32, 32, dtype=f16),), 4, "m64n16k16", (1, 0),
                 ["zero fill dropped", "epilogue in registers"]),
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


def test_indices_through_views_reach_the_viewed_buffer():
    """An epilogue or prologue on the buffer C views (an im2col convolution's 2x16x32x32 output,
    C its 2x16x1024 collapse) is computed at the buffer's own indices: a collapsed index
    delinearised, an expanded group linearised (folded from constants here)."""
    from torch_mlir import ir
    from torch_mlir.dialects import arith, func, memref
    from vtmlir.codegen.gpu.wgmma_contractions import _indices_through, _view_chain
    from vtmlir.context import make_context
    from vtmlir.passes import run_pipeline
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        index = ir.IndexType.get()
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("f", ([], [index] * 8))
            with ir.InsertionPoint(f.add_entry_block()):
                buffer = memref.AllocOp(ir.MemRefType.get([2, 16, 32, 32], ir.F32Type.get()), [], []).result
                c = memref.collapse_shape(ir.MemRefType.get([2, 16, 1024], ir.F32Type.get()), buffer,
                                          [[0], [1], [2, 3]])
                wide = memref.expand_shape(ir.MemRefType.get([2, 4, 4, 1024], ir.F32Type.get()), c,
                                           [[0], [1, 2], [3]], [], [2, 4, 4, 1024])
                chain, root = _view_chain(c)
                assert root == buffer and len(chain) == 1
                down = _indices_through(chain, [arith.ConstantOp(index, v).result for v in (1, 5, 700)])
                up_chain, _ = _view_chain(wide)
                up = _indices_through(up_chain[:1], [arith.ConstantOp(index, v).result for v in (1, 2, 3, 700)])
                func.ReturnOp(down + up + [arith.ConstantOp(index, 0).result])
        run_pipeline(module, "builtin.module(canonicalize)", what="fold")
        ret = list(f.entry_block.operations)[-1]
        values = [ir.IntegerAttr(v.owner.attributes["value"]).value for v in ret.operands]
    assert values[:4] == [1, 5, 700 // 32, 700 % 32] and values[4:7] == [1, 2 * 4 + 3, 700]


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


def _sm90a_against_sm90(model, inputs):
    """(sm_90 executable, sm_90a executable) of one model, each kernel checked by ptxas."""
    level = {}
    for chip in ("sm_90", "sm_90a"):
        exe = vtmlir.compile(model, *inputs, target="cuda", chip=chip)
        for kernel in exe.kernels:
            _check_resources(kernel, chip)
        level[chip] = exe
    return level["sm_90"], level["sm_90a"]


def test_yolo_block_on_sm90a_runs_fewer_kernels():
    """YOLOv11's C3K2 in f16 at batch 2: its 3x3 convolutions (K = 72 and 144, 8-16 output
    channels) run on wgmma with the output pixels as rows and no K-padding copies; no more kernels
    and no higher roofline estimate than sm_90's mma-sync, no spills."""
    from vtmlir.models import get
    model, inputs = get("vtc_yolo_c3k2").builder(batch=2, seed=0)
    model, inputs = model.eval().half(), tuple(x.half() for x in inputs)
    sm90, sm90a = _sm90a_against_sm90(model, inputs)
    assert [k.schedule for k in sm90a.kernels].count("wgmma") >= 2
    assert len(sm90a.kernels) < len(sm90.kernels)
    assert sm90a.report().h100_estimate_s <= sm90.report().h100_estimate_s


@pytest.mark.slow  # every zoo, VTC_ZOO (full size, batch 1 and 16) and TEMCO_ZOO model in f16
def test_sm90a_never_runs_more_kernels_than_sm90():
    """Across the model suites in f16 (and the zoo in bf16), sm_90a's wgmma never adds a kernel or
    raises the roofline estimate over sm_90's mma-sync, and no kernel spills."""
    from vtmlir.models import TEMCO_ZOO, VTC_ZOO, ZOO
    cases = [(name, spec.build(), dtype) for name, spec in ZOO.items() for dtype in (torch.float16, torch.bfloat16)]
    cases += [(name, spec.builder(batch=b, seed=0), torch.float16) for name, spec in VTC_ZOO.items() for b in (1, 16)]
    cases += [(name, spec.builder(batch=8, seed=0), torch.float16) for name, spec in TEMCO_ZOO.items()
              if name in ("temco_resnet18", "temco_unet_small")]
    for name, (model, inputs), dtype in cases:
        inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
        sm90, sm90a = _sm90a_against_sm90(model.eval().to(dtype), inputs)
        assert len(sm90a.kernels) <= len(sm90.kernels), (name, dtype)
        assert sm90a.report().h100_estimate_s <= sm90.report().h100_estimate_s * 1.0001, (name, dtype)


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
