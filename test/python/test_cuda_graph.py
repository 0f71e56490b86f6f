"""The static CUDA runtime's CUDA graph (`backend.cuda.runtime.CudaRuntime`, `cuda_graph=True`): a
call replays the launch sequence as one `cuGraphLaunch` instead of one `cuLaunchKernel` per kernel.

No GPU here: `_HostDriver` emulates, in host memory, the driver calls the runtime makes -- "device"
addresses are host buffers; `cuLaunchKernel` and each kernel node of a launched graph read the
parameter array they are handed and run the kernel's semantics (a few synthetic kernels written in
numpy) on the buffers it points at; `cuGraphAddKernelNode` copies the parameter values when it is
called, as the driver does, and `cuGraphLaunch` runs the instantiated nodes in their dependency
order. Where no CUDA driver library loads (this machine), every graph call is also made on the real
`cuda.bindings.driver` with the same arguments, so the binding's argument conversion checks the
types and arity (only the load of libcuda fails after it): the signatures the runtime uses are those
of the pinned cuda-python. What runs on a real GPU is not checked here (benchmarks/gpu.py there).
"""

from __future__ import annotations

import ctypes
import warnings

import numpy as np
import pytest
import torch
from cuda.bindings import driver as real_driver
from cuda_stand_in import HostMemory

import vtmlir
from vtmlir.backend.cuda import runtime
from vtmlir.backend.cuda.host import (Allocate, Buffer, Free, HostProgram, Launch, MemrefView, Scalar,
                                      UploadConstant)
from vtmlir.errors import VtmlirError

CUresult = real_driver.CUresult
OK = CUresult.CUDA_SUCCESS
_CTYPES = {"ptr": ctypes.c_void_p, "i64": ctypes.c_int64, "i32": ctypes.c_int32, "f32": ctypes.c_float,
           "f64": ctypes.c_double, "i1": ctypes.c_bool, "i8": ctypes.c_int8, "i16": ctypes.c_int16,
           "f16": ctypes.c_uint16, "bf16": ctypes.c_uint16}


def _library_absent_error():
    """The exception the real binding raises when no driver library loads, or None where one does
    (a GPU machine: no real call is then made with the stand-in's handles)."""
    try:
        real_driver.cuInit(0)
    except Exception as err:  # noqa: BLE001 - DynamicLibNotFoundError (cuda.pathfinder) on this machine
        return type(err)
    return None


LIBRARY_ABSENT = _library_absent_error()


class _HostDriver(HostMemory):
    """The CUDA driver calls of `CudaRuntime`, in host memory (the module docstring). `semantics`:
    kernel function name -> fn(values) run on a launch (values: per parameter a memref view or a
    scalar), or absent: the launch is only recorded. `fail`: call name -> the CUresult it returns;
    `missing`: call names the "binding" lacks (AttributeError, as an old cuda-python)."""

    CUresult = CUresult
    SUCCESS = OK
    CUDA_KERNEL_NODE_PARAMS = real_driver.CUDA_KERNEL_NODE_PARAMS

    def __init__(self, program: HostProgram, images: dict, semantics: dict | None = None,
                 fail: dict | None = None, missing: set | None = None):
        self.param_types = {step.kernel: step.param_types for step in program.launches()}
        # which kernel a loaded image is (kernels may share an entry function's name)
        self.image_kernels = {bytes(image).rstrip(b"\0"): kernel for kernel, image in images.items()}
        self.semantics = semantics or {}
        self.fail, self.missing = dict(fail or {}), set(missing or ())
        super().__init__()
        self.calls: list[str] = []          # every driver call, by name, in order
        self.executed: list[tuple] = []     # (via, function, grid, block, parameter values) per kernel run
        self.modules: dict[str, str] = {}    # module handle -> kernel
        self.functions: dict[int, tuple] = {}   # CUfunction -> (kernel, entry function)
        self.graphs: dict[int, list] = {}   # live CUgraph -> its nodes
        self.execs: dict[int, list] = {}    # live CUgraphExec -> its nodes in launch order
        self.nodes: dict[int, dict] = {}
        self.events: dict[int, int] = {}
        self._ids = 100

    def __getattribute__(self, name):
        if name.startswith("cu") and name in object.__getattribute__(self, "missing"):
            raise AttributeError(f"module 'cuda.bindings.driver' has no attribute '{name}'")
        return object.__getattribute__(self, name)

    def _new_id(self) -> int:
        self._ids += 1
        return self._ids

    def _call(self, name: str, *real_args):
        """Record `name`; make the same call on the real binding where no library loads (its argument
        conversion runs first: a wrong type or count raises there, not the missing library)."""
        self.calls.append(name)
        if LIBRARY_ABSENT is not None and real_args:
            with pytest.raises(LIBRARY_ABSENT):
                getattr(real_driver, name)(*real_args[0])
        return self.fail.get(name)

    # -- context and modules (memory: HostMemory) -------------------------------------------------------------------

    def cuInit(self, flags):
        return (OK,)

    def cuDeviceGet(self, ordinal):
        return (OK, 0)

    def cuDevicePrimaryCtxRetain(self, device):
        return (OK, "context")

    def cuDevicePrimaryCtxRelease(self, device):
        return (OK,)

    def cuCtxSetCurrent(self, context):
        return (OK,)

    def cuCtxSynchronize(self):
        self.calls.append("cuCtxSynchronize")
        return (OK,)

    def cuGetErrorName(self, err):
        return (OK, CUresult(err).name.encode())

    def cuGetErrorString(self, err):
        return (OK, b"emulated failure")

    def cuModuleLoadData(self, image):
        handle = f"module{self._new_id()}"
        self.modules[handle] = self.image_kernels[bytes(image).rstrip(b"\0")]
        return (OK, handle)

    def cuModuleUnload(self, module):
        return (OK,)

    def cuModuleGetFunction(self, module, name):
        handle = self._new_id()
        self.functions[handle] = (self.modules[module], name.decode())
        return (OK, real_driver.CUfunction(handle))

    # -- kernels ------------------------------------------------------------------------------------

    def _run(self, via, function, grid, block, params: int) -> None:
        name, entry = self.functions[int(function)]
        types = self.param_types[name]
        pointers = (ctypes.c_void_p * len(types)).from_address(params)
        values = tuple(_CTYPES[t].from_address(p).value for t, p in zip(types, pointers))
        self.executed.append((via, name, tuple(grid), tuple(block), values))
        kernel = self.semantics.get(entry)
        if kernel is not None:
            kernel(self, values)

    def view(self, values, start: int) -> np.ndarray:
        """The 1-d f32 memref whose descriptor starts at values[start] (allocated, aligned, offset,
        size, stride), as a numpy view of the buffer it points at."""
        _, aligned, offset, size, stride = values[start:start + 5]
        first = aligned + 4 * offset
        span = 4 * ((size - 1) * stride + 1) if size else 0
        self._within(first, span)
        raw = np.ctypeslib.as_array((ctypes.c_float * max(span // 4, 1)).from_address(first))
        return raw[::stride][:size]

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        err = self._call("cuLaunchKernel", (function, gx, gy, gz, bx, by, bz, shared, stream, params, extra))
        if err is not None:
            return (err,)
        assert (shared, stream, extra) == (0, 0, 0)
        self._run("launch", function, (gx, gy, gz), (bx, by, bz), params)
        return (OK,)

    # -- graphs -------------------------------------------------------------------------------------

    def cuGraphCreate(self, flags):
        err = self._call("cuGraphCreate", (flags,))
        if err is not None:
            return (err, None)
        assert flags == 0
        handle = self._new_id()
        self.graphs[handle] = []
        return (OK, real_driver.CUgraph(handle))

    def cuGraphAddKernelNode(self, graph, dependencies, count, params):
        err = self._call("cuGraphAddKernelNode", (graph, dependencies, count, params))
        if err is not None:
            return (err, None)
        assert isinstance(params, real_driver.CUDA_KERNEL_NODE_PARAMS)
        assert int(graph) in self.graphs and count == len(dependencies or ())
        assert params.sharedMemBytes == 0 and int(params.extra) == 0
        # The driver copies the parameter values now: later changes to them do not reach the node.
        types = self.param_types[self.functions[int(params.func)][0]]
        pointers = (ctypes.c_void_p * len(types)).from_address(int(params.kernelParams))
        values = [_CTYPES[t].from_address(p).value for t, p in zip(types, pointers)]
        copies = [_CTYPES[t](v) for t, v in zip(types, values)]
        node = self._new_id()
        self.nodes[node] = {"function": int(params.func), "copies": copies,
                            "grid": (params.gridDimX, params.gridDimY, params.gridDimZ),
                            "block": (params.blockDimX, params.blockDimY, params.blockDimZ),
                            "dependencies": [int(d) for d in dependencies or ()]}
        self.graphs[int(graph)].append(node)
        return (OK, real_driver.CUgraphNode(node))

    def cuGraphInstantiate(self, graph, flags):
        err = self._call("cuGraphInstantiate", (graph, flags))
        if err is not None:
            return (err, None)
        assert flags == 0 and int(graph) in self.graphs
        nodes, order, done = list(self.graphs[int(graph)]), [], set()
        while len(order) < len(nodes):   # a topological order; ties in the order the nodes were added
            ready = next(n for n in nodes if n not in done and set(self.nodes[n]["dependencies"]) <= done)
            order.append(ready)
            done.add(ready)
        handle = self._new_id()
        self.execs[handle] = order
        return (OK, real_driver.CUgraphExec(handle))

    def cuGraphLaunch(self, graph_exec, stream):
        err = self._call("cuGraphLaunch", (graph_exec, stream))
        if err is not None:
            return (err,)
        assert int(stream) == 0   # the stream of the per-kernel launches
        for node in self.execs[int(graph_exec)]:
            spec = self.nodes[node]
            array = (ctypes.c_void_p * len(spec["copies"]))(*[ctypes.addressof(c) for c in spec["copies"]])
            self._run("graph", spec["function"], spec["grid"], spec["block"], ctypes.addressof(array))
        return (OK,)

    def cuGraphDestroy(self, graph):
        self._call("cuGraphDestroy", (graph,))
        del self.graphs[int(graph)]
        return (OK,)

    def cuGraphExecDestroy(self, graph_exec):
        self._call("cuGraphExecDestroy", (graph_exec,))
        del self.execs[int(graph_exec)]
        return (OK,)

    # -- events (a clock that counts the kernels run) -----------------------------------------------

    def cuEventCreate(self, flags):
        handle = self._new_id()
        self.events[handle] = 0
        return (OK, handle)

    def cuEventRecord(self, event, stream):
        assert stream == 0
        self.events[event] = len(self.executed)
        return (OK,)

    def cuEventSynchronize(self, event):
        return (OK,)

    def cuEventElapsedTime(self, start, end):
        return (OK, float(self.events[end] - self.events[start]))

    def cuEventDestroy(self, event):
        del self.events[event]
        return (OK,)


# -- a host program of synthetic kernels: the order of its launches changes its results --------------

def _memref(buffer: int, size: int, offset: int = 0, stride: int = 1) -> MemrefView:
    return MemrefView(buffer, offset, (size,), (stride,))


MEMREF = ["ptr", "ptr", "i64", "i64", "i64"]


def _axpby(driver, values):
    """out = a * x + b * y (memrefs x, y, out; f32 scalars a, b)."""
    x, y, out = driver.view(values, 0), driver.view(values, 5), driver.view(values, 10)
    out[:] = np.float32(values[15]) * x + np.float32(values[16]) * y


def _mul(driver, values):
    """out = x * y."""
    x, y, out = driver.view(values, 0), driver.view(values, 5), driver.view(values, 10)
    out[:] = x * y


SEMANTICS = {"axpby": _axpby, "mul": _mul}
WEIGHT = np.linspace(-1.0, 2.0, 8, dtype=np.float32)


def _program() -> HostProgram:
    """x (input, 8) and w (a constant): t = 2x + w; u = t * t; out = u - 3x; out2 = t[::2] + u[1::2]
    (views with offsets and strides). Each launch reads what the one before wrote."""
    f32 = "f32"
    buffers = {0: Buffer(0, (8,), f32, "input", "arg0"), 1: Buffer(1, (8,), f32, "constant", "w"),
               2: Buffer(2, (8,), f32, "temporary"), 3: Buffer(3, (8,), f32, "temporary"),
               4: Buffer(4, (8,), f32, "output", "arg1"), 5: Buffer(5, (4,), f32, "output", "arg2")}

    def axpby(name, x, y, out, a, b, n):
        return Launch(name, "axpby", (1, 1, 1), (n, 1, 1), [x, y, out, Scalar(f32, a), Scalar(f32, b)],
                      MEMREF * 3 + [f32, f32])

    steps = [Allocate(buffers[1]), UploadConstant(buffers[1], WEIGHT), Allocate(buffers[2]),
             axpby("k0", _memref(0, 8), _memref(1, 8), _memref(2, 8), 2.0, 1.0, 8),
             Allocate(buffers[3]),
             Launch("k1", "mul", (2, 1, 1), (4, 1, 1), [_memref(2, 8), _memref(2, 8), _memref(3, 8)], MEMREF * 3),
             axpby("k2", _memref(3, 8), _memref(0, 8), _memref(4, 8), 1.0, -3.0, 8),
             axpby("k3", _memref(2, 4, 0, 2), _memref(3, 4, 1, 2), _memref(5, 4), 1.0, 1.0, 4),
             Free(2), Free(3)]
    return HostProgram("main", buffers, [0], [4, 5], steps)


def _expected(x: np.ndarray) -> list[np.ndarray]:
    t = np.float32(2) * x + WEIGHT
    u = t * t
    return [u - np.float32(3) * x, t[::2] + u[1::2]]


@pytest.fixture
def emulate(monkeypatch):
    """emulate(program, images=None, **driver options) -> the stand-in driver, installed for
    `runtime`; `images` as the runtime gets them (default `_images(program)`)."""
    def install(program, images=None, **options):
        driver = _HostDriver(program, images or _images(program), SEMANTICS, **options)
        monkeypatch.setattr(runtime, "cuda_driver", lambda: driver)
        monkeypatch.setattr(runtime, "cuda_available", lambda: True)
        return driver
    return install


def _images(program) -> dict:
    """A stand-in image per kernel: its name (the runtime loads it as PTX text)."""
    return {step.kernel: step.kernel.encode() for step in program.launches()}


def _make(program, **options) -> runtime.CudaRuntime:
    functions = {step.kernel: step.function for step in program.launches()}
    return runtime.CudaRuntime(program, _images(program), functions, **options)


def _inputs(seed: int) -> list[np.ndarray]:
    return [np.random.default_rng(seed).standard_normal(8).astype(np.float32)]


def _kernel_runs(driver, via=None) -> list[tuple]:
    """The kernels run, without the path that ran them (for comparing the two paths)."""
    return [run[1:] for run in driver.executed if via is None or run[0] == via]


def test_the_graph_holds_each_launch_once_in_order_and_each_call_replays_it(emulate):
    program = _program()
    driver = emulate(program)
    rt = _make(program)
    launches = len(program.launches())
    assert rt.graph is not None and rt.graph_reason is None
    assert "one CUDA graph of 4 kernel nodes" in rt.launch_mode
    # built once when the runtime was made: a node per launch, each depending on the one before
    assert driver.calls.count("cuGraphAddKernelNode") == launches and driver.calls.count("cuGraphInstantiate") == 1
    (order,) = driver.execs.values()
    assert [driver.functions[driver.nodes[n]["function"]][0] for n in order] == [s.kernel for s in program.launches()]
    assert [driver.nodes[n]["dependencies"] for n in order] == [[]] + [[n] for n in order[:-1]]
    assert driver.graphs == {}   # the source graph is destroyed once instantiated
    for seed in range(3):
        got = rt.run(_inputs(seed))
        for g, want in zip(got, _expected(_inputs(seed)[0])):
            np.testing.assert_array_equal(g, want)
    # three calls: three graph launches, no re-capture, no kernel launched from Python
    assert driver.calls.count("cuGraphLaunch") == 3
    assert driver.calls.count("cuGraphAddKernelNode") == launches and driver.calls.count("cuGraphInstantiate") == 1
    assert "cuLaunchKernel" not in driver.calls
    assert [run[0] for run in driver.executed] == ["graph"] * 3 * launches
    rt.close()
    assert driver.execs == {} and driver.memory == {}


def test_graph_and_per_kernel_launches_run_the_same_kernels_with_the_same_parameters(emulate):
    """The same runtime (the same buffers) called through the graph and then per kernel: the same
    kernels, grids, blocks and parameter values in the same order, and bitwise the same results."""
    program = _program()
    driver = emulate(program)
    rt = _make(program)
    inputs = _inputs(7)
    via_graph = rt.run(inputs)
    rt.use_graph = False
    assert "not used now" in rt.launch_mode
    per_kernel = rt.run(inputs)
    graph_runs, launch_runs = _kernel_runs(driver, "graph"), _kernel_runs(driver, "launch")
    assert graph_runs == launch_runs and len(graph_runs) == len(program.launches())
    for a, b in zip(via_graph, per_kernel):
        np.testing.assert_array_equal(a, b)
    rt.close()


def test_cuda_graph_false_launches_per_kernel_and_makes_no_graph(emulate):
    program = _program()
    driver = emulate(program)
    rt = _make(program, cuda_graph=False)
    for seed in range(2):
        for g, want in zip(rt.run(_inputs(seed)), _expected(_inputs(seed)[0])):
            np.testing.assert_array_equal(g, want)
    assert not any(call.startswith("cuGraph") for call in driver.calls)
    assert driver.calls.count("cuLaunchKernel") == 2 * len(program.launches())
    assert rt.graph is None and "cuda_graph=False" in rt.launch_mode
    rt.close()


@pytest.mark.parametrize("failure", [
    {"fail": {"cuGraphCreate": CUresult.CUDA_ERROR_NOT_SUPPORTED}},
    {"fail": {"cuGraphAddKernelNode": CUresult.CUDA_ERROR_INVALID_VALUE}},
    {"fail": {"cuGraphInstantiate": CUresult.CUDA_ERROR_NOT_SUPPORTED}},
    {"missing": {"cuGraphAddKernelNode"}},
], ids=["create", "add-node", "instantiate", "binding-without-the-call"])
def test_a_graph_that_cannot_be_made_falls_back_to_per_kernel_launches(emulate, failure):
    program = _program()
    driver = emulate(program, **failure)
    with pytest.warns(RuntimeWarning, match="without a CUDA graph"):
        rt = _make(program)
    assert rt.graph is None
    call = next(iter(failure.get("fail") or failure["missing"]))
    assert call in rt.graph_reason and call in rt.launch_mode
    if "fail" in failure:
        assert CUresult(failure["fail"][call]).name in rt.graph_reason
    else:
        assert "AttributeError" in rt.graph_reason
    assert driver.graphs == {} and driver.execs == {}   # nothing of the half-made graph is left
    for seed in range(2):
        for g, want in zip(rt.run(_inputs(seed)), _expected(_inputs(seed)[0])):
            np.testing.assert_array_equal(g, want)
    assert "cuGraphLaunch" not in driver.calls and [run[0] for run in driver.executed] == ["launch"] * 8
    rt.close()


def test_a_graph_launch_that_fails_falls_back_for_that_call_and_after(emulate):
    program = _program()
    driver = emulate(program, fail={"cuGraphLaunch": CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES})
    rt = _make(program)
    assert rt.graph is not None
    with pytest.warns(RuntimeWarning, match="CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"):
        first = rt.run(_inputs(1))
    for g, want in zip(first, _expected(_inputs(1)[0])):
        np.testing.assert_array_equal(g, want)
    assert rt.graph is None and "cuGraphLaunch" in rt.graph_reason and driver.execs == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # warned once, when the graph was dropped
        second = rt.run(_inputs(2))
    for g, want in zip(second, _expected(_inputs(2)[0])):
        np.testing.assert_array_equal(g, want)
    assert driver.calls.count("cuGraphLaunch") == 1 and driver.calls.count("cuLaunchKernel") == 8
    rt.close()


def test_profile_times_the_graph_and_the_per_kernel_launches(emulate):
    program = _program()
    driver = emulate(program)
    rt = _make(program)
    profile = rt.profile(_inputs(0), repeat=3)
    n = len(program.launches())
    assert profile["cuda_graph"] is True and profile["graph_reason"] is None
    # the emulated clock counts kernels: each total spans the whole sequence, each kernel one
    assert profile["total_s"] == profile["graph_total_s"] == profile["launches_total_s"] == n / 1e3
    assert [name for name, _ in profile["kernels"]] == [s.kernel for s in program.launches()]
    assert all(t == 1 / 1e3 for _, t in profile["kernels"])
    # per repeat: one graph launch, one per-kernel sequence, one per-kernel sequence between events
    assert driver.calls.count("cuGraphLaunch") == 1 + 3
    assert driver.calls.count("cuGraphAddKernelNode") == n   # timing never rebuilds the graph
    rt.use_graph = False
    assert rt.profile(_inputs(0), repeat=2)["cuda_graph"] is False
    rt.close()
    assert driver.events == {}


def test_a_program_without_kernels_makes_no_graph(emulate):
    buffers = {0: Buffer(0, (2,), "f32", "input", "arg0")}
    program = HostProgram("main", buffers, [0], [], [], results=[0])
    driver = emulate(program)
    rt = _make(program)
    assert rt.graph is None and rt.graph_reason == "no kernels to launch"
    np.testing.assert_array_equal(rt.run([np.ones(2, np.float32)])[0], np.ones(2, np.float32))
    assert not any(call.startswith("cuGraph") for call in driver.calls)
    rt.close()


# -- a compiled model: the executable's launches, through the graph and per kernel ---------------------

@pytest.fixture(scope="module")
def compiled_mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()
    x = torch.randn(4, 16)
    return vtmlir.compile(model, x, target="cuda"), x, model


def test_a_compiled_executable_replays_its_launches_as_one_graph(compiled_mlp, emulate, monkeypatch):
    """The real host program of a compiled model (its kernels are not run: the stand-in records
    them): one node per launch, and the graph replays the very launches the per-kernel path makes."""
    from vtmlir import backend

    exe, x, _ = compiled_mlp
    program = exe.host_program
    driver = emulate(program, exe.assemble(exe.chip))
    monkeypatch.setattr(backend.cuda, "cuda_available", lambda: True)
    monkeypatch.setattr(backend.cuda, "device_arch", lambda: exe.chip)
    assert "launch: one CUDA graph of" in str(exe.report())   # before it runs: what it will do
    try:
        exe.run(x)
        rt = exe.runtime()
        assert rt.graph is not None
        assert driver.calls.count("cuGraphAddKernelNode") == len(exe.kernels) == len(program.launches())
        rt.use_graph = False
        exe.run(x)
        assert _kernel_runs(driver, "graph") == _kernel_runs(driver, "launch")
        assert [run[0] for run in _kernel_runs(driver, "graph")] == [k.name for k in exe.kernels]
        rt.use_graph = True
        assert f"launch: one CUDA graph of {len(exe.kernels)} kernel nodes per call" in str(exe.report())
    finally:
        if exe._runtime is not None:
            exe._runtime.close()
            exe._runtime = None
    assert driver.memory == {} and driver.execs == {}
    exe.cuda_graph = False
    try:
        assert "cuda_graph=False" in exe.launch_mode()
        exe.run(x)
        assert exe.runtime().graph is None and "cuda_graph=False" in str(exe.report())
    finally:
        exe._runtime.close()
        exe._runtime = None
        exe.cuda_graph = True


def test_the_gpu_benchmark_times_calls_through_the_graph_and_per_kernel(compiled_mlp, emulate, monkeypatch,
                                                                        load_benchmark):
    from vtmlir import backend

    exe, x, _ = compiled_mlp
    emulate(exe.host_program, exe.assemble(exe.chip))
    monkeypatch.setattr(backend.cuda, "cuda_available", lambda: True)
    monkeypatch.setattr(backend.cuda, "device_arch", lambda: exe.chip)
    bench = load_benchmark("gpu")
    try:
        times = bench.call_times(exe, (x,), seconds=0.01)
        assert set(times) == {"graph", "launches"} and all(t > 0 for t in times.values())
        assert exe.runtime().use_graph is True   # left as it was
    finally:
        exe._runtime.close()
        exe._runtime = None


def test_cuda_graph_option_is_checked():
    with pytest.raises(VtmlirError, match="cuda_graph must be True or False"):
        vtmlir.compile("func.func @main() { return }", target="cuda", cuda_graph=1)
    with pytest.raises(VtmlirError, match="cuda_graph=False applies to target='cuda'"):
        vtmlir.compile("func.func @main() { return }", target="cpu", cuda_graph=False)


def test_the_option_travels_with_a_saved_executable(compiled_mlp, tmp_path):
    from vtmlir.backend.cuda import load

    exe, _, _ = compiled_mlp
    exe.cuda_graph = False
    try:
        exe.save(tmp_path / "mlp.vtcuda")
    finally:
        exe.cuda_graph = True
    loaded = load(tmp_path / "mlp.vtcuda")
    assert loaded.cuda_graph is False and "cuda_graph=False" in loaded.launch_mode()
    del loaded.cuda_graph   # an executable saved before the option: the graph, the default
    assert loaded.launch_mode().startswith(f"one CUDA graph of {len(exe.kernels)} kernel nodes")


@pytest.mark.skipif(LIBRARY_ABSENT is not None or not runtime.cuda_available(), reason="no CUDA device")
def test_on_a_gpu_the_graph_is_made_and_gives_the_per_kernel_results(compiled_mlp):
    """Where a GPU exists: the driver accepts the graph (no fallback), and its results are bitwise
    those of the per-kernel launches, and torch's within f32 tolerance."""
    exe, x, model = compiled_mlp
    fresh = exe._runtime is None
    try:
        via_graph = exe(x)
        rt = exe.runtime()
        assert rt.graph is not None, rt.graph_reason
        rt.use_graph = False
        per_kernel = exe(x)
        rt.use_graph = True
        again = exe(x)
        assert torch.equal(via_graph, per_kernel) and torch.equal(via_graph, again)
        with torch.no_grad():
            torch.testing.assert_close(via_graph, model(x), rtol=1e-4, atol=1e-4)
        profile = exe.profile(x, repeat=3)
        assert profile["cuda_graph"] and profile["graph_total_s"] > 0 and profile["launches_total_s"] > 0
    finally:
        if fresh and exe._runtime is not None:
            exe._runtime.close()
            exe._runtime = None
