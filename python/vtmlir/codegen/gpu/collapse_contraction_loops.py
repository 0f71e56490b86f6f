"""`codegen-gpu-collapse-contraction-loops`: a contraction's loops the block grid cannot hold become fewer.

The counterpart of `codegen-gpu-collapse-sums` (collapse_sums.py) for the parallel loops of a
contraction the block grid cannot hold: more batch and outer m/n loops than fit next to m and n in
its three dimensions (grouped-query attention's `q K^T`: batch x kv heads, query heads per kv head x
queries). Each run of consecutive batch, m or n loops read contiguously by every operand becomes one
loop; the sums are untouched (bitwise the same). It runs in the `schedule` stage after
`codegen-gpu-split-prologues` and before `codegen-gpu-pad-contractions`, so a collapsed m is padded
once (the query heads of a group share one 16-row tile).
"""

from __future__ import annotations

from math import prod

from torch_mlir import ir

from ...passes.registry import Pass, register_pass
from ..decompose_convolutions import merge_loops
from ..kernels import Kernel, KernelKind, classify
from .attach_schedule import rewrite_top_level_generics
from .matvec import dim_position


def loop_groups(kernel: Kernel) -> list[list[int]] | None:
    """The groups of consecutive loops of one role (batch, m, n) that every operand reads as
    consecutive dimensions in loop order, contiguous together (static strides), or none of; None
    where no group has two loops."""
    groups = []
    for role in (kernel.batch, kernel.m, kernel.n):
        loops = list(role)
        # The role's loops split into runs of consecutive loop numbers.
        runs, run = [], []
        for d in loops:
            if run and d != run[-1] + 1:
                runs.append(run)
                run = []
            run.append(d)
        if run:
            runs.append(run)
        for run in runs:
            # Loops dropped from the outside of the run until every operand reads the rest together.
            while len(run) > 1 and not _collapsible(kernel, run):
                run = run[1:]
            if len(run) > 1:
                groups.append(run)
    return groups or None


def _collapsible(kernel: Kernel, loops: list[int]) -> bool:
    for value, amap in zip(kernel.op.operands, kernel.maps):
        dims = [dim_position(e) for e in amap.results]
        found = [i for i, d in enumerate(dims) if d in loops]
        if any(d is None and any(p in loops for p in _positions(e)) for d, e in zip(dims, amap.results)):
            return False    # an operand reads one of the loops inside an expression
        if not found:
            continue
        if [dims[i] for i in found] != loops or found != list(range(found[0], found[0] + len(loops))):
            return False
        t = ir.MemRefType(value.type)
        strides, offset = t.get_strides_and_offset()
        if any(t.is_dynamic_stride_or_offset(strides[i]) for i in found):
            return False
        if any(strides[i] != t.shape[i + 1] * strides[i + 1] for i in found[:-1]):
            return False
    return True


def _positions(expr) -> list[int]:
    """The loop dimensions an affine expression reads."""
    if isinstance(expr, ir.AffineDimExpr):
        return [expr.position]
    if isinstance(expr, ir.AffineBinaryExpr):
        return _positions(expr.lhs) + _positions(expr.rhs)
    return []


def collapse_contraction_loops(kernel: Kernel) -> bool:
    """Rewrite a contraction with more batch and outer m/n loops than the grid has room for next to
    m and n (two or more: the block grid is x, y, z) so that each run of consecutive batch, m or n
    loops read together by every operand (contiguous: `collapse_shape` views, no copy) is one loop
    over their row-major product: grouped-query attention's `q K^T` (batch x kv heads, query heads
    per kv head x queries) becomes a batch matmul with one batch loop and a longer m. Only parallel
    loops are merged; the sum loops and their order stay: every output is the same sum, bitwise.
    False where there is nothing to collapse."""
    if kernel.kind is not KernelKind.CONTRACTION or kernel.op.name != "linalg.generic":
        return False
    ranges = kernel.loop_ranges
    if prod(ranges[d] for d in kernel.m) < 2 or prod(ranges[d] for d in kernel.n) < 2:
        return False     # a matrix-vector product (m or n folds away): the gemv schedule's, left as it is
    if len(kernel.batch) + len(kernel.m) + len(kernel.n) - 2 < 2 and \
            min(ranges[kernel.m[-1]], ranges[kernel.n[-1]]) > 1:
        return False     # fits the grid already (one batch or outer loop at most), m and n real loops
    groups = loop_groups(kernel)
    if groups is None:
        return False
    merge_loops(kernel.op, kernel.maps, groups)
    return True


def collapse_contractions(module_op) -> int:
    """`collapse_contraction_loops` on every kernel of the module's functions; how many it rewrote."""
    return rewrite_top_level_generics(module_op, lambda op: collapse_contraction_loops(classify(op)))


@register_pass
class CollapseContractionLoops(Pass):
    name = "codegen-gpu-collapse-contraction-loops"
    summary = "A contraction's runs of batch / m / n loops read together -> one loop each (collapse_shape views)"
    description = ("Kernel level (memrefs). A contraction with two or more batch and outer m/n loops (more than "
                   "the block grid's three dimensions hold next to m and n), or a unit innermost m or n: each run "
                   "of consecutive batch, m or n loops that every operand reads as contiguous consecutive "
                   "dimensions becomes one loop over collapse_shape views (GQA's q K^T: one batch loop, m = "
                   "query heads per kv head x queries). Sums untouched: bitwise the same results.")

    def run(self, module):
        collapse_contractions(module)
