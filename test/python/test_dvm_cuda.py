"""`vtmlir.compile(..., target="cuda", dynamic_shapes=...)`: DVM's PTX VM behind one callable.

Without a GPU everything short of the launch is checked: the compile (the VM's PTX assembled with
ptxas, the templates prebuilt), the launch read from the lowered IR, each kernel's launch plan
(its bytecode the very words the CPU VM runs for that shape, the grid its tile count) and the
plan's bytecode run on the CPU native VM against torch. The launch itself runs where a CUDA device
exists (skipped otherwise, as the static CUDA tests are). ~1 min (the VM's lowering and JIT).
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch
from torch.export import Dim
from cuda_stand_in import HostMemory

import vtmlir
from vtmlir.backend.cuda import cuda_available
from vtmlir.dvm.bytecode import decode
from vtmlir.dvm.compile import compile_graph
from vtmlir.dvm.runner import DvmFunction
from vtmlir.dynamic import CUDA_CORES, CudaDynamicExecutable
from vtmlir.errors import VtmlirError

BATCH = {"input": {0: Dim("batch", min=1, max=8)}}


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()


@pytest.fixture(scope="module")
def compiled():
    model = _mlp()
    return model, vtmlir.compile(model, torch.randn(4, 16), target="cuda", dynamic_shapes=BATCH)


def test_compile_returns_the_ptx_vm_executable(compiled):
    _, exe = compiled
    assert isinstance(exe, CudaDynamicExecutable) and exe.target == "cuda" and exe.chip == "sm_80"
    assert exe.prebuilt["points"] == 8  # every batch's templates built at compile time, on the host
    assert exe.cubin.startswith(b"\x7fELF")  # ptxas assembled the VM for the chip (sm_90: test_dvm_ptx.py)
    text = str(exe.report())
    assert "dvm (dynamic shapes)" in text and "batch in [1, 8]" in text
    assert "target cuda (chip sm_80)" in text and exe.vm.kernel in text
    # the example's shape was compiled and admitted at compile time: its plans exist, nothing ran
    assert exe.host.plans and exe.host.launches == 0


def test_the_launch_is_read_from_the_lowered_ir(compiled):
    launch = compiled[1].vm.launch
    assert launch.function == compiled[1].vm.kernel
    assert sorted(ref[1] for kind, ref in launch.operands if kind == "memref") == ["args", "code", "local"]
    assert len(launch.param_types) == 5 * 3 + sum(kind == "scalar" for kind, _ in launch.operands)
    for tiles in (1, 2, 7, 4096):
        grid, block, _ = launch.evaluate(tiles, 736)
        assert grid == (tiles, 1, 1) and block == (1, 1, 1)  # Alg. 2: one thread block per tile


@pytest.mark.parametrize("batch", [1, 3, 6, 8])
def test_launch_plans_are_the_cpu_vms_bytecode_and_match_torch(compiled, batch):
    model, exe = compiled
    xb = torch.randn(batch, 16)
    exe.host.ran.clear()
    (got,) = exe.run_on_host(xb)
    with torch.no_grad():
        torch.testing.assert_close(got, model(xb), rtol=1e-5, atol=1e-6)
    assert len(exe.host.ran) == 2  # Linear + ReLU, Linear: one kernel each

    # what the CPU VM runs for this shape (a DvmFunction on the native VM, the same tiling target)
    cpu = DvmFunction(exe.graph, "main", native=True, target=exe.function.target, replay=False)
    (want,) = cpu(np.ascontiguousarray(xb.numpy()))
    np.testing.assert_array_equal(got.numpy(), want)  # the same words on the same VM: bitwise
    cpu_kernels = {k.graph.name: k for unit in cpu.kernels for k, _, _ in unit.cache.values()}
    for kernel, plan in exe.host.ran:
        assert plan.code is kernel.bytecode
        np.testing.assert_array_equal(plan.code, cpu_kernels[kernel.graph.name].bytecode)
        # and the reference lowering's words (no template) for the shape
        reference = compile_graph(kernel.graph, kernel.input_shapes, exe.function.target, template=False)
        np.testing.assert_array_equal(plan.code, reference.bytecode)
        program = decode(plan.code)  # valid bytecode
        assert plan.tiles == program.tile_count and plan.grid == (program.tile_count, 1, 1)
        assert plan.block == (1, 1, 1) and plan.local_total == program.tile_count * program.local_bytes
        assert [(dt, n) for dt, n in plan.arguments] == [(np.dtype(a.dtype.numpy), a.numel) for a in program.args]
        sizes, i = {}, 0  # each memref parameter: (ptr, ptr, offset, size, stride)
        while i < len(plan.params):
            kind, value = plan.params[i]
            if kind == "ptr":
                assert plan.params[i + 1:i + 5] == (("ptr", value), ("i64", 0), plan.params[i + 3], ("i64", 1))
                sizes[value] = plan.params[i + 3][1]
            i += 5 if kind == "ptr" else 1
        assert sizes == {"code": plan.code.size, "local": plan.local_total, "table": len(plan.arguments)}
        table = plan.table(range(100, 100 + len(plan.arguments)), [4 * n for _, n in plan.arguments])
        assert table.reshape(-1, 5).tolist()[0] == [100, 100, 0, 4 * plan.arguments[0][1], 1]


def test_tiling_spreads_over_the_blocks(compiled):
    assert compiled[1].function.target.cores == CUDA_CORES


@pytest.mark.skipif(cuda_available(), reason="a CUDA device is present")
def test_calling_without_a_cuda_device_is_a_clear_error(compiled):
    with pytest.raises(VtmlirError, match="no CUDA device available"):
        compiled[1](torch.randn(3, 16))


@pytest.mark.skipif(not cuda_available(), reason="no CUDA device")
def test_the_ptx_vm_runs_every_batch_on_the_device(compiled):
    model, exe = compiled
    for batch in (1, 3, 8, 3, 5):
        xb = torch.randn(batch, 16)
        got = exe(xb)
        assert got.device.type == "cpu"
        with torch.no_grad():
            torch.testing.assert_close(got, model(xb), rtol=1e-5, atol=1e-5)
    # the host run of the same words agrees (the PTX VM's f32 arithmetic is the CPU VM's)
    xb = torch.randn(7, 16)
    torch.testing.assert_close(exe(xb), exe.run_on_host(xb)[0], rtol=1e-6, atol=1e-6)
    device = exe.device()
    frames = len(device.frames)
    exe(torch.randn(3, 16))  # a seen shape: its device bytecode and buffers are reused
    assert len(device.frames) == frames and device.launches > 0
    assert "launch(es) on the device" in str(exe.report())


def test_unknown_chip_is_refused():
    with pytest.raises(VtmlirError, match="unsupported CUDA chip 'sm_999'"):
        vtmlir.compile(_mlp(), torch.randn(4, 16), target="cuda", chip="sm_999", dynamic_shapes=BATCH)


def test_tf32_is_refused_with_dynamic_shapes():
    with pytest.raises(VtmlirError, match="allow_tf32=True needs static shapes"):
        vtmlir.compile(_mlp(), torch.randn(4, 16), target="cuda", allow_tf32=True, dynamic_shapes=BATCH)


def test_a_kernel_the_ptx_vm_cannot_run_is_refused_at_compile_time(compiled):
    # f64 arithmetic: the native CPU VM runs it, the PTX VM computes in f32 only
    model = torch.nn.Linear(8, 4).double().eval()
    with pytest.raises(VtmlirError, match=r"PTX VM cannot run kernel .*F64"):
        vtmlir.compile(model, torch.randn(2, 8, dtype=torch.float64), target="cuda", dynamic_shapes=BATCH,
                       prebuild=False)


def test_saved_executable_loads_without_the_ptx_tools_and_runs_the_same(compiled, tmp_path):
    from vtmlir.dynamic import load_dynamic

    model, exe = compiled
    path = tmp_path / "mlp.vtdyn"
    exe.save(path)
    loaded = load_dynamic(path)  # the saved VM: nothing lowered or assembled again
    assert isinstance(loaded, CudaDynamicExecutable) and loaded.vm.ptx == exe.vm.ptx and loaded.cubin == exe.cubin
    assert loaded.vm.launch == exe.vm.launch and loaded.prebuilt["points"] == 8
    assert loaded.function.target.cores == exe.function.target.cores
    xb = torch.randn(5, 16)
    np.testing.assert_array_equal(loaded.run_on_host(xb)[0].numpy(), exe.run_on_host(xb)[0].numpy())
    (tmp_path / "bad.vtdyn").write_bytes(b"not a pickle")
    with pytest.raises(VtmlirError, match="not a saved dynamic CUDA executable"):
        load_dynamic(tmp_path / "bad.vtdyn")


def test_gpu_benchmark_prepares_the_dynamic_case(compiled, tmp_path, load_benchmark):
    """benchmarks/gpu.py --only dynamic, up to the GPU machine's load (no GPU here)."""
    import pickle

    from vtmlir.dynamic import load_dynamic

    bench = load_benchmark("gpu")
    bench.prepare(str(tmp_path), {"dynamic"}, [], [1], "sm_80")  # sm_80: the VM the fixture lowered
    meta = pickle.loads((tmp_path / f"{bench.DYNAMIC_CASE}.case").read_bytes())
    assert meta["kind"] == "dynamic" and bench.same_weights(bench.dynamic_model(), meta["fingerprint"])
    loaded = load_dynamic(tmp_path / f"{bench.DYNAMIC_CASE}.vtdyn")
    x = torch.randn(33, 32)
    with torch.no_grad():
        torch.testing.assert_close(loaded.run_on_host(x)[0], bench.dynamic_model()(x), rtol=1e-5, atol=1e-6)


class _HostDriver(HostMemory):
    """The CUDA driver calls `gpu_runtime.CudaPlanRunner` makes, emulated in host memory for a test
    of the runner's own work (allocations, uploads, the argument table, the parameter array, the
    read-back), never a GPU's: "device" addresses are host buffers, and `cuLaunchKernel` checks
    the parameters it is handed and runs the code they point at on the CPU native VM, on the
    argument buffers the table it is handed points at."""

    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self, launch):
        super().__init__()
        self.launch, self.launched = launch, []

    def cuInit(self, flags):
        return (0,)

    def cuDeviceGet(self, ordinal):
        return (0, 0)

    def cuDevicePrimaryCtxRetain(self, device):
        return (0, "context")

    def cuDevicePrimaryCtxRelease(self, device):
        return (0,)

    def cuCtxSetCurrent(self, context):
        return (0,)

    def cuCtxSynchronize(self):
        return (0,)

    def cuModuleLoadData(self, image):
        assert image.startswith(b"\x7fELF")  # the cubin assembled for the device's arch
        return (0, "module")

    def cuModuleUnload(self, module):
        return (0,)

    def cuModuleGetFunction(self, module, name):
        return (0, name.decode())

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        from vtmlir.dvm.native import launch_header, native_vm

        assert function == self.launch.function and (shared, stream, extra) == (0, 0, 0)
        pointers = (ctypes.c_void_p * len(self.launch.param_types)).from_address(params)
        values = [ctypes.c_int64.from_address(p).value for p in pointers]
        memrefs, i = {}, 0
        for kind, ref in self.launch.operands:
            if kind == "memref":
                memrefs[ref[1]] = values[i:i + 5]
                assert values[i] == values[i + 1] and values[i + 2] == 0 and values[i + 4] == 1
            i += 5 if kind == "memref" else 1

        def words(address, count):
            return np.ctypeslib.as_array((ctypes.c_int64 * count).from_address(address))

        code = words(memrefs["code"][0], memrefs["code"][3]).copy()
        tiles, local_bytes, descs, _ = launch_header(code)
        assert (gx, gy, gz, bx, by, bz) == (tiles, 1, 1, 1, 1, 1)
        self._within(memrefs["local"][0], tiles * local_bytes)
        assert memrefs["local"][3] == tiles * local_bytes and memrefs["args"][3] == len(descs)
        table = words(memrefs["args"][0], 5 * len(descs)).reshape(-1, 5)
        arrays = []
        for (address, aligned, offset, nbytes, stride), (dtype, numel) in zip(table.tolist(), descs):
            assert address == aligned and offset == 0 and stride == 1 and nbytes >= numel * np.dtype(dtype).itemsize
            self._within(address, nbytes)
            raw = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))
            arrays.append(raw.view(dtype)[:numel])
        native_vm().run_valid(code, arrays, cores=1)
        self.launched.append(tiles)
        return (0,)


def test_the_cuda_runner_uploads_launches_and_reads_back_through_the_driver_calls(compiled, monkeypatch):
    """`CudaPlanRunner`'s driver calls, emulated in host memory (`_HostDriver`; no GPU's result):
    what it allocates, uploads, hands `cuLaunchKernel` and reads back gives torch's results, and a
    seen shape reuses its device bytecode and buffers."""
    from vtmlir import dynamic
    from vtmlir.backend.cuda import runtime
    from vtmlir.dvm import gpu_runtime

    model, exe = compiled
    driver = _HostDriver(exe.vm.launch)
    for module in (runtime, gpu_runtime):
        monkeypatch.setattr(module, "cuda_driver", lambda: driver)
    monkeypatch.setattr(gpu_runtime, "cuda_available", lambda: True)
    monkeypatch.setattr(dynamic, "cuda_available", lambda: True)
    monkeypatch.setattr(dynamic, "device_arch", lambda: exe.chip)
    try:
        for batch in (2, 8, 2):
            xb = torch.randn(batch, 16)
            with torch.no_grad():
                torch.testing.assert_close(exe(xb), model(xb), rtol=1e-5, atol=1e-6)
        device = exe.device()
        # two kernels per call, each one thread block per tile; the third call is the first's shape
        assert len(driver.launched) == 6 == device.launches and driver.launched[4:] == driver.launched[:2]
        assert len(device.frames) == 4  # two kernels x two shapes: the third call made none
        assert "6 launch(es) on the device" in str(exe.report())
    finally:
        if exe._device is not None:
            exe._device.close()
            exe._device = None
        exe.function.device = exe.host
    assert driver.memory == {}  # close() freed every buffer
