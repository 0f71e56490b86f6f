"""One compiler (issue 23): `vtmlir.compile` at opt level 0 vs 2 against torch eager, torch.compile
and IREE, per seed workload, time and peak memory in one process.

    python benchmarks/composed.py [--models a,b] [--batches 1,16] [--repeat 10] [--threads 1]
                                  [--no-iree] [--no-inductor]

Workloads: VTC's §7 workloads (`VTC_ZOO`, benchmark size), the VTensor networks (`LAYOUT_ZOO`:
resnet50, mobilenet_v2 by default), TeMCO's models decomposed by `temco-decompose` (the graph
compiled is the decomposed one; eager runs the original module), a Llama decoder layer with
4-bit weights (`vtmlir.quantize`, Tilus), and the zoo's small models.

Metrics per case (JSON lines, benchmarks/jsonl.py): `time_wall` / `time_cpu` (ms, median of
`--repeat` calls, contenders round robin) per contender `opt0`, `opt2`, `eager`, `inductor`,
`iree`; `ratio_wall` (x, baseline `opt0` and `eager`); `peak_internal_bytes` and `peak_total_bytes`
of the vtmlir builds (the counting allocator, `track_memory`; total = internal + weights + inputs +
outputs) and `eager`'s (PyTorch's allocator peak plus weights and inputs); `max_abs_diff` of opt 2
against opt 0; `steps` (the systems opt level 2 ran) and `compile_time` per level.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import vtmlir  # noqa: E402
from codegen import Contender, eager_contender, inductor_contender, iree_contender, measure, _timed, _FAILURES  # noqa: E402
from jsonl import Reporter, torch_peak_bytes  # noqa: E402
from vtmlir import models  # noqa: E402

emit = Reporter("composed").emit

DEFAULT_MODELS = ("vtc_llama3_decode", "vtc_gemma2_decode", "vtc_yolo_c3k2", "vtc_shufflenet_unit",
                  "vtc_efficientvit_block", "resnet50", "mobilenet_v2", "temco_resnet18", "temco_unet_small",
                  "llama_q4", "resnet_bottleneck_block", "transformer_block")


def workload(name: str, batch: int):
    """(module for eager, what vtmlir compiles, inputs)."""
    if name == "llama_q4":
        model, inputs = models.get("llama_decoder_layer").build(batch=batch)
        return model, vtmlir.quantize(model, "u4", group_size=32), inputs
    model, inputs = models.get(name).build(batch=batch)
    if name.startswith("temco_"):
        from vtmlir.passes import run_pipeline

        graph = vtmlir.import_torch(model, *inputs)
        run_pipeline(graph, "temco-decompose, temco-fold-weight-ops")
        return model, str(graph), inputs
    return model, model, inputs


def _flat(out):
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def _compile(subject, inputs, level, threads, **kw):
    if isinstance(subject, str):
        return vtmlir.compile(subject, opt_level=level, threads=threads, **kw)
    return vtmlir.compile(subject, *inputs, opt_level=level, threads=threads, **kw)


def run_case(name: str, batch: int, args) -> None:
    case = f"{name}/b{batch}"
    model, subject, inputs = workload(name, batch)
    torch.set_num_threads(args.threads)
    _FAILURES.clear()
    contenders, outputs = [eager_contender(model, inputs)], {}
    for level in (0, 2):
        compiled, seconds = _timed(lambda: _compile(subject, inputs, level, args.threads))
        emit(case, "compile_time", round(seconds[0], 3), "s", contender=f"opt{level}")
        if level == 2:
            opt = compiled.report().optimization
            emit(case, "steps", [s.step.system for s in opt.steps], "", contender="opt2")
        outputs[level] = [t.detach().clone() for t in _flat(compiled(*inputs))]
        contenders.append(Contender(f"opt{level}", lambda c=compiled: c(*inputs), seconds))
    diff = max((float((a.float() - b.float()).abs().max()) for a, b in zip(outputs[0], outputs[2])), default=0.0)
    emit(case, "max_abs_diff", diff, "", baseline="opt0", contender="opt2")
    if not args.no_inductor:
        contenders.append(inductor_contender(model, inputs))
    if not args.no_iree and not name == "llama_q4":
        contenders.append(iree_contender(model, inputs, args.threads))
    contenders = [c for c in contenders if c is not None]
    for contender, reason in _FAILURES:
        emit(case, "time_wall", None, "ms", contender=contender, reason=reason)
    times = measure(contenders, args.repeat, args.threads)
    for c in contenders:
        wall, cpu = times[c.name]
        emit(case, "time_wall", round(wall * 1e3, 4), "ms", contender=c.name)
        emit(case, "time_cpu", round(cpu * 1e3, 4), "ms", contender=c.name)
        for base in ("opt0", "eager"):
            if c.name != base:
                emit(case, "ratio_wall", round(wall / times[base][0], 3), "x", baseline=base, contender=c.name)
    # Peak memory: builds with the counting allocator (LLVM -O0: allocations do not depend on it).
    for level in (0, 2):
        tracked = _compile(subject, inputs, level, args.threads, track_memory=True, llvm_opt_level=0)
        tracked(*inputs)
        stats = tracked.memory_stats()
        emit(case, "peak_internal_bytes", stats.peak_internal_bytes, "B", contender=f"opt{level}")
        emit(case, "peak_total_bytes", stats.peak_bytes + stats.weight_bytes, "B", contender=f"opt{level}")
    weights = sum(p.numel() * p.element_size() for p in model.parameters()) + \
        sum(b.numel() * b.element_size() for b in model.buffers())
    with torch.no_grad():
        eager_peak = torch_peak_bytes(lambda: model(*inputs))
    emit(case, "peak_total_bytes", eager_peak + weights + sum(x.numel() * x.element_size() for x in inputs), "B",
         contender="eager")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--batches", default="1")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-iree", action="store_true")
    ap.add_argument("--no-inductor", action="store_true")
    args = ap.parse_args(argv)
    for name in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            try:
                run_case(name, batch, args)
            except Exception as err:  # noqa: BLE001 - one failing workload is a null line, not the end
                emit(f"{name}/b{batch}", "error", None, "", reason=f"{type(err).__name__}: {str(err)[:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
