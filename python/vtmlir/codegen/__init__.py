"""vtmlir's code-generation strategy layer for the CPU (kernel level → vectorised, threaded kernels).

Where it sits: after bufferization (`backend.bufferize`: every kernel a linalg op over memrefs) and
before the lowering to LLVM (`backend.cpu.lower`). It imports only the IR layer and the pass registry.

- `kernels`: classification (contraction, convolution, pooling, reduction, elementwise, data movement).
- `schedules`: per-kind schedule parameters and the transform IR each builds; `DEFAULT_SCHEDULES`.
- `transform_ir`: thin builders over the upstream transform ops.
- `fusion`: which neighbours (the accumulator's fill, the elementwise epilogue) a contraction runs in
  its outer tiles; the CPU contraction schedule and the GPU's (`gpu/`) both take its groups.
- passes (one per file): `codegen-transpose-b-operands` (`transpose_b_operands`),
  `codegen-attach-schedule` (`attach_schedule`), `codegen-erase-schedule` (`erase_schedule`),
  `codegen-fuse-rows` (`fuse_rows`: row kernels in one loop over row blocks), `codegen-split-row-reductions`
  (`split_row_reductions`: a fused row reduction's partial sums),
  `codegen-fold-row-broadcasts` (`fold_row_broadcasts`: a register tile's A column as one broadcast),
  `codegen-fuse-multiply-add` (`fuse_multiply_add`), `codegen-streaming-stores` (`streaming_stores`),
  `codegen-emulate-bf16` (`emulate_bf16`),
  `codegen-hoist-accumulators` (`hoist_accumulators`), `codegen-hoist-static-allocas` (`hoist_static_allocas`),
  `codegen-outline-kernels` (`outline_kernels`: a very large function's kernels as functions),
  `codegen-drop-transfer-unit-dims` (`drop_transfer_unit_dims`: transfers on N x C x 1 x 1 buffers as rank-2 ones),
  `codegen-insert-profile-marks`
  (`insert_profile_marks`, a profiling build's timing marks); the upstream `transform-interpreter` runs the script.
- `report`: which kernels were vectorised and which kept loops, and why.
- `target`: the host's vector width and cores; `openmp`: the OpenMP runtime for threads.
"""

from __future__ import annotations

from ..errors import VtmlirError
from .attach_schedule import KernelPlan, attach_schedules
from .kernels import KERNEL_ATTR, Kernel, KernelKind, classify
from .report import KernelReport, kernel_report
from .schedules import (DEFAULT_SCHEDULES, EXACT_SCHEDULES, ContractionSchedule, RowReductionSchedule, Schedule, VectorSchedule,
                        resolve_schedules)
from .target import HostTarget, host_target


def override_items(schedules, resolve=resolve_schedules) -> list[str]:
    """`schedules=` of `vtmlir.compile` as the text items of `codegen-attach-schedule{schedules=...}`
    (validated by `resolve`, the target's: an unknown kind or parameter is a VtmlirError)."""
    if not schedules:
        return []
    if isinstance(schedules, dict):
        items = []
        for kind, value in schedules.items():
            if value is None:
                items.append(f"{kind}:none")
            elif isinstance(value, Schedule):
                items += [f"{kind}.{name}:{getattr(value, name)}" for name in value.__dataclass_fields__]
            elif isinstance(value, dict):
                items += [f"{kind}.{k}:{v}" for k, v in value.items()]
            else:
                raise VtmlirError(f"error: schedules[{kind!r}] must be None, a Schedule or a dict of parameters")
    else:
        items = list(schedules)
    resolve(items)
    return items


__all__ = [
    "DEFAULT_SCHEDULES", "EXACT_SCHEDULES", "KERNEL_ATTR", "ContractionSchedule", "HostTarget", "Kernel", "KernelKind",
    "KernelPlan", "KernelReport", "RowReductionSchedule", "Schedule", "VectorSchedule", "attach_schedules",
    "classify", "host_target", "kernel_report", "override_items", "resolve_schedules",
]
