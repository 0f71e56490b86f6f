"""DVM benchmark (Fang et al., DVM, §6 Table 2 workloads at CPU scale): per-new-shape compile latency
(tiling + encoding, `vtmlir.dvm.compile_graph`) over random shapes, and the run time of the VM
compiled once through MLIR (`vtmlir.dvm.native`) against torch eager on the same shapes.

Prints JSON lines (DESIGN.md §7): for each workload `compile_latency_median`/`_max` (µs, every shape
new), `native_vm_jit` (the one-off JIT of the VM, s), and for a few shapes `run_time` (best-of-R µs of
the native VM, baseline: torch eager's best-of-R µs, same thread count) and `compile_run_ratio` (compile latency / native run).
torch.compile comparisons and the if-else-add / BERT workloads are not measured here yet.

    python benchmarks/dvm.py [--shapes N] [--repeat R] [--cores C]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from vtmlir.dvm import Graph, Target, compile_graph
from vtmlir.dvm.native import native_vm

SUITE = "dvm"


def emit(case, metric, value, unit, baseline=None, **extra):
    print(json.dumps({"suite": SUITE, "case": case, "metric": metric, "value": value, "unit": unit,
                      "baseline": baseline, **extra}), flush=True)


def best_us(fn, repeat):
    """Best of `repeat` timed calls after a warm-up (the machine may be shared: the minimum is the
    least disturbed sample, for the VM and for eager alike)."""
    fn()
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return min(samples) * 1e6


def layernorm():
    g = Graph("layernorm")
    x, w, b = g.input(3), g.input(1), g.input(1)
    mu = g.mean(x, -1)
    xc = x - mu
    g.output(xc / g.sqrt(g.mean(xc * xc, -1) + 1e-5) * w + b)
    return g


def softmax():
    g = Graph("softmax")
    x = g.input(2)
    e = g.exp(x - g.max(x, -1))
    g.output(e / g.sum(e, -1))
    return g


def add():
    g = Graph("add")
    g.output(g.input(2) + g.input(2))
    return g


def addmm():
    g = Graph("addmm")
    bias, a, b = g.input(1), g.input(2), g.input(2)
    g.output(g.matmul(a, b) * 0.5 + bias * 2.0)
    return g


# (name, graph, random input shapes, torch eager reference)
WORKLOADS = [
    ("add[m,1024]", add(), lambda r: [(m := int(r.integers(1, 8193)), 1024), (m, 1024)],
     lambda a, b: a + b),
    ("layernorm[b,512,h]", layernorm(),
     lambda r: [(int(r.integers(1, 9)), 512, h := int(r.choice([256, 512, 768, 1024]))), (h,), (h,)],
     lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, 1e-5)),
    ("softmax[m,n]", softmax(), lambda r: [(int(r.integers(1, 4097)), int(r.integers(1, 2049)))],
     lambda x: torch.softmax(x, -1)),
    ("addmm[m,k=n=256]", addmm(), lambda r: [(256,), (m := int(r.integers(1, 1025)), 256), (256, 256)],
     lambda c, a, b: torch.addmm(c, a, b, beta=2.0, alpha=0.5)),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shapes", type=int, default=200, help="random shapes per workload (compile latency)")
    ap.add_argument("--run-shapes", type=int, default=3, help="shapes per workload timed at run time")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--cores", type=int, default=None, help="Alg. 2 cores (default: CPU count)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    target = Target() if args.cores is None else Target(cores=args.cores)
    cores = target.cores

    t = time.perf_counter()
    native_vm()
    emit("vm", "native_vm_jit", round(time.perf_counter() - t, 3), "s")

    torch.set_num_threads(cores)
    for name, graph, shapes_of, eager in WORKLOADS:
        lat = []
        for _ in range(args.shapes):
            shapes = shapes_of(rng)
            t = time.perf_counter()
            compile_graph(graph, shapes, target)
            lat.append((time.perf_counter() - t) * 1e6)
        emit(name, "compile_latency_median", round(statistics.median(lat), 1), "us", shapes=args.shapes)
        emit(name, "compile_latency_max", round(max(lat), 1), "us", shapes=args.shapes)
        for _ in range(args.run_shapes):
            shapes = shapes_of(rng)
            k = compile_graph(graph, shapes, target)
            arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
            tensors = [torch.from_numpy(a) for a in arrays]
            (out,) = k(*arrays, native=True, cores=cores)
            ref = eager(*tensors)
            err = float(np.abs(out - ref.numpy()).max())
            vm_us = best_us(lambda: k(*arrays, native=True, cores=cores), args.repeat)
            eager_us = best_us(lambda: eager(*tensors), args.repeat)
            t = time.perf_counter()
            compile_graph(graph, shapes, target)
            comp_us = (time.perf_counter() - t) * 1e6
            case = f"{name}@{'x'.join(map(str, shapes[0 if name != 'addmm[m,k=n=256]' else 1]))}"
            emit(case, "run_time", round(vm_us, 1), "us", baseline=round(eager_us, 1),
                 ratio=round(vm_us / eager_us, 2), max_abs_err=err, tiles=k.program.tile_count)
            emit(case, "compile_run_ratio", round(comp_us / vm_us, 3), "ratio")


if __name__ == "__main__":
    main()
