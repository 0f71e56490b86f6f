"""`codegen-attach-schedule`: classify every kernel and attach its schedule as transform IR.

Each structured op of the kernel level (memrefs, after bufferization) is classified
(`kernels.classify`), tagged `codegen.kernel = <id>`, and, where its kind has a schedule, given a
`transform.named_sequence @kernel_<id>_<schedule>` that tiles, packs and vectorises it. The module
gets `@__transform_main`, which applies them kernel by kernel and then, per function, the clean-ups
the vector code needs (alias folding, CSE, hoisting the accumulators, lowering contractions to outer
products). The upstream `transform-interpreter` pass runs it, so the IR after this pass (the CPU
stage "schedule") replays with `vt-opt --transform-interpreter`.

A kernel's schedule is applied with failures suppressed: one that cannot apply leaves that kernel as
it was (correct loops later), and `codegen.report.kernel_report` names it; never a silent slowdown.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from torch_mlir import ir

from ..errors import format_location
from ..passes.registry import Option, Pass, register_pass
from . import transform_ir as t
from .kernels import KERNEL_ATTR, SCHEDULED_ATTR, Kernel, KernelKind, classify, in_row_loop, structured_ops
from .schedules import DEFAULT_SCHEDULES, ParallelLoops, Schedule, resolve_schedules, schedule_key
from .target import HostTarget, host_target

MAIN = "__transform_main"


@dataclass(frozen=True)
class KernelPlan:
    """What codegen decided for one kernel: its id, class, schedule (None: loops) and where it came from."""

    id: int
    kind: str
    description: str
    location: str
    schedule: str | None
    reason: str = ""


def attach_schedules(module_op, threads: int = 0, overrides=None, target: HostTarget | None = None,
                     strict: bool = False) -> list[KernelPlan]:
    """Tag the kernels of `module_op` (a builtin.module at kernel level) and append the transform
    script that schedules them; returns the plan per kernel. `threads` only decides how many parallel
    tiles a kernel is split into (0: the host's cores); values never depend on it. `strict`: a
    schedule that does not apply fails the interpreter (for tests and schedule development)."""
    with module_op.context, ir.Location.unknown():
        return _attach(module_op, threads, overrides, target or host_target(), strict)


def _attach(module_op, threads: int, overrides, target: HostTarget, strict: bool) -> list[KernelPlan]:
    table = resolve_schedules(overrides)
    parts = threads if threads > 0 else target.cores
    kernels = [classify(op) for op in structured_ops(module_op)]
    plans: list[KernelPlan] = []
    scheduled: list[tuple[int, Kernel, Schedule]] = []
    for i, kernel in enumerate(kernels):
        kernel.op.attributes[KERNEL_ATTR] = t.kernel_id_attr(i)
        key = schedule_key(kernel)
        schedule = table.get(key)
        reason = kernel.reason
        if schedule is None and not reason:
            reason = ("turned off by schedules=" if DEFAULT_SCHEDULES.get(key) is not None
                      else f"no schedule for {key} kernels")
        plans.append(KernelPlan(i, key, kernel.describe(), format_location(kernel.op.location, "-"),
                                schedule.name if schedule else None, reason))
        if schedule is None and key == KernelKind.UNKNOWN.value and ParallelLoops.applies(kernel, parts):
            schedule = ParallelLoops()  # still loops in the report; split over the threads
        if schedule is not None:
            kernel.op.attributes[SCHEDULED_ATTR] = ir.UnitAttr.get()
            scheduled.append((i, kernel, schedule))
    _append_script(module_op, scheduled, target, parts, strict)
    return plans


def _append_script(module_op, scheduled, target: HostTarget, parts: int, strict: bool) -> None:
    module_op.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
    body = module_op.regions[0].blocks[0]
    with ir.Location.unknown():
        for kid, kernel, schedule in scheduled:
            seq = t.named_sequence(body, _sequence_name(kid, schedule), consumed=True)
            with ir.InsertionPoint(seq.body), ir.Location.name(f"kernel {kid}: {kernel.describe()}"):
                # Inside a loop over row blocks (`codegen-fuse-rows`), that loop is the parallel one.
                schedule.build(kid, kernel, target, 1 if in_row_loop(kernel.op) else parts, seq.bodyTarget)
                t.yield_()
        main = t.named_sequence(body, MAIN, consumed=False)
        with ir.InsertionPoint(main.body):
            root = main.bodyTarget
            handles = t.match_scheduled(root, len(scheduled)) if scheduled else []
            for (kid, _, schedule), handle in zip(scheduled, handles):
                t.include(_sequence_name(kid, schedule), handle, suppress_failures=not strict)
            if scheduled:
                funcs = t.match_names(root, ["func.func"])
                t.canonicalize(funcs, fold_memref_aliases=True)
                t.drop_leading_unit_dims(funcs)
                t.cse(funcs)
                funcs = t.hoist_vector_transfers(funcs)
                t.lower_contractions(funcs)
                t.lower_multi_reductions(funcs)
                t.drop_unit_vector_dims(funcs)
                t.lower_transposes(funcs, target.vector_bits)
            t.yield_()


def _sequence_name(kid: int, schedule: Schedule) -> str:
    return f"kernel_{kid}_{schedule.name.replace('-', '_')}"


@register_pass
class AttachSchedule(Pass):
    name = "codegen-attach-schedule"
    summary = "Classify each kernel and attach its tiling/vectorisation schedule as transform IR"
    description = (
        "Kernel level (memrefs). Tags every linalg op `codegen.kernel = <id>` and appends "
        "`@__transform_main` with one named sequence per scheduled kernel; run `transform-interpreter` "
        "next. Kinds: contraction, elementwise, data-movement, row-reduction, outer-reduction "
        "(scheduled), convolution, pooling (loops for now)."
    )
    options = (
        Option("threads", int, 0, "parallel tiles per kernel: the thread count (0: the host's cores)"),
        Option("schedules", list[str], [], "overrides: kind:none, kind:default or kind.parameter:value"),
        Option("strict", bool, False, "a schedule that does not apply fails the interpreter (else: loops)"),
        Option("vector-bits", int, 0, "vector register width to schedule for (0: the host's; tests fix it)"),
    )

    def run(self, module):
        target = host_target()
        if self.vector_bits:
            target = replace(target, vector_bits=self.vector_bits)
        attach_schedules(module, threads=self.threads, overrides=self.schedules, strict=self.strict, target=target)
