"""`codegen-decompose-convolutions`: a convolution becomes one contraction per filter tap.

At the kernel level a convolution is a `linalg.generic` whose input map reads `s*oh + d*kh` (stride
s, dilation d). The vectoriser takes only projected-permutation maps, so each tap (kh, kw) is made its
own op: an `scf.for` nest over the filter window, and inside it the same generic over the other
dimensions, reading the input through a strided subview shifted by the tap (`[kh*d, kw*d]`, strides
`[s, s]`) and the filter through the tap's slice. For NCHW that is `out[f, p] += W_tap[f, c] · In_tap[c, p]`
over the spatial positions p: a matmul whose contiguous dimension is p, which
`codegen-attach-schedule` classifies as a contraction (a depthwise tap is elementwise).

The accumulation order changes: the loops sum each output over (c, kh, kw) with kw innermost; here
the taps are outer and the channels inner. The result differs from the scalar loops by the rounding
of a reordered f32 sum (docs/codegen.md has the tolerance), identically for any thread count and
for every pipeline that runs this pass (VTC's and VTensor's bitwise comparisons hold).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, memref, scf

from ..passes.registry import Pass, register_pass
from .kernels import indexing_maps_of, loop_ranges_of, rewrite_generics


def _linear_terms(expr) -> tuple[dict[int, int], int] | None:
    """`expr` as ({dim: coefficient}, constant), or None when it is not linear in the dims."""
    if isinstance(expr, ir.AffineDimExpr):
        return {expr.position: 1}, 0
    if isinstance(expr, ir.AffineConstantExpr):
        return {}, expr.value
    if isinstance(expr, ir.AffineAddExpr):
        lhs, rhs = _linear_terms(expr.lhs), _linear_terms(expr.rhs)
        if lhs is None or rhs is None:
            return None
        terms = dict(lhs[0])
        for d, c in rhs[0].items():
            terms[d] = terms.get(d, 0) + c
        return terms, lhs[1] + rhs[1]
    if isinstance(expr, ir.AffineMulExpr):
        lhs, rhs = _linear_terms(expr.lhs), _linear_terms(expr.rhs)
        if lhs is None or rhs is None:
            return None
        if not rhs[0]:
            return {d: c * rhs[1] for d, c in lhs[0].items()}, lhs[1] * rhs[1]
        if not lhs[0]:
            return {d: c * lhs[1] for d, c in rhs[0].items()}, lhs[1] * rhs[1]
    return None


def decompose_convolution(op) -> bool:
    """Rewrite one convolution generic in place (moved into its tap loops); False if it does not fit."""
    op = op.operation
    if not all(isinstance(v.type, ir.MemRefType) for v in op.operands):
        return False  # a convolution on tensors (before bufferization) is not the kernel level
    maps = indexing_maps_of(op)
    ranges = loop_ranges_of(op, maps) if maps else None
    if ranges is None or len(op.opview.outputs) != 1:
        return False
    dims = linalg.infer_convolution_dimensions(op)  # None where isa_convolution_op's looser check held
    window = sorted(dims.filter_loop) if dims is not None else []
    if not window:
        return False
    n_loops = len(ranges)
    keep = [d for d in range(n_loops) if d not in window]
    renumber = {d: i for i, d in enumerate(keep)}
    plans = []  # per operand: (new map exprs, [(offset terms, constant, size, stride)] or None)
    for operand, amap in zip(op.operands, maps):
        shape = list(operand.type.shape)
        exprs, slices, sliced = [], [], False
        for size, expr in zip(shape, amap.results):
            lin = _linear_terms(expr)
            if lin is None:
                return False
            terms, const = lin
            taps = {d: c for d, c in terms.items() if d in window}
            rest = {d: c for d, c in terms.items() if d not in window}
            if not taps and len(rest) <= 1 and const == 0 and all(c == 1 for c in rest.values()):
                exprs.append(ir.AffineDimExpr.get(renumber[next(iter(rest))]) if rest
                             else ir.AffineConstantExpr.get(0))
                slices.append(({}, 0, size, 1))
                continue
            if len(rest) > 1 or any(c <= 0 for c in rest.values()):
                return False
            sliced = True
            if rest:
                (d, stride), = rest.items()
                exprs.append(ir.AffineDimExpr.get(renumber[d]))
                slices.append((taps, const, ranges[d], stride))
            else:  # a filter dimension: the tap's slice, dropped from the operand (rank-reducing)
                exprs.append(None)
                slices.append((taps, const, 1, 1))
        plans.append((exprs, slices if sliced else None))
    with op.location:
        index = ir.IndexType.get()
        ip, ivs, loop = ir.InsertionPoint(op), {}, None
        for d in window:  # the tap loops, outermost first, where the convolution stood
            with ip:
                lb, ub, step = (arith.ConstantOp(index, v).result for v in (0, ranges[d], 1))
                loop = scf.ForOp(lb, ub, step)
                with ir.InsertionPoint(loop.body):
                    terminator = scf.YieldOp([])
            ivs[d] = loop.induction_variable
            ip = ir.InsertionPoint(terminator)
        new_operands = []
        with ip:
            for operand, (exprs, slices) in zip(op.operands, plans):
                if slices is None:
                    new_operands.append(operand)
                    continue
                offsets = [_offset(taps, const, ivs, index) for taps, const, _, _ in slices]
                sizes, strides = [s for _, _, s, _ in slices], [st for _, _, _, st in slices]
                full = memref.subview(operand, offsets, sizes, strides)
                if any(e is None for e in exprs):
                    dropped = [i for i, e in enumerate(exprs) if e is None]
                    reduced = _drop_dims(full.type, dropped)
                    full.owner.erase()
                    full = memref.subview(operand, offsets, sizes, strides, result_type=reduced)
                new_operands.append(full)
    op.move_before(terminator.operation)
    for i, v in enumerate(new_operands):
        op.operands[i] = v
    op.attributes["indexing_maps"] = ir.ArrayAttr.get(
        [ir.AffineMapAttr.get(ir.AffineMap.get(len(keep), 0, [e for e in exprs if e is not None]))
         for exprs, _ in plans])
    iterators = ir.ArrayAttr(op.attributes["iterator_types"])
    op.attributes["iterator_types"] = ir.ArrayAttr.get([iterators[d] for d in keep])
    if "linalg.memoized_indexing_maps" in op.attributes:
        del op.attributes["linalg.memoized_indexing_maps"]
    return True


def _drop_dims(t: ir.MemRefType, dropped: list[int]) -> ir.MemRefType:
    """`t` without the (unit) dimensions `dropped`: the type of a rank-reducing subview."""
    strides, offset = t.get_strides_and_offset()
    keep = [i for i in range(t.rank) if i not in dropped]
    layout = ir.StridedLayoutAttr.get(offset, [strides[i] for i in keep])
    return ir.MemRefType.get([t.shape[i] for i in keep], t.element_type, layout, t.memory_space)


def _offset(taps: dict[int, int], const: int, ivs: dict, index) -> ir.Value | int:
    """Σ coefficient · iv + const as index arithmetic (an int when there is no tap)."""
    value = None
    for d, c in sorted(taps.items()):
        term = ivs[d]
        if c != 1:
            term = arith.MulIOp(term, arith.ConstantOp(index, c).result).result
        value = term if value is None else arith.AddIOp(value, term).result
    if value is None:
        return const
    if const:
        value = arith.AddIOp(value, arith.ConstantOp(index, const).result).result
    return value


def decompose_convolutions(module_op) -> int:
    """Decompose every convolution generic of the kernel level; returns how many."""
    return rewrite_generics(module_op, lambda op: linalg.isa_convolution_op(op) and decompose_convolution(op))


@register_pass
class DecomposeConvolutions(Pass):
    name = "codegen-decompose-convolutions"
    summary = "Split each convolution (memrefs) into one contraction per filter tap inside scf.for loops"

    def run(self, module):
        decompose_convolutions(module)
