"""GPU schedules, checked statically (no GPU here): per schedule kind the PTX assembles with
`ptxas -v` for sm_80 and sm_90 with no spills, registers and shared memory within the chip's limits,
and the instructions the schedule exists for; contractions never fall back to the naive mapping;
half-precision models compile end to end; the kernel report."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import vtmlir
from torch_mlir import ir
from torch_mlir.dialects import linalg
from vtmlir.backend.cuda import cuda_available
from vtmlir.backend.cuda.ptxas import resource_usage
from vtmlir.codegen.gpu.target import gpu_target
from vtmlir.models import ZOO

ARCHS = ("sm_80", "sm_90")


class MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


class LinearGelu(torch.nn.Module):
    """A Linear (B transposed) with ragged sizes (padded to multiples of 16 for tensor cores) and
    an epilogue."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(40, 24)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x))


class BatchMatMul(torch.nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)


class Elementwise(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x * y + 1.0)


class Norms(torch.nn.Module):
    """Softmax, LayerNorm and RMSNorm over rows of 1024 (a warp per row), a sum over rows of 8192 (a
    block per row)."""

    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(1024)
        self.rms = torch.nn.RMSNorm(1024)

    def forward(self, x, y):
        return torch.softmax(x, -1), self.ln(x), self.rms(x), y.sum(-1)


def _compile(model, *inputs, chip="sm_80"):
    torch.manual_seed(0)
    return vtmlir.compile(model, *inputs, target="cuda", chip=chip)


def _kernels(exe, schedule):
    found = [k for k in exe.kernels if k.schedule == schedule]
    assert found, f"no {schedule} kernel: {[(k.name, k.schedule) for k in exe.kernels]}"
    return found


def _check_resources(kernel, arch):
    """ptxas -v figures of one kernel on `arch`: no spills, registers and shared memory within limits."""
    usage = resource_usage(kernel.ptx, arch, kernel.name)
    target = gpu_target(arch)
    threads = kernel.block[0] * kernel.block[1] * kernel.block[2]
    assert usage.spill_bytes == 0 and usage.stack_bytes == 0, (kernel.name, arch, usage)
    assert usage.registers <= target.max_registers_per_thread, (kernel.name, arch, usage)
    assert usage.registers * threads <= target.registers_per_sm, (kernel.name, arch, usage)
    assert usage.shared_bytes <= target.shared_per_block_static, (kernel.name, arch, usage)
    blocks, _ = target.occupancy(threads, usage.registers, usage.shared_bytes)
    assert blocks >= 1, (kernel.name, arch, usage)
    return usage


HALF = {"f16": torch.float16, "bf16": torch.bfloat16}


@pytest.fixture(scope="module", params=[(chip, dtype) for dtype in HALF for chip in ARCHS], ids="-".join)
def half_matmul(request):
    chip, dtype = request.param
    a, b = torch.randn(256, 256).to(HALF[dtype]), torch.randn(256, 256).to(HALF[dtype])
    return chip, dtype, _compile(MatMul(), a, b, chip=chip)


def test_half_matmul_runs_on_tensor_cores(half_matmul):
    """f16 and bf16 (bf16 x bf16 into f32: the bf16 mma.sync) alike: ldmatrix fragments, cp.async
    staging, no spills on sm_80 and sm_90."""
    chip, dtype, exe = half_matmul
    (kernel,) = _kernels(exe, "mma-sync")
    ptx = kernel.ptx
    assert f".target {chip}" in ptx
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{dtype}.{dtype}.f32" in ptx
    assert f"mma-sync {dtype}:" in kernel.plan.detail
    assert "ldmatrix.sync.aligned" in ptx
    assert "cp.async" in ptx and "cp.async.wait_group" in ptx  # staged through shared memory, pipelined
    assert "bar.sync" in ptx
    assert kernel.plan.shared_bytes > 0 and "stage" in kernel.plan.detail
    for arch in [a for a in ARCHS if a >= chip]:  # PTX for sm_90 does not assemble for sm_80
        usage = _check_resources(kernel, arch)
        assert usage.shared_bytes >= kernel.plan.shared_bytes


def _pipelined_k_loop(ptx: str) -> list[str]:
    """The lines of the PTX loop (a label and the branch back to it) that issues cp.async copies."""
    lines = [" ".join(line.split()) for line in ptx.splitlines()]
    for end, line in enumerate(lines):
        if " bra " in f" {line} " or line.startswith("bra"):
            label = line.split()[-1].rstrip(";")
            if f"{label}:" in lines[:end]:
                body = lines[lines.index(f"{label}:"):end + 1]
                if any(b.startswith("cp.async.commit_group") for b in body):
                    return body
    raise AssertionError("no pipelined loop in the PTX")


def _stages(kernel) -> int:
    return int(kernel.plan.detail.split(" stage(s)")[0].split()[-1])


def test_a_pipelined_k_step_is_one_cp_async_group_waited_for_as_one_stage(half_matmul):
    """Each k step copies the A and B tiles as ONE cp.async group (codegen-gpu-eliminate-barriers
    removes the barrier between the two copies, which split them into two groups), so the
    pipeliner's `cp.async.wait_group stages - 1` leaves the next stages' copies in flight while
    the product runs; two barriers a step: after the wait (the tile is complete) and after the
    product (its buffer may be overwritten)."""
    chip, dtype, exe = half_matmul
    (kernel,) = _kernels(exe, "mma-sync")
    stages = _stages(kernel)
    assert stages >= 2, kernel.plan.detail
    body = _pipelined_k_loop(kernel.ptx)
    commits = [line for line in body if line.startswith("cp.async.commit_group")]
    waits = [line for line in body if line.startswith("cp.async.wait_group")]
    barriers = [line for line in body if line.startswith("bar.sync")]
    assert len(commits) == 1 and waits == [f"cp.async.wait_group {stages - 1};"] and len(barriers) == 2, \
        (commits, waits, barriers)


@pytest.mark.parametrize("chip", ARCHS)
@pytest.mark.parametrize("case", ["matmul", "bmm"])
def test_bf16_tensor_core_kernels_are_the_f16_ones_but_for_the_types(case, chip):
    """The static half of the bf16 numerics argument (docs/codegen_gpu.md, Numerics): the bf16
    kernel's PTX is the f16 kernel's line for line -- the same tiles, cp.async copies, ldmatrix
    fragment loads and mma.sync order over k -- except the mma.sync's operand type and the final
    f32 -> bf16 conversions of the cast fused as its epilogue. The f16 kernels ran bitwise-checked
    on an H100; PTX gives m16n8k16 bf16 the f16 fragment layout."""
    shapes = {"matmul": [(128, 96), (96, 64)], "bmm": [(4, 64, 32), (4, 32, 48)]}[case]
    module = MatMul() if case == "matmul" else BatchMatMul()
    ptx = {}
    for dtype in HALF:
        torch.manual_seed(0)
        exe = vtmlir.compile(module, *(torch.randn(*s).to(HALF[dtype]) for s in shapes), target="cuda", chip=chip)
        (kernel,) = exe.kernels
        assert kernel.schedule == "mma-sync", (dtype, kernel.plan.reason)
        ptx[dtype] = kernel.ptx.splitlines()
    assert len(ptx["f16"]) == len(ptx["bf16"])
    differ = [(a, b) for a, b in zip(ptx["f16"], ptx["bf16"]) if a != b]
    assert any("mma.sync" in a for a, _ in differ) and any("cvt.rn" in a for a, _ in differ)
    for f16_line, bf16_line in differ:
        assert ("mma.sync" in f16_line or "cvt.rn" in f16_line) and bf16_line == f16_line.replace("f16", "bf16"), \
            (f16_line, bf16_line)


def test_f32_matmul_is_a_shared_memory_tiled_simt_kernel():
    exe = _compile(MatMul(), torch.randn(128, 96), torch.randn(96, 64))
    (kernel,) = _kernels(exe, "simt")
    assert "mma.sync" not in kernel.ptx  # exact f32, no TF32 unless asked
    assert "fma.rn.f32" in kernel.ptx or "add.rn.f32" in kernel.ptx
    assert "bar.sync" in kernel.ptx and "cp.async" in kernel.ptx
    for arch in ARCHS:
        assert _check_resources(kernel, arch).shared_bytes > 0


def test_f32_matmul_uses_tf32_tensor_cores_only_on_request():
    torch.manual_seed(0)
    a, b = torch.randn(128, 64), torch.randn(64, 96)
    exe = vtmlir.compile(MatMul(), a, b, target="cuda", allow_tf32=True)
    (kernel,) = _kernels(exe, "mma-sync")
    assert "tf32" in kernel.plan.detail
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in kernel.ptx
    assert "cp.async" in kernel.ptx and "bar.sync" in kernel.ptx
    for arch in ARCHS:
        assert _check_resources(kernel, arch).shared_bytes > 0
    # An explicit schedules= setting wins over the keyword (the default, False, is checked above).
    exact = vtmlir.compile(MatMul(), a, b, target="cuda", allow_tf32=True,
                           schedules={"contraction": {"allow_tf32": False}})
    (kernel,) = _kernels(exact, "simt")
    assert "mma.sync" not in kernel.ptx and "tf32" not in kernel.ptx


def test_allow_tf32_is_an_error_on_the_cpu():
    with pytest.raises(vtmlir.VtmlirError, match="allow_tf32=True applies to target='cuda' only"):
        vtmlir.compile(MatMul(), torch.randn(4, 4), torch.randn(4, 4), allow_tf32=True)
    with pytest.raises(vtmlir.VtmlirError, match="allow_tf32 must be True or False"):
        vtmlir.compile(MatMul(), torch.randn(4, 4), torch.randn(4, 4), target="cuda", allow_tf32="yes")


def test_cli_allow_tf32(tmp_path):
    from vtmlir.cli.main import main

    # (transformer_block: its Linears run over the tokens; the batch-1 MLP's are matrix-vector
    # products, gemv kernels: memory-bound, no tensor cores)
    out = tmp_path / "transformer_block.ptx"
    assert main(["compile", "transformer_block", "--target", "cuda", "--allow-tf32", "-o", str(out)]) == 0
    assert ".tf32.tf32.f32" in out.read_text()  # the f32 model's Linear layers on TF32 tensor cores


def test_elementwise_kernels_use_128_bit_accesses():
    exe = _compile(Elementwise(), torch.randn(64, 1024), torch.randn(64, 1024))
    (kernel,) = _kernels(exe, "vector")
    assert "ld.global.v4." in kernel.ptx or "ld.global.nc.v4." in kernel.ptx
    assert "st.global.v4." in kernel.ptx
    for arch in ARCHS:
        _check_resources(kernel, arch)


class PadRelu(torch.nn.Module):
    """4-D elementwise and data-movement kernels: a padded NCHW batch (the pad's copy) and a ReLU."""

    def forward(self, x):
        return torch.relu(torch.nn.functional.pad(x, (1, 1, 1, 1)))


def test_four_dimensional_kernels_loop_over_the_fourth_dimension_in_each_thread():
    # The grid has three dimensions: the loop of least extent (the batch of 8) runs inside each
    # thread instead of the kernel keeping the naive mapping.
    exe = _compile(PadRelu(), torch.randn(8, 16, 30, 30))
    assert all(k.schedule == "vector" for k in exe.kernels), [(k.name, k.schedule, k.plan and k.plan.reason)
                                                             for k in exe.kernels]
    serial = [k for k in exe.kernels if "loops [0] in each thread" in k.plan.detail]
    assert serial, [(k.name, k.plan.detail) for k in exe.kernels]
    for kernel in serial:
        for arch in ARCHS:
            _check_resources(kernel, arch)


class ConvPool(torch.nn.Module):
    """A depthwise 3x3 convolution (no channel reduction: not an implicit GEMM) and a max-pool:
    window kernels the vectoriser does not take."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)

    def forward(self, x):
        return torch.nn.functional.max_pool2d(self.conv(x), 2)


def test_window_kernels_get_a_thread_per_output_element():
    # Not the naive mapping (one thread per block): scalar code, an output element per thread,
    # coalesced along the output rows; the reduction over the window in each thread, in loop order.
    exe = _compile(ConvPool(), torch.randn(2, 8, 32, 32))
    threads = _kernels(exe, "threads")
    assert len(threads) == 2, [(k.name, k.plan.description) for k in threads]   # the conv and the pool
    assert not [k for k in exe.kernels if k.schedule == "naive"], [(k.name, k.plan and k.plan.reason) for k in exe.kernels]
    for kernel in threads:
        assert kernel.block[0] * kernel.block[1] * kernel.block[2] >= 32, (kernel.name, kernel.block)
        for arch in ARCHS:
            _check_resources(kernel, arch)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_row_reductions_use_warp_shuffles(dtype):
    # Each reduction a kernel of its own (row groups off: `test_row_groups_run_as_one_kernel`).
    torch.manual_seed(0)
    exe = vtmlir.compile(Norms().to(dtype), torch.randn(24, 1024).to(dtype), torch.randn(3, 8192).to(dtype),
                         target="cuda", chip="sm_80", schedules={"row-reduction": {"fuse": False}})
    rows = [k for k in exe.kernels if k.plan is not None and k.plan.kind == "row-reduction"]
    # softmax: max, sum; LayerNorm: mean, variance; RMSNorm: mean square; the sum.
    assert len(rows) >= 6, [(k.name, k.plan.kind if k.plan else None) for k in exe.kernels]
    assert all(k.schedule in ("warp-reduce", "block-reduce") for k in rows), \
        [(k.name, k.schedule, k.plan.reason) for k in rows]
    warp = [k for k in rows if k.schedule == "warp-reduce"]
    block = [k for k in rows if k.schedule == "block-reduce"]
    assert warp and block
    for kernel in rows:
        assert kernel.ptx.count("shfl.sync.bfly") >= 5, kernel.name
        assert kernel.block[0] * kernel.block[1] * kernel.block[2] <= 256
        for arch in ARCHS:
            usage = _check_resources(kernel, arch)
            assert usage.shared_bytes == (0 if kernel in warp else kernel.plan.shared_bytes), (kernel.name, usage)
    for kernel in block:  # the warps' results meet in shared memory
        assert "bar.sync" in kernel.ptx and "st.shared" in kernel.ptx and "ld.shared" in kernel.ptx
    # A warp per row, 8 rows per block: 24 rows of 1024 in 3 blocks of 32x8 threads.
    assert any(k.block == (32, 8, 1) and k.grid == (3, 1, 1) for k in warp), [(k.block, k.grid) for k in warp]
    assert any(k.block == (256, 1, 1) and k.grid == (3, 1, 1) for k in block), [(k.block, k.grid) for k in block]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_row_groups_run_as_one_kernel(dtype):
    """Softmax, LayerNorm and RMSNorm of the same rows: their reductions, the row kernels between
    them (exp, the normalisations) and the fills of their row buffers run in one kernel, a warp per
    row (8 rows per block), each member over the row in turn with a barrier between (none after a
    fill: the reduction's thread 0 that reads it wrote it); the separate sum and its fill another
    (block-reduce): 19 kernels become 2. No member left as a kernel, no fill of its own; PTX for
    sm_80 / sm_90 without spills."""
    torch.manual_seed(0)
    inputs = (torch.randn(24, 1024).to(dtype), torch.randn(3, 8192).to(dtype))
    exe = _compile(Norms().to(dtype), *inputs)
    unfused = vtmlir.compile(Norms().to(dtype), *inputs, target="cuda", chip="sm_80",
                             schedules={"row-reduction": {"fuse": False}})
    groups = [k for k in exe.kernels if k.plan is not None and k.plan.fused and k.schedule == "warp-reduce"]
    assert len(groups) >= 1, [(k.name, k.plan and k.plan.detail) for k in exe.kernels]
    group = max(groups, key=lambda k: len(k.plan.fused))
    # softmax's max and sum, LayerNorm's mean and variance, RMSNorm's mean square: all in the group
    assert len(group.plan.fused) >= 6 and "row group" in group.plan.detail
    assert group.block == (32, 8, 1) and group.grid == (3, 1, 1)
    plans = {p.id: p for p in exe.plans}
    fills = {i for i in group.plan.fused if plans[i].description == "data-movement 24"}
    assert len(fills) >= 5, [plans[i].description for i in group.plan.fused]  # softmax 2, LayerNorm 2, RMSNorm 1
    assert group.ptx.count("bar.sync") >= len(group.plan.fused) - len(fills)
    assert group.ptx.count("shfl.sync.bfly") >= 25
    fused = set(group.plan.fused)
    assert not [k for k in exe.kernels if k.plan is not None and k.plan.id in fused]
    assert len(exe.kernels) <= len(unfused.kernels) - len(fused)
    # Every fill of a row buffer ran in a group: no fill kernel launched.
    assert not [k for k in exe.kernels if k.plan is not None and k.plan.description.startswith("data-movement")], \
        [(k.name, k.plan.description) for k in exe.kernels]
    # y.sum(-1) and its fill (a scalar kernel of 3 elements, independent of the first group): a
    # group of their own, block-reduce.
    (total,) = [k for k in exe.kernels if k.schedule == "block-reduce"]
    assert [plans[i].description for i in total.plan.fused] == ["scalar 3"]
    assert len(exe.kernels) == 2, [(k.name, k.plan and k.plan.detail) for k in exe.kernels]
    for kernel in exe.kernels:
        for arch in ARCHS:
            _check_resources(kernel, arch)


@pytest.mark.parametrize("case", ["softmax_f32", "softmax_f16", "layernorm_f32", "rmsnorm_f32", "sum_f32"])
def test_norms_of_4096_rows_are_one_kernel(case):
    """The 4096x4096 softmax, LayerNorm and RMSNorm of `benchmarks/gpu.py` (and a row sum) compile
    to one kernel each: the fills of the row buffers are per-row members of the row group (the
    softmax's sum reuses the max's buffer, its fill between the exp and the sum), a block of 128
    threads per row. Unfused they are 6 (f16: 7, with the copy to f32), 8, 3 and 2 kernels; PTX
    without spills."""
    kind, dtype = case.split("_")
    dtype = {"f32": torch.float32, "f16": torch.float16}[dtype]
    module = {"softmax": torch.nn.Softmax(-1), "layernorm": torch.nn.LayerNorm(4096),
              "rmsnorm": torch.nn.RMSNorm(4096, eps=1e-6), "sum": RowSum()}[kind].eval().to(dtype)
    exe = _compile(module, torch.randn(4096, 4096).to(dtype))
    (kernel,) = exe.kernels
    assert kernel.schedule == "block-reduce" and kernel.block == (128, 1, 1) and kernel.grid == (4096, 1, 1)
    plans = {p.id: p for p in exe.plans}
    unfused = {"softmax_f32": 6, "softmax_f16": 7, "layernorm_f32": 8, "rmsnorm_f32": 3, "sum_f32": 2}[case]
    assert len(plans) == len(kernel.plan.fused) + 1 == unfused
    fills = [i for i in kernel.plan.fused if plans[i].description == "data-movement 4096"]
    assert len(fills) == {"softmax": 2, "layernorm": 3, "rmsnorm": 1, "sum": 1}[kind]
    # A barrier between members but after a fill (the reduction's thread 0 reads what it stored),
    # and one in each block-reduce (the warps' partial results through shared memory).
    reductions = sum(p.kind == "row-reduction" for p in plans.values())
    assert kernel.ptx.count("bar.sync") == len(plans) - 1 - len(fills) + reductions
    for arch in ARCHS:
        _check_resources(kernel, arch)


class RowSum(torch.nn.Module):
    def forward(self, x):
        return x.sum(-1)


def _run_kernel_level_on_cpu(model, x: tuple, row_groups_like_gpu: bool, without: tuple[str, ...] = ()):
    """`model` imported and bufferized as for CUDA, the CUDA `schedule` stage run up to its
    `codegen-gpu-attach-schedule`, then (`row_groups_like_gpu`) every row group the GPU forms
    (`codegen-gpu-attach-schedule` run on a copy says which: `row_groups(per_row_members=True,
    independent_groups=True)` less the contractions' prologues and epilogues, fills included)
    moved into a loop over rows, one row a trip, its members in order, at its last member's place
    (`codegen.fuse_rows`); the kernel level run by the CPU backend with the exact schedules.
    `without`: passes left out of the `schedule` stage. Returns the results and, per group, which
    members are per-row."""
    from vtmlir.backend.bufferize import bufferize
    from vtmlir.backend.cpu.executable import CpuExecutable, create_engine
    from vtmlir.backend.cpu.lower import lower_to_llvm
    from vtmlir.backend.cuda.lower import DEFAULT_STAGES
    from vtmlir.codegen import EXACT_SCHEDULES
    from vtmlir.codegen.fuse_rows import _fuse, row_groups
    from vtmlir.codegen.gpu.attach_schedule import attach_gpu_schedules, top_level_kernels
    from vtmlir.codegen.gpu.reduce_rows import ROW_GROUP_ATTR
    from vtmlir.codegen.kernels import KERNEL_ATTR
    from vtmlir.frontend.torch_import import export_torch, import_exported
    from vtmlir.passes import run_pipeline
    from vtmlir.signature import box_scalars, find_entry, signature_of

    module = import_exported(export_torch(model, *x))
    signature = signature_of(find_entry(module, None))
    box_scalars(find_entry(module, None))
    result_arguments = bufferize(module, function=signature.name)
    for stage in DEFAULT_STAGES:
        if stage.name == "schedule":
            head, _, _ = stage.text("sm_80").rpartition(", codegen-gpu-attach-schedule")
            for name in without:
                assert f"{name}, " in head, name
                head = head.replace(f"{name}, ", "")
            run_pipeline(module, head + ")")
            break
        stage.run(module, "sm_80")
    found = []
    if row_groups_like_gpu:
        with module.context:
            copy = module.operation.clone()
            plans = attach_gpu_schedules(copy, chip="sm_80")
            chosen = {}  # the GPU's groups: last member's id -> member ids
            gemv = {p.id for p in plans if p.schedule == "gemv"}   # a matvec's fill and epilogue: not fuse_rows'
            for op in top_level_kernels(copy):
                if ROW_GROUP_ATTR in op.attributes:
                    leader = ir.IntegerAttr(op.attributes[ROW_GROUP_ATTR]).value
                    if leader not in gemv:
                        chosen.setdefault(leader, []).append(ir.IntegerAttr(op.attributes[KERNEL_ATTR]).value)
            copy.erase()
            kernels = top_level_kernels(module.operation)
            apart = {kernels[p.id] for p in plans if p.reason.startswith("fused into") and "row group" not in p.reason}
            body = find_entry(module, None).regions[0].blocks[0]
            groups = [g for per_row in (True, False)
                      for g in row_groups(body, per_row_members=per_row, independent_groups=True, exclude=apart)]
            done = set()
            for group in groups:
                ids = [kernels.index(m.op) for m in group.members]
                if chosen.get(ids[-1]) == ids and ids[-1] not in done:
                    done.add(ids[-1])
                    found.append([m.per_row for m in group.members])
                    _fuse(group, 1)
            assert sorted(done) == sorted(chosen), (chosen, done)
    lower_to_llvm(module, threads=1, schedules=EXACT_SCHEDULES)
    exe = CpuExecutable(create_engine(module, 2), signature, {}, result_arguments=result_arguments, threads=1)
    return [torch.as_tensor(y) for y in exe.run(*x)], found


class SoftmaxSumLayerNorm(torch.nn.Module):
    """A softmax and a LayerNorm of x (one group) and, between them in program order, a sum over the
    rows of y (a group of its own, independent of the first: its kernels stand between its members)."""

    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(256)

    def forward(self, x, y):
        return torch.softmax(x, -1), y.sum(-1), self.ln(x)


@pytest.mark.parametrize("kind", ["softmax", "layernorm", "rmsnorm", "attention_softmax", "interleaved"])
def test_row_groups_with_their_fills_match_the_kernels_on_the_cpu(kind):
    """The row groups the GPU forms, fills of the row buffers included (the softmax's sum's fill on
    the buffer the max's result was in, between the exp and the sum; an attention-shaped softmax's
    [2, 4, 8] fills, rows of two loops; a group formed from kernels standing between another's
    members), run row by row with their members in order at their last member's place: bitwise the
    kernels one after another (the GPU's group kernel runs each member as its own kernel would, so
    the order of the members is what can go wrong)."""
    torch.manual_seed(0)
    module = {"softmax": torch.nn.Softmax(-1), "layernorm": torch.nn.LayerNorm(256),
              "rmsnorm": torch.nn.RMSNorm(256, eps=1e-6), "attention_softmax": torch.nn.Softmax(-1),
              "interleaved": SoftmaxSumLayerNorm()}[kind].eval()
    x = (torch.randn(2, 4, 8, 64) * 3,) if kind == "attention_softmax" else (torch.randn(16, 256) * 3,)
    if kind == "interleaved":
        x = (x[0], torch.randn(3, 512))
    apart, _ = _run_kernel_level_on_cpu(module, x, False)
    grouped, found = _run_kernel_level_on_cpu(module, x, True)
    fills = {"layernorm": [3], "rmsnorm": [1], "interleaved": [5, 1]}.get(kind, [2])
    assert [sum(members) for members in found] == fills, found
    for g, a in zip(grouped, apart):
        assert torch.equal(g, a)
    with torch.no_grad():
        want = module(*x)
    for g, w in zip(grouped, want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["transformer_block", "llama_decoder_layer", "elementwise_reduction_mix"])
def test_zoo_row_groups_match_the_kernels_on_the_cpu(name):
    """The zoo's row groups as the GPU forms them (LayerNorms and RMSNorms whose normalisation
    feeds a contraction's prologue or stands beside its accumulator's fill, attention softmaxes,
    groups of kernels standing between another group's members) run row by row on the CPU:
    bitwise the kernels one after another."""
    model, inputs = ZOO[name].build(batch=1, seed=0)
    apart, _ = _run_kernel_level_on_cpu(model, tuple(inputs), False)
    grouped, found = _run_kernel_level_on_cpu(model, tuple(inputs), True)
    assert found
    for g, a in zip(grouped, apart):
        assert torch.equal(g, a)


@pytest.mark.parametrize("case", [
    "linear_ragged_f16", "linear_ragged_bf16", "matmul_f32", "matmul_bf16",
    "bmm_f16", "bmm_bf16",
])
def test_contractions_do_not_fall_back_to_the_naive_mapping(case):
    """Nor, in f16 and bf16, to the SIMT kernel: bf16 takes the f16 route to mma.sync as 16-bit
    payload (codegen-gpu-convert-mma), a ragged bf16 Linear padded to multiples of 16 as an f16 one."""
    kind, dtype = case.rsplit("_", 1)
    half = HALF.get(dtype, torch.float32)
    if kind == "linear_ragged":
        exe = _compile(LinearGelu().to(half), torch.randn(20, 40).to(half))
    elif kind == "bmm":
        exe = _compile(BatchMatMul(), torch.randn(4, 64, 32).to(half), torch.randn(4, 32, 48).to(half))
    else:
        exe = _compile(MatMul(), torch.randn(64, 80).to(half), torch.randn(80, 32).to(half))
    expected = "simt" if dtype == "f32" else "mma-sync"
    report = exe.report()
    assert not report.naive_contractions, [(k.name, k.description, k.detail) for k in report.naive_contractions]
    assert [k.schedule for k in report.kernels if k.kind == "contraction"] == [expected]
    if dtype in HALF:
        (kernel,) = [k for k in exe.kernels if k.schedule == "mma-sync"]
        assert f"mma.sync.aligned.m16n8k16.row.col.f32.{dtype}.{dtype}.f32" in kernel.ptx and "ldmatrix" in kernel.ptx
    for kernel in exe.kernels:
        if kernel.scheduled:
            for arch in ARCHS:
                _check_resources(kernel, arch)


class GappedBatchScores(torch.nn.Module):
    """q K^T over (batch, head) with K a slice of a cache holding twice the heads: the heads of K
    are not contiguous across the batch, so the two batch loops cannot be collapsed into one."""

    def forward(self, q, cache):
        return q @ cache[:, :4].transpose(-1, -2)


def test_batch_dimensions_beyond_the_grid_share_one_grid_dimension():
    """Two batch loops that no view collapses, and m and n both over blocks: four block dimensions,
    the grid has three. The block forall's two batch dimensions run on one (grid z = 2 x 4, the block
    id delinearised in the kernel: codegen-gpu-drop-unit-dims); the kernel stays on tensor cores
    (it kept the naive mapping before) and assembles for sm_80 and sm_90 without spills."""
    q, cache = torch.randn(2, 4, 128, 32).half(), torch.randn(2, 8, 128, 32).half()
    exe = _compile(GappedBatchScores(), q, cache)
    report = exe.report()
    assert not report.naive_contractions, [(k.name, k.description, k.detail) for k in report.naive_contractions]
    (kernel,) = [k for k in exe.kernels if k.plan is not None and k.plan.kind == "contraction"]
    assert kernel.schedule == "mma-sync" and "2 outer dimensions on one grid dimension" in kernel.plan.detail, kernel.plan.detail
    bm, bn, _ = (int(v) for v in kernel.plan.detail.split("block ")[1].split(",")[0].split("x"))
    assert kernel.grid == (128 // bn, 128 // bm, 2 * 4)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in kernel.ptx
    for arch in ARCHS:
        _check_resources(kernel, arch)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_grouped_query_scores_collapsed_match_the_kernels_on_the_cpu(dtype):
    """Gemma 2's decode q K^T (grouped-query attention: batch x kv heads, query heads per kv head x
    queries) has more batch and outer loops than the block grid holds next to m and n;
    codegen-gpu-collapse-contraction-loops makes it a batch matmul over collapse_shape views. Only
    parallel loops merge: the kernel level with the pass, run on the CPU, is bitwise the one
    without it (every sum in the same order)."""
    from vtmlir.models import get
    from vtmlir.models.vtc_workloads import SMALL_SIZES

    model, inputs = get("vtc_gemma2_decode").builder(batch=1, seed=0, **SMALL_SIZES["vtc_gemma2_decode"])
    half = HALF.get(dtype, torch.float32)
    model = model.eval().to(half)
    inputs = tuple(x.to(half) if x.is_floating_point() else x for x in inputs)
    collapsed, _ = _run_kernel_level_on_cpu(model, inputs, False)
    apart, _ = _run_kernel_level_on_cpu(model, inputs, False, without=("codegen-gpu-collapse-contraction-loops",))
    for c, a in zip(collapsed, apart):
        assert torch.equal(c, a)


def _scheduled_kernels(exe):
    """The `schedule` stage's IR of `exe`, parsed, and its kernel-level ops by kernel id (the module
    returned too: the ops live as long as it does)."""
    from vtmlir.codegen.gpu.attach_schedule import top_level_kernels
    from vtmlir.codegen.kernels import KERNEL_ATTR
    from vtmlir.context import make_context

    module = ir.Module.parse(exe.stages["schedule"], context=make_context())
    return module, {ir.IntegerAttr(op.attributes[KERNEL_ATTR]).value: op
                    for op in top_level_kernels(module.operation) if KERNEL_ATTR in op.attributes}


@pytest.mark.slow  # about 60 s: every VTC_ZOO model at test size, f16 and f32
@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_no_vtc_zoo_contraction_keeps_the_naive_mapping(dtype):
    """Issue 22's static target for VTC_ZOO (structure kept at test size): no contraction of any
    model keeps the naive mapping -- tensor cores or, where the types or an f32 prologue rule them
    out, the shared-memory-tiled SIMT kernel -- and each assembles for sm_80 and sm_90 without
    spills."""
    from vtmlir.models import VTC_ZOO, get
    from vtmlir.models.vtc_workloads import SMALL_SIZES

    half = HALF.get(dtype, torch.float32)
    for name in VTC_ZOO:
        model, inputs = get(name).builder(batch=1, seed=0, **SMALL_SIZES[name])
        model = model.eval().to(half)
        inputs = tuple(x.to(half) if x.is_floating_point() else x for x in inputs)
        exe = vtmlir.compile(model, *inputs, target="cuda")
        plans = [p for p in exe.plans if p.kind == "contraction"]
        assert all(p.schedule in ("mma-sync", "simt") for p in plans), \
            (name, [(p.id, p.description, p.schedule, p.reason) for p in plans if p.schedule not in ("mma-sync", "simt")])
        assert not exe.report().naive_contractions, name
        # Convolutions: the only ones left as convolutions (the `threads` schedule) are depthwise
        # (no channel reduction); grouped ones are batch matmuls over their groups (issue 22).
        left = [p for p in exe.plans if p.kind == "convolution"]
        assert all(p.schedule == "threads" for p in left), (name, [(p.id, p.description, p.schedule) for p in left])
        stage_ir, ops = _scheduled_kernels(exe)  # stage_ir keeps the ops alive
        grouped = [p for p in left if list(linalg.infer_convolution_dimensions(ops[p.id]).input_channel)]
        assert not grouped, (name, [(p.id, p.description) for p in grouped])
        if name == "vtc_efficientvit_block" and dtype == "f16":
            # Every contraction on tensor cores: qkv, the grouped aggregation (6 groups of 8 -> 8
            # channels over 36 pixels, padded to 16x48x16: it was a SIMT kernel), LiteMLA's two
            # products, proj, MBConv's expanding 1x1 and its projection (BatchNorm and Hardswish
            # split off: it was a row reduction over the channels).
            assert all(p.schedule == "mma-sync" for p in plans), [(p.id, p.description, p.schedule) for p in plans]
            assert any(p.description.startswith("contraction 6x16x48x16") for p in plans), \
                [(p.id, p.description) for p in plans]
            assert len(plans) == 7 and not [p for p in exe.plans if p.kind == "row-reduction"], \
                [(p.id, p.description, p.schedule) for p in exe.plans]
        scheduled = {p.id for p in plans}
        for kernel in exe.kernels:
            if kernel.plan is not None and kernel.plan.id in scheduled:
                if kernel.schedule == "mma-sync":
                    assert "mma.sync.aligned" in kernel.ptx, (name, kernel.name)
                for arch in ARCHS:
                    _check_resources(kernel, arch)


@pytest.mark.slow  # about 32 s: the suite is over its 15 minutes (16 min 47 s at e9d42f9)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_llama_layer_in_half_precision_runs_every_contraction_on_tensor_cores(dtype):
    """The Llama decoder layer in f16 / bf16 at decode (batch 1): attention's two batched products
    (batch and heads on the grid) and the o-projection where it stays a contraction (it reads the
    heads unflattened: two k dimensions) on tensor cores; the q/k/v projections and the MLP's gate,
    up and down Linears are matrix-vector products, gemv kernels (test_cuda_gemv.py); none naive."""
    model, inputs = ZOO["llama_decoder_layer"].build(batch=1, seed=0)
    model = model.to(HALF[dtype])
    inputs = tuple(x.to(HALF[dtype]) if x.is_floating_point() else x for x in inputs)
    exe = vtmlir.compile(model, *inputs, target="cuda")
    report = exe.report()
    assert not report.naive_contractions, [(k.name, k.description, k.detail) for k in report.naive_contractions]
    contractions = [k for k in exe.kernels if k.plan is not None and k.plan.kind == "contraction"]
    gemv = [k for k in exe.kernels if k.schedule == "gemv"]
    assert len(contractions) >= 2 and len(contractions) + len(gemv) >= 7, \
        [(k.name, k.plan.description) for k in contractions + gemv]
    assert len(gemv) >= 5   # q, k, v; gate, up, down (o: gemv where its heads collapse into one sum)
    batched = [k for k in contractions if k.plan.description.count("x") >= 3]  # batch/outer or two k dims
    assert len(batched) >= 2
    for kernel in contractions:
        assert kernel.schedule == "mma-sync", (kernel.name, kernel.plan.description, kernel.plan.reason)
        assert f"mma.sync.aligned.m16n8k16.row.col.f32.{dtype}.{dtype}.f32" in kernel.ptx and "ldmatrix" in kernel.ptx
        for arch in ARCHS:
            _check_resources(kernel, arch)
    rows = [k for k in exe.kernels if k.plan is not None and k.plan.kind == "row-reduction"]
    assert rows and all(k.schedule in ("warp-reduce", "block-reduce") for k in rows)


@pytest.mark.slow  # about 40 s per dtype
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_every_zoo_contraction_runs_on_tensor_cores_in_half_precision(dtype):
    """Issue 22's target: every contraction of every zoo model (Linears, attention's products,
    convolutions as implicit GEMM) on mma.sync in f16 and bf16, at batch 1 (m padded to 16). None
    is a SIMT or naive kernel, or fused away unscheduled. (Matrix-vector products, a batch-1
    Linear's `W x`, are no contractions here: gemv kernels, test_cuda_gemv.py.)"""
    for name in ZOO:
        model, inputs = ZOO[name].build(batch=1, seed=0)
        model = model.to(HALF[dtype])
        inputs = tuple(x.to(HALF[dtype]) if x.is_floating_point() else x for x in inputs)
        exe = vtmlir.compile(model, *inputs, target="cuda")
        plans = [p for p in exe.plans if p.kind in ("contraction", "convolution")]
        assert all(p.schedule == "mma-sync" for p in plans), \
            (name, [(p.id, p.description, p.schedule, p.reason) for p in plans if p.schedule != "mma-sync"])
        scheduled = {p.id for p in plans}
        kernels = [k for k in exe.kernels if k.plan is not None and k.plan.id in scheduled]
        assert len(kernels) == len(plans)
        for kernel in kernels:
            assert f"mma.sync.aligned.m16n8k16.row.col.f32.{dtype}.{dtype}.f32" in kernel.ptx, (name, kernel.name)


def _mlp_f16(batch=64):
    model, inputs = ZOO["mlp"].build(batch=batch, seed=0)  # batch 64: m a multiple of 16, no padding
    return model.half(), inputs[0].half()


@pytest.fixture(scope="module")
def mlp_fused_and_not():
    model, x = _mlp_f16()
    return (vtmlir.compile(model, x, target="cuda"),
            vtmlir.compile(model, x, target="cuda", schedules={"contraction": {"fuse": False}}))


def test_linear_bias_and_activation_are_one_tensor_core_kernel(mlp_fused_and_not):
    """The f16 MLP's Linear + bias + GELU / ReLU: the accumulator's fill, the matmul on tensor cores
    and the bias and activation (the epilogue) in one kernel per layer; 9 kernels without fusion."""
    fused, unfused = mlp_fused_and_not
    assert [k.schedule for k in unfused.kernels].count("mma-sync") == 3 and len(unfused.kernels) == 9
    assert len(fused.kernels) == 3
    for kernel in fused.kernels:
        assert kernel.schedule == "mma-sync", (kernel.name, kernel.plan.reason)
        assert "+ prologue (kernel" in kernel.plan.detail and "+ epilogue (kernel" in kernel.plan.detail
        ptx = kernel.ptx
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx and "cp.async" in ptx
        assert "bar.sync" in ptx
        for arch in ARCHS:
            _check_resources(kernel, arch)  # no spills on sm_80 or sm_90
    members = {p.id for p in fused.plans if p.reason.startswith("fused into kernel")}
    assert len(members) == 6  # 3 fills, 3 bias + activation epilogues
    # GELU's erf (libdevice: ex2) in the first layer's tensor-core kernel, in no unfused contraction
    assert "ex2" in fused.kernels[0].ptx
    assert not any("ex2" in k.ptx for k in unfused.kernels if k.schedule == "mma-sync")
    report = fused.report()
    assert len(report.kernels) == 3 and "+ epilogue" in str(report)


@pytest.mark.parametrize("batch", [8])  # batch 1: matrix-vector products, gemv kernels (test_cuda_gemv.py)
def test_padded_linear_layers_fuse_their_padding_copies_and_epilogues(batch):
    """The f16 MLP at batch 8 (m padded to 16 rows): each layer's accumulator fills, the copies
    into and out of the padded accumulator, the bias and activation and the copy of the activation into
    the next layer's padded A run in the layer's tensor-core kernel (one block covers the 16 rows);
    only the padded A buffers' fills and the input's copy stay kernels of their own: 24 -> 7 kernels."""
    model, x = _mlp_f16(batch=batch)
    exe = vtmlir.compile(model, x, target="cuda")
    contractions = [k for k in exe.kernels if k.plan is not None and k.plan.kind == "contraction"]
    assert len(contractions) == 3 and len(exe.kernels) == 7, [(k.name, k.plan.description) for k in exe.kernels]
    for kernel in contractions:
        assert kernel.schedule == "mma-sync" and "mma.sync.aligned.m16n8k16" in kernel.ptx
        assert "+ prologue (kernels" in kernel.plan.detail and "+ epilogue (kernels" in kernel.plan.detail
        for arch in ARCHS:
            _check_resources(kernel, arch)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_epilogue_fusion_with_simt_and_bf16_contractions(dtype):
    """f32 (SIMT contractions, the FMA register tiles) and bf16 (mma.sync, the epilogue's bias and
    activation on f32 values, cast to bf16): the same fusion as f16, one kernel per layer."""
    model, inputs = ZOO["mlp"].build(batch=64, seed=0)
    model, x = model.to(dtype), inputs[0].to(dtype)
    exe = vtmlir.compile(model, x, target="cuda")
    assert [k.schedule for k in exe.kernels] == ["simt" if dtype == torch.float32 else "mma-sync"] * 3
    for kernel in exe.kernels:
        assert "+ epilogue" in kernel.plan.detail
        if dtype == torch.bfloat16:
            assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in kernel.ptx and "cp.async" in kernel.ptx
        for arch in ARCHS:
            _check_resources(kernel, arch)


@pytest.mark.skipif(not cuda_available(), reason="no CUDA device")
@pytest.mark.parametrize("batch", [64, 8, 1])  # 8, 1: m padded, the padding copies fused too
def test_fused_epilogues_compute_what_the_separate_kernels_do(batch):
    """On a GPU: fusion is bitwise the unfused kernels (same operations per element, same order),
    and both are torch's f16 MLP within f16 rounding of a differently ordered sum."""
    model, x = _mlp_f16(batch)
    fused = vtmlir.compile(model, x, target="cuda")
    unfused = vtmlir.compile(model, x, target="cuda", schedules={"contraction": {"fuse": False}})
    got, want = fused(x), unfused(x)
    assert torch.equal(got, want)
    reference = model.cuda()(x.cuda()).cpu()
    torch.testing.assert_close(got.cpu(), reference, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_model_compiles_end_to_end(dtype):
    """`vtmlir.compile(model.half(), ...)` (and bf16): import, kernels, PTX for sm_80 and sm_90, a
    host program; the Linears on tensor cores."""
    model, inputs = ZOO["mlp"].build(batch=8, seed=0)  # batch 1 makes matrix-vector products
    model = model.to(dtype)
    inputs = tuple(x.to(dtype) for x in inputs)
    exe = vtmlir.compile(model, *inputs, target="cuda")
    for arch in ARCHS:
        assert set(exe.assemble(arch)) == set(exe.ptx)
    assert exe.host_program.launches()
    contractions = [k for k in exe.kernels if k.plan is not None and k.plan.kind == "contraction"]
    assert contractions
    assert all(k.schedule == "mma-sync" for k in contractions), [(k.name, k.schedule) for k in contractions]


def test_report_lists_every_kernel_with_resources_and_an_estimate():
    m, n, k = 64, 48, 32
    exe = _compile(MatMul(), torch.randn(m, k).half(), torch.randn(k, n).half())
    report = exe.report()
    assert len(report.kernels) == len(exe.kernels)
    (row,) = [r for r in report.kernels if r.schedule == "mma-sync"]
    assert row.flops == 2 * m * n * k + m * n  # and the fused epilogue's f32 -> f16 cast per element
    assert len(report.kernels) == 1  # the accumulator's fill and that cast run in the contraction's tiles
    assert row.bytes >= (m * k + k * n) * 2
    for arch in ARCHS:
        assert row.resources[arch].registers > 0 and row.resources[arch].shared_bytes > 0
        blocks, occupancy = row.occupancy[arch]
        assert blocks >= 1 and 0 < occupancy <= 1
    assert row.h100_estimate_s > 0
    text = str(report)
    assert "estimate" in text and "not measured" in text
    assert row.name in text and "sm_80" in text and "sm_90" in text


def test_cli_prints_the_report_for_a_half_precision_zoo_model():
    proc = subprocess.run([sys.executable, "-m", "vtmlir.cli.main", "compile", "mlp", "--target", "cuda",
                           "--dtype", "float16", "--report"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # the report: the batch-1 MLP's Linears are matrix-vector products (gemv kernels)
    assert "-> gemv (gemv: " in proc.stderr and "H100 roofline estimate" in proc.stderr
    assert ".entry" in proc.stdout  # the PTX, still emitted


class ConvRelu(torch.nn.Module):
    """An NCHW convolution (groups 1, bias) and a ReLU: what the importer makes of a conv layer."""

    def __init__(self, cin, cout, stride, dilation=1, kernel=3):
        super().__init__()
        self.conv = torch.nn.Conv2d(cin, cout, kernel, stride=stride, padding=dilation * (kernel // 2),
                                    dilation=dilation)

    def forward(self, x):
        return torch.relu(self.conv(x))


def _run_with_gpu_im2col_on_cpu(model, x, schedules=None):
    """`model` imported and bufferized as for CUDA, `codegen-gpu-im2col-convolutions` applied, the
    rewritten kernel level run by the CPU backend (the GPU path's kernels cannot run here; with
    `schedules`, e.g. EXACT_SCHEDULES): returns the result and how many convolutions were rewritten."""
    from vtmlir.backend.bufferize import bufferize
    from vtmlir.backend.cpu.executable import CpuExecutable, create_engine
    from vtmlir.backend.cpu.lower import lower_to_llvm
    from vtmlir.codegen.gpu.im2col_convolutions import im2col_convolutions
    from vtmlir.frontend.torch_import import export_torch, import_exported
    from vtmlir.signature import box_scalars, find_entry, signature_of

    module = import_exported(export_torch(model, x))
    signature = signature_of(find_entry(module, None))
    box_scalars(find_entry(module, None))
    result_arguments = bufferize(module, function=signature.name)
    rewritten = im2col_convolutions(module.operation)
    lower_to_llvm(module, threads=1, schedules=schedules)
    exe = CpuExecutable(create_engine(module, 2), signature, {}, result_arguments=result_arguments, threads=1)
    (y,) = exe.run(x)
    return y, rewritten


@pytest.mark.parametrize("kernel, stride, dilation", [(3, 1, 1), (3, 2, 1), (3, 1, 2), (1, 1, 1), (1, 2, 1)])
def test_im2col_convolutions_match_pytorch_on_the_cpu(kernel, stride, dilation):
    """The im2col copy + batch matmul (a 1x1 stride-1 convolution: the input read as the matrix)
    computes the convolution: f32 within rtol 1e-4 of PyTorch (the product sums in k = (c, kh, kw)
    order, the convolution loops' own)."""
    torch.manual_seed(0)
    model = ConvRelu(16, 24, stride, dilation, kernel).eval()
    x = torch.randn(2, 16, 18, 14)
    y, rewritten = _run_with_gpu_im2col_on_cpu(model, x)
    assert rewritten == 1
    want = model(x)
    torch.testing.assert_close(torch.as_tensor(y), want, rtol=1e-4, atol=1e-4 * want.abs().max().item())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kernel, stride", [(3, 1), (3, 2), (1, 1)])
def test_convolutions_run_as_implicit_gemm(dtype, kernel, stride):
    """A 3x3 convolution (padding 1, stride 1 or 2) compiles to an im2col copy (vector schedule) and
    a contraction, a 1x1 one to the contraction alone: SIMT in f32, mma.sync in f16 and bf16; no
    naive kernel; PTX for sm_80 and sm_90 with no spills."""
    torch.manual_seed(0)
    model = ConvRelu(32, 64, stride, kernel=kernel).to(dtype)
    exe = _compile(model, torch.randn(4, 32, 24, 24).to(dtype))
    report = exe.report()
    assert not report.naive_contractions, [(k.name, k.description, k.detail) for k in report.naive_contractions]
    assert all(k.schedule != "naive" for k in exe.kernels), \
        [(k.name, k.plan and k.plan.description, k.plan and k.plan.reason) for k in exe.kernels]
    assert not [k for k in exe.kernels if k.plan is not None and k.plan.kind == "convolution"]
    (gemm,) = [k for k in exe.kernels if k.plan is not None and k.plan.kind == "contraction"]
    assert gemm.schedule == ("simt" if dtype == torch.float32 else "mma-sync")
    # batch 4, M = 64 filters, N = output pixels, K = 32 channels x kernel x kernel
    pixels = (24 // stride) ** 2
    n = pixels if dtype == torch.float32 else -(-pixels // 16) * 16
    assert gemm.plan.description.startswith(f"contraction 4x64x{n}x{32 * kernel * kernel}")
    if dtype != torch.float32:
        t = {torch.float16: "f16", torch.bfloat16: "bf16"}[dtype]
        assert f"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32" in gemm.ptx and "ldmatrix" in gemm.ptx
    windows = [k for k in exe.kernels if k.plan is not None
               and k.plan.description.startswith(f"data-movement 4x32x{kernel}x{kernel}")]
    assert len(windows) == (0 if (kernel, stride) == (1, 1) else 1)
    assert all(k.schedule == "vector" for k in windows)
    for kernel in exe.kernels:
        for arch in ARCHS:
            _check_resources(kernel, arch)


class GroupedConvRelu(torch.nn.Module):
    """A grouped NCHW convolution (several channels per group, bias) and a ReLU."""

    def __init__(self, cin, cout, groups, kernel, stride=1):
        super().__init__()
        self.conv = torch.nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, groups=groups)

    def forward(self, x):
        return torch.relu(self.conv(x))


def _grouped_sums_in_k_order(conv, x):
    """conv(x) (f32) summed as the naive mapping sums it: per output, the bias, then the products
    over k = (c, kh, kw) of the output's group in that order, each product and sum rounded to f32
    (F.unfold lists a window's elements c-major, then kh, kw: k's order)."""
    n, groups = x.shape[0], conv.groups
    kh, kw = conv.kernel_size
    cols = torch.nn.functional.unfold(x, (kh, kw), padding=conv.padding, stride=conv.stride)   # [N, C*KH*KW, L]
    k_extent = cols.shape[1] // groups
    cols = cols.view(n, groups, k_extent, 1, -1)                                                # [N, G, K, 1, L]
    weight = conv.weight.detach().reshape(groups, -1, k_extent)                                 # [G, F, K]
    acc = conv.bias.detach().view(1, groups, -1, 1).expand(n, groups, weight.shape[1], cols.shape[-1]).clone()
    for k in range(k_extent):
        acc = acc + weight[None, :, :, k, None] * cols[:, :, k]
    h = (x.shape[2] + 2 * conv.padding[0] - kh) // conv.stride[0] + 1
    return torch.relu(acc.reshape(n, -1, h, acc.shape[-1] // h))


@pytest.mark.parametrize("kernel, stride", [(1, 1), (3, 1), (3, 2), (1, 2)])
def test_grouped_im2col_convolutions_sum_as_the_naive_mapping_on_the_cpu(kernel, stride):
    """A grouped convolution (4 groups of 4 channels -> 6 features) becomes the im2col copy (none
    for 1x1 stride 1: the input read as the matrices) and a batch matmul over the groups; run on
    the CPU with the exact schedules (each product and sum rounded separately, the loops' order) it
    is bitwise the convolution summed per output over k = (c, kh, kw) in order -- the naive
    mapping's sum, which the GPU's SIMT kernel keeps -- and within rtol 1e-4 of PyTorch."""
    from vtmlir.codegen import EXACT_SCHEDULES

    torch.manual_seed(0)
    model = GroupedConvRelu(16, 24, 4, kernel, stride).eval()
    x = torch.randn(2, 16, 18, 14)
    y, rewritten = _run_with_gpu_im2col_on_cpu(model, x, schedules=EXACT_SCHEDULES)
    assert rewritten == 1
    y = torch.as_tensor(y)
    with torch.no_grad():
        assert torch.equal(y, _grouped_sums_in_k_order(model.conv, x))
        want = model(x)
    torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-4 * want.abs().max().item())


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_efficientvit_grouped_aggregation_matches_the_kernels_on_the_cpu(dtype):
    """vtc_efficientvit_block (test size): its kernel level with the CUDA `schedule` stage -- the
    grouped 1x1 aggregation a batch matmul over the groups, in f16 its cast split off and the
    product padded to 16x48x16 -- run on the CPU is bitwise the one without
    codegen-gpu-im2col-convolutions (each output summed over its group's channels in order; the
    padding adds exact zeros)."""
    from vtmlir.models import get
    from vtmlir.models.vtc_workloads import SMALL_SIZES

    model, inputs = get("vtc_efficientvit_block").builder(batch=1, seed=0, **SMALL_SIZES["vtc_efficientvit_block"])
    half = HALF.get(dtype, torch.float32)
    model = model.eval().to(half)
    inputs = tuple(x.to(half) for x in inputs)
    batched, _ = _run_kernel_level_on_cpu(model, inputs, False)
    convolved, _ = _run_kernel_level_on_cpu(model, inputs, False, without=("codegen-gpu-im2col-convolutions",))
    for b, c in zip(batched, convolved):
        assert torch.equal(b, c)


class DepthwiseBnHardswishProjection(torch.nn.Module):
    """MBConv's end (vtc_efficientvit_block at test size): a depthwise 3x3 convolution, BatchNorm
    and Hardswish, then the 1x1 projection 32 -> 16, which the graph-level fusion reads through the
    BatchNorm and Hardswish (six inputs, the image at `oh + kh`)."""

    def __init__(self):
        super().__init__()
        self.depthwise = torch.nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False)
        self.norm = torch.nn.BatchNorm2d(32)
        self.project = torch.nn.Conv2d(32, 16, 1, bias=False)
        with torch.no_grad():  # a trained model's statistics, not the identity
            self.norm.running_mean.uniform_(-0.5, 0.5)
            self.norm.running_var.uniform_(0.5, 2.0)
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.project(torch.nn.functional.hardswish(self.norm(self.depthwise(x))))


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_a_convolution_reading_its_input_through_a_prologue_is_a_batch_matmul(dtype):
    """The projection's BatchNorm and Hardswish are computed once over the depthwise output's
    indices (codegen-gpu-split-prologues before the im2col rewrite), so the 1x1 convolution is a
    batch matmul on tensor cores in f16 (the SIMT kernel in f32) where it was a row reduction over
    the channels recomputing them per output channel; PTX for sm_80 and sm_90 without spills. Run
    on the CPU, the kernel level is bitwise the one with neither pass (the same ops per element,
    each output summed over its channels in order)."""
    from vtmlir.codegen import EXACT_SCHEDULES

    torch.manual_seed(0)
    half = HALF.get(dtype, torch.float32)
    model, x = DepthwiseBnHardswishProjection().eval().to(half), torch.randn(1, 32, 6, 6).to(half)
    exe = _compile(model, x)
    expected = "simt" if dtype == "f32" else "mma-sync"
    contractions = [p for p in exe.plans if p.kind == "contraction"]
    assert [p.schedule for p in contractions] == [expected], [(p.description, p.schedule) for p in exe.plans]
    assert not [p for p in exe.plans if p.kind == "row-reduction"], [(p.description, p.schedule) for p in exe.plans]
    assert not exe.report().naive_contractions
    for kernel in exe.kernels:
        if kernel.plan is not None and kernel.plan.kind == "contraction" and dtype != "f32":
            assert "mma.sync.aligned" in kernel.ptx, kernel.name
        for arch in ARCHS:
            _check_resources(kernel, arch)
    batched, _ = _run_kernel_level_on_cpu(model, (x,), False)
    convolved, _ = _run_kernel_level_on_cpu(model, (x,), False, without=(
        "codegen-gpu-split-prologues", "codegen-gpu-im2col-convolutions"))
    for b, c in zip(batched, convolved):
        assert torch.equal(b, c)


@pytest.mark.parametrize("dtype, case", [
    ("f32", "3x3"), ("f16", "1x1"), ("f16", "3x3"), ("f16", "1x1-ragged"), ("bf16", "1x1"), ("bf16", "3x3"),
])
def test_grouped_convolutions_run_as_batch_matmuls_over_the_groups(dtype, case):
    """A grouped convolution (4 groups of 16 channels -> 32 features, 16x16 images; the ragged case
    vtc_efficientvit_block's aggregation at test size: 6 groups of 8 -> 8, 6x6, padded to 16x48x16
    by codegen-gpu-pad-contractions) is an im2col copy (3x3) and a batch matmul over the groups:
    mma.sync with ldmatrix fragments in f16 and bf16, the SIMT kernel in f32; no naive or threads
    kernel; PTX for sm_80 and sm_90 with no spills."""
    half = HALF.get(dtype, torch.float32)
    torch.manual_seed(0)
    if case == "1x1-ragged":
        model, x = GroupedConvRelu(48, 48, 6, 1), torch.randn(1, 48, 6, 6)
        groups, m, n, k = 6, 8, 36, 8
    else:
        kernel = int(case[0])
        model, x = GroupedConvRelu(64, 128, 4, kernel), torch.randn(2, 64, 16, 16)
        groups, m, n, k = 4, 32, 256, 16 * kernel * kernel
    exe = _compile(model.to(half), x.to(half))
    report = exe.report()
    assert not report.naive_contractions, [(r.name, r.description, r.detail) for r in report.naive_contractions]
    assert all(r.schedule not in ("naive", "threads") for r in report.kernels), \
        [(r.name, r.description, r.schedule) for r in report.kernels]
    assert not [p for p in exe.plans if p.kind == "convolution"]
    expected = "simt" if dtype == "f32" else "mma-sync"
    assert [r.schedule for r in report.kernels if r.kind == "contraction"] == [expected]
    (gemm,) = [kk for kk in exe.kernels if kk.plan is not None and kk.plan.kind == "contraction"]
    if dtype != "f32":
        m, n, k = (-(-v // 16) * 16 for v in (m, n, k))
    images = "" if x.shape[0] == 1 else f"{x.shape[0]}x"
    assert gemm.plan.description.startswith(f"contraction {images}{groups}x{m}x{n}x{k}"), gemm.plan.description
    if dtype != "f32":
        assert f"mma.sync.aligned.m16n8k16.row.col.f32.{dtype}.{dtype}.f32" in gemm.ptx and "ldmatrix" in gemm.ptx
    for kernel in exe.kernels:
        for arch in ARCHS:
            _check_resources(kernel, arch)


class DecodeProducts(torch.nn.Module):
    """A decode step's attention product P[b, h, 1, S] @ V[b, h, S, D] (few outputs, a 4096-long sum),
    a sum and a max over a middle dimension (outer reductions)."""

    def forward(self, p, v, x):
        return p @ v, x.sum(1), x.amax(1)


def _decode_inputs():
    torch.manual_seed(0)
    return torch.randn(2, 4, 1, 4096), torch.randn(2, 4, 4096, 32), torch.randn(3, 2048, 8)


def test_split_reductions_match_pytorch_on_the_cpu():
    """`codegen-gpu-split-reductions` on the kernel level as the CUDA schedule stage sees it (unit
    dimensions folded), run by the CPU backend: the chunked sums are within 1e-5 of PyTorch's (a
    reassociated f32 sum), the max is bitwise (max is exact in any order)."""
    from vtmlir.backend.bufferize import bufferize
    from vtmlir.backend.cpu.executable import CpuExecutable, create_engine
    from vtmlir.backend.cpu.lower import lower_to_llvm
    from vtmlir.codegen.gpu.split_reductions import split_reductions
    from vtmlir.frontend.torch_import import export_torch, import_exported
    from vtmlir.passes import run_pipeline
    from vtmlir.signature import box_scalars, find_entry, signature_of

    model, inputs = DecodeProducts(), _decode_inputs()
    module = import_exported(export_torch(model, *inputs))
    signature = signature_of(find_entry(module, None))
    box_scalars(find_entry(module, None))
    result_arguments = bufferize(module, function=signature.name)
    run_pipeline(module, "builtin.module(func.func(linalg-generalize-named-ops, linalg-fold-unit-extent-dims, "
                         "linalg-fold-unit-extent-dims{use-rank-reducing-slices=true}), canonicalize)")
    assert split_reductions(module.operation, chip="sm_90") == 3
    lower_to_llvm(module, threads=1)
    exe = CpuExecutable(create_engine(module, 2), signature, {}, result_arguments=result_arguments, threads=1)
    got = [torch.as_tensor(y) for y in exe.run(*inputs)]
    want = model(*inputs)
    for g, w in zip(got[:2], want[:2]):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5 * w.abs().max().item())
    assert torch.equal(got[2], want[2])


def test_long_reductions_over_few_outputs_are_split_on_the_gpu():
    """The decode product's 2 x 4 x 32 outputs: a partial kernel over 64 chunks of 64 (8192 threads,
    not 256 walking 4096 products each) and a combine; the outer sum likewise; every kernel assembles
    for sm_80 and sm_90 without spills. Off (`split_reductions: False`), the product is one kernel."""
    inputs = _decode_inputs()
    exe = _compile(DecodeProducts(), *inputs)
    descriptions = [k.plan.description for k in exe.kernels if k.plan is not None]
    assert "unknown 64x2x4x32x64 (a contraction without m, n and k dimensions)" in descriptions, descriptions
    partial = next(k for k in exe.kernels if k.plan is not None and k.plan.description.startswith("unknown 64x2x4x32"))
    assert partial.schedule == "threads" and partial.plan.grid * partial.plan.threads >= 64 * 2 * 4 * 32
    assert not [d for d in descriptions if "4096" in d and d.startswith("unknown")], descriptions
    for kernel in exe.kernels:
        for arch in ARCHS:
            _check_resources(kernel, arch)
    off = vtmlir.compile(DecodeProducts(), *inputs, target="cuda", chip="sm_80",
                         schedules={"unknown": {"split_reductions": False}})
    assert "unknown 2x4x32x4096 (a contraction without m, n and k dimensions)" in \
        [k.plan.description for k in off.kernels if k.plan is not None]


def _last_depthwise():
    """MobileNetV2's last strided depthwise convolution: 3x3 stride 2 over a 2x2 image, padded to 4x4,
    whose one output row reads rows 0..2 only."""
    torch.manual_seed(0)
    return torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8, bias=False).eval(), torch.randn(1, 8, 2, 2)


def test_a_window_that_leaves_input_rows_unread_compiles():
    # linalg-fold-unit-extent-dims dropped the unit output loop and made `2 * oh + kh` a plain `kh`
    # over the 4-row input: the op failed to verify (mobilenet_v2 did not compile for CUDA at any
    # opt level). codegen-trim-window-inputs gives the window a view of the rows it reads.
    conv, x = _last_depthwise()
    compiled = _compile(conv, x)
    assert compiled.kernels and all(k.ptx for k in compiled.kernels)


@pytest.mark.skipif(not cuda_available(), reason="no CUDA device")
def test_a_window_that_leaves_input_rows_unread_computes_the_convolution():
    conv, x = _last_depthwise()
    with torch.no_grad():
        torch.testing.assert_close(_compile(conv, x)(x).cpu(), conv(x), rtol=1e-5, atol=1e-5)
