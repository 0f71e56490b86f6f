"""`codegen-gpu-pad-contractions`: tensor-core contractions get operands padded to multiples of 16.

`mma.sync.m16n8k16` multiplies 16x16 by 16x8 tiles, and the tensor-core schedule tiles m, n and k
exactly (no partial tiles: the accumulators are loaded and stored without bounds checks). A
contraction the schedule would put on tensor cores (`ContractionSchedule.uses_tensor_cores`: f16
or bf16 operands) whose m, n or k is not a multiple of 16 -- a decode step's single row, a 172-wide MLP, a
3-channel stem -- computes on zero-padded copies instead: each operand indexed by a padded
dimension is copied into a zeroed buffer of the padded shape (`linalg.fill` + `linalg.copy` into a
subview: data-movement kernels, vectorised like any other), the contraction runs on the copies, and
the accumulator's valid part is copied back. An output whose rows are misaligned for the
accumulators' 8-byte stores is staged the same way.

Values are unchanged: the padded k entries are zeros of both operands (products 0, sums unchanged
in f32), the padded rows and columns of C are computed and dropped.
"""

from __future__ import annotations

from math import prod

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, memref

from ...passes.registry import Option, Pass, register_pass
from ..kernels import KernelKind, classify
from .attach_schedule import rewrite_top_level_generics
from .matvec import MATVEC_KEY, matvec_problem
from .schedules import ContractionSchedule, VectorSchedule, resolve_gpu_schedules
from .split_reductions import chunks_for
from .target import gpu_target

MMA_MULTIPLE = 16


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _zero(element_type: ir.Type) -> ir.Value:
    if isinstance(element_type, ir.IntegerType):
        return arith.ConstantOp(element_type, 0).result
    return arith.ConstantOp(element_type, 0.0).result


def _padded_copy(source: ir.Value, padded_shape: list[int], copy_in: bool) -> tuple[ir.Value, ir.Value]:
    """A zeroed buffer of `padded_shape` with `source` copied into its leading corner (when
    `copy_in`); returns (buffer, the corner as a view)."""
    stype = ir.MemRefType(source.type)
    buffer = memref.AllocOp(ir.MemRefType.get(padded_shape, stype.element_type), [], [], alignment=64).result
    linalg.fill(_zero(stype.element_type), outs=[buffer])
    corner = memref.subview(buffer, [0] * stype.rank, list(stype.shape), [1] * stype.rank)
    if copy_in:
        linalg.copy(source, outs=[corner])
    return buffer, corner


def _split_instead(kernel, max_threads: int) -> bool:
    """Whether `kernel` is a matrix-vector product `x @ W` (m or n of 1, W's rows along the outputs:
    no gemv) with a sum long enough for `codegen-gpu-split-reductions` to make chunks of it: padded
    to 16 rows for tensor cores it ran in a handful of blocks (decode's P V, 8 heads x 32 outputs
    over 4096 positions: 16 blocks of 64 threads), while its chunk partials spread over the chip (the
    f32 kernel's 64 chunks, 16384 threads)."""
    ranges = kernel.loop_ranges
    if not (prod(ranges[d] for d in kernel.m) == 1 or prod(ranges[d] for d in kernel.n) == 1):
        return False
    sums = [d for d in kernel.k if ranges[d] > 1]
    if len(sums) != 1:
        return False
    outputs = kernel.iterations // ranges[sums[0]]
    return chunks_for(outputs, ranges[sums[0]], max_threads) > 1


def pad_contraction(op, schedule: ContractionSchedule, target, matvec=None, split=None) -> bool:
    """Pad one contraction generic in place (operands replaced); False when it needs none, is a
    matrix-vector product that `matvec` (the gemv schedule, None: none) takes, or one whose long sum
    `codegen-gpu-split-reductions` splits (`split`: the threads it fills, None: no splitting)."""
    kernel = classify(op)
    if kernel.kind is not KernelKind.CONTRACTION or not schedule.uses_tensor_cores(kernel, target):
        return False
    if schedule.mma_aligned(kernel):
        return False
    if matvec is not None and not matvec_problem(kernel):
        # A matrix-vector product (m or n of 1: a batch-1 Linear) is memory-bound: padded to 16 rows
        # it ran on tensor cores in few blocks (a 4096x4096 one: 64 blocks of 16x64); the gemv
        # schedule reads W coalesced with a warp per output row once the unit loop is folded.
        return False
    if split is not None and _split_instead(kernel, split):
        return False
    ranges = kernel.loop_ranges
    padded = {d: _round_up(ranges[d], MMA_MULTIPLE) for d in (kernel.m[-1], kernel.n[-1], kernel.k[-1])}
    if prod(padded.values()) > 32 * prod(ranges[d] for d in padded):
        return False  # mostly padding (more than a single row's 16x): the SIMT kernel is the better one
    out_index = len(op.operands) - 1
    buffers, writeback = [], None
    with op.location, ir.InsertionPoint(op):
        for i, (operand, amap) in enumerate(zip(op.operands, kernel.maps)):
            shape = list(ir.MemRefType(operand.type).shape)
            new_shape = [padded.get(e.position, size) if isinstance(e, ir.AffineDimExpr) else size
                         for e, size in zip(amap.results, shape)]
            if new_shape == shape and (i != out_index or ContractionSchedule.mma_aligned(kernel)):
                continue
            buffer, corner = _padded_copy(operand, new_shape, copy_in=True)
            op.operands[i] = buffer
            buffers.append(buffer)
            if i == out_index:
                writeback = (corner, operand)
    with op.location, ir.InsertionPoint.after(op):
        if writeback is not None:
            linalg.copy(writeback[0], outs=[writeback[1]])
        for buffer in buffers:
            memref.DeallocOp(buffer)
    return True


def pad_contractions(module_op, chip: str = "sm_80", overrides=None) -> int:
    """Pad every tensor-core contraction of the module's functions; returns how many."""
    target = gpu_target(chip)
    table = resolve_gpu_schedules(overrides)
    schedule = table.get(KernelKind.CONTRACTION.value)
    matvec = table.get(MATVEC_KEY)
    unknown = table.get(KernelKind.UNKNOWN.value)
    split = target.sms * target.max_threads_per_sm // 2 \
        if target is not None and isinstance(unknown, VectorSchedule) and unknown.split_reductions else None
    if target is None or not isinstance(schedule, ContractionSchedule):
        return 0
    return rewrite_top_level_generics(module_op, lambda op: pad_contraction(op, schedule, target, matvec, split))


@register_pass
class PadContractions(Pass):
    name = "codegen-gpu-pad-contractions"
    summary = "Zero-pad the operands of tensor-core contractions whose m, n or k is not a multiple of 16"
    options = (
        Option("chip", str, "sm_80", "the GPU the schedules are for"),
        Option("schedules", list[str], [], "the GPU schedule overrides (contraction.tensor_cores:false: no padding)"),
    )

    def run(self, module):
        pad_contractions(module, chip=self.chip, overrides=self.schedules)
