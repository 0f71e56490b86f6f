"""Models users bring (issue 19): compile time and CPU run time of vtmlir against torch eager and
torch.compile (inductor), on the transformers and torchvision models of `vtmlir.models.library`.

Prints JSON lines (docs/design.md §7). Per model:
- `compile_time` for vtmlir (`vtmlir.compile`) and torch.compile (its first call, which compiles),
  wall and process CPU time (`unit` "s", `clock` "wall"/"cpu");
- `run_time` of vtmlir, eager and torch.compile: the median of `--repeat` calls after one warm-up,
  wall and CPU (`unit` "ms"); ratios `run_time_ratio` of vtmlir against eager and torch.compile
  (below 1: vtmlir is faster);
- `max_abs_err`/`max_rel_err` of vtmlir's result against eager's (over every output tensor).
Inputs are copied before every call, outside the timed region (a transformers decode step updates
the cache it is given in place). One thread everywhere (vtmlir's kernels are single-threaded).
A torch.compile failure is a record with value null and the reason.

    python benchmarks/models.py [--models gpt2,vit] [--all] [--repeat 10] [--no-torch-compile]

`--all` adds the full-size torchvision networks (`slow` in the library; densenet121 and swin_t take
minutes to compile on 2 cores).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from torch.utils import _pytree as pytree

import vtmlir
from jsonl import Reporter
from vtmlir.models.library import LIBRARY_MODELS

emit = Reporter("models").emit


def clocked(fn):
    """(result, wall seconds, process CPU seconds) of one call of `fn`."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def median_times(call, inputs, repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `call(*args, **kwargs)` over `repeat` calls after a warm-up,
    each on a fresh copy of `inputs = (args, kwargs)` made outside the timing."""
    call(*copy.deepcopy(inputs[0]), **copy.deepcopy(inputs[1]))
    walls, cpus = [], []
    for _ in range(repeat):
        args, kwargs = copy.deepcopy(inputs)
        _, wall, cpu = clocked(lambda: call(*args, **kwargs))
        walls.append(wall)
        cpus.append(cpu)
    return statistics.median(walls), statistics.median(cpus)


def errors(got, want) -> tuple[float, float]:
    worst_abs = worst_rel = 0.0
    for g, w in zip(pytree.tree_leaves(got), pytree.tree_leaves(want)):
        if isinstance(w, torch.Tensor) and w.is_floating_point():
            diff = (g - w).abs().max().item()
            worst_abs = max(worst_abs, diff)
            worst_rel = max(worst_rel, diff / max(w.abs().max().item(), 1e-12))
    return worst_abs, worst_rel


def bench(name: str, repeat: int, with_torch_compile: bool) -> None:
    model, args, kwargs = LIBRARY_MODELS[name].build(batch=1, seed=0)
    inputs = (args, kwargs)
    compiled, wall, cpu = clocked(lambda: vtmlir.compile(model, *args, kwargs=copy.deepcopy(kwargs)))
    emit(name, "compile_time", round(wall, 3), "s", clock="wall", compiler="vtmlir")
    emit(name, "compile_time", round(cpu, 3), "s", clock="cpu", compiler="vtmlir")
    with torch.no_grad():
        want = model(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    abs_err, rel_err = errors(compiled(*copy.deepcopy(args), **copy.deepcopy(kwargs)), want)
    emit(name, "max_abs_err", abs_err, "", baseline="torch_eager")
    emit(name, "max_rel_err", rel_err, "", baseline="torch_eager")

    times = {}
    with torch.no_grad():
        times["vtmlir"] = median_times(compiled, inputs, repeat)
        times["torch_eager"] = median_times(model, inputs, repeat)
        if with_torch_compile:
            try:
                optimized = torch.compile(model)
                _, wall, cpu = clocked(lambda: optimized(*copy.deepcopy(args), **copy.deepcopy(kwargs)))
                emit(name, "compile_time", round(wall, 3), "s", clock="wall", compiler="torch_compile")
                emit(name, "compile_time", round(cpu, 3), "s", clock="cpu", compiler="torch_compile")
                times["torch_compile"] = median_times(optimized, inputs, repeat)
            except Exception as err:  # inductor cannot compile everything; record why
                reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
                emit(name, "run_time", None, "ms", clock="wall", compiler="torch_compile", reason=reason)
    for who, (wall, cpu) in times.items():
        emit(name, "run_time", round(wall * 1e3, 4), "ms", clock="wall", compiler=who)
        emit(name, "run_time", round(cpu * 1e3, 4), "ms", clock="cpu", compiler=who)
    for baseline in ("torch_eager", "torch_compile"):
        if baseline in times:
            for i, clock in enumerate(("wall", "cpu")):
                emit(name, "run_time_ratio", round(times["vtmlir"][i] / times[baseline][i], 3), "x",
                     baseline=baseline, clock=clock)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=None, help="comma-separated names of vtmlir.models.library")
    parser.add_argument("--all", action="store_true", help="also the full-size torchvision networks")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--no-torch-compile", action="store_true")
    options = parser.parse_args()
    torch.set_num_threads(1)
    names = options.models.split(",") if options.models else \
        [n for n, spec in LIBRARY_MODELS.items() if options.all or not spec.slow]
    unknown = [n for n in names if n not in LIBRARY_MODELS]
    if unknown:
        parser.error(f"unknown models {', '.join(unknown)}; available: {', '.join(LIBRARY_MODELS)}")
    for name in names:
        bench(name, options.repeat, not options.no_torch_compile)


if __name__ == "__main__":
    main()
