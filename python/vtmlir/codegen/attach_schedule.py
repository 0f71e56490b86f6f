"""`codegen-attach-schedule`: classify every kernel and attach its schedule as transform IR.

Each structured op of the kernel level (memrefs, after bufferization) is classified
(`kernels.classify`), tagged `codegen.kernel = <id>`, and, where its kind has a schedule, given the
transform ops that tile, pack and vectorise it (located `kernel <id>: ...`). They are built kernel by
kernel in the module's `@__transform_main` (no named sequence per kernel: the `transform.include`s
calling them cost a symbol lookup each, quadratic in the kernels), which then applies, per function,
the clean-ups the vector code needs (alias folding, CSE, hoisting the accumulators, lowering
contractions to outer products). The upstream `transform-interpreter` pass runs it, so the IR after this pass (the CPU
stage "schedule") replays with `vt-opt --transform-interpreter`.

A contraction's neighbours (its accumulator's fill before it, its elementwise epilogue after it:
bias, activation, BatchNorm, residual add, casts; `codegen.fusion.find_group`) run inside its outer
tiles: its schedule tiles them with its own outer tiles and fuses their loops with its own
(`ContractionSchedule.fuse_neighbours`, `schedules.FusedMember`). They get no ops of their own
in the script's order; each is tagged `codegen.fused_into = <contraction id>` (for the profile's
marks) and keeps its own vector schedule as a fallback, applied after the contraction's to whatever
of it is still there (nothing, where the fusion applied; the kernel as it was, where the
contraction's schedule failed before fusing it).

A kernel's schedule is applied with failures suppressed: one that cannot apply leaves that kernel as
it was (correct loops later), and `codegen.report.kernel_report` names it; never a silent slowdown.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from math import prod

from torch_mlir import ir

from ..errors import format_location
from ..passes.registry import Option, Pass, register_pass
from . import transform_ir as t
from .fusion import (Candidate, collapsed_output, expanded_output, find_group, frees_keep_peak, merge_to_output,
                     split_to_output)
from .kernels import (FUSED_ATTR, KERNEL_ATTR, SCHEDULED_ATTR, UNFUSED_PREFIX, Kernel, KernelKind, classify,
                      element_bits_of, in_row_loop, structured_ops)
from .schedules import (DEFAULT_SCHEDULES, ContractionSchedule, FusedMember, ParallelLoops, Schedule, VectorSchedule,
                        body_divides, fusable_member, resolve_schedules, schedule_key)
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
    # A kernel run in a contraction's outer tiles: that contraction's id and its role there
    # (prologue, epilogue); on the contraction, the ids of the kernels it runs. (Keyword-only: the
    # GPU's plan adds positional fields.)
    fused_into: int | None = field(default=None, kw_only=True)
    fused_role: str = field(default="", kw_only=True)
    neighbours: tuple[int, ...] = field(default=(), kw_only=True)


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
    for i, kernel in enumerate(kernels):
        kernel.op.attributes[KERNEL_ATTR] = t.kernel_id_attr(i)
    members = _fuse_neighbours(kernels, table, target, parts)
    fused_into = {m.id: (cid, m.role) for cid, found in members.items() for m in found}
    plans: list[KernelPlan] = []
    scheduled: list[tuple[int, Kernel, Schedule]] = []
    fallbacks: list[tuple[int, Kernel, Schedule]] = []
    for i, kernel in enumerate(kernels):
        key = schedule_key(kernel)
        schedule = table.get(key)
        reason = kernel.reason
        if schedule is None and not reason:
            reason = ("turned off by schedules=" if DEFAULT_SCHEDULES.get(key) is not None
                      else f"no schedule for {key} kernels")
        host, role = fused_into.get(i, (None, ""))
        plans.append(KernelPlan(i, key, kernel.describe(), format_location(kernel.op.location, "-"),
                                schedule.name if schedule else None, reason, fused_into=host, fused_role=role,
                                neighbours=tuple(m.id for m in members.get(i, ()))))
        if host is not None:
            kernel.op.attributes[FUSED_ATTR] = t.kernel_id_attr(host)
            fallbacks.append((i, kernel, schedule))
            continue
        if schedule is None and key == KernelKind.UNKNOWN.value and ParallelLoops.applies(kernel, parts):
            schedule = ParallelLoops()  # still loops in the report; split over the threads
        if schedule is not None:
            kernel.op.attributes[SCHEDULED_ATTR] = ir.UnitAttr.get()
            scheduled.append((i, kernel, schedule))
    _append_script(module_op, scheduled, fallbacks, members, target, parts, strict)
    return plans


def _kernel_parts(kernel: Kernel, parts: int) -> int:
    # Inside a loop over row blocks (`codegen-fuse-rows`), that loop is the parallel one.
    return 1 if in_row_loop(kernel.op) else parts


def _fuse_neighbours(kernels: list[Kernel], table: dict, target: HostTarget,
                     parts: int) -> dict[int, tuple[FusedMember, ...]]:
    """The neighbours each contraction runs in its outer tiles (`codegen.fusion.find_group` over the
    kernels of its block), {contraction id: members in program order}. A contraction takes them
    where its schedule has `fuse_neighbours`, its outer tiles are C's dimensions in C's order (the
    members' tile loops are then its loop's), a tile of C is at most `fuse_tile_bytes`, and every
    member that divides agrees on `reciprocal` (one mark for the fused loop), and the buffers freed
    between the group's members do not raise the block's peak (the fused loop runs at the last
    member's place: such a buffer lives longer; `fusion.frees_keep_peak`)."""
    _merge_to_outputs(kernels, table)
    blocks: list[tuple[object, list[Candidate]]] = []
    for i, kernel in enumerate(kernels):
        schedule = table.get(schedule_key(kernel))
        candidate = Candidate(i, kernel.op, kernel, kernel.kind in (KernelKind.CONTRACTION, KernelKind.CONVOLUTION),
                              isinstance(schedule, VectorSchedule) and not in_row_loop(kernel.op)
                              and fusable_member(kernel))
        block = kernel.op.block
        found = next((c for b, c in blocks if b == block), None)
        if found is None:
            found = []
            blocks.append((block, found))
        found.append(candidate)
    members: dict[int, tuple[FusedMember, ...]] = {}
    taken: set[int] = set()
    for _, candidates in blocks:
        for pos, candidate in enumerate(candidates):
            kernel = candidate.kernel
            schedule = table.get(schedule_key(kernel))
            if (kernel.kind is not KernelKind.CONTRACTION or not isinstance(schedule, ContractionSchedule)
                    or not schedule.fuse_neighbours):
                continue
            c_tile = _output_tile(kernel, schedule.outer_tile_sizes(kernel, target, _kernel_parts(kernel, parts)))
            if c_tile is None:
                continue
            c_shape = ir.MemRefType(kernel.op.operands[2].type).shape
            tile_bytes = prod(s or e for s, e in zip(c_tile, c_shape)) * element_bits_of(kernel.op.operands[2]) // 8
            if schedule.fuse_tile_bytes and tile_bytes > schedule.fuse_tile_bytes:
                continue
            group = find_group(candidates, pos, {d for d, s in enumerate(c_tile) if not s}, taken,
                               names=("linalg.generic", "linalg.fill"))
            if group is None:
                continue
            found = tuple(FusedMember(c.id, role, c.kernel, tuple(c_tile[d] for d in group.dims[c.id]),
                                      table[schedule_key(c.kernel)])
                          for role, part in (("prologue", group.prologue), ("epilogue", group.epilogue)) for c in part)
            if len({m.schedule.reciprocal for m in found if body_divides(m.kernel)}) > 1:
                continue
            if not frees_keep_peak(group, kernel.op):
                # The group runs at its last member's place: a buffer freed between its members (the
                # contraction's input, read last there) lives on beside the epilogue's output. Where
                # that raises the block's peak, which the allocation replay and TeMCO's analysis
                # compute (decomposed conv_bn_relu_residual: 18688 -> 20800 B measured), not fused.
                continue
            # The group runs at its last member's place: buffers its members use are freed after it.
            for dealloc in group.frees:
                dealloc.move_after(group.place or kernel.op)
            members[candidate.id] = found
            taken.update(m.id for m in found)
    return members


def _merge_to_outputs(kernels: list[Kernel], table: dict) -> None:
    """Where a contraction that fuses neighbours writes C through a `collapse_shape` view of a buffer
    Y (a 1x1 convolution's pixels as one dimension), the vector kernels of its block that access Y
    element by element (its fill, its BatchNorm + ReLU) get their loops merged the same way
    (`fusion.merge_to_output`); through an `expand_shape` of Y (a grouped 1x1 convolution written
    into a concatenation's slice), split the same way (`fusion.split_to_output`): only then are their
    loops C's. Updates `kernels` (new ops, same ids)."""
    for kernel in list(kernels):
        schedule = table.get(schedule_key(kernel))
        if (kernel.kind is not KernelKind.CONTRACTION or not isinstance(schedule, ContractionSchedule)
                or not schedule.fuse_neighbours):
            continue
        collapsed, expanded = collapsed_output(kernel), expanded_output(kernel)
        if collapsed is None and expanded is None:
            continue
        for i, other in enumerate(kernels):
            if other.op.block != kernel.op.block or not isinstance(table.get(schedule_key(other)), VectorSchedule):
                continue
            if collapsed is not None:
                merged = merge_to_output(other, *collapsed)
            else:
                merged = split_to_output(other, *expanded)
            if merged is not None:
                merged.attributes[KERNEL_ATTR] = t.kernel_id_attr(i)
                kernels[i] = classify(merged)


def _output_tile(kernel: Kernel, sizes: list[int]) -> tuple[int, ...] | None:
    """The outer tile per dimension of C (0: whole) for the contraction's outer tile `sizes` per
    loop, or None when the tiled loops are not dimensions of C in C's order: the members' loops
    walk C's dimensions in C's order, so only then are their tile loops the contraction's."""
    c_dims = []
    for e in kernel.maps[2].results:
        if not isinstance(e, ir.AffineDimExpr):
            return None
        c_dims.append(e.position)
    tiled = [d for d in range(kernel.rank) if sizes[d]]
    if any(d not in c_dims for d in tiled) or [c_dims.index(d) for d in tiled] != sorted(c_dims.index(d) for d in tiled):
        return None
    return tuple(sizes[d] for d in c_dims)


def _append_script(module_op, scheduled, fallbacks, members, target: HostTarget, parts: int, strict: bool) -> None:
    """`@__transform_main` with every scheduled kernel's ops built in it, located `kernel <id>: ...`:
    not one named sequence per kernel behind a `transform.include`, whose verification (and the
    interpreter's checks of its effects) looks the callee up by a scan of the module's symbols,
    quadratic in the kernels. Where failures are suppressed each kernel's ops are a nested
    `transform.sequence failures(suppress)` (`transform_ir.sequence`)."""
    module_op.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
    body = module_op.regions[0].blocks[0]

    def build(kid, kernel, schedule, handle):
        with ir.Location.name(f"kernel {kid}: {kernel.describe()}"), \
                t.sequence(handle, suppress_failures=not strict) as op:
            extra = {"members": members[kid]} if members.get(kid) else {}
            schedule.build(kid, kernel, target, _kernel_parts(kernel, parts), op, **extra)

    with ir.Location.unknown():
        main = t.named_sequence(body, MAIN, consumed=False)
        with ir.InsertionPoint(main.body):
            root = main.bodyTarget
            handles = t.match_scheduled(root, len(scheduled)) if scheduled else []
            for (kid, kernel, schedule), handle in zip(scheduled, handles):
                build(kid, kernel, schedule, handle)
            for kid, kernel, schedule in fallbacks:
                # A fused kernel's own schedule on what is left of it: nothing where its contraction's
                # schedule fused it, the kernel where that failed first. Where it runs at all the
                # module is marked first (what the report reads back).
                with t.foreach(t.match_kernel(root, kid)) as each:
                    t.annotate(t.parent_op(each, "builtin.module"), f"{UNFUSED_PREFIX}{kid}")
                    build(kid, kernel, schedule, each)
            if scheduled or fallbacks:
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


@register_pass
class AttachSchedule(Pass):
    name = "codegen-attach-schedule"
    summary = "Classify each kernel and attach its tiling/vectorisation schedule as transform IR"
    description = (
        "Kernel level (memrefs). Tags every linalg op `codegen.kernel = <id>` and appends "
        "`@__transform_main` with each scheduled kernel's transform ops; run `transform-interpreter` "
        "next. Kinds: contraction, elementwise, data-movement, row-reduction, outer-reduction "
        "(scheduled), convolution, pooling (loops for now). A contraction's accumulator fill and "
        "elementwise epilogue run in its outer tiles (schedules=contraction.fuse_neighbours:false: apart)."
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
