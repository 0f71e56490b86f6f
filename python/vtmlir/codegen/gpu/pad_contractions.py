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
from .attach_schedule import top_level_kernels
from .schedules import ContractionSchedule, resolve_gpu_schedules
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


def pad_contraction(op, schedule: ContractionSchedule, target) -> bool:
    """Pad one contraction generic in place (operands replaced); False when it needs none."""
    kernel = classify(op)
    if kernel.kind is not KernelKind.CONTRACTION or not schedule.uses_tensor_cores(kernel, target):
        return False
    if schedule.mma_aligned(kernel):
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
    schedule = resolve_gpu_schedules(overrides).get(KernelKind.CONTRACTION.value)
    if target is None or not isinstance(schedule, ContractionSchedule):
        return 0
    with module_op.context:
        return sum(1 for op in top_level_kernels(module_op) if op.name == "linalg.generic"
                   and pad_contraction(op, schedule, target))


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
