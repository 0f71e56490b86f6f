"""Matrix-vector products (batch-1 Linears, decode) as row reductions: which kernels are ones.

A batch-1 Linear `y[n] = init[n] + sum_k W[n, k] x[k]` reaches the kernel level as a generic over
`(n, k)` (after the unit m loop is folded) whose body is `out + g(x, W)`: no contraction to the
classifier (it has no m), so it fell to the `threads` schedule, one output per thread, each thread
walking its own row of W -- lanes of a warp K elements apart, uncoalesced. Yet it is exactly a row
reduction with an elementwise body (`codegen-gpu-reduce-rows`' form: `combine(g(inputs), out)`
over the innermost loop), and W's rows are contiguous along k: the `gemv` schedule
(`MatvecSchedule`, schedules.py) builds it with the row-reduction machinery -- lanes reading
consecutive k (128-bit vectors where alignment allows), a `shfl.sync.bfly` butterfly, lane 0
combining with the output's initial value.

The predicate holds on both forms the CUDA `schedule` stage sees: before the unit loops are
folded (`codegen-gpu-pad-contractions` must not pad such a contraction to 16 rows for tensor
cores) and after (`codegen-gpu-attach-schedule`). Loops of one iteration are ignored, so both
forms give the same answer. `x @ W` with W[k, n] (n contiguous) is not one: there the `threads`
mapping is already coalesced along n (consecutive threads, consecutive outputs, one W row per k
step), and a row reduction would read W with a stride.
"""

from __future__ import annotations

from math import prod

from torch_mlir import ir

from ..kernels import Kernel, KernelKind
from .reduce_rows import row_combiners

#: The schedule key (`schedules={"gemv": None}`: matvecs keep their kind's schedule, `threads`).
MATVEC_KEY = "gemv"
#: The classifier's reason for a contraction whose m or n folded away.
NO_MNK = "a contraction without m, n and k dimensions"
#: Shorter rows stay with one output per thread (a warp of lanes would mostly idle).
MIN_ROW = 16


def dim_position(e) -> int | None:
    """The loop an affine result reads when it is a plain dimension, else None."""
    return e.position if isinstance(e, ir.AffineDimExpr) else None


def sum_loops(kernel: Kernel) -> list[int] | str:
    """The reduction loops of more than one iteration of `kernel` where they are its innermost
    loops of more than one iteration and every operand that reads one reads them all, as
    consecutive dimensions in loop order that are contiguous together (one sum over their
    row-major product, in the loops' order: an o-projection's heads x head dimension), else why not."""
    ranges = kernel.loop_ranges
    real = [d for d, n in enumerate(ranges) if n > 1]
    loops = [d for d in kernel.reduction_dims if ranges[d] > 1]
    if not loops or real[-len(loops):] != loops:
        return "its sums are not its innermost loops"
    for value, amap in zip(kernel.op.operands, kernel.maps):
        dims = [dim_position(e) for e in amap.results]
        found = [i for i, d in enumerate(dims) if d in loops]
        if not found:
            continue
        if [dims[i] for i in found] != loops or found != list(range(found[0], found[0] + len(loops))):
            return "an operand reads its sum loops apart or out of order"
        if len(loops) > 1:
            t = ir.MemRefType(value.type)
            strides, _ = t.get_strides_and_offset()
            if any(t.is_dynamic_stride_or_offset(strides[i]) for i in found):
                return "a dynamic stride"
            if any(strides[i] != t.shape[i + 1] * strides[i + 1] for i in found[:-1]):
                return "an operand's sum dimensions are not contiguous together"
    return loops


def matvec_problem(kernel: Kernel) -> str:
    """'' if `kernel` (kernel level, unit loops folded or not) is a matrix-vector product the
    `gemv` schedule takes, else why not: its sum over the innermost loops (`sum_loops`: one loop,
    or several read as one contiguous dimension, which `codegen-gpu-collapse-sums` makes one); an
    add combiner over a pure elementwise body (`row_combiners`); every input that reads the sum
    reads it as its innermost dimension with unit stride, and one of them (the matrix) also reads
    an output loop of more than one iteration."""
    op = kernel.op
    ranges = kernel.loop_ranges
    if op.name != "linalg.generic" or not ranges:
        return "not a linalg.generic"
    if kernel.kind is KernelKind.CONTRACTION:
        if not (prod(ranges[d] for d in kernel.m) == 1 or prod(ranges[d] for d in kernel.n) == 1):
            return "a contraction with m and n"
    elif not (kernel.kind is KernelKind.UNKNOWN and kernel.reason == NO_MNK):
        return "not a product"
    loops = sum_loops(kernel)
    if isinstance(loops, str):
        return loops
    r = loops[-1]
    length = prod(ranges[d] for d in loops)
    if length < MIN_ROW:
        return f"a sum of {length} terms (under {MIN_ROW}: a thread per output)"
    combiners = row_combiners(op)
    if isinstance(combiners, str):
        return combiners
    if [c.name for c in combiners] != ["arith.addf"]:
        return "not a float sum"
    n_in = len(op.opview.inputs)
    matrix = False
    for value, amap in zip(list(op.operands)[:n_in], kernel.maps[:n_in]):
        dims = [dim_position(e) for e in amap.results]
        if r not in dims:
            continue
        if not isinstance(value.type, ir.MemRefType) or dims[-1] != r:
            return "an input reads the sum along a non-contiguous dimension (x @ W: coalesced by `threads`)"
        strides, _ = ir.MemRefType(value.type).get_strides_and_offset()
        if strides[-1] != 1:
            return "an input reads the sum with a stride"
        if any(d is not None and d not in loops and ranges[d] > 1 for d in dims):
            matrix = True
    if not matrix:
        return "no input is a matrix read along its rows"
    return ""


def matvec_rows(kernel: Kernel) -> tuple[int, int]:
    """(rows, row length) of a matvec: the outputs and the sum's extent."""
    length = prod(kernel.loop_ranges[d] for d in kernel.reduction_dims)
    return kernel.iterations // length, length
