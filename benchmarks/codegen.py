"""CPU code generation (issue 21): vtmlir's scheduled kernels against torch eager, torch.compile and IREE.

Prints JSON lines (benchmarks/README.md). Every contender runs in this one process, interleaved call by
call (round robin over the contenders, `--repeat` rounds; with several threads, round robin over bursts
of calls that each start after the other runtimes' spinning workers have gone idle), at each thread
count of `--threads`; the medians of wall time and of the process's CPU time per call are reported
(the machine is shared: CPU time is the steadier figure; with several threads, wall time is the
figure, CPU time adds up the threads and their spinning). Contenders:

- `vtmlir`: `compiled(*args)` of `vtmlir.compile(..., threads=N)` (includes the Python call path);
- `vtmlir_kernel`: the same JIT-compiled function invoked with argument descriptors built once and
  its result arrays reused (the generated code alone, without the call path);
- `eager`: the torch module (`torch.set_num_threads(N)`); `inductor`: `torch.compile(module)`;
- `vtmlir_nchw16c` (3x3 convolutions): the convolution in the blocked layout, with its input's and
  output's conversions from and to NCHW;
- `iree`: IREE 3.13 llvm-cpu on the same linalg-on-tensors MLIR (`--iree-llvmcpu-target-cpu=host`;
  `local-sync` for 1 thread, `local-task` with N worker groups otherwise).

Kernels report GFLOP/s (matmul, conv) or GB/s (bytes read + written; elementwise, transpose, concat, with
numpy's `copyto` bandwidth measured in the same run as `numpy_copy`) and the time ratio to eager;
models report the time ratio to eager per contender. Compile times are per contender (CPU seconds).
Every case also reports `max_abs_diff` of vtmlir's and inductor's outputs against eager's.

    python benchmarks/codegen.py [--threads 1,2] [--repeat 9] [--only kernels,models]
        [--kernels matmul,conv,depthwise,norm,memory] [--models a,b] [--batches 1,8] [--no-iree] [--no-inductor]
        [--settle]
    python benchmarks/codegen.py --profile --models a,b [--batches 1]

`--profile`: where a model's time goes, kernel by kernel (one thread): `vtmlir.compile(...,
profile=True)` and `compiled.profile(clock="cpu")` (docs/codegen.md "Profiling"); one JSON line per
kernel (kind, shape, schedule, calls, microseconds per call), slowest first.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import numpy as np
import torch

import vtmlir
from jsonl import Fn, Reporter

SUITE = "codegen"
emit = Reporter(SUITE).emit


# -- contenders ----------------------------------------------------------------------------------

class Contender:
    """A callable with its compile time ((wall, CPU) seconds) and a name; `call()` runs it once."""

    def __init__(self, name: str, call, compile_s=None):
        self.name, self.call, self.compile_s = name, call, compile_s


def _timed(build):
    """(result, (wall s, CPU s of this process)) -- IREE's compiler runs in a child process, so its
    compile time is wall time."""
    w0, p0 = time.perf_counter(), time.process_time()
    result = build()
    return result, (time.perf_counter() - w0, time.process_time() - p0)


def vtmlir_contenders(module, inputs, threads: int) -> list[Contender]:
    compiled, seconds = _timed(lambda: vtmlir.compile(module, *inputs, threads=threads))
    out = [Contender("vtmlir", lambda: compiled(*inputs), seconds)]
    kernel = _kernel_call(compiled, inputs)
    if kernel is not None:
        out.append(Contender("vtmlir_kernel", kernel, seconds))
    return out


def _kernel_call(compiled, inputs):
    """`compiled`'s JIT function with descriptors built once (results as out-parameters)."""
    from torch_mlir.runtime import get_ranked_memref_descriptor

    from vtmlir.backend.cpu.calling import aligned_empty

    if any(a >= 0 for a in compiled.result_arguments) or any(x.dim() == 0 for x in inputs):
        return None
    # Results as the call path makes them (cache-line aligned: a large transpose's streaming stores need it).
    arrays = [x.numpy() for x in inputs] + [aligned_empty(r.shape, r.numpy_dtype) for r in compiled.signature.results]
    if compiled.workspace_bytes:  # the intermediate buffers' workspace, the last argument (codegen-plan-workspace)
        arrays.append(aligned_empty((compiled.workspace_bytes,), np.uint8, compiled.report().workspace.alignment))
    if any(a.ndim == 0 for a in arrays):
        return None
    pointers = [ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a))) for a in arrays]
    engine, name = compiled._engine, compiled.signature.name  # the benchmark looks inside on purpose

    def call(keep=arrays):  # `keep`: the descriptors point into these arrays
        engine.invoke(name, *pointers)

    return call


def eager_contender(module, inputs) -> Contender:
    def call():
        with torch.no_grad():
            return module(*inputs)
    return Contender("eager", call)


def inductor_contender(module, inputs) -> Contender | None:
    try:
        compiled = torch.compile(module)

        def call():
            with torch.no_grad():
                return compiled(*inputs)

        _, seconds = _timed(call)  # the first call compiles
        return Contender("inductor", call, seconds)
    except Exception as err:  # noqa: BLE001 - a contender that cannot run is a null line, not a crash
        return _failed("inductor", err)


_FAILURES: list[tuple[str, str]] = []


def _failed(name, err):
    _FAILURES.append((name, f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"))
    return None


def iree_contender(module, inputs, threads: int) -> Contender | None:
    try:
        import iree.compiler as ireec
        import iree.runtime as ireert
    except ImportError as err:
        return _failed("iree", err)
    try:
        text = str(vtmlir.import_torch(module, *inputs))
        flags = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                 "--iree-llvmcpu-target-cpu=host"]
        vmfb, seconds = _timed(lambda: ireec.compile_str(text, extra_args=flags))
        if threads == 1:
            config = ireert.Config("local-sync")
        else:
            ireert.flags.parse_flags(f"--task_topology_max_group_count={threads}")
            config = ireert.Config("local-task")
        context = ireert.SystemContext(config=config)
        context.add_vm_module(ireert.VmModule.copy_buffer(context.instance, vmfb))
        function = context.modules.module["main"]
        arrays = [x.numpy() for x in inputs]

        def call():
            result = function(*arrays)
            return [r.to_host() for r in result] if isinstance(result, (list, tuple)) else result.to_host()

        return Contender("iree", call, seconds)
    except Exception as err:  # noqa: BLE001
        return _failed("iree", err)


# Multi-threaded contenders run in bursts: the OpenMP runtimes of torch (libgomp) and of vtmlir
# (libomp) and IREE's task system each keep their worker threads spinning for a while after a call
# (libomp: KMP_BLOCKTIME, 200 ms unless set). Called one call each in turn, every contender would
# run beside another runtime's spinning workers on a 2-core machine and measure the interference,
# not itself. A burst starts after the others' workers have gone to sleep and after a call that
# wakes its own team.
# The burst's own warm-up lasts WARM_SECONDS: on this VM the cores idle during the settle take
# milliseconds to come back (after 0.25 s idle, the first three calls of a 64x1024 softmax at 2
# threads took 3.3/3.6/2.2 ms for vtmlir and 5.6/4.1/0.08 ms for eager, then 20-23 µs), which one
# untimed call did not absorb (vtmlir's median was 35 µs, eager's 33, against 22 and 23 warm).
SETTLE_SECONDS = 0.25
WARM_SECONDS = 0.01
BURST_CALLS = 5


def measure(contenders: list[Contender], repeat: int, threads: int = 1,
            settle: bool = False) -> dict[str, tuple[float, float]]:
    """name -> (median wall s, median CPU s) per call. One thread: round robin, one call each per
    round, `repeat` rounds. Several threads: round robin over bursts of `BURST_CALLS` timed calls,
    each after `SETTLE_SECONDS` of idling and untimed calls for `WARM_SECONDS` (at least one), `repeat` rounds.

    A contender also pays for the one before it: after eager, malloc's heap has been trimmed (the
    next call's large allocations fault their pages in again: ~4000 faults, +5 ms, on
    vtc_gemma2_decode b8) and its caches are cold. `settle` times each call after an untimed one of
    the same contender (twice the run time): that absorbs the faults (vtc_gemma2_decode b8, one
    thread: the contender after eager 21 ms, 15.6 with `settle`, 15.3 with no eager in the round --
    whichever of `vtmlir` and `vtmlir_kernel` comes first), not all of the rest (vtc_llama3_decode
    b1: 1.0 / 0.74 / 0.57 ms). Bursts always settle."""
    for c in contenders:
        c.call()  # warm-up (JIT materialisation, caches)
    wall = {c.name: [] for c in contenders}
    cpu = {c.name: [] for c in contenders}
    burst = 1 if threads == 1 else BURST_CALLS
    for _ in range(repeat):
        for c in contenders:
            if threads > 1:
                time.sleep(SETTLE_SECONDS)
            if threads > 1 or settle:
                warm_until = time.perf_counter() + (WARM_SECONDS if threads > 1 else 0.0)
                c.call()
                while time.perf_counter() < warm_until:
                    c.call()
            for _ in range(burst):
                w0, p0 = time.perf_counter(), time.process_time()
                c.call()
                wall[c.name].append(time.perf_counter() - w0)
                cpu[c.name].append(time.process_time() - p0)
    return {n: (statistics.median(wall[n]), statistics.median(cpu[n])) for n in wall}


def run_case(case: str, module, inputs, threads: int, args, work=None, unit=None, extra=None) -> dict:
    """Measure every contender on `module(*inputs)`; emit times, ratios to eager and `work`/s."""
    torch.set_num_threads(threads)
    contenders = [eager_contender(module, inputs)]
    try:
        contenders += vtmlir_contenders(module, inputs, threads)
    except vtmlir.VtmlirError as err:
        _failed("vtmlir", err)
    if not args.no_inductor:
        contenders.append(inductor_contender(module, inputs))
    if not args.no_iree:
        contenders.append(iree_contender(module, inputs, threads))
    contenders += list(extra or [])
    contenders = [c for c in contenders if c is not None]
    for name, reason in _FAILURES:
        emit(case, "time_wall", None, "ms", contender=name, threads=threads, reason=reason)
    _FAILURES.clear()  # here, not at the start: the `extra` contenders were built before the call
    _emit_differences(case, contenders, threads)
    times = measure(contenders, args.repeat, threads, args.settle)
    eager_wall, eager_cpu = times["eager"]
    for c in contenders:
        w, p = times[c.name]
        common = dict(contender=c.name, threads=threads)
        emit(case, "time_wall", round(w * 1e3, 4), "ms", **common)
        emit(case, "time_cpu", round(p * 1e3, 4), "ms", **common)
        if c.name != "eager":
            emit(case, "ratio_wall", round(w / eager_wall, 3), "x", baseline="eager", **common)
            emit(case, "ratio_cpu", round(p / eager_cpu, 3) if eager_cpu else None, "x", baseline="eager", **common)
        if c.compile_s and c.name != "vtmlir_kernel":
            emit(case, "compile_time_wall", round(c.compile_s[0], 3), "s", **common)
            emit(case, "compile_time_cpu", round(c.compile_s[1], 3), "s", **common)
        if work:
            emit(case, f"{unit}_wall", round(work / w / 1e9, 2), unit, **common)
            emit(case, f"{unit}_cpu", round(work / p / 1e9, 2) if p else None, unit, **common)
    return times


def _emit_differences(case: str, contenders: list[Contender], threads: int) -> None:
    """`max_abs_diff` of vtmlir's and inductor's outputs against eager's: a fast wrong answer is not a
    result."""
    from torch.utils._pytree import tree_leaves

    def leaves(out):
        return [torch.as_tensor(t) for t in tree_leaves(out) if isinstance(t, (torch.Tensor, np.ndarray))]

    by_name = {c.name: c for c in contenders}
    reference = leaves(by_name["eager"].call())
    for name in ("vtmlir", "vtmlir_nchw16c", "inductor"):
        if name in by_name:
            got = leaves(by_name[name].call())
            diff = (max(float((g.double() - r.double()).abs().max()) if r.numel() else 0.0
                        for g, r in zip(got, reference))
                    if len(got) == len(reference) and all(g.shape == r.shape for g, r in zip(got, reference))
                    else float("inf"))
            emit(case, "max_abs_diff", diff, "", baseline="eager", contender=name, threads=threads)


# -- workloads ------------------------------------------------------------------------------------

def kernel_cases(which: set[str]):
    """(case, module, inputs, work, unit) per kernel benchmark."""
    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=gen)

    if "matmul" in which:
        for n in (512, 1024, 2048):
            yield f"matmul_f32_{n}", Fn(torch.matmul), (rand(n, n), rand(n, n)), 2 * n ** 3, "GFLOP/s"
    if "conv" in which:
        for c, hw in ((64, 56), (128, 28), (256, 14)):
            conv = torch.nn.Conv2d(c, c, 3, padding=1, bias=False).eval()
            yield f"conv3x3_nchw_1x{c}x{hw}x{hw}", conv, (rand(1, c, hw, hw),), 2 * c * c * 9 * hw * hw, "GFLOP/s"
    if "depthwise" in which:
        # MobileNet/EfficientViT/ShuffleNet depthwise convolutions (nn.Conv2d(groups=C)).
        for c, hw, k, stride in ((144, 56, 3, 1), (144, 56, 3, 2), (576, 14, 5, 1)):
            conv = torch.nn.Conv2d(c, c, k, stride=stride, padding=k // 2, groups=c, bias=False).eval()
            out = (hw + 2 * (k // 2) - k) // stride + 1
            yield (f"depthwise{k}x{k}s{stride}_nchw_1x{c}x{hw}x{hw}", conv, (rand(1, c, hw, hw),),
                   2 * c * k * k * out * out, "GFLOP/s")
    if "norm" in which:
        for rows, cols in ((64, 1024), (256, 4096)):
            x = rand(rows, cols)
            yield f"layernorm_{rows}x{cols}", torch.nn.LayerNorm(cols).eval(), (x,), 8 * rows * cols, "GB/s"
            yield f"rmsnorm_{rows}x{cols}", torch.nn.RMSNorm(cols, eps=1e-6).eval(), (x,), 8 * rows * cols, "GB/s"
            yield f"softmax_{rows}x{cols}", torch.nn.Softmax(-1), (x,), 8 * rows * cols, "GB/s"
    if "memory" in which:
        n = 1 << 22
        a, b = rand(n), rand(n)
        yield "add_4M", Fn(torch.add), (a, b), 12 * n, "GB/s"
        yield "relu_4M", Fn(torch.relu), (a,), 8 * n, "GB/s"
        m = rand(2048, 2048)
        yield "transpose_2048", Fn(lambda x: x.t().contiguous()), (m,), 8 * 2048 * 2048, "GB/s"
        p, q = rand(1024, 2048), rand(1024, 2048)
        yield "concat_2x1024x2048", Fn(lambda x, y: torch.cat([x, y], 0)), (p, q), 16 * 1024 * 2048, "GB/s"


def numpy_copy_contender(nbytes: int) -> Contender:
    src = np.ones(nbytes // 8, np.float32)
    dst = np.empty_like(src)
    return Contender("numpy_copy", lambda: np.copyto(dst, src))


def blocked_conv_contender(module, inputs, threads: int) -> Contender | None:
    """The convolution in nChw16c (`layout-select-ilp{target=paper-mkl}` picks it for every conv,
    `layout-materialize` re-lays the weights at compile time), with the transposing copies of its
    NCHW input and output, as a user holding NCHW tensors runs it."""
    try:
        compiled, seconds = _timed(lambda: vtmlir.compile(
            module, *inputs, threads=threads, pipeline="layout-select-ilp{target=paper-mkl}, layout-materialize"))
    except vtmlir.VtmlirError as err:
        return _failed("vtmlir_nchw16c", err)
    return Contender("vtmlir_nchw16c", lambda: compiled(*inputs), seconds)


def model_cases(names: list[str], batches: list[int]):
    from vtmlir import models

    for name in names:
        spec = models.get(name)
        for batch in batches:
            model, inputs = spec.build(batch=batch, seed=0)
            yield f"{name}_b{batch}", model.eval(), tuple(inputs)


def default_models() -> list[str]:
    from vtmlir import models

    return list(models.ZOO) + list(models.VTC_ZOO) + list(models.TEMCO_ZOO)


# -- kernel profile --------------------------------------------------------------------------------

def profile_kernels(case: str, module, inputs, repeat: int) -> None:
    """Time every kernel of `module` as `vtmlir.compile` makes it for one thread: a profiling build
    (`profile=True`, timing marks around each kernel, docs/codegen.md "Profiling"), thread CPU time,
    median of `repeat` calls; one JSON line per kernel, slowest first."""
    compiled = vtmlir.compile(module, *inputs, threads=1, profile=True)
    p = compiled.profile(*inputs, repeat=repeat, clock="cpu")
    emit(case, "profile_total", round(p.total_ns / 1e3, 1), "us", kernels_us=round(p.kernel_ns / 1e3, 1),
         call_us=round(p.call_ns / 1e3, 1))
    for k in p.top(len(p.kernels)):
        emit(case, "profile_kernel", round(k.time_ns / 1e3, 1), "us", kernel=k.id, kind=k.kind,
             shape=k.description, schedule=k.schedule or "loops", calls=k.calls, location=k.location)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--settle", action="store_true",
                        help="time each call after an untimed one of the same contender (`measure`)")
    parser.add_argument("--only", default="kernels,models")
    parser.add_argument("--kernels", default="matmul,conv,depthwise,norm,memory")
    parser.add_argument("--models", default=None, help="comma-separated model names (default: zoo, VTC, TeMCO)")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--no-iree", action="store_true")
    parser.add_argument("--no-inductor", action="store_true")
    parser.add_argument("--profile", action="store_true", help="time each kernel of --models (1 thread)")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    only = set(args.only.split(","))
    if args.profile:
        torch.set_num_threads(1)
        names = args.models.split(",") if args.models else default_models()
        for case, module, inputs in model_cases(names, [int(b) for b in args.batches.split(",")]):
            profile_kernels(case, module, inputs, args.repeat)
        return
    from vtmlir.codegen import host_target

    target = host_target()
    emit("host", "vector_bits", target.vector_bits, "bit", cores=target.cores, features=sorted(target.features))
    if "kernels" in only:
        for case, module, inputs, work, unit in kernel_cases(set(args.kernels.split(","))):
            for n in threads:
                extra = [numpy_copy_contender(work)] if unit == "GB/s" else []
                if case.startswith("conv3x3"):
                    extra = [blocked_conv_contender(module, inputs, n)]
                run_case(case, module, inputs, n, args, work=work, unit=unit, extra=extra)
    if "models" in only:
        names = args.models.split(",") if args.models else default_models()
        batches = [int(b) for b in args.batches.split(",")]
        for case, module, inputs in model_cases(names, batches):
            for n in threads:
                run_case(case, module, inputs, n, args)


if __name__ == "__main__":
    main()
