"""DVM benchmark (Fang et al., DVM, §6 Table 2 workloads at CPU scale).

Workloads: matmul and addmm with m sampled in [1, 8192] and the paper's (n, k) set D scaled by 1/32
(4096 -> 128, 11008 -> 344, 5120 -> 160, 13696 -> 428, 8192 -> 256, 28672 -> 896), LayerNorm
[b, s, h] (b in [1, 60], s in [2, 128] (8192/64 = 128 at most), h in {1024..4096}/4), if-else-add (((a > b ? 2x : 4x) + y)
over [b, s, f] with random branch, through the streaming fuser), and a BERT-style encoder
(`vtmlir.models.bert`, imported with a dynamic batch, `dvm-fuse`d, run by `DvmFunction`) with
batch in {2, 4, 8, 16}.

JSON lines (benchmarks/jsonl.py), per workload:
- `compile_latency_median` / `compile_latency_max` (µs): per-new-shape compile = tiling + encoding,
  every sampled shape new and distinct (static-graph workloads: `compile_graph` through the graph's
  bytecode templates -- guards, Alg. 1, the shape-dependent words; if-else-add: the stream fuser's
  compile time of the shape; BERT: all kernels of one new batch). Before measuring, the static
  workloads (and BERT, `DvmFunction.prebuild` over the import's batch range) build every template their symbol ranges need (`vtmlir.dvm.template.prebuild`,
  exhaustive over the ranges the samplers draw from: reported as `prebuild` seconds, at graph
  compile time), so no measured shape traces a template (`template_builds` counts any that still
  did; they are included in the max). `--warmup W` instead compiles W random shapes first (the
  previous method, which leaves rare structures to be traced at run time).
  Python's cyclic GC is frozen (`gc.freeze()`) after the warm-up: a full collection of the torch
  heap would otherwise land in one sample;
- `compile_cpu_max_at`: the sample index of `compile_cpu_max` (0: the first compile after the
  `gc.collect()`, whose walk over the heap leaves every cache cold); `compile_cpu_cold_median` /
  `_max`: `--cold-shapes` further new shapes compiled after streaming 128 MB (a compile between
  two VM runs), with `control` the same measurement of nothing;
- first run (the validation step of session 8): a template's guards include `decode`'s checks (`bytecode.check_traced`),
  so a new shape's first native run decodes nothing; `first_run_cpu_median` / `_max` = compile +
  the check before the first native run (`CompiledKernel.native_reason`), and beside it, measured
  after the samples on the same kernels, `decode_cpu_*` (decode + coverage check: what the first
  native run did before) and `first_run_cpu_before_*` (compile + that decode). BERT, per new
  batch: `validate_latency_*` (the admission check beyond the compile), `first_run_overhead_*` =
  compile + validate (every compile and admission of the call: the ones compiled ahead and any
  compiled lazily), `decode_latency_*` / `first_run_overhead_before_*` the same comparison;
- `run_time` (µs, best of R) of the VM compiled once through MLIR (`native=True`; numpy VM where
  a program needs it), `baseline` = torch eager's best of R on the same inputs and threads; BERT
  also `native_kernels` (of `kernels`) and `run_time_wide_on_numpy_vm`: the same call with its
  kernels of more than 8 arguments on the numpy VM, as until the argument-table step of session 8 (the native VM had 8
  argument buffers), measured in the same process;
- `compile_cpu_median` / `compile_cpu_max` (µs): the same compiles in the compiling thread's CPU
  time (the 2-core dev machine is shared, so wall maxima mostly measure preemption);
  `compile_cpu_best3_median` / `_max` (static workloads): per shape the least CPU time of its first
  compile and two repeats of exactly the same work (`forget_last_tiling` between them), so that a
  maximum is the costliest shape rather than the worst interruption;
- `compile_run_ratio`: compile latency / run time of that shape;
- `torch_compile_new_shape_max` / `_median` (µs): torch.compile(dynamic=True)'s first call on each
  new shape (compiles and recompiles included), and `compile_latency_ratio` = that max / DVM's max;
  `torch_compile_run_time` (µs, best of R, after compilation) vs DVM's run time;
- `torch_compile_static_new_shape_max` / `_median` (µs): the same with torch.compile(dynamic=False),
  which recompiles for every new shape (recompile limit lifted), on `--torch-shapes` shapes, and
  `compile_latency_ratio_static_max` / `_median` = those / DVM's max / median. Inductor gets a
  fresh cache directory and no FX graph cache, so a new shape recompiles (the same random shapes
  as an earlier run would otherwise be cache hits).
`native_vm_jit` (s) is the one-off JIT of the VM per process. `--only compile_dynamic` (not in the
default set): `vtmlir.compile(..., dynamic_shapes=...)` of an MLP, the first call of never-seen
batches (`first_call_overhead_*` = first - steady, `new_shape_compile_*`), the second
(`record_call_cpu_*`: it records the shape's replay) and `steady_vs_static`
(`run_compile_dynamic`). `--only guards` (not in the default
set): per static workload `template_guards`, `template_jit_cpu` and `template_walk_cpu`, its
template sets built with every traced guard (baseline) and with the implied ones removed.

    python benchmarks/dvm.py [--shapes N] [--warmup W] [--run-shapes K] [--torch-shapes T] [--repeat R]
                             [--cores C] [--no-inductor] [--only static,if_else_add,bert,guards,compile_dynamic]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jsonl import Reporter  # noqa: E402

from vtmlir.dvm import Graph, Target, compile_graph, decode, workloads  # noqa: E402
from vtmlir.dvm.native import native_vm, unsupported_reason  # noqa: E402

REPORT = Reporter("dvm")
D_SCALED = [(128, 128), (344, 128), (128, 344), (160, 160), (428, 160), (160, 428), (256, 256), (896, 256), (256, 896)]


def best_us(fn, repeat):
    """Best of `repeat` timed calls after a warm-up: on a shared machine the minimum is the least
    disturbed sample, for DVM and the baselines alike."""
    fn()
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return min(samples) * 1e6


def _mk(rng, m_max=8192):
    m = int(rng.integers(1, m_max + 1))
    n, k = D_SCALED[int(rng.integers(len(D_SCALED)))]
    return m, n, k


STATIC = [
    ("matmul", workloads.matmul(),
     lambda r, cap: (lambda m, n, k: [(m, k), (k, n)])(*_mk(r, cap)),
     lambda a, b: a @ b),
    ("addmm", workloads.addmm(),
     lambda r, cap: (lambda m, n, k: [(m, n), (m, k), (k, n)])(*_mk(r, cap)),
     lambda c, a, b: torch.addmm(c, a, b)),
    ("layernorm", workloads.layernorm(),
     lambda r, cap: (lambda b, s, h: [(b, s, h), (h,), (h,)])(int(r.integers(1, min(60, cap) + 1)),
                                                                int(r.integers(2, 129)),
                                                                int(r.choice([256, 512, 768, 1024]))),
     lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, 1e-5)),
]
RUN_CAP = {"matmul": 1024, "addmm": 1024, "layernorm": 8}  # m / b bound of the timed shapes
# the symbol ranges of each static workload, for `prebuild` (the same space the samplers above draw from)
SPACES = {
    "matmul": (lambda m, nk: [(m, nk[1]), (nk[1], nk[0])], {"m": range(1, 8193), "nk": D_SCALED}),
    "addmm": (lambda m, nk: [(m, nk[0]), (m, nk[1]), (nk[1], nk[0])], {"m": range(1, 8193), "nk": D_SCALED}),
    "layernorm": (lambda b, s, h: [(b, s, h), (h,), (h,)],
                  {"b": range(1, 61), "s": range(2, 129), "h": [256, 512, 768, 1024]}),
}


def torch_compile_new_shapes(fn, inputs_list, repeat, dynamic=True):
    """First-call latency of torch.compile(dynamic=...) on each new shape (µs), and the steady run
    time of the last shape. dynamic=False recompiles for every shape (the recompile limit, 8 by
    default, is lifted so that it does not fall back to eager)."""
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.config.recompile_limit = 1 << 20
    compiled = torch.compile(fn, dynamic=dynamic)
    first = []
    for inputs in inputs_list:
        t = time.perf_counter()
        compiled(*inputs)
        first.append((time.perf_counter() - t) * 1e6)
    steady = best_us(lambda: compiled(*inputs_list[-1]), repeat)
    return first, steady


def emit_latency(case, wall, cpu=None, **extra):
    """Wall-clock median/max, and the compiling thread's CPU time (excludes time the thread was
    descheduled: on a shared machine the wall maximum mostly measures other jobs)."""
    REPORT.emit(case, "compile_latency_median", round(statistics.median(wall), 1), "us", shapes=len(wall), **extra)
    REPORT.emit(case, "compile_latency_max", round(max(wall), 1), "us", shapes=len(wall), **extra)
    if len(wall) >= 100:
        REPORT.emit(case, "compile_latency_p99", round(sorted(wall)[int(0.99 * len(wall))], 1), "us", shapes=len(wall))
    if cpu:
        REPORT.emit(case, "compile_cpu_median", round(statistics.median(cpu), 1), "us", shapes=len(cpu))
        REPORT.emit(case, "compile_cpu_max", round(max(cpu), 1), "us", shapes=len(cpu))
        if len(cpu) >= 100:
            REPORT.emit(case, "compile_cpu_p99", round(sorted(cpu)[int(0.99 * len(cpu))], 1), "us", shapes=len(cpu))


def emit_steady(case, wall, cpu, built):
    """The same over the shapes whose structure already had a template (no trace in the sample)."""
    w = [x for x, b in zip(wall, built) if not b]
    c = [x for x, b in zip(cpu, built) if not b]
    REPORT.emit(case, "compile_latency_max_no_build", round(max(w), 1), "us", shapes=len(w))
    REPORT.emit(case, "compile_cpu_max_no_build", round(max(c), 1), "us", shapes=len(c))
    return w


def emit_inductor_static(case, first, dvm_lat, n):
    REPORT.emit(case, "torch_compile_static_new_shape_max", round(max(first), 1), "us", shapes=n)
    REPORT.emit(case, "torch_compile_static_new_shape_median", round(statistics.median(first), 1), "us", shapes=n)
    REPORT.emit(case, "compile_latency_ratio_static_max", round(max(first) / max(dvm_lat), 1), "ratio",
                baseline="torch.compile(dynamic=False) max new-shape latency / DVM max compile latency")
    REPORT.emit(case, "compile_latency_ratio_static_median", round(statistics.median(first) / statistics.median(dvm_lat), 1),
                "ratio", baseline="torch.compile(dynamic=False) median new-shape latency / DVM median compile latency")


def emit_first_run_ratio(case, first, dvm_first_run):
    """torch.compile(dynamic=False)'s new-shape latency against DVM's whole first-run overhead
    (compile + the check before the first native run, wall), at the median and the maximum."""
    REPORT.emit(case, "first_run_ratio_static_median", round(statistics.median(first) / statistics.median(dvm_first_run), 1),
                "ratio", baseline="torch.compile(dynamic=False) median new-shape latency / DVM median first-run overhead")
    REPORT.emit(case, "first_run_ratio_static_max", round(max(first) / max(dvm_first_run), 1), "ratio",
                baseline="torch.compile(dynamic=False) max new-shape latency / DVM max first-run overhead")


def emit_cold(case, compile_new, new_shapes):
    """Compile CPU time with every cache level cold: before each sample 128 MB are streamed
    through (as a VM run between compiles does), and the same for an empty sample (`control`:
    the measurement's own cold cost)."""
    n = len(new_shapes)
    if not n:
        return
    flush = np.ones(16 << 20, np.int64)
    cold, control = [], []
    for shapes in new_shapes:
        flush += 1
        c = time.thread_time()
        compile_new(shapes)
        cold.append((time.thread_time() - c) * 1e6)
        flush += 1
        c = time.thread_time()
        control.append((time.thread_time() - c) * 1e6)
    REPORT.emit(case, "compile_cpu_cold_median", round(statistics.median(cold), 1), "us", shapes=n,
                control=round(statistics.median(control), 1), note="caches flushed before each compile")
    REPORT.emit(case, "compile_cpu_cold_max", round(max(cold), 1), "us", shapes=n, control=round(max(control), 1))


def decode_us(k) -> float:
    """CPU time of what a kernel's first native run did before the validation step of session 8: decode (validate) its
    bytecode and check the native VM's coverage on the decoded program."""
    c = time.thread_time()
    unsupported_reason(decode(k.bytecode))
    return (time.thread_time() - c) * 1e6


def emit_first_run(case, compile_cpu, check_cpu, kernels):
    """A new shape's first-run overhead: the compile (its guards include `decode`'s checks,
    `bytecode.check_traced`) plus what the first native run asks beyond it (`native_reason`, read
    from the template). Beside it, measured in the same process after the compile samples (it
    evicts caches), the decode + coverage check the first native run did before, on the same
    kernels: `decode_cpu_*` and `first_run_cpu_before_*` (= this compile + that decode)."""
    first = [a + b for a, b in zip(compile_cpu, check_cpu)]
    dec = [decode_us(k) for k in kernels]
    before = [a + d for a, d in zip(compile_cpu, dec)]
    n = len(first)
    REPORT.emit(case, "first_run_cpu_median", round(statistics.median(first), 1), "us", shapes=n,
                note="per new shape: compile + the check before its first native run (no decode)")
    REPORT.emit(case, "first_run_cpu_max", round(max(first), 1), "us", shapes=n)
    REPORT.emit(case, "first_run_check_cpu_median", round(statistics.median(check_cpu), 2), "us", shapes=n,
                note="the check alone: CompiledKernel.native_reason (thread_time's own cost included)")
    REPORT.emit(case, "decode_cpu_median", round(statistics.median(dec), 1), "us", shapes=n,
                note="not on the path: bytecode.decode + unsupported_reason of the same kernels, what the "
                     "first native run did before the validation step of session 8")
    REPORT.emit(case, "decode_cpu_max", round(max(dec), 1), "us", shapes=n)
    REPORT.emit(case, "first_run_cpu_before_median", round(statistics.median(before), 1), "us", shapes=n,
                baseline=round(statistics.median(first), 1),
                ratio=round(statistics.median(before) / statistics.median(first), 1),
                note="compile + decode per shape (the session-8 first run, with this compile); "
                     "baseline = first_run_cpu_median")
    REPORT.emit(case, "first_run_cpu_before_max", round(max(before), 1), "us", shapes=n, baseline=round(max(first), 1))


def distinct_shapes(shapes_of, rng, cap, n, seen):
    """`n` random shapes not in `seen` (every measured compile is for a new shape)."""
    out, tries = [], 0
    while len(out) < n and tries < 100 * n:
        tries += 1
        s = shapes_of(rng, cap)
        key = tuple(map(tuple, s))
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def emit_inductor(case, first, steady, dvm_max_us, dvm_run_us, n):
    REPORT.emit(case, "torch_compile_new_shape_max", round(max(first), 1), "us", shapes=n)
    REPORT.emit(case, "torch_compile_new_shape_median", round(statistics.median(first), 1), "us", shapes=n)
    REPORT.emit(case, "compile_latency_ratio", round(max(first) / dvm_max_us, 1), "ratio",
                baseline="torch.compile(dynamic=True) max new-shape latency / DVM max compile latency")
    REPORT.emit(case, "torch_compile_run_time", round(steady, 1), "us", baseline=round(dvm_run_us, 1),
                note="baseline = DVM native VM run time on the same shape")


def run_static(args, target, rng, inductor):
    from vtmlir.dvm.template import forget_last_tiling, prebuild, templates_of

    cores = target.cores
    for name, graph, shapes_of, eager in STATIC:
        cap = 8192 if name != "layernorm" else 60
        seen = set()
        if args.warmup:  # random warm-up (the previous method): structures it misses build at run time
            t = time.perf_counter()
            for shapes in distinct_shapes(shapes_of, rng, cap, args.warmup, seen):
                compile_graph(graph, shapes, target)
            REPORT.emit(name, "warmup", round((time.perf_counter() - t) * 1e3, 1), "ms", shapes=args.warmup,
                        templates=sum(len(ts) for ts in templates_of(graph).values()))
        else:  # every structure of the declared symbol ranges, ahead of time (graph compile)
            pb = prebuild(graph, *SPACES[name], target)
            REPORT.emit(name, "prebuild", round(pb["seconds"], 2), "s", points=pb["points"], templates=pb["templates"],
                        native_template_sets=pb["native"])
        n_templates = sum(len(ts) for ts in templates_of(graph).values())
        lat, cpu, builds, built = [], [], 0, []
        gc.collect()
        gc.freeze()
        best = []  # per shape: the least CPU time of its first compile and two repeats
        check, kernels = [], []  # per shape: the check before the first native run, the kernel
        for shapes in distinct_shapes(shapes_of, rng, cap, args.shapes, seen):
            t, c = time.perf_counter(), time.thread_time()
            k = compile_graph(graph, shapes, target)
            cpu.append((time.thread_time() - c) * 1e6)
            lat.append((time.perf_counter() - t) * 1e6)
            c = time.thread_time()
            k.native_reason  # what a first native run asks beyond the compile (no decode: template)
            check.append((time.thread_time() - c) * 1e6)
            kernels.append(k)
            now = sum(len(ts) for ts in templates_of(graph).values())
            built.append(now > n_templates)
            builds, n_templates = builds + (now > n_templates), now
            again = []
            for _ in range(2):  # the same work again (the remembered tiling forgotten): preemption-free
                forget_last_tiling()
                c = time.thread_time()
                compile_graph(graph, shapes, target)
                again.append((time.thread_time() - c) * 1e6)
            best.append(min(cpu[-1], *again))
        gc.unfreeze()
        emit_latency(name, lat, cpu, template_builds=builds, templates=n_templates)
        lat_no_build = emit_steady(name, lat, cpu, built)
        REPORT.emit(name, "compile_cpu_best3_median", round(statistics.median(best), 1), "us", shapes=len(best))
        REPORT.emit(name, "compile_cpu_best3_max", round(max(best), 1), "us", shapes=len(best),
                    note="per shape the least of its first compile and two repeats of the same work")
        REPORT.emit(name, "compile_cpu_max_at", int(max(range(len(cpu)), key=cpu.__getitem__)), "index",
                    note="which sample (0 = the first compile after gc.collect(), caches cold)")
        emit_first_run(name, cpu, check, kernels)
        emit_cold(name, lambda shapes: compile_graph(graph, shapes, target),
                  distinct_shapes(shapes_of, rng, cap, args.cold_shapes, seen))
        timed = []
        for _ in range(args.run_shapes):
            shapes = shapes_of(rng, RUN_CAP[name])
            t = time.perf_counter()
            k = compile_graph(graph, shapes, target)
            comp_us = (time.perf_counter() - t) * 1e6
            arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
            tensors = [torch.from_numpy(a) for a in arrays]
            native = k.native_reason is None
            (out,) = k(*arrays, native=native, cores=cores if native else None)
            err = float(np.abs(out - eager(*tensors).numpy()).max())
            vm_us = best_us(lambda: k(*arrays, native=native, cores=cores if native else None), args.repeat)
            eager_us = best_us(lambda: eager(*tensors), args.repeat)
            dims = shapes[0] if name == "layernorm" else (*shapes[-2], shapes[-1][-1])  # [b,s,h] or m,k,n
            case = f"{name}@{'x'.join(map(str, dims))}"
            REPORT.emit(case, "run_time", round(vm_us, 1), "us", baseline=round(eager_us, 1),
                        ratio=round(vm_us / eager_us, 2), max_abs_err=err, tiles=int(k.bytecode[5]), native=native)
            REPORT.emit(case, "compile_run_ratio", round(comp_us / vm_us, 4), "ratio")
            timed.append((tensors, vm_us))
        if inductor:
            first, steady = torch_compile_new_shapes(eager, [t for t, _ in timed], args.repeat)
            emit_inductor(name, first, steady, max(lat), timed[-1][1], len(timed))
            shapes = distinct_shapes(shapes_of, rng, RUN_CAP[name], args.torch_shapes, set())
            inputs = [[torch.from_numpy(rng.standard_normal(s).astype(np.float32)) for s in shp] for shp in shapes]
            first, _ = torch_compile_new_shapes(eager, inputs, 1, dynamic=False)
            emit_inductor_static(name, first, lat, len(inputs))
            emit_first_run_ratio(name, first, [a + b for a, b in zip(lat, check)])
            REPORT.emit(name, "compile_latency_ratio_static_max_no_build", round(max(first) / max(lat_no_build), 1), "ratio",
                        baseline="torch.compile(dynamic=False) max new-shape latency / DVM max compile latency "
                                 "over shapes whose structure had a template")


def run_if_else_add(args, target, rng, inductor):
    from vtmlir.dvm.stream import StreamFuser
    from vtmlir.dvm.template import prebuild, templates_of

    fuser = StreamFuser(target, native=True)
    g = Graph("if_else_add")  # the fused branch + add kernel, for the compile-only shapes
    xi, yi = g.input(3), g.input(3)
    g.output(xi * 2.0 + yi)

    def step(x, y, a_, b_):
        X, Y = fuser.tensor(x), fuser.tensor(y)
        t = X * 2.0 if bool(fuser.tensor(a_) > fuser.tensor(b_)) else X * 4.0
        return (t + Y).numpy()

    # warm-up: the fuser's kernel structures (compare, either branch + add) and the graph's templates
    seen = set()
    for i in range(args.warmup or 300):
        b, s, f = (int(rng.integers(1, c + 1)) for c in (3, 5, 9))
        if (b, s, f) not in seen:
            seen.add((b, s, f))
            z = np.zeros((b, s, f), np.float32)
            step(z, z, np.float32([i % 2]), np.float32([0.5]))
        b, s, f = (int(rng.integers(1, c + 1)) for c in (256, 512, 8192))
        seen.add((b, s, f))
        compile_graph(g, [(b, s, f), (b, s, f)], target)
    # the run steps' shapes (up to 4 x 64 x 512) through the fuser: the corners of those ranges, so
    # that its kernels' structures are there before measuring (`fuser_template_builds` counts any
    # structure still traced in a measured step)
    for b in (1, 2, 3, 4):
        for s_ in (1, 2, 3, 4, 63, 64):
            for f in (1, 2, 3, 4, 8, 9, 511, 512):
                z, z2 = np.zeros((b, s_, f), np.float32), np.ones((b, s_, f), np.float32)
                for branch in (0, 1):  # two arrays: x is y would be a kernel with one input
                    step(z, z2, np.float32([branch]), np.float32([0.5]))
    # [b, s, f] up to 256 x 512 x 8192 is too large a space to walk whole; its structures are which
    # sizes are 1 and how Alg. 1 splits, so the corners of every range are prebuilt (not a proof:
    # `template_builds` reports any structure that is still traced among the measured shapes)
    corners = {"b": [1, 2, 3, 4, 255, 256], "s": [1, 2, 3, 4, 511, 512], "f": [1, 2, 3, 4, 8, 9, 512, 8191, 8192]}
    prebuild(g, lambda b, s, f: [(b, s, f), (b, s, f)], corners, target)
    REPORT.emit("if_else_add", "native_template_sets", fuser.compile_native(), "count",
                note="the stream fuser's kernel structures from the warm-up, JIT-compiled")
    n_templates = sum(len(ts) for ts in templates_of(g).values())

    def fuser_templates():
        return sum(len(ts) for fg in fuser._graphs.values() for ts in templates_of(fg).values())

    fuser_before = fuser_templates()
    lat, cpu, rows, builds = [], [], [], 0
    gc.collect()
    gc.freeze()
    while len(lat) < args.shapes:
        i = len(lat)
        cap = (256, 512, 8192) if i >= args.run_shapes else (4, 64, 512)
        b, s, f = (int(rng.integers(1, c + 1)) for c in cap)
        if (b, s, f) in seen:
            continue
        seen.add((b, s, f))
        if i >= args.run_shapes:  # per-new-shape compile of the fused branch+add kernel only
            t, c = time.perf_counter(), time.thread_time()
            compile_graph(g, [(b, s, f), (b, s, f)], target)
            cpu.append((time.thread_time() - c) * 1e6)
            lat.append((time.perf_counter() - t) * 1e6)
            now = sum(len(ts) for ts in templates_of(g).values())
            builds, n_templates = builds + (now > n_templates), now
            continue
        a_, b_ = rng.standard_normal(1).astype(np.float32), rng.standard_normal(1).astype(np.float32)
        x, y = rng.standard_normal((b, s, f)).astype(np.float32), rng.standard_normal((b, s, f)).astype(np.float32)
        before = fuser.compile_seconds
        step(x, y, a_, b_)
        lat.append((fuser.compile_seconds - before) * 1e6)
        tx, ty, ta, tb = map(torch.from_numpy, (x, y, a_, b_))

        def eager():
            return (2 * tx if bool(ta > tb) else 4 * tx) + ty

        vm_us = best_us(lambda: step(x, y, a_, b_), args.repeat)
        eager_us = best_us(eager, args.repeat)
        case = f"if_else_add@{b}x{s}x{f}"
        REPORT.emit(case, "run_time", round(vm_us, 1), "us", baseline=round(eager_us, 1), ratio=round(vm_us / eager_us, 2),
                    max_abs_err=float(np.abs(step(x, y, a_, b_) - eager().numpy()).max()))
        REPORT.emit(case, "compile_run_ratio", round(lat[-1] / vm_us, 4), "ratio")
        rows.append(((tx, ty, ta, tb), vm_us))
    gc.unfreeze()
    emit_latency("if_else_add", lat, cpu, template_builds=builds, templates=n_templates,
                 fuser_template_builds=fuser_templates() - fuser_before,
                 note=f"the first {args.run_shapes} samples: the stream fuser's compiles in a run step (wall)")
    if inductor:
        def fn(x, y, a, b):
            return torch.where(a > b, 2 * x, 4 * x) + y  # traced without the data-dependent Python branch

        first, steady = torch_compile_new_shapes(fn, [r for r, _ in rows], args.repeat)
        emit_inductor("if_else_add", first, steady, max(lat), rows[-1][1], len(rows))
        first, _ = torch_compile_new_shapes(fn, [r for r, _ in rows], 1, dynamic=False)
        emit_inductor_static("if_else_add", first, lat, len(rows))


def run_bert(args, target, rng, inductor):
    import vtmlir
    from vtmlir.dvm.runner import DvmFunction
    from vtmlir.models.bert import build_bert_encoder, dynamic_shapes

    seq, hidden = 32, 128
    model, (x,) = build_bert_encoder(batch=2, seq=seq, layers=2, hidden=hidden, heads=4, ffn=4 * hidden)
    module = vtmlir.import_torch(model, x, dynamic_shapes=dynamic_shapes())
    fn = DvmFunction(module, target=target, native=True)
    REPORT.emit("bert", "kernels", len(fn.fusion.groups), "count",
                fused_ops=sum(len(g.ops) for g in fn.fusion.groups))
    pb = fn.prebuild()  # every batch the import allows (Dim max): dry runs build all templates
    REPORT.emit("bert", "prebuild", round(pb["seconds"], 2), "s", points=pb["points"], templates=pb["templates"],
                native_template_sets=pb["native"])
    fn(rng.standard_normal((3, seq, hidden)).astype(np.float32))  # warm-up batch (native VM, numpy glue)
    templates = fn.template_count()
    lat, rows, builds, validate, new_kernels = [], [], 0, [], []
    for batch in range(2, 17):
        if batch == 3:
            continue
        xb = rng.standard_normal((batch, seq, hidden)).astype(np.float32)
        before, vbefore = fn.compile_seconds, fn.validate_seconds
        known = {id(k) for k, _ in bert_kernels(fn)}
        (out,) = fn(xb)
        lat.append((fn.compile_seconds - before) * 1e6)
        validate.append((fn.validate_seconds - vbefore) * 1e6)
        new_kernels.append([k for k, _ in bert_kernels(fn) if id(k) not in known])
        builds, templates = builds + (fn.template_count() > templates), fn.template_count()
        if batch not in (2, 4, 8, 16):
            continue
        tx = torch.from_numpy(xb)
        with torch.no_grad():
            err = float(np.abs(out - model(tx).numpy()).max())
            vm_us = best_us(lambda: fn(xb), max(2, args.repeat // 3))
            eager_us = best_us(lambda: model(tx), args.repeat)
            with wide_kernels_on_numpy_vm(fn) as wide:
                wide_us = best_us(lambda: fn(xb), max(2, args.repeat // 3))
        case = f"bert@{batch}x{seq}x{hidden}"
        kernels = bert_kernels(fn)
        REPORT.emit(case, "run_time", round(vm_us, 1), "us", baseline=round(eager_us, 1), ratio=round(vm_us / eager_us, 2),
                    max_abs_err=err, native_kernels_admitted=sum(u for _, u in kernels), kernels_admitted=len(kernels))
        REPORT.emit(case, "run_time_wide_on_numpy_vm", round(wide_us, 1), "us", baseline=round(eager_us, 1),
                    ratio=round(wide_us / eager_us, 2), speedup_of_native=round(wide_us / vm_us, 2),
                    wide_kernels_admitted=wide,
                    note="the same call with the kernels of more than 8 arguments on the numpy VM, as the "
                         "native VM's 8 fixed argument buffers forced until the argument-table step of session 8 (same process)")
        REPORT.emit(case, "compile_run_ratio", round(lat[-1] / vm_us, 4), "ratio")
        rows.append(((tx,), vm_us))
    emit_latency("bert", lat, note="all kernels of one new batch (batches 2-16 but the warm-up's 3)",
                 template_builds=builds, templates=templates)
    REPORT.emit("bert", "validate_latency_median", round(statistics.median(validate), 1), "us", shapes=len(validate),
                note="per new batch: deciding whether the native VM runs each new kernel, beyond the compile "
                     "(CompiledKernel.native_reason from its template: no decode)")
    REPORT.emit("bert", "validate_latency_max", round(max(validate), 1), "us", shapes=len(validate))
    first = [a + b for a, b in zip(lat, validate)]
    REPORT.emit("bert", "first_run_overhead_median", round(statistics.median(first), 1), "us", shapes=len(first),
                note="per new batch (wall): compile + validate, everything a new batch adds to its call")
    REPORT.emit("bert", "first_run_overhead_max", round(max(first), 1), "us", shapes=len(first))
    # not on the path, after all batches (its garbage would otherwise be collected inside a later
    # compile): what the first runs of each batch's new kernels decoded before the validation step of session 8
    decoded = [sum(decode_us(k) for k in ks) for ks in new_kernels]
    REPORT.emit("bert", "decode_latency_median", round(statistics.median(decoded), 1), "us", shapes=len(decoded),
                note="not on the path: CPU time of decode + unsupported_reason of all the batch's new "
                     "kernels, what their admission did before the validation step of session 8")
    REPORT.emit("bert", "decode_latency_max", round(max(decoded), 1), "us", shapes=len(decoded))
    before = [a + d for a, d in zip(lat, decoded)]
    REPORT.emit("bert", "first_run_overhead_before_median", round(statistics.median(before), 1), "us",
                shapes=len(before), baseline=round(statistics.median(first), 1),
                ratio=round(statistics.median(before) / statistics.median(first), 1),
                note="compile + that decode per new batch (the session-8 first call, with this compile); "
                     "baseline = first_run_overhead_median")
    if inductor:
        with torch.no_grad():
            first, steady = torch_compile_new_shapes(model, [r for r, _ in rows], args.repeat)
            emit_inductor("bert", first, steady, max(lat), rows[-1][1], len(rows))
            first, _ = torch_compile_new_shapes(model, [r for r, _ in rows], 1, dynamic=False)
            emit_inductor_static("bert", first, lat, len(rows))
            emit_first_run_ratio("bert", first, [a + b for a, b in zip(lat, validate)])


@contextlib.contextmanager
def wide_kernels_on_numpy_vm(fn, max_args=8):
    """Within: `fn`'s kernels of more than `max_args` arguments run on the numpy VM (decoded and
    interpreted at every run), the path they took when the native VM had 8 argument buffers.
    Yields how many kernels that moves."""
    moved = []
    for kg in fn.kernels:
        for key, (k, use_native) in list(kg.cache.items()):
            if use_native and len(k.input_shapes) + len(k.output_shapes) > max_args:
                kg.cache[key] = (k, False)
                moved.append((kg, key, k))
    try:
        yield len(moved)
    finally:
        for kg, key, k in moved:
            kg.cache[key] = (k, True)


def run_guards(args, target):
    """Graph-compile cost of the templates' guards: each static workload's template set built
    over its `SPACES` twice in this process, with every traced guard and with the implied ones
    removed (`implied_guards.prune`): guards kept / traced, the CPU time of the prebuild walk (the
    Python `fill` over every point) and of the native JIT (`TemplateSet.compile_native`)."""
    from vtmlir.dvm import template
    from vtmlir.dvm.template import prebuild, templates_of

    makers = {"matmul": workloads.matmul, "addmm": workloads.addmm, "layernorm": workloads.layernorm}
    for name, make in makers.items():
        row = {}
        for prune_on in (False, True):
            template.PRUNE_IMPLIED_GUARDS = prune_on
            try:
                g = make()
                c = time.process_time()
                pb = prebuild(g, *SPACES[name], target, native=False)
                walk = time.process_time() - c
                sets = list(templates_of(g).values())
                c = time.process_time()
                for ts in sets:
                    ts.compile_native()
                jit = time.process_time() - c
            finally:
                template.PRUNE_IMPLIED_GUARDS = True
            kept = sum(sum(1 for st in t.stmts if st[0] == "guard") for ts in sets for t in ts.templates)
            row[prune_on] = (kept, walk, jit, pb["templates"], all(ts.native is not None for ts in sets))
        (k0, w0, j0, n, nat0), (k1, w1, j1, _, nat1) = row[False], row[True]
        REPORT.emit(name, "template_guards", k1, "count", baseline=k0, ratio=round(k1 / k0, 3), templates=n,
                    note="guards of all templates after implied-guard removal; baseline = as traced")
        REPORT.emit(name, "template_jit_cpu", round(j1, 2), "s", baseline=round(j0, 2), ratio=round(j1 / j0, 3),
                    native=nat0 and nat1, note="compile_native of every template set (JIT + its check), "
                                               "pruned vs every traced guard, same process")
        REPORT.emit(name, "template_walk_cpu", round(w1, 2), "s", baseline=round(w0, 2), ratio=round(w1 / w0, 3),
                    note="prebuild's walk of the shape space with the Python fill")


def bert_kernels(fn):
    """(kernel, runs natively) of every kernel a `DvmFunction` has admitted (fused groups and the
    batch_matmul glue's slice kernels)."""
    return [e for k in fn.kernels for e in k.cache.values()] + list(fn.__dict__.get("_bmm_kernels", {}).values())


def inductor_available() -> tuple[bool, str]:
    import shutil

    if shutil.which("gcc") is None and shutil.which("cc") is None:
        return False, "no C compiler on PATH: TorchInductor's CPU backend cannot build kernels"
    return True, ""


def run_compile_dynamic(args) -> None:
    """`vtmlir.compile(model, x, dynamic_shapes=...)` (issue 23): an MLP (Linear 32->64, ReLU,
    Linear 64->16) with batch in [1, 64] (prebuilt at compile time), one thread. Per never-seen
    batch, in a random order: the first call's CPU time, then the median of `--repeat` further
    calls (steady state: replayed, one native call); `record_call_cpu` the second call, which
    records the replay; `first_call_overhead` = first - steady of that batch, and
    `new_shape_compile` the part of it DVM counts as compiling (`DvmFunction.compile_seconds`:
    every kernel's template fill). `steady_vs_static` compares each batch's steady time with the
    static compile of that batch (`vtmlir.compile` without dynamic_shapes), measured interleaved."""
    from torch.export import Dim

    import vtmlir

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)).eval()
    case = "compile_dynamic/mlp"
    t = time.perf_counter()
    dyn = vtmlir.compile(model, torch.randn(4, 32), dynamic_shapes={"input": {0: Dim("batch", min=1, max=64)}},
                         threads=1)
    REPORT.emit(case, "compile_time", round(time.perf_counter() - t, 3), "s", prebuilt=dyn.prebuilt["points"])
    batches = [b for b in range(1, 65) if b != 4]
    random = np.random.default_rng(1)
    random.shuffle(batches)
    inputs = {b: torch.randn(b, 32) for b in batches}
    gc.collect()
    gc.freeze()  # as for the other workloads: a collection of the whole heap is not DVM's cost
    first, second, steady, compiled = {}, {}, {}, {}
    for b in batches:
        before = dyn.function.compile_seconds
        p = time.process_time()
        dyn(inputs[b])
        first[b] = (time.process_time() - p) * 1e6
        compiled[b] = (dyn.function.compile_seconds - before) * 1e6
        p = time.process_time()
        dyn(inputs[b])  # the second call records the shape's replay (`dvm.replay`)
        second[b] = (time.process_time() - p) * 1e6
        runs = []
        for _ in range(max(args.repeat, 5)):
            p = time.process_time()
            dyn(inputs[b])
            runs.append((time.process_time() - p) * 1e6)
        steady[b] = statistics.median(runs)
    over = [first[b] - steady[b] for b in batches]
    for name, values in (("first_call_cpu", list(first.values())), ("first_call_overhead", over),
                         ("new_shape_compile", list(compiled.values())), ("record_call_cpu", list(second.values())),
                         ("steady_cpu", list(steady.values()))):
        REPORT.emit(case, f"{name}_median", round(statistics.median(values), 1), "us")
        REPORT.emit(case, f"{name}_p90", round(statistics.quantiles(values, n=10)[-1], 1), "us")
        REPORT.emit(case, f"{name}_max", round(max(values), 1), "us")
    ratios = []
    for b in batches[:args.run_shapes]:
        static = vtmlir.compile(model, inputs[b], threads=1)
        x = inputs[b]
        samples = {"dvm": [], "static": []}
        for _ in range(21):
            for name, fn in (("dvm", dyn), ("static", static)):
                p = time.process_time()
                for _ in range(50):
                    fn(x)
                samples[name].append((time.process_time() - p) / 50 * 1e6)
        d, s_ = statistics.median(samples["dvm"]), statistics.median(samples["static"])
        ratios.append(d / s_)
        REPORT.emit(case, "steady_vs_static", round(d / s_, 2), "x", batch=b, dvm_us=round(d, 2),
                    static_us=round(s_, 2))
    REPORT.emit(case, "steady_vs_static_median", round(statistics.median(ratios), 2), "x")
    gc.unfreeze()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shapes", type=int, default=1000, help="random new shapes per workload (compile latency)")
    ap.add_argument("--warmup", type=int, default=0,
                    help="static workloads: random shapes compiled before measuring instead of `prebuild` over "
                         "the symbol ranges (0, the default: prebuild); if-else-add: its warm-up shapes (default 300)")
    ap.add_argument("--torch-shapes", type=int, default=4, help="shapes for torch.compile(dynamic=False)")
    ap.add_argument("--run-shapes", type=int, default=3, help="shapes per workload timed at run time")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--cold-shapes", type=int, default=30,
                    help="static workloads: new shapes compiled with every cache flushed before (0: skip)")
    ap.add_argument("--cores", type=int, default=None, help="Alg. 2 cores (default: CPU count)")
    ap.add_argument("--no-inductor", action="store_true", help="skip the torch.compile baseline")
    ap.add_argument("--only", default="",
                    help="comma-separated workloads: static,if_else_add,bert (default: these three), guards, "
                         "compile_dynamic")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    target = Target() if args.cores is None else Target(cores=args.cores)
    torch.set_num_threads(target.cores)
    inductor, why = (False, "disabled by --no-inductor") if args.no_inductor else inductor_available()
    if inductor:
        # a fresh, private cache: a "new shape" must really recompile, not hit the FX graph / code
        # caches an earlier run of this benchmark (same random shapes) left in /tmp
        import os
        import tempfile

        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="dvm-bench-inductor-")
        import torch._inductor.config as inductor_config

        inductor_config.fx_graph_cache = False
    else:
        REPORT.emit("torch.compile", "torch_compile_new_shape_max", None, "us", reason=why)

    t = time.perf_counter()
    native_vm()
    REPORT.emit("vm", "native_vm_jit", round(time.perf_counter() - t, 3), "s")
    only = set(filter(None, args.only.split(","))) or {"static", "if_else_add", "bert"}
    if "static" in only:
        run_static(args, target, rng, inductor)
    if "if_else_add" in only:
        run_if_else_add(args, target, rng, inductor)
    if "bert" in only:
        run_bert(args, target, rng, inductor)
    if "guards" in only:
        run_guards(args, target)
    if "compile_dynamic" in only:
        run_compile_dynamic(args)


if __name__ == "__main__":
    main()
