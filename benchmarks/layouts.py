"""Layout conversions and CPU latency per network (VTensor §6.5, Fig. 13): naive vs LHO vs EWO.

For each whole network of the layout zoo (`vtmlir.models.LAYOUT_ZOO`, or a `vtmlir.models.ZOO` block)
and each kernel-convention target, imports the model once and prints JSON lines (benchmarks/README.md):

- `conversions_naive`, `bytes_naive`: run-time `layout.convert`s after `layout-resolve` (Fig. 8, one
  per use — the paper's "before LOO" count);
- `conversions_lho`, `bytes_lho`: after `layout-resolve, layout-hoist` (LHO, §5.2: a branch node's
  identical conversions shared right after the producer, conversion chains folded);
- `conversions_ewo`, `bytes_ewo`: after `layout-select-ilp` (EWO as an ILP with shared conversions,
  bytes as cost — vtmlir's default, which subsumes LHO);
- `conversions_ewo_count`: `layout-select-ilp{cost=count share=false}`, the paper's own objective;
- `ilp_variables` (+ `integer`), `ilp_constraints`, `ilp_solve_seconds` (of the default
  `layout-select-ilp`), `constant_relayouts` (operands laid out at compile time, free);
- with `--latency`: `latency_layouts` — the CPU executable built with `layout-select-ilp{target=T},
  layout-materialize` over the one without layout passes (all NCHW), both compiled and timed in this
  process (median of `--repeat` calls); the value is the ratio (< 1: the layouts are faster), and
  `bitwise_identical` says whether the two outputs are `torch.equal` (they must be);
- `conversions_free_views` (baseline: EWO's conversions): how many of EWO's run-time conversions
  `layout-materialize` (default `views=auto`) turns into free VTC views (folded into the consumers'
  indexing maps, or a reshape when fully contiguous) instead of copies;
- with `--views`: `latency_views_auto` / `latency_views_always` — the chosen layouts materialised
  with `views=auto` / `views=always` over `views=never` (every conversion a copy), the three
  executables compiled in this process and timed interleaved (`--repeat` rounds, one call of each
  per round, medians of the process CPU time; `wall_ratio` the same with wall time);
  `bitwise_identical_views` says all three outputs are `torch.equal`;
- `import_seconds` (torch → linalg) for context.

    python benchmarks/layouts.py [--models resnet152,vgg19] [--targets paper-mkl,cpu,cpu-nhwc]
    python benchmarks/layouts.py --models resnet_bottleneck_block,mobilenet_v2 --targets cpu-nhwc --latency
    python benchmarks/layouts.py --models mobilenet_v2,inception --targets cpu --views --repeat 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from jsonl import Reporter, median_time  # noqa: E402

import vtmlir  # noqa: E402
from vtmlir.frontend import as_module  # noqa: E402
from vtmlir.models import LAYOUT_ZOO, get  # noqa: E402
from vtmlir.passes import get_pass  # noqa: E402

REPORT = Reporter("layouts")


def _run(module, *names_and_options):
    """Run passes in order on `module`; the totals of the last one's report."""
    report = None
    for name, options in names_and_options:
        p = get_pass(name)(**options)
        report = p.run(module.operation)
    return report.totals()


def conversions(model_name: str, text: str, target: str) -> None:
    case = f"{model_name}/{target}"
    module = as_module(text)
    naive = _run(module, ("layout-resolve", {"target": target}))
    lho = _run(module, ("layout-resolve", {"target": target}), ("layout-hoist", {}))
    count = _run(module, ("layout-select-ilp", {"target": target, "cost": "count", "share": False}))
    ewo = _run(module, ("layout-select-ilp", {"target": target}))
    assert module.operation.verify()
    REPORT.emit(case, "conversions_naive", naive["conversions"], "count")
    REPORT.emit(case, "bytes_naive", naive["bytes"], "bytes")
    REPORT.emit(case, "conversions_lho", lho["conversions"], "count", naive["conversions"])
    REPORT.emit(case, "bytes_lho", lho["bytes"], "bytes", naive["bytes"])
    REPORT.emit(case, "conversions_ewo_count", count["conversions"], "count", naive["conversions"])
    REPORT.emit(case, "conversions_ewo", ewo["conversions"], "count", naive["conversions"])
    REPORT.emit(case, "bytes_ewo", ewo["bytes"], "bytes", naive["bytes"])
    REPORT.emit(case, "constant_relayouts", ewo["constant_relayouts"], "count")
    REPORT.emit(case, "ilp_variables", ewo["ilp_variables"], "count", integer=ewo["ilp_integer_variables"])
    REPORT.emit(case, "ilp_constraints", ewo["ilp_constraints"], "count")
    REPORT.emit(case, "ilp_solve_seconds", round(ewo["ilp_solve_seconds"], 4), "s")
    materialized = _run(module, ("layout-materialize", {}))
    assert module.operation.verify()
    REPORT.emit(case, "conversions_free_views", materialized["views"], "count", ewo["conversions"],
                copies=materialized["copies"], view_bytes_saved=materialized["view_bytes_saved"])


def latency(model_name: str, text: str, inputs, target: str, repeat: int) -> None:
    """Chosen layouts vs all-NCHW on the CPU, same process (ratio), and the bitwise check."""
    import torch

    case = f"{model_name}/{target}"
    t0 = time.perf_counter()
    baseline = vtmlir.compile(as_module(text), opt_level=0)
    t1 = time.perf_counter()
    laid_out = vtmlir.compile(as_module(text), pipeline=f"layout-select-ilp{{target={target}}}, layout-materialize")
    t2 = time.perf_counter()
    same = bool(torch.equal(baseline(*inputs), laid_out(*inputs)))
    base_s = median_time(lambda: baseline(*inputs), repeat)
    lay_s = median_time(lambda: laid_out(*inputs), repeat)
    REPORT.emit(case, "bitwise_identical", same, "bool")
    REPORT.emit(case, "latency_layouts", round(lay_s / base_s, 4), "ratio", "all-NCHW",
                seconds=round(lay_s, 6), baseline_seconds=round(base_s, 6), repeat=repeat)
    REPORT.emit(case, "compile_seconds", round(t2 - t1, 2), "s", round(t1 - t0, 2))


def views_latency(model_name: str, text: str, inputs, target: str, repeat: int) -> None:
    """`layout-materialize{views=auto|always}` over `views=never`, same process, interleaved."""
    import torch

    case = f"{model_name}/{target}"
    exes = {mode: vtmlir.compile(as_module(text), pipeline=f"layout-select-ilp{{target={target}}}, "
                                                           f"layout-materialize{{views={mode}}}")
            for mode in ("never", "auto", "always")}
    outs = [exe(*inputs) for exe in exes.values()]
    same = all(bool(torch.equal(outs[0], o)) for o in outs[1:])
    # CPU time of the (single-threaded) executables: on this shared machine wall time also counts
    # the time other jobs hold the core, which is larger than the differences measured here.
    cpu = {mode: [] for mode in exes}
    wall = {mode: [] for mode in exes}
    for _ in range(repeat):
        for mode, exe in exes.items():
            t0, c0 = time.perf_counter(), time.process_time()
            exe(*inputs)
            cpu[mode].append(time.process_time() - c0)
            wall[mode].append(time.perf_counter() - t0)
    med = {mode: statistics.median(v) for mode, v in cpu.items()}
    med_wall = {mode: statistics.median(v) for mode, v in wall.items()}
    REPORT.emit(case, "bitwise_identical_views", same, "bool")
    for mode in ("auto", "always"):
        REPORT.emit(case, f"latency_views_{mode}", round(med[mode] / med["never"], 4), "ratio", "views=never",
                    cpu_seconds=round(med[mode], 6), baseline_cpu_seconds=round(med["never"], 6),
                    wall_ratio=round(med_wall[mode] / med_wall["never"], 4), repeat=repeat)


def measure(model_name: str, targets: list[str], *, timed: bool, repeat: int, views: bool = False) -> None:
    model, inputs = get(model_name).build(batch=1, seed=0)
    t0 = time.perf_counter()
    text = str(vtmlir.import_torch(model, *inputs))
    REPORT.emit(model_name, "import_seconds", round(time.perf_counter() - t0, 3), "s")
    for target in targets:
        conversions(model_name, text, target)
        if timed:
            latency(model_name, text, inputs, target, repeat)
        if views:
            views_latency(model_name, text, inputs, target, repeat)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(LAYOUT_ZOO))
    ap.add_argument("--targets", default="paper-mkl,cpu,cpu-nhwc")
    ap.add_argument("--latency", action="store_true",
                    help="also compile and time each model with and without the layout passes (slow)")
    ap.add_argument("--views", action="store_true",
                    help="also time layout-materialize{views=auto|always} against views=never (slow)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    for name in (m for m in args.models.split(",") if m):
        measure(name, targets, timed=args.latency, repeat=args.repeat, views=args.views)


if __name__ == "__main__":
    main()
