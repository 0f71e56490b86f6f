"""Foundation benchmark: compile time and CPU latency of every zoo model vs torch eager.

Prints JSON lines (docs/design.md §7). Latency is the median of `--repeat` timed calls after warm-up, for
vtmlir's compiled function and for the eager module, measured in this one process; the ratio is
vtmlir / eager (below 1 means vtmlir is faster).
"""

from __future__ import annotations

import argparse
import time

import torch

import vtmlir
from jsonl import Reporter, median_time
from vtmlir.models import ZOO

SUITE = "foundation"


emit = Reporter(SUITE).emit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default=",".join(ZOO), help="comma-separated zoo names")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)  # vtmlir's kernels are single-threaded for now: compare like with like
    # One untimed compile first: the first torch.export in a process pays seconds of one-off setup.
    warm_model, warm_inputs = ZOO["mlp"].build(batch=1, seed=0)
    vtmlir.compile(warm_model, *warm_inputs)
    for name in args.models.split(","):
        model, inputs = ZOO[name].build(batch=1, seed=0)
        start = time.perf_counter()
        compiled = vtmlir.compile(model, *inputs)
        compile_s = time.perf_counter() - start
        emit(name, "compile_time", round(compile_s, 3), "s")
        with torch.no_grad():
            eager_s = median_time(lambda: model(*inputs), args.repeat)
        vt_s = median_time(lambda: compiled(*inputs), args.repeat)
        emit(name, "cpu_latency", round(vt_s * 1e3, 4), "ms")
        emit(name, "cpu_latency_eager", round(eager_s * 1e3, 4), "ms")
        emit(name, "cpu_latency_ratio", round(vt_s / eager_s, 3), "x", baseline="torch_eager")


if __name__ == "__main__":
    main()
