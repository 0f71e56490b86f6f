"""CUDA backend: PTX per kernel (ptxas for sm_80 and sm_90), launch configurations, host program,
crash-safe LLVM translation, and (where a GPU exists) numerics against PyTorch."""

from __future__ import annotations

import signal
import sys

import numpy as np
import pytest
import torch

from vtmlir.backend.cuda import compile_cuda, cuda_available, load
from vtmlir.backend.cuda import ptx as ptx_module
from vtmlir.backend.cuda.host import Launch, MemrefView, UploadConstant, build_host_program
from vtmlir.backend.cuda.ptx import check_llvm_only, translate_kernels
from vtmlir.backend.cuda.ptxas import assemble, resource_usage
from vtmlir.errors import VtmlirError
from vtmlir.frontend import as_module, import_torch
from vtmlir.models import ZOO


class ReductionMix(torch.nn.Module):
    """A full reduction (no parallel dimension: becomes a one-thread kernel) and a row reduction."""

    def forward(self, x):
        return (x * 2).sum() + x.mean(), torch.exp(x).amax(dim=1)


def _build(name):
    if name == "reduction_mix":
        torch.manual_seed(0)
        return ReductionMix().eval(), (torch.randn(4, 5),)
    return ZOO[name].build(batch=1, seed=0)


# Every zoo model, plus a full reduction (a kernel with no parallel dimension).
@pytest.fixture(scope="module", params=[*ZOO, "reduction_mix"])
def compiled(request):
    model, inputs = _build(request.param)
    module = import_torch(model, *inputs)
    before = str(module)
    exe = compile_cuda(module, chip="sm_80")
    assert str(module) == before, "compile_cuda must not modify the caller's module"
    return model, inputs, exe


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_kernel_assembles(compiled, arch):
    _, _, exe = compiled
    assert exe.kernels
    cubins = exe.assemble(arch)
    assert set(cubins) == set(exe.ptx)
    for name, cubin in cubins.items():
        assert cubin[:4] == b"\x7fELF", name
    for kernel in exe.kernels:
        assert ".target sm_80" in kernel.ptx
        assert f".entry {kernel.function}(" in kernel.ptx
        assert ".extern" not in kernel.ptx, "libdevice must be linked: no unresolved external functions"


def test_scheduled_kernels_do_not_spill(compiled):
    """Every kernel a GPU schedule made: ptxas -v (sm_80) reports no spills and no stack frame."""
    _, _, exe = compiled
    for kernel in exe.kernels:
        if kernel.scheduled:
            usage = resource_usage(kernel.ptx, "sm_80", kernel.name)
            assert usage.spill_bytes == 0 and usage.stack_bytes == 0, (kernel.name, kernel.plan.detail, usage)


def test_launch_configuration_covers_iteration_space(compiled):
    _, _, exe = compiled
    for kernel in exe.kernels:
        if kernel.scheduled:
            # A GPU schedule's blocks and threads each cover a tile: the launch is its tiling's.
            assert kernel.plan is not None, kernel.name
            assert int(np.prod(kernel.grid)) == kernel.plan.grid, (kernel.name, kernel.grid, kernel.plan)
            assert int(np.prod(kernel.block)) == kernel.plan.threads, (kernel.name, kernel.block, kernel.plan)
            continue
        assert kernel.iteration_space, kernel.name
        assert all(isinstance(n, int) and n > 0 for n in kernel.iteration_space)
        mapped = kernel.iteration_space[:3]
        for axis in range(3):
            covered = kernel.grid[axis] * kernel.block[axis]
            if axis < len(mapped):
                assert covered >= mapped[axis], (kernel.name, kernel.grid, kernel.block, mapped)
            else:
                assert covered == 1, (kernel.name, kernel.grid, kernel.block)
        assert kernel.threads >= int(np.prod(mapped))


def test_host_program_is_consistent(compiled):
    model, inputs, exe = compiled
    program = exe.host_program
    assert len(program.inputs) == len(inputs) and program.outputs
    launched = [step.kernel for step in program.steps if isinstance(step, Launch)]
    assert launched == [k.name for k in exe.kernels]
    known = set(program.buffers)
    for step in program.launches():
        assert len(step.params()) == len(step.param_types)
        for arg in step.args:
            if isinstance(arg, MemrefView):
                assert arg.buffer in known
                buf = program.buffers[arg.buffer]
                # the view stays inside its buffer
                last = arg.offset + sum((s - 1) * st for s, st in zip(arg.sizes, arg.strides))
                assert 0 <= arg.offset and last < max(1, int(np.prod(buf.shape)))
    # Every weight of the model is uploaded bit for bit.
    uploaded = [step.data for step in program.steps if isinstance(step, UploadConstant)]
    for name, param in model.state_dict().items():
        if param.dtype.is_floating_point and param.numel() > 1:
            assert any(u.shape == tuple(param.shape) and np.array_equal(u, param.numpy()) for u in uploaded), name
    assert "launch" in str(program)


def test_stages_are_recorded(compiled):
    _, _, exe = compiled
    assert list(exe.stages)[:2] == ["bufferize", "strip-runtime-asserts"]
    assert list(exe.stages)[-1] == "to-nvvm"
    assert "gpu.launch_func" in exe.stages["to-nvvm"] and "nvvm.read.ptx.sreg" in exe.stages["to-nvvm"]
    # The kernels left to the naive mapping are loop nests here (a model may have none left).
    assert ("scf.parallel" in exe.stages["wrap-serial-code"]) == any(not k.scheduled for k in exe.kernels)


def test_libdevice_is_linked_for_math_functions():
    model, inputs = ZOO["transformer_block"].build(batch=1, seed=0)
    exe = compile_cuda(import_torch(model, *inputs))
    calls = [k for k in exe.kernels if "__nv_" in k.llvm_ir]
    assert calls, "softmax/gelu should call libdevice (__nv_expf, __nv_erff)"
    for kernel in calls:
        assert ".extern" not in kernel.ptx


class PowNorm(torch.nn.Module):
    """RMSNorm's `x.pow(2)`: torch-mlir emits math.fpowi with an i64 exponent."""

    def forward(self, x, e):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5), x.pow(3) + e.pow(2)


def test_integer_powers_do_not_call_libdevice_powif():
    """NVVM lowers math.fpowi to __nv_powif(float, i32) with torch-mlir's i64 exponent: the call went
    through the wrong prototype and the Llama layer's RMSNorm read garbage on an H100. The
    expand-fpowi stage turns constant powers into multiplications before NVVM sees them."""
    x, e = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    exe = compile_cuda(import_torch(PowNorm().eval(), x, e))
    assert "math.fpowi" not in exe.stages["expand-fpowi"]
    assert not any("__nv_powif" in k.llvm_ir for k in exe.kernels)
    assert not any("callprototype" in k.ptx for k in exe.kernels)


def test_a_libdevice_call_of_the_wrong_type_is_refused():
    kernel = """
module attributes {llvm.target_triple = "nvptx64-nvidia-cuda"} {
  llvm.func @__nv_powif(f32, i64) -> f32
  llvm.func @square(%p: !llvm.ptr<1>) attributes {nvvm.kernel} {
    %c2 = llvm.mlir.constant(2 : i64) : i64
    %x = llvm.load %p : !llvm.ptr<1> -> f32
    %y = llvm.call @__nv_powif(%x, %c2) : (f32, i64) -> f32
    llvm.store %y, %p : f32, !llvm.ptr<1>
    llvm.return
  }
}
"""
    with pytest.raises(VtmlirError, match=r"__nv_powif as 'float \(float, i64\)'.*'float \(float, i32\)'"):
        translate_kernels([("square", kernel)])


def test_hex_float_constants_reach_ptx():
    """MLIR's LLVM prints 2^-9 as `f0x3B000000` and inexact f16 decimals, which llvmlite's parser
    rejects; the translation rewrites such literals and the kernel assembles."""
    kernel = """
module attributes {llvm.target_triple = "nvptx64-nvidia-cuda"} {
  llvm.func @scale(%p: !llvm.ptr<1>, %h: !llvm.ptr<1>) attributes {nvvm.kernel} {
    %c = llvm.mlir.constant(0.001953125 : f32) : f32
    %ch = llvm.mlir.constant(0.0999755859375 : f16) : f16
    %x = llvm.load %p : !llvm.ptr<1> -> f32
    %y = llvm.fmul %x, %c : f32
    llvm.store %y, %p : f32, !llvm.ptr<1>
    %a = llvm.load %h : !llvm.ptr<1> -> f16
    %b = llvm.fmul %a, %ch : f16
    llvm.store %b, %h : f16, !llvm.ptr<1>
    llvm.return
  }
}
"""
    out = translate_kernels([("scale", kernel)])["scale"]
    assert "f0x3B000000" in out["llvm_ir"]
    assert assemble(out["ptx"], "sm_80")


def test_hex_float_literals_of_every_width_are_rewritten():
    from vtmlir.backend.cuda._translate import legacy_float_literals

    text = legacy_float_literals("%1 = fmul half %0, f0x3C00\n%2 = fmul bfloat %0, f0x3F80\n"
                                 "%3 = fmul float %0, f0x3B000000\n%4 = fmul double %0, f0x3FF0000000000000\n"
                                 "%5 = fmul half %0, 9.997550e-02\n%6 = fmul bfloat %0, 1.000980e-01\n"
                                 "%7 = fmul float %0, 1.000000e-01")
    assert text.split("\n") == ["%1 = fmul half %0, 0xH3C00", "%2 = fmul bfloat %0, 0xR3F80",
                                 "%3 = fmul float %0, 0x3F60000000000000",
                                 "%4 = fmul double %0, 0x3FF0000000000000",
                                 "%5 = fmul half %0, 0xH2E66", "%6 = fmul bfloat %0, 0xR3DCD",
                                 "%7 = fmul float %0, 0x3FB99999A0000000"]


@pytest.mark.skipif(not cuda_available(), reason="no CUDA device")
def test_runs_on_gpu_like_pytorch(compiled):
    model, inputs, exe = compiled
    got = exe(*inputs)
    with torch.no_grad():
        want = model(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w.detach(), rtol=1e-4, atol=1e-4)


def test_call_without_gpu_raises_clear_error(compiled):
    if cuda_available():
        pytest.skip("a CUDA device is present")
    _, inputs, exe = compiled
    with pytest.raises(VtmlirError, match="no CUDA device available"):
        exe(*inputs)


NON_LLVM = """
module attributes {llvm.target_triple = "nvptx64-nvidia-cuda"} {
  llvm.func @k(%arg0: i64) attributes {nvvm.kernel} {
    %0 = builtin.unrealized_conversion_cast %arg0 : i64 to index
    %1 = arith.addi %0, %0 : index
    llvm.return
  }
}
"""


def test_inexact_float_vector_constants_translate():
    # GELU's 0.044715 in a vector<4xf32> multiply (vtc_gemma2_decode, vtc_efficientvit_block): LLVM 24
    # prints `<float 4.471500e-02, ...>`, which the older parser of llvmlite refuses as inexact.
    import llvmlite.binding as llvm

    from vtmlir.backend.cuda._translate import legacy_float_literals

    text = legacy_float_literals("%37 = fmul <4 x float> %36, <float 4.471500e-02, float 4.471500e-02>")
    assert text == "%37 = fmul <4 x float> %36, <float 0x3FA6E4E260000000, float 0x3FA6E4E260000000>"
    llvm.parse_assembly("define <2 x float> @f(<2 x float> %x) {\n  %y = "
                        + text.split("= ", 1)[1].replace("%36", "%x").replace("<4 x", "<2 x")
                        + "\n  ret <2 x float> %y\n}\n")


def test_translation_refuses_non_llvm_ops():
    with pytest.raises(VtmlirError, match="builtin.unrealized_conversion_cast.*not in the LLVM or NVVM"):
        check_llvm_only(NON_LLVM, "k")
    # The subprocess worker refuses it too (it never reaches translate_module_to_llvmir).
    with pytest.raises(VtmlirError, match="kernel k: .*unrealized_conversion_cast"):
        translate_kernels([("k", NON_LLVM)])


def test_translation_crash_becomes_error(monkeypatch):
    crash = ("import os, signal, sys; sys.stderr.write('translating second\\n'); sys.stderr.flush(); "
             f"os.kill(os.getpid(), {int(signal.SIGSEGV)})")
    monkeypatch.setattr(ptx_module, "TRANSLATE_COMMAND", [sys.executable, "-c", crash])
    with pytest.raises(VtmlirError, match=r"kernel second: the LLVM translation crashed \(signal 11\)"):
        translate_kernels([("first", "module {}"), ("second", "module {}")])


def test_ptxas_reports_invalid_ptx():
    with pytest.raises(VtmlirError, match="ptxas rejected kernel broken for sm_80"):
        assemble(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() { bogus; }\n",
                 "sm_80", "broken")


def test_host_program_names_unsupported_op():
    module = as_module("""
    func.func @main(%arg0: memref<4xf32>, %arg1: memref<4xf32>) {
      %c0 = arith.constant 0 : index
      %0 = memref.load %arg0[%c0] : memref<4xf32>
      memref.store %0, %arg1[%c0] : memref<4xf32>
      return
    }""")
    with pytest.raises(VtmlirError, match="op 'memref.load' in the host function is not supported"):
        build_host_program(module, num_outputs=1)


def test_launch_beyond_cuda_grid_limits_is_refused():
    # Dim 1 of the loop nest lands on grid.y, whose limit is 65535.
    text = """
    func.func @main(%a: tensor<2x70000xf32>) -> tensor<2x70000xf32> {
      %e = tensor.empty() : tensor<2x70000xf32>
      %r = linalg.add ins(%a, %a : tensor<2x70000xf32>, tensor<2x70000xf32>) outs(%e : tensor<2x70000xf32>) -> tensor<2x70000xf32>
      return %r : tensor<2x70000xf32>
    }
    """
    with pytest.raises(VtmlirError, match=r"<string>:4:\d+: error: kernel main_kernel: grid size 70000 along y exceeds the CUDA limit 65535"):
        compile_cuda(text, schedules={"elementwise": None})  # the naive mapping's grid


def test_boolean_fill_passes_an_i1_constant_to_its_kernel():
    # BERT's and GPT-2's attention masks fill an i1 buffer with `true`: under the naive mapping the
    # constant becomes a kernel parameter, read from its BoolAttr (it used to stop at "host constant
    # true is not a scalar"). By default the fill is a `threads` kernel (i1 vectors are bit-packed,
    # which the vector schedule refuses) with the constant inside.
    source = """
func.func @main(%x: tensor<4x8xf32>) -> (tensor<4x8xi1>, tensor<4x8xf32>) {
  %true = arith.constant true
  %e = tensor.empty() : tensor<4x8xi1>
  %m = linalg.fill ins(%true : i1) outs(%e : tensor<4x8xi1>) -> tensor<4x8xi1>
  %f = tensor.empty() : tensor<4x8xf32>
  %h = arith.constant 0.5 : f32
  %y = linalg.fill ins(%h : f32) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %m, %y : tensor<4x8xi1>, tensor<4x8xf32>
}
"""
    naive = compile_cuda(as_module(source), schedules={"unknown": None})
    scalars = [a for launch in naive.host_program.launches() for a in launch.args if not isinstance(a, MemrefView)]
    assert any(a.type == "i1" and a.value == 1 for a in scalars)
    assert len(naive.assemble("sm_80")) == len(naive.kernels)
    exe = compile_cuda(as_module(source))
    assert [k.schedule for k in exe.kernels] == ["threads", "vector"]
    assert len(exe.assemble("sm_80")) == len(exe.kernels)


def test_half_precision_scalars_are_passed_as_their_bits():
    from vtmlir.backend.cuda.runtime import scalar_parameter

    assert scalar_parameter("f16", 1.0).value == 0x3C00
    assert scalar_parameter("bf16", 1.0).value == 0x3F80
    assert scalar_parameter("i1", 1).value is True
    with pytest.raises(VtmlirError, match="parameter type vector<4xf32>"):
        scalar_parameter("vector<4xf32>", 0)


def test_integer_abs_reaches_ptx():
    # T5's relative-position buckets take |i - j| of i64 positions: math.absi, which NVVM's patterns
    # leave for convert-math-to-llvm (llvm.intr.abs).
    exe = compile_cuda(as_module("""
#id = affine_map<(d0) -> (d0)>
func.func @main(%x: tensor<16xi64>) -> tensor<16xi64> {
  %e = tensor.empty() : tensor<16xi64>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<16xi64>) outs(%e : tensor<16xi64>) {
  ^bb0(%a: i64, %o: i64):
    %b = math.absi %a : i64
    linalg.yield %b : i64
  } -> tensor<16xi64>
  return %r : tensor<16xi64>
}
"""))
    assert "abs.s64" in "".join(exe.ptx.values())
    assert len(exe.assemble("sm_80")) == len(exe.kernels)


def test_saved_executable_loads_with_its_kernels_and_host_program(compiled, tmp_path):
    # Compile on a machine without a GPU, run where one is: the saved file holds everything a run needs.
    _, inputs, exe = compiled
    path = tmp_path / "model.vtcuda"
    exe.save(path)
    loaded = load(path)
    assert [(k.name, k.function, k.grid, k.block, k.schedule) for k in loaded.kernels] == \
        [(k.name, k.function, k.grid, k.block, k.schedule) for k in exe.kernels]
    assert loaded.ptx == exe.ptx
    assert str(loaded.host_program) == str(exe.host_program)
    assert loaded.signature.results == exe.signature.results
    if not cuda_available():
        with pytest.raises(VtmlirError, match="no CUDA device available"):
            loaded(*inputs)


def test_loading_a_file_that_is_not_a_saved_executable_is_an_error(tmp_path):
    path = tmp_path / "x.vtcuda"
    path.write_bytes(b"not a pickle")
    with pytest.raises(VtmlirError, match="not a saved CUDA executable"):
        load(path)
    with pytest.raises(VtmlirError, match="not a saved CUDA executable"):
        load(tmp_path / "missing.vtcuda")
