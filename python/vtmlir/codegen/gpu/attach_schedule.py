"""`codegen-gpu-attach-schedule`: classify every kernel and attach its GPU schedule as transform IR.

The GPU counterpart of `codegen-attach-schedule`, with the same classification (`codegen.kernels`).
A kernel is a structured op directly in a function body (the loop nests of TeMCO's fused groups keep
their own kernels, `gpu-sequentialize-forall`). Each scheduled kernel is tagged
`codegen.kernel = <id>` and gets transform ops for each phase of the CUDA lowering (located
`kernel <id>: ... (<phase>)`), built in the module's entry point of that phase, which the
`transform-interpreter{entry-point=...}` passes of `passes/cuda.pipeline` run in turn:

- `@__gpu_tile`: block tiles (`scf.forall` on `#gpu.block`), k loops;
- `@__gpu_promote` (after `codegen-gpu-drop-unit-dims`): shared-memory promotion;
- `@__gpu_map`: copies and compute over threads/warps, vectors, `gpu.launch` (annotated with the
  kernel id), then per function the accumulators hoisted out of the k loops, then each kernel's
  finishing patterns;
- `@__gpu_pipeline`: `cp.async` copies, multi-buffered shared memory, software pipelining.

Kernels without a schedule (kinds mapped to None, schedules that do not apply, chips without one)
are left to the naive mapping of the later stages (`convert-linalg-to-parallel-loops`, one thread per
element) and named in the report with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

from torch_mlir import ir
from torch_mlir.dialects.transform import interpreter

from ...errors import format_location
from ...passes.registry import Option, Pass, register_pass
from .. import transform_ir as t
from ..attach_schedule import KernelPlan
from ..fuse_rows import row_groups
from ..kernels import KERNEL_ATTR, SCHEDULED_ATTR, KernelKind, classify
from .layouts import element_bytes
from ..fusion import Candidate, find_group
from .fusion import neighbour
from ..bodies import VIEW_OPS, buffer_root
from .reduce_rows import ROW_CHUNKS_ATTR, ROW_GROUP_ATTR, ROW_VECTOR_ATTR, row_member_problem
from .schedules import (DEFAULT_GPU_SCHEDULES, ContractionTiling, MatvecTiling, RowReductionSchedule, VectorTiling,
                        gpu_schedule_key, resolve_gpu_schedules)
from .target import gpu_target
from .transform_gpu import hoist_vector_transfers

ENTRY_POINTS = {"tile": "__gpu_tile", "promote": "__gpu_promote", "map": "__gpu_map", "pipeline": "__gpu_pipeline"}
_STRUCTURED = ("linalg.generic", "linalg.copy", "linalg.fill", "linalg.transpose", "linalg.broadcast")


@dataclass(frozen=True)
class GpuKernelPlan(KernelPlan):
    """What GPU code generation decided for one kernel (`KernelPlan`: its schedule, "mma-sync",
    "simt" or "vector", or None for the naive mapping with the reason), and the figures of its tiling."""

    detail: str = ""
    threads: int = 0
    grid: int = 0
    flops: int = 0
    bytes: int = 0
    shared_bytes: int = 0
    fused: tuple[int, ...] = ()    # the kernels run in its block tiles (its fill, its epilogue)


def top_level_kernels(module_op) -> list[ir.Operation]:
    """The structured ops directly in a function body, in program order."""
    found = []
    for op in module_op.regions[0].blocks[0].operations:
        if op.operation.name != "func.func" or not op.regions[0].blocks:
            continue
        for inner in op.regions[0].blocks[0].operations:
            inner = inner.operation
            if inner.name in _STRUCTURED or (inner.name.startswith("linalg.") and "indexing_maps" in inner.attributes):
                found.append(inner)
    return found


def rewrite_top_level_generics(module_op, rewrite) -> int:
    """Apply `rewrite(op) -> bool` to every `linalg.generic` of `top_level_kernels` on buffers; how many
    it rewrote. A generic on tensors (a kernel-level pass run on graph-level input, `vt-opt`) is left
    alone: the rewrites build memref views (`vt-fuzz mlir` seed 9192 cases 1218, 1994)."""
    with module_op.context:
        return sum(1 for op in top_level_kernels(module_op)
                   if op.name == "linalg.generic" and all(isinstance(v.type, ir.MemRefType) for v in op.operands)
                   and rewrite(op))


def attach_gpu_schedules(module_op, chip: str = "sm_80", overrides=None, exclude=(), unfused=()) -> list[GpuKernelPlan]:
    """Tag the kernels of `module_op` (kernel level, memrefs) and append their GPU schedules; returns
    the plan per kernel. `exclude`: kernel ids to leave to the naive mapping (a schedule that failed);
    `unfused`: contraction ids to schedule without their fill and epilogue (`fusion.py`)."""
    with module_op.context, ir.Location.unknown():
        return _attach(module_op, chip, overrides, set(exclude), set(unfused))


def _attach(module_op, chip: str, overrides, exclude: set[int], unfused: set[int]) -> list[GpuKernelPlan]:
    table = resolve_gpu_schedules(overrides)
    target = gpu_target(chip)
    chosen_all = []  # (id, op, kernel, key, schedule, tiling or None, reason)
    for i, op in enumerate(top_level_kernels(module_op)):
        kernel = classify(op)
        op.attributes[KERNEL_ATTR] = t.kernel_id_attr(i)
        key = gpu_schedule_key(kernel, table, target)
        schedule = table.get(key)
        reason, tiling = kernel.reason, None
        if target is None:
            reason = f"no GPU schedules for {chip} (sm_80 and later)"
        elif any(isinstance(v.type, ir.RankedTensorType) for v in op.operands):
            # graph-level IR given to the kernel-level pass (vt-opt): the schedules build memref views
            # (`vt-fuzz mlir` seed 9393 case 419 failed with an internal error)
            reason = "an op on tensors: GPU schedules apply to bufferized kernels"
        elif i in exclude:
            reason = "its schedule failed to apply"
        elif schedule is None:
            reason = reason or ("turned off by schedules=" if DEFAULT_GPU_SCHEDULES.get(key) is not None
                                else f"no GPU schedule for {key} kernels")
        else:
            chosen = schedule.choose(kernel, target)
            if isinstance(chosen, str):
                reason = chosen
            else:
                tiling = chosen
        chosen_all.append([i, op, kernel, key, schedule, tiling, reason])
    fused_into = _fuse_neighbours(chosen_all, unfused)
    if target is not None:
        fused_into.update(_fuse_row_groups(module_op, chosen_all, table.get("row-reduction"), target, set(fused_into),
                                           exclude))
        fused_into.update(_fuse_matvec_neighbours(chosen_all, set(fused_into), exclude))
    plans, scheduled = [], []
    for i, op, kernel, key, schedule, tiling, reason in chosen_all:
        location = format_location(op.location, "-")
        if i in fused_into:
            host, role = fused_into[i]
            plans.append(GpuKernelPlan(i, key, kernel.describe(), location, None,
                                       f"fused into kernel {host} ({role})"))
            continue
        if tiling is None:
            flops, moved = _work(kernel)
            plans.append(GpuKernelPlan(i, key, kernel.describe(), location, None, reason or "no schedule",
                                       flops=flops, bytes=moved))
            continue
        op.attributes[SCHEDULED_ATTR] = ir.UnitAttr.get()
        fused = tuple(n.id for n in getattr(tiling, "prologue", ()) + getattr(tiling, "epilogue", ())) \
            + tuple(getattr(tiling, "members", ())[:-1])
        plans.append(GpuKernelPlan(i, key, kernel.describe(), location, tiling.schedule, "", tiling.describe(),
                                   tiling.threads, tiling.grid, tiling.flops, tiling.bytes,
                                   getattr(tiling, "shared_bytes", 0), fused))
        scheduled.append((i, kernel, schedule, tiling))
    _append_script(module_op, scheduled)
    return plans


def _fuse_neighbours(chosen_all, unfused: set[int]) -> dict[int, tuple[int, str]]:
    """Give each contraction the prologue and epilogue kernels that run in its block tiles
    (`fusion.py`); updates the contractions' tilings in `chosen_all`, returns {member id:
    (contraction id, role)}."""
    candidates = [Candidate(i, op, kernel, kernel.kind in (KernelKind.CONTRACTION, KernelKind.CONVOLUTION),
                            isinstance(tiling, VectorTiling) and tiling.vectorized)
                  for i, op, kernel, _, _, tiling, _ in chosen_all]
    fused_into: dict[int, tuple[int, str]] = {}
    for pos, (i, op, kernel, _, schedule, tiling, _) in enumerate(chosen_all):
        if not isinstance(tiling, ContractionTiling) or i in unfused or not schedule.fuse:
            continue
        group = find_group(candidates, pos, tiling.whole_output_dims(kernel), set(fused_into))
        if group is None:
            continue
        fused_tiling = tiling.covering(kernel, group.whole_dims)
        sizes = fused_tiling.output_block_sizes(kernel) if fused_tiling is not None else None
        if sizes is None:
            continue
        members = {role: [neighbour(c.kernel, c.id, role, tuple(sizes[d] for d in group.dims[c.id]), tiling.threads)
                          for c in found]
                   for role, found in (("prologue", group.prologue), ("epilogue", group.epilogue))}
        if any(n is None for found in members.values() for n in found):
            continue
        # The group runs at its last member's place: buffers its members use are freed after that.
        for dealloc in group.frees:
            dealloc.move_after(group.place)
        for n in members["prologue"] + members["epilogue"]:
            fused_into[n.id] = (i, n.role)
        chosen_all[pos][5] = fused_tiling.with_neighbours(tuple(members["prologue"]), tuple(members["epilogue"]))
    return fused_into


def _fuse_row_groups(module_op, chosen_all, schedule, target, taken: set[int],
                     exclude: set[int]) -> dict[int, tuple[int, str]]:
    """Run each group of row kernels (`codegen.fuse_rows.row_groups`: a softmax's fills, max, exp,
    sum and division; a LayerNorm's fills, moments and normalisation) that holds a row reduction as
    one kernel, by its last member (`RowReductionSchedule.choose_group`; `codegen-gpu-reduce-rows`
    builds it, the rows several members access kept in shared memory): one launch where there were
    one per member, each row read from global memory once where its buffers fit that cache. The
    per-row kernels (the fills of the row buffers) are members too; where a group with them cannot
    be formed, the group without them is tried (they then run before it as kernels of their own).
    Members must all have a schedule of their own (none excluded or turned off; per-row kernels of
    at most four elements, which no GPU schedule takes, need none) and belong to no contraction's
    group. Updates the last member's tiling in `chosen_all`; returns {member id:
    (that id, role)}."""
    if not isinstance(schedule, RowReductionSchedule) or not schedule.fuse:
        return {}
    fused_into: dict[int, tuple[int, str]] = {}
    grouped: set[int] = set()
    # A contraction's prologue (a LayerNorm's normalisation before the next Linear) joins no row
    # group: the scan sees it as another kernel, and the moments before it still form one.
    apart = {e[1] for e in chosen_all if e[0] in taken or e[0] in exclude}
    for func in module_op.regions[0].blocks[0].operations:
        if func.operation.name != "func.func" or not func.regions[0].blocks:
            continue
        for per_row_members in (True, False):
            for group in row_groups(func.regions[0].blocks[0], per_row_members=per_row_members,
                                    independent_groups=True, exclude=apart):
                if len(group.members) < 2 or not any(m.reduces and m.row_length > 1 for m in group.members):
                    continue
                entries = [next((e for e in chosen_all if e[1] == m.op), None) for m in group.members]
                if any(e is None or e[0] in taken or e[0] in grouped or e[0] in exclude
                       or (e[5] is None and not (m.per_row and e[2].kind is KernelKind.SCALAR))
                       for e, m in zip(entries, group.members)):
                    continue  # (a scalar kernel, no GPU schedule's, joins as a per-row member)
                per_row = {e[0] for e, m in zip(entries, group.members) if m.per_row}
                tiling = schedule.choose_group([(e[0], e[2]) for e in entries], prod(group.rows), target, per_row)
                if isinstance(tiling, str):
                    continue
                leader = entries[-1]
                for e, width in zip(entries, tiling.vectors):
                    e[1].attributes[ROW_GROUP_ATTR] = t.kernel_id_attr(leader[0])
                    if width > 1:   # the member's chunks along the row (`row_vector_width`)
                        i64 = ir.IntegerType.get_signless(64)
                        e[1].attributes[ROW_VECTOR_ATTR] = ir.IntegerAttr.get(i64, width)
                        e[1].attributes[ROW_CHUNKS_ATTR] = ir.IntegerAttr.get(i64, schedule.vector_chunks)
                    grouped.add(e[0])
                # The group runs at its last member's place: buffers its members use are freed after it
                # (a free already after it, moved after a later group's place, stays there).
                after = leader[1]
                for free in group.between:
                    if free.is_before_in_block(leader[1]):
                        free.move_after(after)
                        after = free
                leader[4], leader[5] = schedule, tiling
                for e in entries[:-1]:
                    fused_into[e[0]] = (leader[0], "row group")
    return fused_into


# Ops that may stand between a matvec and its fill or epilogue: no memory access (frees move after
# the group).
_TRANSPARENT = frozenset({"memref.alloc", "memref.alloca", "memref.dealloc", "memref.get_global",
                          "arith.constant"}) | VIEW_OPS


def _roots(op) -> set:
    return {buffer_root(v) for v in op.operands if isinstance(v.type, ir.MemRefType)}


def _row_identity(amap: ir.AffineMap, ranges: tuple[int, ...], rows: list[int]) -> bool:
    """Whether `amap` indexes a buffer by the row loops `rows` in order (loops and results of one
    element aside): lane 0 of each row then touches its own row's element only."""
    dims = []
    for e in amap.results:
        if isinstance(e, ir.AffineDimExpr):
            if ranges[e.position] > 1:
                dims.append(e.position)
        elif not (isinstance(e, ir.AffineConstantExpr) and e.value == 0):
            return False
    return dims == rows


def _neighbour(op, forward: bool, accepts, passable):
    """The nearest kernel op before (after) `op` in its block that `accepts`, past ops without memory
    accesses and past kernels that `passable(kernel)` allows the group to move across; the frees
    passed on the way. (None, frees) where another op, or a kernel neither accepted nor passable,
    stands first."""
    frees = []
    ops = [o.operation for o in op.block.operations]
    index = next(i for i, o in enumerate(ops) if o == op)
    for at in (ops[index + 1:] if forward else reversed(ops[:index])):
        if at.name in _TRANSPARENT:
            if at.name == "memref.dealloc":
                frees.append(at)
            continue
        if not at.name.startswith("linalg."):
            return None, frees
        if accepts(at):
            return at, frees
        if not passable(at):
            return None, frees
    return None, frees


def _fuse_matvec_neighbours(chosen_all, taken: set[int], exclude: set[int]) -> dict[int, tuple[int, str]]:
    """Run a matvec (`gemv`) with its neighbours as one row group (`codegen-gpu-reduce-rows`): the
    kernel before it that fills its output row by row (a Linear's zero or bias fill), and the one
    after it that maps each output row to one element (a bias, an activation, a cast), reading the
    output: per-row members, run by lane 0 of the row before (after) its sum, no barrier (that lane
    wrote what it reads). A Linear at batch 1 is then one kernel instead of three. Between them may
    stand views, allocations, frees (moved after the group: it runs at its last member's place) and
    kernels the group may move across: the fill past kernels that touch none of its output, the
    matvec (with its fill) past kernels that touch none of its buffers (a bufferization puts the next
    layer's fill between a Linear and its bias); a group formed before counts with all its members'
    buffers, a kernel fused elsewhere stops the scan. Values are the unfused kernels': the same
    operations per element in the same order. Returns {member id: (leader id, role)}."""
    # By kernel id (`KERNEL_ATTR`): the Python objects of the ops a block walk yields need not be
    # the ones classified (nor hash alike).
    entries = {e[0]: e for e in chosen_all}
    fused: dict[int, tuple[int, str]] = {}
    group_roots: dict[int, set] = {}   # leader id -> the buffers of its group's members

    def entry_of(kernel_op):
        return entries.get(ir.IntegerAttr(kernel_op.attributes[KERNEL_ATTR]).value) \
            if KERNEL_ATTR in kernel_op.attributes else None

    def roots_of(kernel_op) -> set:
        found = entry_of(kernel_op)
        return group_roots.get(found[0]) or _roots(kernel_op)

    def standalone(kernel_op) -> bool:
        found = entry_of(kernel_op)
        return found is not None and found[0] not in taken and found[0] not in fused

    for entry in chosen_all:
        kid, op, kernel, _, schedule, tiling, _ = entry
        if not isinstance(tiling, MatvecTiling) or tiling.members or kid in taken or kid in exclude \
                or not schedule.fuse:
            continue
        extents = [n for n in kernel.loop_ranges[:-1] if n > 1]
        out = op.operands[-1]
        if not extents or not _row_identity(kernel.maps[-1], kernel.loop_ranges,
                             [d for d, n in enumerate(kernel.loop_ranges[:-1]) if n > 1]):
            continue
        inputs = {buffer_root(v) for v in list(op.operands)[:-1] if isinstance(v.type, ir.MemRefType)}
        mine = _roots(op)

        def member(candidate):
            found = entry_of(candidate)
            if found is None or found[0] in taken or found[0] in exclude or found[0] in fused \
                    or candidate.name != "linalg.generic" or not found[2].loop_ranges \
                    or row_member_problem(candidate):
                return None
            ranges = found[2].loop_ranges
            if found[2].reduction_dims or [n for n in ranges if n > 1] != extents:
                return None  # not one element per output row
            if found[5] is None and found[2].kind is not KernelKind.SCALAR:
                return None
            rows = [d for d, n in enumerate(ranges) if n > 1]
            for value, amap in zip(candidate.operands, found[2].maps):
                # the output through this very view, row by row (no other lane's element)
                if isinstance(value.type, ir.MemRefType) and buffer_root(value) == buffer_root(out) \
                        and (value != out or not _row_identity(amap, ranges, rows)):
                    return None
            return found

        def is_fill(candidate) -> bool:
            found = member(candidate)
            return found is not None and candidate.operands[-1] == out and not any(
                isinstance(v.type, ir.MemRefType) for v in list(candidate.operands)[:-1])

        def is_epilogue(candidate) -> bool:
            found = member(candidate)
            if found is None:
                return False
            reads = list(candidate.operands)[:len(candidate.opview.inputs)]
            writes = {buffer_root(v) for v in list(candidate.operands)[len(reads):]}
            # reads a result of this matvec and overwrites neither W nor x (other rows still read them)
            return out in reads and not writes & inputs

        before, _ = _neighbour(op, False, is_fill,
                               lambda k: standalone(k) and buffer_root(out) not in roots_of(k))
        after, frees = _neighbour(op, True, is_epilogue, lambda k: standalone(k) and not roots_of(k) & mine)
        fill = entry_of(before) if before is not None else None
        epilogue = entry_of(after) if after is not None else None
        members = [m for m in (fill, entry, epilogue) if m is not None]
        if len(members) < 2:
            continue
        rows = prod(extents)
        rows_per_block = tiling.rows_per_block
        if tiling.row_threads == 32:   # rows per block dividing the rows: every thread reaches the barriers
            rows_per_block = max(d for d in range(1, rows_per_block + 1) if rows % d == 0)
        leader = members[-1]
        grouped = replace(tiling, rows_per_block=rows_per_block, grid=rows // rows_per_block,
                          members=tuple(m[0] for m in members))
        for m in members:
            m[1].attributes[ROW_GROUP_ATTR] = t.kernel_id_attr(leader[0])
        op.attributes[ROW_VECTOR_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), tiling.vector)
        if leader is epilogue:
            for free in frees:
                free.move_after(epilogue[1])
        leader[4], leader[5] = schedule, grouped
        group_roots[leader[0]] = set().union(*(_roots(m[1]) for m in members))
        for m in members[:-1]:
            fused[m[0]] = (leader[0], "row group")
    return fused


def _work(kernel) -> tuple[int, int]:
    """(flops, bytes) of a kernel left to the naive mapping, for the report: its body's arithmetic
    per iteration (2 per multiply-add of a contraction), every operand read or written once."""
    op = kernel.op
    moved = sum(prod(ir.MemRefType(v.type).shape) * element_bytes(ir.MemRefType(v.type).element_type)
                for v in op.operands if isinstance(v.type, ir.MemRefType))
    iterations = kernel.iterations if kernel.loop_ranges else 0
    if kernel.kind is KernelKind.CONTRACTION:
        return 2 * iterations, moved
    body = len(list(op.regions[0].blocks[0].operations)) - 1 if op.regions and op.regions[0].blocks else 0
    return iterations * max(0, body), moved


def _build_phase(kid: int, kernel, schedule, tiling, phase: str, handle) -> None:
    """Build kernel `kid`'s ops of `phase` at the insertion point, located `kernel <id>: ... (<phase>)`
    (`kernel_of_failure`, `failing_kernel`)."""
    with ir.Location.name(f"kernel {kid}: {kernel.describe()} ({phase})"):
        getattr(schedule, f"build_{phase}")(kid, kernel, tiling, handle)


def _append_script(module_op, scheduled) -> None:
    """One entry point per phase (`transform-interpreter{entry-point=...}`) holding every kernel's ops
    of that phase. They are built in the entry point, not as a named sequence per kernel and phase
    behind a `transform.include`: verifying an include (and the interpreter's checks of its effects)
    looks its callee up by a scan of the module's symbols, so the includes cost includes x symbols,
    quadratic in the kernels (compile time: docs/codegen_gpu.md, Limits)."""
    module_op.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
    body = module_op.regions[0].blocks[0]
    # Failures propagate: the CUDA lowering retries without a kernel whose schedule failed
    # (`backend/cuda/lower.py`).
    for phase, entry in ENTRY_POINTS.items():
        main = t.named_sequence(body, entry, consumed=False)
        with ir.InsertionPoint(main.body):
            root = main.bodyTarget
            if phase == "tile":
                # (each kernel's ops may consume its handle: nothing else uses it)
                handles = t.match_scheduled(root, len(scheduled)) if scheduled else []
                for (kid, kernel, schedule, tiling), handle in zip(scheduled, handles):
                    _build_phase(kid, kernel, schedule, tiling, phase, handle)
            else:
                for kid, kernel, schedule, tiling in scheduled:
                    _build_phase(kid, kernel, schedule, tiling, phase, root)
            if phase == "map" and scheduled:
                funcs = t.match_names(root, ["func.func"])
                t.canonicalize(funcs, fold_memref_aliases=True)
                t.cse(funcs)
                hoist_vector_transfers(funcs)
                for kid, kernel, schedule, tiling in scheduled:
                    _build_phase(kid, kernel, schedule, tiling, "finish", root)
            t.yield_()


def kernel_of_failure(message: str) -> int | None:
    """The kernel whose schedule failed, from an interpreter error: the failing transform op's
    location is the name `kernel <id>: ...` given to that kernel's sequences."""
    marker = "kernel "
    at = message.find(marker)
    while at >= 0:
        digits = ""
        for ch in message[at + len(marker):]:
            if not ch.isdigit():
                break
            digits += ch
        if digits and message[at + len(marker) + len(digits):].startswith(":"):
            return int(digits)
        at = message.find(marker, at + 1)
    return None


def failing_kernel(snapshot, phase: str, plans: list[GpuKernelPlan]) -> int | None:
    """Which kernel's `phase` ops fail on `snapshot` (the module as it was before the phase), trying
    each scheduled kernel's alone: on a copy whose entry point keeps that kernel's ops and those of no
    kernel (the matches, the per-function clean-ups), the others' erased (their location names their
    kernel); None when none fails alone."""
    entry = ENTRY_POINTS[phase]
    for plan in plans:
        if plan.schedule is None:
            continue
        trial = snapshot.clone()
        try:
            main = next((op for op in trial.regions[0].blocks[0].operations
                         if op.operation.name == "transform.named_sequence"
                         and ir.StringAttr(op.attributes["sym_name"]).value == entry), None)
            if main is None:
                return None
            # Last first: a kernel's ops use only its own ops' results and those of no kernel.
            for op in reversed(list(main.regions[0].blocks[0].operations)):
                owner = kernel_of_failure(str(op.location))
                if owner is not None and owner != plan.id:
                    op.operation.erase()
            try:
                interpreter.apply_named_sequence(trial, main.operation, trial)
            except Exception:  # noqa: BLE001 - any failure of this kernel's ops names it
                return plan.id
        finally:
            trial.erase()
    return None


@register_pass
class AttachGpuSchedule(Pass):
    name = "codegen-gpu-attach-schedule"
    summary = "Classify each kernel and attach its GPU schedule (tile, map, pipeline phases) as transform IR"
    description = (
        "Kernel level (memrefs). Tags every top-level linalg op `codegen.kernel = <id>` and appends the "
        "entry points @__gpu_tile, @__gpu_promote, @__gpu_map and @__gpu_pipeline, each holding every "
        "kernel's transform ops of its phase, run by transform-interpreter{entry-point=...} (passes/cuda.pipeline)."
    )
    options = (
        Option("chip", str, "sm_80", "the GPU to schedule for (sm_80, sm_86, sm_89, sm_90, sm_90a)"),
        Option("schedules", list[str], [], "overrides: kind:none, kind:default or kind.parameter:value"),
        Option("exclude", list[int], [], "kernel ids left to the naive mapping"),
    )

    def run(self, module):
        attach_gpu_schedules(module, chip=self.chip, overrides=self.schedules, exclude=self.exclude)
