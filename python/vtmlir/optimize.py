"""The default optimisation pipeline: which of vtmlir's systems run on a graph, in which order.

`vtmlir.compile(..., opt_level=N)`, `vtmlir compile -O N` and the `vtmlir-default` pass of `vt-opt`
all call `plan` and `optimize` here, so the order is decided once (docs/pipeline.md):

1. VTC data-movement elimination (`vt-eliminate-data-movement`, memory-aware), then `vt-lower-views`;
2. VTensor layout selection (`layout-select-ilp`, `layout-materialize`) for the target's kernels;
3. TeMCO rematerialisation and fusion (`temco-remat-skip`, `temco-fuse-activation`,
   `temco-pad-in-place`) where lconv -> activation -> fconv groups exist or a memory budget is given;
4. Tilus low-bit lowering (`subbyte-pack`, `subbyte-lower`) for weights quantised with `vtmlir.quantize`;
5. then the backend: the CPU code generation strategy layer (`vtmlir.codegen`) on every kernel.

`opt_level` 0 runs none of 1-4; 1 runs the steps that are bitwise identical to level 0 and never
measured slower (VTC, Tilus); 2 (the default) adds those that win on the target where they apply
(layouts where the layout ILP's time model finds a gain, TeMCO on decomposed networks). Each
step's own cost model decides where inside the graph it rewrites (VTC's Alg. 2 with its memory
check, the layout ILP's time model, TeMCO's Algs. 1-2); `plan` only decides whether a step can
apply at all, from what the graph holds, and says why in `Step.reason`.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field

from torch_mlir import ir

from .errors import VtmlirError
from .ir_utils import copy_module, symbol_name, walk_ops
from .passes.pipeline import parse_pipeline, run_pipeline
from .passes.vt_stats import DATA_MOVEMENT, collect_stats
from .signature import find_entry
from .temco.decompose import ROLE_ATTR
from .temco.remat_skip import is_lconv
from .vtc.memory_check import backend_peak

OPT_LEVELS = (0, 1, 2)
TARGETS = ("cpu", "cuda")

# The layout step's measure of what it laid out; 0 after `layout-select-ilp{cost=time}`: no change.
LAID_OUT = "kernels in a non-row-major layout"

# The Tilus lowering per `lowbit=` choice (CPU): "vector" = word-at-a-time vector loops (the fast
# path, default), "portable" = the fused scalar loop (Tilus §6).
LOWBIT_PIPELINES = {
    "vector": "subbyte-pack, subbyte-lower{cpu-vectorize=1}",
    "portable": "subbyte-pack, subbyte-lower",
}

# The layout convention table per target (vtmlir.layouts.TARGETS) the default pipeline selects for.
# "cpu": blocked nChw16c / nChw8c, NHWC or NCHW convolutions; with cost=time the ILP picks each
# convolution's layout by the CPU time model (kernels + transposing copies, the graph's NCHW inputs
# and outputs included; vtmlir.layouts.costs, docs/layouts.md), so a block whose conversions cost
# more than its kernels gain stays NCHW and is left unchanged.
LAYOUT_TARGETS = {"cpu": "cpu"}

# Each step: which system, the passes it runs (vtmlir pass name -> options), the lowest opt level it
# runs at, and the passes whose text report (their `report` option) the step report shows.
_REPORTING_PASSES = frozenset({
    "vt-eliminate-data-movement",
    "layout-select-ilp",
    "layout-materialize",
    "temco-remat-skip",
    "temco-fuse-activation",
    "temco-pad-in-place",
    "subbyte-pack",
    "subbyte-lower",
})


@dataclass(frozen=True)
class Step:
    """One step of the default pipeline as planned for a graph."""

    system: str          # "vtc", "layouts", "temco" or "lowbit"
    pipeline: str        # the textual pipeline it runs (what vt-opt would run)
    reason: str          # why it applies to this graph
    then: str = ""       # run after the step's measures are taken (lowering its own ops)


@dataclass
class StepResult:
    """What one step did: its reports, the measures before/after and the time it took."""

    step: Step
    seconds: float
    reports: dict[str, str] = field(default_factory=dict)   # pass name -> its text report
    measures: dict[str, tuple] = field(default_factory=dict)  # measure -> (before, after)
    failed: str = ""      # why the step failed (the graph was left as it was)
    unchanged: bool = False  # the step's cost model chose to change nothing (the graph was left as it was)

    def to_text(self) -> str:
        then = f", then {self.step.then}" if self.step.then else ""
        lines = [f"{self.step.system}: {self.step.pipeline}{then}  ({self.seconds * 1e3:.1f} ms)",
                 f"  why: {self.step.reason}"]
        if self.failed:
            lines.append(f"  failed, graph left as it was: {self.failed}")
        if self.unchanged:
            lines.append("  its cost model chose no change: graph left as it was")
        for name, (before, after) in self.measures.items():
            lines.append(f"  {name}: {before} -> {after}")
        for name, text in self.reports.items():
            body = [ln for ln in text.splitlines() if ln.strip()]
            if body:
                lines.append(f"  {name}:")
                lines.extend(f"    {ln}" for ln in body[:40])
                if len(body) > 40:
                    lines.append(f"    ... ({len(body) - 40} more lines)")
        return "\n".join(lines)


@dataclass
class OptimizationReport:
    """What the default pipeline did to a graph: the plan, skipped systems and per-step results."""

    opt_level: int
    target: str
    steps: list[StepResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)    # system -> why it did not run
    peak_internal: tuple | None = None                       # (before, after) bytes, report=True only
    memory_budget: int | None = None

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    def to_text(self) -> str:
        lines = [f"opt level {self.opt_level} ({self.target}): {len(self.steps)} step(s), "
                 f"{self.seconds * 1e3:.1f} ms"]
        for s in self.steps:
            lines.append(s.to_text())
        for system, why in self.skipped.items():
            lines.append(f"{system}: not run ({why})")
        if self.peak_internal is not None:
            before, after = self.peak_internal
            change = f" ({(after - before) / before:+.1%})" if before else ""
            lines.append(f"peak internal memory (as the backend allocates): {before} -> {after} bytes{change}")
            if self.memory_budget is not None and after > self.memory_budget:
                lines.append(f"  above the memory budget of {self.memory_budget} bytes")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()


def check_opt_level(opt_level) -> int:
    if isinstance(opt_level, bool) or opt_level not in OPT_LEVELS:
        raise VtmlirError(f"error: opt_level must be one of {', '.join(map(str, OPT_LEVELS))}, got {opt_level!r}")
    return opt_level


def plan(module, *, target: str = "cpu", opt_level: int = 2, memory_budget: int | None = None,
         lowbit: str | None = "vector") -> tuple[list[Step], dict[str, str]]:
    """The steps the default pipeline runs on `module` (graph level) and, per system left out, why."""
    check_opt_level(opt_level)
    if lowbit is not None and lowbit not in LOWBIT_PIPELINES:
        raise VtmlirError(f"error: unknown lowbit '{lowbit}'; expected one of: {', '.join(LOWBIT_PIPELINES)}, or None")
    steps: list[Step] = []
    skipped: dict[str, str] = {}
    if opt_level == 0:
        return steps, {"all": "opt level 0"}
    if target not in TARGETS:
        raise VtmlirError(f"error: unknown target '{target}'; expected one of: {', '.join(TARGETS)}")

    convs = walk_ops(module, "linalg.conv_2d_nchw_fchw")
    decomposed = _decomposed_convs(module)
    # CUDA: TeMCO's fused lconv -> activation -> fconv groups are tile loops the GPU code generator
    # runs one thread per tile (docs/codegen_gpu.md), so they cost time there: only on request.
    wants_temco = (opt_level >= 2 and bool(decomposed) and target == "cpu") or memory_budget is not None

    # Layouts before VTC: vt-lower-views generalises the named convolutions the layout conventions
    # match (a layout step after it chose nothing); VTC then works on the materialised kernels,
    # the layout conversions that remain included.
    if opt_level < 2:
        skipped["layouts"] = "opt level < 2"
    elif target not in LAYOUT_TARGETS:
        skipped["layouts"] = f"no layout time model for the {target} kernels yet (docs/pipeline.md)"
    elif not convs:
        skipped["layouts"] = "no 2-d convolution"
    elif wants_temco:
        # TeMCO's passes match the named NCHW convolutions that layout-materialize generalises: a
        # decomposed network keeps NCHW and gets TeMCO's memory savings instead (docs/pipeline.md).
        skipped["layouts"] = "TeMCO applies (its groups are NCHW convolutions)"
    else:
        layout_target = LAYOUT_TARGETS[target]
        steps.append(Step("layouts", f"layout-select-ilp{{target={layout_target} cost=time}}, layout-materialize",
                          f"{len(convs)} convolution(s); the time model decides each one's layout"))

    moved = _data_movement_ops(module)
    if wants_temco:
        # VTC's pad stores (convolutions writing into the padded tensor) hide TeMCO's lconv ->
        # activation -> fconv groups and skip connections; temco-pad-in-place builds the same pads
        # in place, so TeMCO's step takes the data movement of these networks (docs/pipeline.md).
        skipped["vtc"] = "TeMCO applies (temco-pad-in-place builds the pads in place)"
    elif moved or steps:
        why = f"{moved} data-movement op(s)" + (" and the layout conversions" if steps else "")
        steps.append(Step("vtc", f"vt-eliminate-data-movement{{target={target}}}", why, then="vt-lower-views"))
    else:
        skipped["vtc"] = "no data-movement op"

    if wants_temco:
        why = (f"memory budget {memory_budget} bytes" if memory_budget is not None
               else f"{decomposed} decomposed convolution(s) (temco.role)")
        steps.append(Step("temco", "temco-remat-skip, temco-fuse-activation{where=peak}, temco-pad-in-place", why))
    elif opt_level < 2:
        skipped["temco"] = "opt level < 2"
    elif decomposed and target != "cpu":
        skipped["temco"] = (f"{decomposed} decomposed convolution(s), but on {target} only with memory_budget= "
                            "(its fused groups run one GPU thread per tile)")
    else:
        skipped["temco"] = "no decomposed convolution and no memory budget"

    if lowbit is None:
        skipped["lowbit"] = "lowbit=None (quantised weights are dequantised in full)"
    elif _has_byte_constants(module):
        # First: VTC's views of the dequantisation chain (reshapes, slices of the codes) hide the
        # quantised matmuls subbyte-pack recognises (measured: no vector loops were made).
        # CUDA: the fused matmul of the portable lowering is what `subbyte-cuda-kernels`
        # turns into a Tilus kernel (the CPU's vector loops are no GPU code).
        pipeline = LOWBIT_PIPELINES[lowbit if target == "cpu" else "portable"]
        steps.insert(0, Step("lowbit", pipeline, "byte constants feeding matmuls (quantised weights)"))
    else:
        skipped["lowbit"] = "no quantised weight"
    return steps, skipped


def optimize(module, *, target: str = "cpu", opt_level: int = 2, memory_budget: int | None = None,
             lowbit: str | None = "vector", measure_peak: bool = False, on_step=None, after_step=None,
             only: tuple[str, ...] | None = None) -> OptimizationReport:
    """Run the default pipeline on `module` (graph level, in place) and return what it did.

    `measure_peak`: also evaluate the internal peak the backend allocates before and after (two
    bufferizations of copies; `vtc.memory_check.backend_peak`). `on_step(step)` is called before
    each step (progress display), `after_step(result)` after it; `only`: run just these systems
    (`vtmlir.compile` with a user pipeline: "lowbit")."""
    steps, skipped = plan(module, target=target, opt_level=opt_level, memory_budget=memory_budget, lowbit=lowbit)
    if only is not None:
        skipped = {**{s.system: "replaced by the user's pipeline" for s in steps if s.system not in only},
                   **{k: v for k, v in skipped.items() if k in only}}
        steps = [s for s in steps if s.system in only]
    report = OptimizationReport(opt_level, target, skipped=skipped, memory_budget=memory_budget)
    peak_before = _peak(module) if (measure_peak or memory_budget is not None) and steps else None
    for step in steps:
        if on_step is not None:
            on_step(step)
        report.steps.append(run_step(module, step))
        if after_step is not None:
            after_step(report.steps[-1])
    if peak_before is not None:
        report.peak_internal = (peak_before, _peak(module))
    return report


def run_step(module, step: Step) -> StepResult:
    """Run one step on a copy of `module` and, if it succeeds, put the result in its place; a step
    that fails (a pass refusing what an earlier step made of the graph, e.g. a VTC store through a
    blocked layout) leaves the graph as it was and says why (`StepResult.failed`)."""
    op = module.operation if isinstance(module, ir.Module) else module
    work = copy_module(op)
    start = time.perf_counter()
    try:
        result = _run_step(work, step)
    except VtmlirError as err:
        return StepResult(step, time.perf_counter() - start, failed=str(err).splitlines()[0])
    if result.measures.get(LAID_OUT, (0, None))[1] == 0:
        # The layout ILP kept every kernel row-major: the graph stays exactly as it was (not even
        # layout-materialize's generalised named ops).
        result.unchanged = True
        return result
    body = op.regions[0].blocks[0]
    for old in list(body.operations):
        old.operation.erase()
    with op.context:
        for new in work.body.operations:
            new.operation.clone(ip=ir.InsertionPoint(body))
    return result


def _run_step(module, step: Step) -> StepResult:
    """Run one step, its passes writing their reports to temporary files that are read back."""
    pipeline = parse_pipeline(step.pipeline, validate=False)
    before = _measures(module, step.system)
    with tempfile.TemporaryDirectory(prefix="vtmlir-report-") as tmp:
        paths = {}
        for inst in pipeline.vtmlir_passes:
            if inst.name in _REPORTING_PASSES:
                paths[inst.name] = os.path.join(tmp, f"{inst.name}.txt")
                inst.report = paths[inst.name]
        what = f"running the default pipeline's {step.system} step"
        start = time.perf_counter()
        results = run_pipeline(module, pipeline, what=what)
        seconds = time.perf_counter() - start
        reports = {}
        for name, path in paths.items():
            if os.path.exists(path):
                with open(path) as f:
                    reports[name] = f.read()
    after = _measures(module, step.system)
    if step.then:
        start = time.perf_counter()
        run_pipeline(module, step.then, what=what)
        seconds += time.perf_counter() - start
    extra = _pass_measures(results)
    measures = {k: (before[k], after[k]) for k in before}
    measures.update(extra)
    return StepResult(step, seconds, reports, measures)


def _measures(module, system: str) -> dict:
    """Cheap graph-level measures each system changes (before/after pairs in the report)."""
    if system == "vtc":
        totals = collect_stats(module).totals()
        return {"data-movement ops": totals["data_movement"], "data-movement bytes": totals["bytes_moved"]}
    if system == "temco":
        return {"lconvs": _lconv_groups(module)}
    if system == "lowbit":
        return {"scf.for loops": len(walk_ops(module, "scf.for"))}
    return {}


def _pass_measures(results) -> dict:
    """Before/after figures from the reports the step's passes returned (`PipelineResults`)."""
    out = {}
    for result in results:
        rep = result.report
        if result.name == "layout-select-ilp" and rep is not None:
            naive = sum(f.naive_conversions for f in rep.functions)
            after = sum(f.conversions for f in rep.functions)
            out["layout conversions (naive -> ILP)"] = (naive, after)
            out[LAID_OUT] = (0, sum(f.laid_out for f in rep.functions))
            if any(f.row_major_ns for f in rep.functions):
                out["time model, us (all row-major -> chosen)"] = (
                    round(sum(f.row_major_ns for f in rep.functions) / 1e3, 1),
                    round(sum(f.model_ns for f in rep.functions) / 1e3, 1))
    return out


def _peak(module) -> int:
    """Internal peak (bytes) of the entry function as the backend allocates it, on a copy."""
    op = module.operation if isinstance(module, ir.Module) else module
    copy = copy_module(op)
    return backend_peak(copy, symbol_name(find_entry(copy, None)))


def _data_movement_ops(module) -> int:
    return collect_stats(module).count(DATA_MOVEMENT)


def _lconv_groups(module) -> int:
    """lconvs (TeMCO Alg. 2 IsLConv: 1x1 stride-1 convs raising the channel count)."""
    return sum(1 for op in walk_ops(module, "linalg.conv_2d_nchw_fchw") if is_lconv(op))


def _decomposed_convs(module) -> int:
    """Convolutions `temco-decompose` produced (tagged `temco.role`): TeMCO's rematerialisation and
    fusion pay where the graph holds them; on undecomposed networks their groups are rare and the
    fused loops measured slower than the scheduled convolutions (docs/pipeline.md)."""
    return sum(1 for op in walk_ops(module, "linalg.conv_2d_nchw_fchw") if ROLE_ATTR in op.attributes)


def _has_byte_constants(module) -> bool:
    """Whether the graph holds a matmul and a tensor constant of bytes (i8): the cheap sign of packed
    quantised weights, which `vtmlir.quantize` stores as uint8 whatever their width (subbyte-pack
    then decides for real, by evaluating each matmul's weight)."""
    if not walk_ops(module, "linalg.matmul"):
        return False
    for op in walk_ops(module, "arith.constant"):
        t = op.results[0].type.maybe_downcast()
        if isinstance(t, ir.RankedTensorType) and isinstance(t.element_type, ir.IntegerType) \
                and ir.IntegerType(t.element_type).width == 8:
            return True
    return False


