"""Kernels launched whole, built outside the schedules' transform scripts: the Tilus kernels that
`subbyte-cuda-kernels` (lowbit/subbyte_cuda_kernels.py) launches in place of quantised contractions
and the sm_90a `wgmma` kernels of `codegen-gpu-wgmma-contractions`. Each launch carries
`codegen.launch_plan`, a dictionary saying its schedule, tiling and figures, from which the CUDA
backend makes its plan and report row; a quantised contraction the Tilus kernels refused keeps its
generic, marked with `codegen.tilus_refusal` (why). Here, below the lowbit subsystem, so the CUDA
backend reads them without importing the passes."""

from __future__ import annotations

import math
from dataclasses import replace

from torch_mlir import ir

from ...errors import format_location
from .. import transform_ir as t
from ..kernels import KERNEL_ATTR
from .attach_schedule import GpuKernelPlan, top_level_kernels

LAUNCH_ATTR = "codegen.launch_plan"
REFUSAL_ATTR = "codegen.tilus_refusal"
_TEXT = ("schedule", "detail", "description")
_NUMBERS = ("threads", "grid", "flops", "bytes", "shared_bytes")


def launch_plan_attr(**fields) -> ir.DictAttr:
    """The `codegen.launch_plan` dictionary: schedule, detail, description (strings); threads per
    block, grid (blocks), flops, bytes moved, shared_bytes (integers)."""
    i64 = ir.IntegerType.get_signless(64)
    return ir.DictAttr.get({**{key: ir.StringAttr.get(fields[key]) for key in _TEXT},
                            **{key: ir.IntegerAttr.get(i64, int(fields[key])) for key in _NUMBERS}})


def is_positive_zero(value) -> bool:
    """Whether `value` is the constant +0.0 (a fill with it is what a fresh accumulator holds)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant" \
            or not isinstance(value.type, (ir.F32Type, ir.F16Type, ir.BF16Type)):
        return False
    number = ir.FloatAttr(owner.operation.attributes["value"]).value
    return number == 0.0 and math.copysign(1.0, number) > 0


def zero_fill_before(op, y) -> ir.Operation | None:
    """The kernel right before `op` (past constants and global reads) that only fills `y` with +0.0
    (a `linalg.fill`, or a generic with no input yielding the constant), or None. A kernel launched
    in `op`'s place then writes y instead of adding to it, and the fill goes: one launch less, the
    same values."""
    ops = [o.operation for o in op.block.operations]
    at = next(i for i, o in enumerate(ops) if o == op)
    for prev in reversed(ops[:at]):
        if prev.name in ("arith.constant", "memref.get_global"):
            continue
        if prev.name == "linalg.fill":
            return prev if prev.operands[-1] == y and is_positive_zero(prev.operands[0]) else None
        if prev.name == "linalg.generic" and len(prev.operands) == 1 and prev.operands[0] == y:
            body = [o.operation for o in prev.regions[0].blocks[0].operations]
            if len(body) == 1 and is_positive_zero(body[0].operands[0]):
                return prev
        return None
    return None


def launch_plans(module_op, plans: list) -> list:
    """`plans` (codegen-gpu-attach-schedule's, one per kernel it saw) with one plan per launch built
    whole (`codegen.launch_plan`; given the next kernel ids, which the launch then carries as its
    `codegen.kernel`, so the CUDA backend reports it as a scheduled kernel), and with the reason
    of each quantised contraction that kept the naive mapping (`codegen.tilus_refusal`)."""
    plans = list(plans)
    with module_op.context:
        position = {p.id: i for i, p in enumerate(plans)}
        for op in top_level_kernels(module_op):
            if REFUSAL_ATTR not in op.attributes or KERNEL_ATTR not in op.attributes:
                continue
            at = position.get(ir.IntegerAttr(op.attributes[KERNEL_ATTR]).value)
            if at is not None and plans[at].schedule is None:
                why = ir.StringAttr(op.attributes[REFUSAL_ATTR]).value
                plans[at] = replace(plans[at], kind="contraction",
                                    reason=f"quantised contraction, no Tilus kernel: {why}; {plans[at].reason}")
        next_id = max(position, default=-1) + 1
        for func in module_op.regions[0].blocks[0].operations:
            if func.operation.name != "func.func" or not func.regions[0].blocks:
                continue
            for launch in func.regions[0].blocks[0].operations:
                launch = launch.operation
                if launch.name != "gpu.launch_func" or LAUNCH_ATTR not in launch.attributes:
                    continue
                info = ir.DictAttr(launch.attributes[LAUNCH_ATTR])
                text = {key: ir.StringAttr(info[key]).value for key in _TEXT}
                number = {key: ir.IntegerAttr(info[key]).value for key in _NUMBERS}
                launch.attributes[KERNEL_ATTR] = t.kernel_id_attr(next_id)
                plans.append(GpuKernelPlan(next_id, "contraction", text["description"],
                                           format_location(launch.location, "-"), text["schedule"], "",
                                           text["detail"], **number))
                next_id += 1
    return plans
