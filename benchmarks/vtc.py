"""VTC §7 workloads: data movement, memory and latency with and without `vt-eliminate-data-movement`.

For every model of `vtmlir.models.VTC_ZOO` (Llama 3 / Gemma 2 decode at context 4096, YOLOv11 C3K2,
ShuffleNetV2 units, EfficientViT block; VTC Table 1 at CPU-feasible sizes) and batch 1 and 16, prints
JSON lines (benchmarks/README.md), case = `<model>/b<batch>`:

- `data_movement_ops`, `bytes_moved`: vt-stats at graph level, after the pass (baseline: the
  imported graph). Reshapes and `vt.view`s are zero-copy and not counted.
- `data_movement_kernels`, `kernels`: linalg loop nests at kernel level (the `kernels` stage of
  `vtmlir.compile`: generalized, fused, views lowered, bufferized) that only move data (vt-stats
  classification: copies, permutation/broadcast generics, ...), and all of them; baseline: the
  unoptimised pipeline. Views that `vt-lower-views` has to gather come back here.
- `frame2_data_movement_kernels` (decode layers only): data-movement kernels run between each
  layer's first q/k/v projection kernel and its probs·V kernel (kernel level, summed over layers;
  `kernels` lists them). VTC Fig. 2 frame 2 / §7.5: the target is 0.
- `peak_internal_bytes`: the most bytes the compiled call has allocated at once (intermediates;
  `compile(..., track_memory=True)`), baseline unoptimised; `peak_total_bytes` adds weights, inputs
  and outputs (what Table 2's "peak GPU memory" counts); `paper_saving` gives Table 2's saving.
- `peak_total_bytes_vs_torch_eager`: the same peak total with the pass against PyTorch eager's
  (Table 2 compares VTC with PyTorch): weights + inputs + the most bytes PyTorch's CPU allocator
  held during the forward (its profiler's memory events; `jsonl.torch_peak_bytes`);
  `unoptimised_vtmlir` repeats the unoptimised pipeline's total.
- decode layers also: `peak_total_bytes_donated_caches`, the same with the KV caches donated
  (`compile(..., donate=...)`: updated in place and returned in their own memory, not an input
  plus an output copy; both pipelines donate; `non_donated` repeats `peak_total_bytes`), and
  `bitwise_identical_donated_caches` (donated outputs against the non-donated ones).
- `pass_time` (the pass alone), `compile_time` (whole `vtmlir.compile`, baseline unoptimised).
- `cpu_latency`: median of `--repeat` calls, baseline the unoptimised vtmlir pipeline; also
  `cpu_latency_ratio` against torch eager and torch.compile (inductor, CPU), all in this process
  with one torch thread (vtmlir's loops are single-threaded). If torch.compile fails the line
  carries value null and the reason.
- `bitwise_identical`: optimised and unoptimised outputs compared with torch.equal (must be true),
  both compiled with `codegen.EXACT_SCHEDULES`: the default schedules may sum in another order where
  the pass changes a kernel's operands (the decode attention's keys read in place per panel rather
  than copied: a few ulp, `max_abs_diff` gives it), as docs/pipeline.md "Semantics" documents.

    python benchmarks/vtc.py [--models vtc_llama3_decode,...] [--batches 1,16] [--repeat 5]
                             [--no-torch-compile] [--cost-model analytic|measured]

(about 20 minutes for everything on a 2-core machine, most of it torch.compile and the batch-16
runs; `--cost-model measured` adds the kernel profiling of vtc/measured_cost.py to `pass_time`.)
"""

from __future__ import annotations

import argparse
import time

import torch
from torch_mlir import ir

import vtmlir
from jsonl import Reporter, median_time, torch_peak_bytes
from vtmlir.codegen import EXACT_SCHEDULES
from vtmlir.frontend import as_module
from vtmlir.models import VTC_ZOO, get
from vtmlir.passes.pipeline import run_pipeline
from vtmlir.passes.vt_stats import DATA_MOVEMENT, classify, collect_stats

SUITE = "vtc"
PASS = "vt-eliminate-data-movement"
# VTC Table 2 (A100, peak GPU memory): savings per model and batch size.
PAPER_SAVING = {
    "vtc_llama3_decode": {1: 0.127, 16: 0.600},
    "vtc_gemma2_decode": {1: 0.093, 16: 0.480},
    "vtc_efficientvit_block": {1: 0.057, 16: 0.030},
    "vtc_yolo_c3k2": {1: 0.185, 16: 0.148},
    "vtc_shufflenet_unit": {1: 0.009, 16: 0.026},
}
DECODE_LAYERS = {"vtc_llama3_decode", "vtc_gemma2_decode"}

emit = Reporter(SUITE).emit


def _outputs(out) -> list:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _linalg_ops(module):
    from vtmlir.ir_utils import walk_ops

    return [op for op in walk_ops(module) if op.name.startswith("linalg.")
            and op.name not in ("linalg.yield", "linalg.index")]


def kernel_counts(kernels_ir: str) -> tuple[int, int]:
    """(all linalg loop nests, data-movement ones) in the `kernels` stage of a compiled model."""
    module = as_module(kernels_ir)   # kept alive while its ops are inspected
    ops = _linalg_ops(module)
    moving = 0
    for op in ops:
        kind = classify(op)
        if kind is not None and kind[0] == DATA_MOVEMENT:
            moving += 1
    return len(ops), moving


def _is_contraction(op) -> bool:
    """A generalized matmul: a reduction generic with at least two inputs whose body multiplies and
    adds (elementwise producers fused into it at kernel level keep it one)."""
    if op.name != "linalg.generic" or "reduction" not in str(op.attributes["iterator_types"]):
        return False
    body = [o.name for o in op.regions[0].blocks[0].operations]
    return len(op.operands) >= 3 and "arith.mulf" in body and "arith.addf" in body


def _body_ops(module):
    from vtmlir.ir_utils import walk_ops

    func = next(f for f in walk_ops(module, "func.func") if len(f.regions[0].blocks))
    return [op.operation for op in func.regions[0].blocks[0].operations]


def attention_layers(graph_ir: str) -> list[tuple[int, int]]:
    """Per decode layer, (ordinal of its first q/k/v projection, ordinal of its probs·V) among the
    contractions in program order. At graph level (named ops generalized, nothing fused) attention
    contractions (scores, probs·V) read two activations (values computed from the function's
    arguments), in pairs; a layer's q/k/v projections are the contractions that reach its scores or
    probs·V through non-contraction ops. The pass and fusion keep every contraction and their order."""
    module = as_module(graph_ir)
    run_pipeline(module, "func.func(linalg-generalize-named-ops)")
    ops = _body_ops(module)
    index = {op: i for i, op in enumerate(ops)}   # nothing is edited: Operation hashes are stable
    activation = set()                            # ops whose value depends on a function argument
    for i, op in enumerate(ops):
        for v in op.operands:
            j = _defining_index(v, index)
            if (j is None and isinstance(v.owner, ir.Block)) or j in activation:
                activation.add(i)
                break
    contractions = [i for i, op in enumerate(ops) if _is_contraction(op)]
    ordinal = {i: k for k, i in enumerate(contractions)}
    attention = [i for i in contractions
                 if all(j is None or j in activation
                        for j in (_defining_index(v, index) for v in ops[i].operands[:2]))]

    def feeding_projections(start: int) -> set[int]:
        """Contractions reached backwards from `start` without passing through one."""
        found, stack, seen = set(), [start], {start}
        while stack:
            i = stack.pop()
            for j in (_defining_index(v, index) for v in ops[i].operands):
                if j is None or j in seen:
                    continue
                seen.add(j)
                if j in ordinal:
                    found.add(j)
                else:
                    stack.append(j)
        return found

    layers = []
    for scores, pv in zip(attention[0::2], attention[1::2]):
        projections = (feeding_projections(scores) | feeding_projections(pv)) - set(attention)
        if projections:
            layers.append((ordinal[min(projections)], ordinal[pv]))
    return layers


def frame2_kernels(kernels_ir: str, layers: list[tuple[int, int]]) -> list[str]:
    """Data-movement kernels run between a layer's first q/k/v projection kernel and its probs·V
    kernel (VTC Fig. 2 frame 2), at kernel level (bufferized: in-place slice writes are subviews,
    not kernels), as `category shape -> shape`."""
    module = as_module(kernels_ir)
    ops = _body_ops(module)
    where = [i for i, op in enumerate(ops) if _is_contraction(op)]
    out = []
    for first, pv in layers:
        for op in ops[where[first] + 1:where[pv]]:
            kind = classify(op) if op.name.startswith("linalg.") else None
            if kind is not None and kind[0] == DATA_MOVEMENT:
                shapes = ["x".join(map(str, ir.ShapedType(v.type).shape)) for v in op.operands]
                out.append(f"{kind[1]} {' -> '.join(shapes)}")
    return out


def _defining_index(value, index):
    owner = value.owner
    if hasattr(owner, "operation"):
        owner = owner.operation
    return None if isinstance(owner, ir.Block) else index.get(owner)


def measure(name: str, batch: int, repeat: int, use_torch_compile: bool) -> None:
    case = f"{name}/b{batch}"
    model, inputs = get(name).build(batch=batch, seed=0)
    graph = vtmlir.import_torch(model, *inputs)
    graph_ir = str(graph)

    # -- graph level: vt-stats before / after, pass time --------------------------------------------
    rewritten = as_module(graph_ir)
    start = time.perf_counter()
    run_pipeline(rewritten, PASS)
    pass_s = time.perf_counter() - start
    before, after = collect_stats(graph.operation).totals(), collect_stats(rewritten.operation).totals()
    emit(case, "data_movement_ops", after["data_movement"], "count", before["data_movement"])
    emit(case, "bytes_moved", after["bytes_moved"], "bytes", before["bytes_moved"])
    emit(case, "pass_time", round(pass_s, 3), "s")
    # -- compile, kernels, bitwise identity, latency ----------------------------------------------------
    start = time.perf_counter()
    plain = vtmlir.compile(graph, opt_level=0)
    plain_s = time.perf_counter() - start
    start = time.perf_counter()
    optimised = vtmlir.compile(graph, pipeline=PASS)
    opt_s = time.perf_counter() - start
    emit(case, "compile_time", round(opt_s, 3), "s", round(plain_s, 3))
    k_plain, dm_plain = kernel_counts(plain.stages["kernels"])
    k_opt, dm_opt = kernel_counts(optimised.stages["kernels"])
    emit(case, "data_movement_kernels", dm_opt, "count", dm_plain)
    emit(case, "kernels", k_opt, "count", k_plain)
    if name in DECODE_LAYERS:
        layers = attention_layers(graph_ir)
        plain_f2 = frame2_kernels(plain.stages["kernels"], layers)
        opt_f2 = frame2_kernels(optimised.stages["kernels"], layers)
        emit(case, "frame2_data_movement_kernels", len(opt_f2), "count", len(plain_f2),
             kernels=opt_f2, target=0)
    exact_plain = vtmlir.compile(graph, opt_level=0, schedules=EXACT_SCHEDULES)
    exact_optimised = vtmlir.compile(graph, pipeline=PASS, schedules=EXACT_SCHEDULES)
    same = all(torch.equal(a, b) for a, b in zip(_outputs(exact_plain(*inputs)), _outputs(exact_optimised(*inputs))))
    emit(case, "bitwise_identical", same, "bool")
    diff = max((float((a - b).abs().max()) for a, b in zip(_outputs(plain(*inputs)), _outputs(optimised(*inputs)))),
               default=0.0)
    emit(case, "max_abs_diff", diff, "", schedules="default")

    plain_t = median_time(lambda: plain(*inputs), repeat)
    opt_t = median_time(lambda: optimised(*inputs), repeat)
    emit(case, "cpu_latency", round(opt_t * 1e3, 3), "ms", round(plain_t * 1e3, 3))
    emit(case, "cpu_latency_ratio", round(opt_t / plain_t, 3), "x", "vtmlir_unoptimised")
    with torch.no_grad():
        eager_t = median_time(lambda: model(*inputs), repeat)
    emit(case, "cpu_latency_ratio", round(opt_t / eager_t, 3), "x", "torch_eager",
         baseline_ms=round(eager_t * 1e3, 3))
    if use_torch_compile:
        try:
            compiled = torch.compile(model)
            with torch.no_grad():
                tc_t = median_time(lambda: compiled(*inputs), repeat)
            emit(case, "cpu_latency_ratio", round(opt_t / tc_t, 3), "x", "torch_compile",
                 baseline_ms=round(tc_t * 1e3, 3))
        except Exception as err:  # inductor needs a C++ toolchain; report instead of failing
            emit(case, "cpu_latency_ratio", None, "x", "torch_compile",
                 reason=f"torch.compile failed: {type(err).__name__}: {str(err)[:200]}")

    # -- peak memory (separate compiles: tracking changes the lowering) ---------------------------------
    mem = {}
    for label, pipeline in (("plain", None), ("vtc", PASS)):
        exe = vtmlir.compile(graph, pipeline=pipeline, track_memory=True, opt_level=0)
        exe(*inputs)
        mem[label] = exe.memory_stats()
    p, v = mem["plain"], mem["vtc"]
    emit(case, "peak_internal_bytes", v.peak_internal_bytes, "bytes", p.peak_internal_bytes,
         saving=_saving(v.peak_internal_bytes, p.peak_internal_bytes))
    total_p, total_v = p.peak_bytes + p.weight_bytes, v.peak_bytes + v.weight_bytes
    emit(case, "peak_total_bytes", total_v, "bytes", total_p, saving=_saving(total_v, total_p),
         paper_saving=PAPER_SAVING.get(name, {}).get(batch))
    # Table 2's own comparison: PyTorch eager's peak (its allocator, as VTC measured on the GPU)
    # against vtmlir with the pass; weights and inputs are resident in both.
    with torch.no_grad():
        model(*inputs)
        eager_peak = torch_peak_bytes(lambda: model(*inputs))
    resident = sum(t.nbytes for t in model.state_dict().values()) + sum(t.nbytes for t in inputs)
    total_eager = eager_peak + resident
    emit(case, "peak_total_bytes_vs_torch_eager", total_v, "bytes", total_eager,
         saving=_saving(total_v, total_eager), paper_saving=PAPER_SAVING.get(name, {}).get(batch),
         unoptimised_vtmlir=total_p)
    if name in DECODE_LAYERS:
        _measure_donated(case, name, batch, graph, inputs, mem)


def _measure_donated(case, name, batch, graph, inputs, mem) -> None:
    """The decode layers with their KV caches donated (`compile(..., donate=...)`): each cache is
    updated in place and returned in its own memory, as the paper's decode setting does (VTC §7,
    Table 2), instead of being an input *and* a separate output. Both pipelines donate; the
    outputs must equal the non-donated ones bitwise."""
    caches = tuple(range(1, len(inputs)))   # decode builders take (x, caches...)
    donated, outputs = {}, {}
    for label, pipeline in (("plain", None), ("vtc", PASS)):
        exe = vtmlir.compile(graph, pipeline=pipeline, track_memory=True, donate=caches, opt_level=0)
        if set(exe.aliases) != set(caches):
            raise SystemExit(f"{case}: caches {caches} not updated in place (aliases {exe.aliases})")
        outputs[label] = _outputs(exe(*[t.clone() for t in inputs]))
        donated[label] = exe.memory_stats()
    reference = vtmlir.compile(graph, pipeline=PASS)
    same = all(torch.equal(a, b) for a, b in zip(_outputs(reference(*inputs)), outputs["vtc"]))
    emit(case, "bitwise_identical_donated_caches", same, "bool", donated=list(caches))
    p, v = donated["plain"], donated["vtc"]
    total_p, total_v = p.peak_bytes + p.weight_bytes, v.peak_bytes + v.weight_bytes
    emit(case, "peak_total_bytes_donated_caches", total_v, "bytes", total_p, saving=_saving(total_v, total_p),
         paper_saving=PAPER_SAVING.get(name, {}).get(batch),
         non_donated=mem["vtc"].peak_bytes + mem["vtc"].weight_bytes)


def _saving(new: int, old: int):
    return round(1.0 - new / old, 4) if old else None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(VTC_ZOO))
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-torch-compile", action="store_true")
    ap.add_argument("--cost-model", default="analytic", choices=("analytic", "measured"),
                    help="the pass's w(e): analytic (default) or measured (kernels timed; slow)")
    args = ap.parse_args(argv)
    global PASS
    PASS = f"vt-eliminate-data-movement{{cost-model={args.cost_model}}}"
    torch.set_num_threads(1)
    for name in (m for m in args.models.split(",") if m):
        for batch in (int(b) for b in args.batches.split(",") if b):
            measure(name, batch, args.repeat, not args.no_torch_compile)


if __name__ == "__main__":
    main()
