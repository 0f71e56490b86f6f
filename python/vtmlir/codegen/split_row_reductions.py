"""`codegen-split-row-reductions`: a fused row reduction sums into a vector of partial sums.

The row-reduction schedule reduces each chunk of 8 registers to a scalar and adds it to the row's
result: a horizontal reduction (shuffles, a serial scalar add) per 8 vectors. Inside a loop over
row blocks (`codegen-fuse-rows`: the reductions of LayerNorm, RMSNorm and softmax) this pass splits
such a reduction `out[r] = out[r] (+) f(x[r, k])` over a row of L elements in two kernels over a
stack buffer `p[r, l]` of W elements per row (W: the outer-reduction schedule's tile, a few vector
registers), filled with the combiner's identity:

    p[r, l]  = p[r, l] (+) f(x[r, c * W + l])     for c in 0 .. L/W, in order   (l: the vectors)
    out[r]   = out[r] (+) p[r, l]                  (a row reduction of W elements: one tree)

The first is an outer reduction (its innermost loop parallel): the vector schedule keeps `p` in
registers across `c`; the second is the row reduction of one chunk. The body `f` is the original's,
so only the order of the sum changes: lane l sums elements l, W + l, 2W + l, ... in order, then the
W lanes as a tree, then the result is combined with `out`'s initial value. Like the row-reduction
schedule's own tree, that is a reassociation: applied only where the `row-reduction` schedule is
(not under `EXACT_SCHEDULES`), with the schedule's `partial_sums` parameter; documented and tested
tolerance in docs/codegen.md (Numerics). Each row is summed alike whatever the thread count.

Combiners and their identities: `addf` (-0.0: `x + -0.0` is `x` for every x), `mulf` (1.0),
`maximumf`/`maxnumf` (-inf), `minimumf`/`minnumf` (+inf); float results only. A row shorter than
two partial vectors, or not a multiple of W, is left alone.
"""

from __future__ import annotations

import math
from dataclasses import replace

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, memref

from ..passes.registry import Option, Pass, register_pass
from .bodies import clone_ops, iterator_attr
from .delinearize_loops import expanded_type
from .kernels import KernelKind, classify, in_row_loop, structured_ops
from .schedules import RowReductionSchedule, VectorSchedule, resolve_schedules
from .target import HostTarget, host_target

_IDENTITY = {"arith.addf": -0.0, "arith.mulf": 1.0, "arith.maximumf": -math.inf, "arith.maxnumf": -math.inf,
             "arith.minimumf": math.inf, "arith.minnumf": math.inf}


def _combiner(op):
    """The op combining the body's value with the accumulator (the output's block argument), or None."""
    block = op.regions[0].blocks[0]
    acc = block.arguments[len(op.opview.inputs)]
    ops = list(block.operations)
    value = ops[-1].operands[0] if len(ops[-1].operands) == 1 else None
    if value is None or isinstance(value, ir.BlockArgument):
        return None
    comb = value.owner.operation
    if comb.name not in _IDENTITY or acc not in list(comb.operands):
        return None
    uses = [o for o in ops for v in o.operands if v == acc]
    if len(uses) != 1 or list(comb.operands).count(acc) != 1:
        return None  # the accumulator is read elsewhere in the body
    return comb


def split_row_reduction(op, width_of) -> bool:
    """Split `op` (a row reduction inside a loop over row blocks) as the module doc says."""
    op = op.operation
    if op.name != "linalg.generic" or not in_row_loop(op):
        return False
    kernel = classify(op)
    if kernel.kind is not KernelKind.REDUCTION or not kernel.innermost_is_reduction:
        return False
    inner, ranges = kernel.rank - 1, kernel.loop_ranges
    if any(d != inner and ranges[d] > 1 for d in kernel.reduction_dims) or len(op.opview.outputs) != 1:
        return False
    out = op.operands[-1]
    element = ir.MemRefType(out.type).element_type
    if not isinstance(element, (ir.F32Type, ir.F64Type, ir.F16Type, ir.BF16Type)):
        return False
    comb = _combiner(op)
    width = width_of(element.width)
    length = ranges[inner]
    if comb is None or length % width or length < 2 * width:
        return False
    n_inputs = len(op.opview.inputs)
    inputs = []  # (value, map over the new loops: outer..., c, l)
    for value, amap in zip(op.operands[:n_inputs], kernel.maps[:n_inputs]):
        results = list(amap.results)
        dims = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in results]
        if inner not in dims:
            inputs.append((value, ir.AffineMap.get(inner + 2, 0, results)))
            continue
        t = ir.MemRefType(value.type)
        if dims[-1] != inner or t.get_strides_and_offset()[0][-1] != 1:
            return False  # the row read along a dimension that is not contiguous
        inputs.append((value, None))
    parallel, reduction = iterator_attr(op.context, "parallel"), iterator_attr(op.context, "reduction")
    iterators = list(ir.ArrayAttr(op.attributes["iterator_types"]))[:inner]
    c, lane = ir.AffineDimExpr.get(inner), ir.AffineDimExpr.get(inner + 1)
    outer = [ir.AffineDimExpr.get(d) for d in range(inner)]
    with op.location, ir.InsertionPoint(op):
        partial = memref.AllocaOp(ir.MemRefType.get(list(ranges[:inner]) + [width], element), [], [],
                                  alignment=64).result
        identity = arith.ConstantOp(element, ir.FloatAttr.get(element, _IDENTITY[comb.name])).result
        rank = inner + 1
        fill = linalg.GenericOp([], [], [partial], ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
                                ir.ArrayAttr.get([parallel] * rank))
        with ir.InsertionPoint(fill.regions[0].blocks.append(element)):
            linalg.YieldOp([identity])
        values, maps = [], []
        for (value, amap), old in zip(inputs, kernel.maps[:n_inputs]):
            if amap is None:  # the row, viewed as (L / W, W)
                t = ir.MemRefType(value.type)
                shape = list(t.shape[:-1]) + [length // width, width]
                groups = [[i] for i in range(t.rank - 1)] + [[t.rank - 1, t.rank]]
                i64 = ir.IntegerType.get_signless(64)
                reassociation = ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, k) for k in g]) for g in groups])
                value = memref.ExpandShapeOp(expanded_type(t, shape, groups), value, reassociation, [], shape).result
                amap = ir.AffineMap.get(inner + 2, 0, list(old.results)[:-1] + [c, lane])
            values.append(value)
            maps.append(amap)
        maps.append(ir.AffineMap.get(inner + 2, 0, outer + [lane]))
        body = op.regions[0].blocks[0]
        partial_sums = linalg.GenericOp([], values, [partial], ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                                        ir.ArrayAttr.get(iterators + [reduction, parallel]))
        block = partial_sums.regions[0].blocks.append(*[a.type for a in body.arguments])
        mapping = dict(zip(body.arguments, block.arguments))
        with ir.InsertionPoint(block):
            clone_ops(list(body.operations), mapping)
        out_map = kernel.maps[-1]
        combine = linalg.GenericOp(
            [], [partial], [out],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get(rank, 0, outer + [ir.AffineDimExpr.get(inner)])),
                              ir.AffineMapAttr.get(ir.AffineMap.get(rank, 0, list(out_map.results)))]),
            ir.ArrayAttr.get(iterators + [reduction]))
        block = combine.regions[0].blocks.append(element, element)
        acc = body.arguments[n_inputs]
        with ir.InsertionPoint(block):
            value = comb.clone()
            for i, operand in enumerate(value.operands):
                value.operands[i] = block.arguments[1] if operand == acc else block.arguments[0]
            linalg.YieldOp([value.results[0]])
    for name in list(op.attributes):  # discardable attributes stay with the kernel
        if name not in partial_sums.operation.attributes:
            partial_sums.operation.attributes[name] = op.attributes[name]
    op.erase()
    return True


def split_all_row_reductions(module_op, overrides=(), target: HostTarget | None = None) -> int:
    """Split the row reductions inside loops over row blocks; returns how many. Nothing where the
    `row-reduction` or `outer-reduction` schedule is off or `partial_sums` is False."""
    table = resolve_schedules(list(overrides))
    rows, partials = table["row-reduction"], table["outer-reduction"]
    if not isinstance(rows, RowReductionSchedule) or not rows.partial_sums or not isinstance(partials, VectorSchedule):
        return 0
    target = target or host_target()

    def width_of(bits: int) -> int:  # the vector schedule's tile of the partial-sum kernel
        return partials.vectors * target.lanes(bits)

    with module_op.context:
        return sum(1 for op in structured_ops(module_op) if split_row_reduction(op, width_of))


@register_pass
class SplitRowReductions(Pass):
    name = "codegen-split-row-reductions"
    summary = "Sum a fused row reduction into a vector of partial sums, reduced once per row"
    options = (
        Option("schedules", list[str], [], "the schedule overrides of codegen-attach-schedule (row-reduction:none: nothing)"),
        Option("vector-bits", int, 0, "vector register width to schedule for (0: the host's; tests fix it)"),
    )

    def run(self, module):
        target = host_target()
        if self.vector_bits:
            target = replace(target, vector_bits=self.vector_bits)
        split_all_row_reductions(module, self.schedules, target)
