"""The plans (and report rows) of the Tilus kernels that `subbyte-cuda-kernels` (lowbit/subbyte_cuda_kernels.py)
launches in place of quantised contractions: the launch's `codegen.tilus` dictionary says its
schedule, tiling and figures; a quantised contraction it refused keeps its generic, marked with
`codegen.tilus_refusal` (why). Here, below the lowbit subsystem, so the CUDA backend reads them
without importing the pass."""

from __future__ import annotations

from dataclasses import replace

from torch_mlir import ir

from ...errors import format_location
from .. import transform_ir as t
from ..kernels import KERNEL_ATTR
from .attach_schedule import GpuKernelPlan, top_level_kernels

TILUS_ATTR = "codegen.tilus"
REFUSAL_ATTR = "codegen.tilus_refusal"


def tilus_plans(module_op, plans: list) -> list:
    """`plans` (codegen-gpu-attach-schedule's, one per kernel it saw) with one plan per Tilus
    launch (`codegen.tilus`; given the next kernel ids, which the launch then carries as its
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
                if launch.name != "gpu.launch_func" or TILUS_ATTR not in launch.attributes:
                    continue
                info = ir.DictAttr(launch.attributes[TILUS_ATTR])
                text = {key: ir.StringAttr(info[key]).value for key in ("schedule", "detail", "description")}
                number = {key: ir.IntegerAttr(info[key]).value
                          for key in ("threads", "grid", "flops", "bytes", "shared_bytes")}
                launch.attributes[KERNEL_ATTR] = t.kernel_id_attr(next_id)
                plans.append(GpuKernelPlan(next_id, "contraction", text["description"],
                                           format_location(launch.location, "-"), text["schedule"], "",
                                           text["detail"], **number))
                next_id += 1
    return plans
