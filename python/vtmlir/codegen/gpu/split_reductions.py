"""`codegen-gpu-split-reductions`: a long reduction over few outputs becomes partial sums and a combine.

The `vector` and `threads` schedules give each thread whole outputs and run the reduction loop inside
the thread. Where the outputs are few and the reduction long, that leaves an H100 nearly idle: a decode
step's attention product `out[b, h, d] = Σ_s P[b, h, s] · V[b, h, s, d]` at batch 8 has 2048 outputs,
so 2048 threads (under 1 % of the 270,336 an H100 holds) each walk 4096 products one after the
other (1.5 ms for 34 MB: 2 % of the memory bandwidth). At the kernel level (memrefs, after the
unit-dimension folding) each such generic with one reduction loop `r` of extent R is rewritten into

1. `partial[j, out...] = combine over c of body(r = j·C + c)`: the inputs that read `r` through a
   `memref.expand_shape` view splitting it into (J, C), `j` a parallel loop outside the op's loops, `c`
   the reduction in r's place, `partial` a fresh buffer filled with the combiner's identity (-0.0 for `addf`,
   exact); the op's own body;
2. `out[...] = combine over j of partial[j, ...]` with the op's combiner, starting from `out`'s value
   (the original's initial value): a kernel of its own, in j order where it is an outer reduction,
   by the row-reduction schedule's tree where `r` was the innermost loop.

Both are kernels the same schedules take (`threads` / `vector` / `row-reduction`), the partial one
with J times the threads (on an H100: `vtc_llama3_decode` at batch 8, 1748 -> 401 us). J is
the largest divisor of R that keeps a chunk C at least `MIN_CHUNK` long and no shorter than J, and
the threads (outputs × J) within half of what the chip holds at once; no split where J would be
under 4 or R is under 2048 (a shorter loop costs a thread less than two more launches).

A matrix-vector product the `gemv` schedule takes (a warp or more per output row) is split only
where its rows are so few that its lanes fill under a quarter of half the chip (8 outputs of a
16384-long sum); its chunks are then gemv rows of their own (J chosen for a warp per partial row).

Values: integer, min and max combiners are exact in any order. A float sum (or product) is
reassociated: each output is the sum of J chunk sums of C terms each, in order, instead of one sum
of R terms; the worst-case error bound of recursive summation shrinks from (R-1)u to (C+J-2)u.
Turned off per kind with `schedules={"unknown": {"split_reductions": False}}` (likewise
"outer-reduction"): then the sums are the naive mapping's, bitwise.
"""

from __future__ import annotations

from math import prod

from torch_mlir import ir
from torch_mlir.dialects import linalg, memref

from ...passes.registry import Option, Pass, register_pass
from ..bodies import iterator_attr
from ..decompose_convolutions import generic_like
from ..kernels import Kernel, KernelKind, classify
from ..schedules import schedule_key
from .attach_schedule import top_level_kernels
from .layouts import strides_and_offset
from .reduce_rows import combine_like, combiner_identity, row_combiners
from .schedules import VectorSchedule, gpu_schedule_key, resolve_gpu_schedules
from .target import gpu_target

WARP = 32

#: A chunk shorter than this leaves the combine kernel (J terms per output) as long as the partial one.
MIN_CHUNK = 32
#: Fewer chunks than this are not worth a second kernel and a buffer.
MIN_SPLIT = 4
#: A shorter reduction takes a thread less time than the two extra launches (measured on an H100: the
#: batch-1 MLP's 256-long GEMVs split ran 58 -> 84 us).
MIN_EXTENT = 2048


def _expanded(value: ir.Value, position: int, chunks: int) -> ir.Value:
    """`value` (a memref of static layout) with dimension `position` split into (chunks,
    extent // chunks) by a `memref.expand_shape` view."""
    t = ir.MemRefType(value.type)
    strides, offset = strides_and_offset(t)
    chunk = t.shape[position] // chunks
    shape = list(t.shape[:position]) + [chunks, chunk] + list(t.shape[position + 1:])
    new_strides = list(strides[:position]) + [strides[position] * chunk, strides[position]] + list(strides[position + 1:])
    if isinstance(t.layout, ir.AffineMapAttr) and t.layout.value == ir.AffineMap.get_identity(t.rank):
        result = ir.MemRefType.get(shape, t.element_type, memory_space=t.memory_space)
    else:
        result = ir.MemRefType.get(shape, t.element_type, ir.StridedLayoutAttr.get(offset, new_strides), t.memory_space)
    i64 = ir.IntegerType.get_signless(64)
    groups = [[i] for i in range(position)] + [[position, position + 1]] + \
        [[i + 1] for i in range(position + 1, t.rank)]
    reassociation = ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, i) for i in g]) for g in groups])
    return memref.ExpandShapeOp(result, value, reassociation, [], shape).result


def chunks_for(outputs: int, extent: int, max_threads: int) -> int:
    """J: the largest divisor of `extent` with chunks C of at least MIN_CHUNK and no fewer than J
    (each output's serial work, C in the partial kernel and J in the combine, at most 2·sqrt(R)) and
    outputs x J threads within `max_threads`; 1 (no split) where that is under MIN_SPLIT or the
    extent under MIN_EXTENT."""
    best = 1
    if extent < MIN_EXTENT:
        return best
    for j in range(MIN_SPLIT, extent // MIN_CHUNK + 1):
        if extent % j == 0 and j * j <= extent and outputs * j <= max_threads:
            best = j
    return best


def split_reduction(kernel: Kernel, max_threads: int, lanes_per_output: int = 1) -> bool:
    """Rewrite one generic (kernel level, `kernel` its classification) into partial reductions and
    their combine, in place; False where it does not qualify (see the module docstring)."""
    op = kernel.op
    if op.name != "linalg.generic" or len(op.opview.outputs) != 1 or len(kernel.reduction_dims) != 1 \
            or not kernel.loop_ranges:
        return False
    (r,) = kernel.reduction_dims
    ranges = kernel.loop_ranges
    outputs = prod(ranges) // ranges[r]
    chunks = chunks_for(outputs * lanes_per_output, ranges[r], max_threads)
    if chunks == 1:
        return False
    combiners = row_combiners(op)
    if isinstance(combiners, str):
        return False
    (combine,) = combiners
    maps = kernel.maps
    # Every input reads `r` at most once, as a plain dimension (a window `oh + kh` does not split).
    positions = []
    for amap in maps[:-1]:
        found = [i for i, e in enumerate(amap.results)
                 if isinstance(e, ir.AffineDimExpr) and e.position == r]
        if len(found) > 1 or any(not isinstance(e, ir.AffineDimExpr) for e in amap.results):
            return False
        positions.append(found[0] if found else None)
    if any(not isinstance(e, ir.AffineDimExpr) for e in maps[-1].results) or all(p is None for p in positions):
        return False
    if any(p is not None and strides_and_offset(ir.MemRefType(v.type)) is None
           for v, p in zip(op.operands, positions)):
        return False  # a dynamic layout: no static view splits it
    rank = kernel.rank

    # The partial kernel's loops: j outermost (the vector schedules tile at most three loops over
    # the grid and run the shortest others inside each thread: j, the long one, stays a grid
    # dimension), then the op's loops with r's extent C.
    def shifted(d: int) -> ir.AffineExpr:
        return ir.AffineDimExpr.get(d + 1)

    j = ir.AffineDimExpr.get(0)
    out = op.operands[-1]
    out_type = ir.MemRefType(out.type)
    with op.location, ir.InsertionPoint(op):
        inputs, partial_maps = [], []
        for operand, amap, position in zip(op.operands[:-1], maps[:-1], positions):
            results = []
            for i, e in enumerate(amap.results):
                results += [j, shifted(r)] if i == position else [shifted(e.position)]
            if position is not None:
                operand = _expanded(operand, position, chunks)
            inputs.append(operand)
            partial_maps.append(ir.AffineMap.get(rank + 1, 0, results))
        partial = memref.AllocOp(ir.MemRefType.get([chunks] + list(out_type.shape), out_type.element_type), [], [],
                                 alignment=64).result
        linalg.fill(combiner_identity(combine), outs=[partial])
        partial_maps.append(ir.AffineMap.get(rank + 1, 0, [j] + [shifted(e.position) for e in maps[-1].results]))
        iterators = [iterator_attr(op.context, "parallel")] + list(ir.ArrayAttr(op.attributes["iterator_types"]))
        generic_like(op, inputs + [partial], partial_maps, iterators)
        # The combine: out = combine(out, partial[j]) for j in order; r's loop now runs over j.
        r_dim = ir.AffineDimExpr.get(r)
        combine_maps = [ir.AffineMap.get(rank, 0, [r_dim] + list(maps[-1].results)), maps[-1]]
        combined = linalg.GenericOp([], [partial], [out], ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in combine_maps]),
                                    ir.ArrayAttr(op.attributes["iterator_types"]))
        block = combined.regions[0].blocks.append(out_type.element_type, out_type.element_type)
        with ir.InsertionPoint(block):
            # The combiner cloned: the original's `out` operand -> out's element, its other one -> partial's.
            out_arg = op.regions[0].blocks[0].arguments[-1]
            linalg.YieldOp([combine_like(combine, out_arg, block.arguments[0], block.arguments[1])])
        memref.DeallocOp(partial)
    op.erase()
    return True


def split_reductions(module_op, chip: str = "sm_80", overrides=None) -> int:
    """Split every qualifying kernel of the module's functions; returns how many."""
    target = gpu_target(chip)
    if target is None:
        return 0
    table = resolve_gpu_schedules(overrides)
    # Half of what the chip holds at once: the two kernels' launches then fill it, and the
    # partial buffer stays small (J x outputs elements).
    max_threads = target.sms * target.max_threads_per_sm // 2
    count = 0
    with module_op.context:
        for op in top_level_kernels(module_op):
            kernel = classify(op)
            if kernel.kind not in (KernelKind.UNKNOWN, KernelKind.REDUCTION) or kernel.reason not in (
                    "", "a contraction without m, n and k dimensions"):
                continue
            if gpu_schedule_key(kernel, table, target) == "gemv":
                # A matvec: its lanes per output row (a warp or more) fill the chip unless the rows
                # are very few; then chunks of the row become rows of their own (a warp each).
                tiling = table["gemv"].choose(kernel, target)
                if tiling.grid * tiling.threads < max_threads // 4:
                    count += split_reduction(kernel, max_threads, lanes_per_output=WARP)
                continue
            schedule = table.get(schedule_key(kernel))
            if not isinstance(schedule, VectorSchedule) or not schedule.split_reductions \
                    or schedule_key(kernel) == "row-reduction":
                continue
            count += split_reduction(kernel, max_threads)
    return count


@register_pass
class SplitReductions(Pass):
    name = "codegen-gpu-split-reductions"
    summary = "Split a long reduction over few outputs into chunk partials and a combine kernel"
    description = ("Kernel level (memrefs). A generic with one reduction loop that the vector or threads "
                   "schedule would run inside too few threads becomes partial[j, ...] over chunks of the "
                   "reduction (inputs viewed through memref.expand_shape) and out = combine over j of "
                   "partial; float sums are reassociated (chunk sums).")
    options = (
        Option("chip", str, "sm_80", "the GPU the schedules are for"),
        Option("schedules", list[str], [], "the GPU schedule overrides (unknown.split_reductions:false: none)"),
    )

    def run(self, module):
        split_reductions(module, chip=self.chip, overrides=self.schedules)
