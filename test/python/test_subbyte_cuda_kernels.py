"""`subbyte-cuda-kernels`: through `vtmlir.compile(..., target="cuda")`, each quantised
contraction (`lowbit.fused`) becomes a launch of the Tilus mma.sync or FMA kernel (docs/lowbit.md,
docs/codegen_gpu.md): which kernel and why (the mma rule, f32 activations, allow_tf32), PTX through
ptxas for sm_80 and sm_90 with no spills, no naive quantised contraction left, the FMA kernel's level
run on the CPU against torch (f32 and f16 models), the case neither kernel takes, a GPU run where a
device exists."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import vtmlir
from vtmlir.lowbit import quantize

from test_lowbit_gpu_kernels import run_gpu_func_on_cpu  # the CPU run of a gpu.func

PIPELINE = "subbyte-pack, subbyte-lower"
ARCHS = ("sm_80", "sm_90")


def _model(k: int, n: int, dtype: str, group: int, half: bool, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    model = quantize(nn.Linear(k, n), dtype=dtype, group_size=group).eval()
    return model.half() if half else model


def _tilus(exe):
    kernels = [k for k in exe.kernels if k.schedule.startswith("tilus-")]
    assert len(kernels) == 1, [(k.name, k.schedule) for k in exe.kernels]
    return kernels[0]


@pytest.mark.parametrize("dtype, group, half, m, allow_tf32, schedule, why", [
    ("u4", 64, True, 16, False, "tilus-mma", "the mma rule holds"),
    ("u4", 64, False, 16, False, "tilus-fma", "f32 activations: mma.sync would round them to f16"),
    ("u4", 64, False, 16, True, "tilus-mma", "f32 activations rounded to f16: allow_tf32"),
    ("u4", 8, True, 16, False, "tilus-fma", "group size 8 is not a multiple of 16"),
    ("e5m1", 64, False, 16, True, "tilus-fma", "the values of f7e5m1 are not all exact in f16"),
    ("i4", 64, True, 1, False, "tilus-fma", "does not tile into 16 x 8 x 16"),
])
def test_quantised_contraction_takes_the_tilus_kernel(dtype, group, half, m, allow_tf32, schedule, why):
    model = _model(128, 64, dtype, group, half)
    x = torch.randn(m, 128, dtype=torch.float16 if half else torch.float32)
    exe = vtmlir.compile(model, x, target="cuda", pipeline=PIPELINE, allow_tf32=allow_tf32)
    kernel = _tilus(exe)
    assert kernel.schedule == schedule and kernel.scheduled
    report = exe.report()
    assert not report.naive_contractions
    (row,) = [r for r in report.kernels if r.name == kernel.name]
    assert row.schedule == schedule and why in row.detail, row.detail
    assert row.kind == "contraction" and row.flops == 2 * m * 64 * 128
    if schedule == "tilus-mma":
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in kernel.ptx
        assert kernel.ptx.count("bar.sync") >= 2 and row.resources["sm_80"].shared_bytes > 0
    else:
        assert "mma.sync" not in kernel.ptx and "fma.rn.f32" in kernel.ptx
    for arch in ARCHS:
        assert row.resources[arch].spill_bytes == 0, (arch, row.resources[arch])
        assert exe.assemble(arch)[kernel.name]
    assert str(report).count(f"-> {schedule} (") == 1


def test_a_contraction_neither_kernel_takes_keeps_the_naive_mapping_and_says_why():
    """K = 30: mma needs K % 16, the FMA kernel K % 4."""
    model = _model(30, 8, "u4", 10, False)
    exe = vtmlir.compile(model, torch.randn(2, 30), target="cuda", pipeline=PIPELINE)
    assert not [k for k in exe.kernels if k.schedule.startswith("tilus-")]
    (naive,) = exe.report().naive_contractions
    assert "no Tilus kernel" in naive.detail and "needs K % 4 == 0, K = 30" in naive.detail, naive.detail
    for arch in ARCHS:
        assert len(exe.assemble(arch)) == len(exe.kernels)


def _kernel_level(model, x):
    """The model imported, lowered by the subbyte passes, bufferized, then the pass."""
    from vtmlir.backend.bufferize import bufferize
    from vtmlir.frontend.torch_import import export_torch, import_exported
    from vtmlir.passes import parse_pipeline, run_pipeline
    from vtmlir.signature import find_entry, signature_of

    module = import_exported(export_torch(model, x))
    run_pipeline(module, parse_pipeline(PIPELINE))
    bufferize(module, function=signature_of(find_entry(module, None)).name)
    run_pipeline(module, "builtin.module(subbyte-cuda-kernels)", what="the pass under test")
    return module


def _run_launch_on_cpu(module, x: np.ndarray) -> tuple[str, np.ndarray]:
    """The Tilus launch of `module`'s entry run on the CPU: its gpu.func over its grid, x as the
    activations, its constant operands' values, a zeroed y. Returns (schedule, y)."""
    from torch_mlir import ir

    from vtmlir.codegen.gpu.launch_plans import LAUNCH_ATTR
    from vtmlir.codegen.weights import Globals

    with module.context:
        body = module.body
        func = next(op for op in body.operations if op.operation.name == "func.func")
        (launch,) = [op for op in func.regions[0].blocks[0].operations
                     if op.operation.name == "gpu.launch_func" and LAUNCH_ATTR in op.operation.attributes]
        schedule = ir.StringAttr(ir.DictAttr(launch.operation.attributes[LAUNCH_ATTR])["schedule"]).value
        module_name, _ = ir.SymbolRefAttr(launch.operation.attributes["kernel"]).value
        gpu_module = next(op for op in body.operations if op.operation.name == "gpu.module"
                          and ir.StringAttr(op.attributes["sym_name"]).value == module_name)

        def const(value):
            return ir.IntegerAttr(value.owner.attributes["value"]).value

        grid = tuple(const(v) for v in (launch.gridSizeX, launch.gridSizeY, launch.gridSizeZ))
        block = tuple(const(v) for v in (launch.blockSizeX, launch.blockSizeY, launch.blockSizeZ))
        globals_ = Globals(module.operation)
        arrays = []
        for value in launch.kernelOperands:
            data = globals_.constant_value(value)
            if data is not None:
                arrays.append(np.ascontiguousarray(data))
            elif isinstance(value, ir.BlockArgument) and value.arg_number == 0:
                arrays.append(np.ascontiguousarray(x))
            else:
                mtype = ir.MemRefType(value.type)
                arrays.append(np.zeros(list(mtype.shape), np.float32))
        text = "module {\n" + str(gpu_module) + "\n}"
    run_gpu_func_on_cpu(text, grid, block, arrays)
    return schedule, arrays[-1]


@pytest.mark.parametrize("dtype, group, half, m", [("u4", 64, False, 3), ("i3", 8, True, 16), ("e3m2", 32, False, 16),
                                                   ("u5", 16, True, 1)])
def test_fma_kernel_level_runs_on_cpu_and_matches_torch(dtype, group, half, m):
    """The kernel the compiled model launches, run on the host: an f32 model equals torch's f32
    x @ W'^T up to the order of f32 additions; an f16 model (exact dequantised weight, f32 sums)
    equals torch's f16 model up to its rounding of W' to f16."""
    model = _model(64, 48, dtype, group, half, seed=1)
    layer = model if not hasattr(model, "layers") else model.layers[0]
    x = torch.randn(m, 64, dtype=torch.float16 if half else torch.float32)
    schedule, y = _run_launch_on_cpu(_kernel_level(model, x), x.numpy())
    assert schedule == "tilus-fma"
    w = layer.dequantized_weight().double()
    exact = (x.double() @ w.T).numpy()
    scale = (x.double().abs() @ w.abs().T).numpy().max()
    if not half:
        np.testing.assert_allclose(y, exact, rtol=0, atol=1e-6 * scale)
    else:
        np.testing.assert_allclose(y, exact, rtol=0, atol=1e-6 * scale)  # the kernel's exact W'
        with torch.no_grad():
            torch_half = (model(x).float() - layer.bias.float()).numpy()
        np.testing.assert_allclose(y, torch_half, rtol=0, atol=4e-3 * scale)  # torch rounds W', y to f16


def test_quantised_models_run_on_gpu_and_match_torch():
    from vtmlir.backend.cuda import cuda_available

    if not cuda_available():
        pytest.skip("no CUDA device")
    for half, m, group in ((True, 16, 64), (False, 16, 64), (True, 1, 8), (False, 3, 16)):
        model = _model(256, 128, "u4", group, half)
        x = torch.randn(m, 256, dtype=torch.float16 if half else torch.float32)
        exe = vtmlir.compile(model, x, target="cuda", pipeline=PIPELINE)
        with torch.no_grad():
            want = model(x).float()
        got = exe(x).float()
        tol = 4e-3 if half else 1e-5
        torch.testing.assert_close(got, want, rtol=tol, atol=tol * want.abs().max().item())


def test_fma_kernel_with_f32_activations_adds_to_y_on_cpu():
    """The builder's f32-activation, accumulating variant (a contraction whose output starts from
    something other than a zero fill): y = y0 + x W'^T in f32."""
    from torch_mlir import ir

    from vtmlir.context import make_context
    from vtmlir.lowbit import quantize_weight
    from vtmlir.lowbit.gpu_kernels import fma_b_layout, fma_kernel
    from vtmlir.lowbit.gpu_matmul import pack_for_layout

    m, n, k, group = 3, 32, 64, 16
    w = quantize_weight(torch.randn(n, k, generator=torch.Generator().manual_seed(2)), "i5", group)
    packed = pack_for_layout(w, fma_b_layout(32))
    with make_context(), ir.Location.unknown():
        f32 = ir.F32Type.get()
        module = fma_kernel("k", w.dtype, m, n, k, group, packed.size, w.zeros is not None, 1, 32,
                            x_type=ir.MemRefType.get([m, k], f32), y_type=ir.MemRefType.get([m, n], f32),
                            accumulate=True)
        module.operation.verify()
        text = str(module)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k)).astype(np.float32)
    y0 = rng.standard_normal((m, n)).astype(np.float32)
    y = y0.copy()
    arrays = [x, packed, w.scales.astype(np.float32)] + ([w.zeros.astype(np.float32)] if w.zeros is not None else [])
    run_gpu_func_on_cpu(text, (1, m, 1), (32, 1, 1), arrays + [y])
    wd = w.dequantize().astype(np.float64)
    want = y0 + x.astype(np.float64) @ wd.T
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-6 * (np.abs(x) @ np.abs(wd).T).max())
