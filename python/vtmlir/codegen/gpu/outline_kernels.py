"""`codegen-gpu-outline-kernels`: the GPU-scheduled launches become `gpu.module` kernels, keeping
their kernel id.

The scheduled kernels are outlined before the naive mapping makes the other launches: the
conversions that finish them (`convert-vector-to-gpu{use-nvgpu}`, the pipelining) then run on their
isolated `gpu.module`s only -- `convert-vector-to-gpu` fails on scalar f16/f64 arithmetic anywhere
in the IR it is given, which the naive kernels' loop bodies hold. Upstream `gpu-kernel-outlining`
drops the launch's attributes, so this pass records the `codegen.kernel` id of every launch in
program order, outlines, and puts the id on the `gpu.launch_func` and the outlined `gpu.func`
(where the pipeline phase of the schedule matches it and the CUDA backend reads it back).
"""

from __future__ import annotations

from torch_mlir import ir

from ...passes import run_pipeline
from ...passes.registry import Pass, PassFailure, register_pass
from ..kernels import KERNEL_ATTR

_EARLIER = "codegen.launched_before"


def _top_level(module_op, name: str) -> list:
    found = []
    for func in module_op.regions[0].blocks[0].operations:
        if func.operation.name == "func.func" and func.regions[0].blocks:
            found += [op.operation for op in func.regions[0].blocks[0].operations if op.operation.name == name]
    return found


def outline_kernels(module_op) -> int:
    """Outline every top-level `gpu.launch` (all made by GPU schedules at this point); returns how many."""
    launches = _top_level(module_op, "gpu.launch")
    if not launches:
        return 0
    ids = []
    for launch in launches:
        if KERNEL_ATTR not in launch.attributes:
            raise PassFailure("codegen-gpu-outline-kernels: a gpu.launch without a kernel id; run it right "
                              "after the GPU schedules' map phase", launch.location)
        ids.append(launch.attributes[KERNEL_ATTR])
    # Launches made before (the Tilus kernels of subbyte-cuda-kernels) may stand anywhere
    # in program order: the new ones are those not there before.
    # (Marked, not kept: the pass manager invalidates the Python handles of the ops.)
    for call in _top_level(module_op, "gpu.launch_func"):
        call.attributes[_EARLIER] = ir.UnitAttr.get(module_op.context)
    run_pipeline(module_op, "builtin.module(gpu-kernel-outlining)", what="outlining the scheduled kernels")
    calls = []
    for call in _top_level(module_op, "gpu.launch_func"):
        if _EARLIER in call.attributes:
            del call.attributes[_EARLIER]
        else:
            calls.append(call)
    if len(calls) != len(ids):
        raise PassFailure(f"codegen-gpu-outline-kernels: {len(ids)} launches became {len(calls)} kernels")
    symbols = {}
    for op in module_op.regions[0].blocks[0].operations:
        if op.operation.name == "gpu.module":
            symbols[ir.StringAttr(op.attributes["sym_name"]).value] = op.operation
    for call, kid in zip(calls, ids):
        call.attributes[KERNEL_ATTR] = kid
        module_name, function = ir.SymbolRefAttr(call.attributes["kernel"]).value
        for op in symbols[module_name].regions[0].blocks[0].operations:
            if op.operation.name == "gpu.func" and ir.StringAttr(op.attributes["sym_name"]).value == function:
                op.attributes[KERNEL_ATTR] = kid
    return len(calls)


@register_pass
class OutlineKernels(Pass):
    name = "codegen-gpu-outline-kernels"
    summary = "Outline the GPU-scheduled gpu.launch ops into gpu.modules, keeping their codegen.kernel ids"

    def run(self, module):
        outline_kernels(module)
