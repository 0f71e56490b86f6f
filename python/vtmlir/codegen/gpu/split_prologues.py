"""`codegen-gpu-split-prologues`: the elementwise work fused into a contraction gets its own kernel.

Tensor cores multiply two tiles staged in shared memory; a contraction whose body computes its
operands (a LayerNorm's normalisation of the rows of A, the softmax's `exp(s - max) / sum` before
the product with V, a bias and GELU of the previous layer) cannot be staged as it is -- the work
would be repeated for every tile that reads the element, or the kernel stays a loop nest. For each
contraction-shaped generic (`codegen.gpu.contraction.contraction_sides`) whose operand side is more
than one input read through at most a widening cast, this pass computes that side once into a
buffer indexed by the side's loop dimensions (an elementwise kernel placed before the contraction)
and makes the contraction read the buffer. A side ending in `extf` stores the narrow value and keeps
the cast in the contraction (an f16 model's `truncf -> extf` pair stores f16), so the contraction
reads f16 (bf16) tiles: tensor-core operands.

Values are unchanged: each element of the side is computed by the same ops from the same inputs,
once instead of once per use; the buffer holds the exact value the product read.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg, memref

from ...passes.registry import Pass, register_pass
from ..bodies import clone_ops, iterator_attr
from ..kernels import indexing_maps_of, loop_ranges_of, rewrite_generics
from .contraction import Side, contraction_sides


def _restricted(amap: ir.AffineMap, renumber: dict[int, int], n_dims: int) -> ir.AffineMap:
    exprs = [ir.AffineDimExpr.get(renumber[e.position]) if isinstance(e, ir.AffineDimExpr) else e
             for e in amap.results]
    return ir.AffineMap.get(n_dims, 0, exprs)


def _materialize(op, side: Side, maps, ranges) -> ir.Value:
    """An elementwise kernel computing `side.root` for every index of the side's dimensions into a
    new buffer (allocated before `op`); returns the buffer."""
    block = op.regions[0].blocks[0]
    dims = side.dims
    renumber = {d: i for i, d in enumerate(dims)}
    shape = [ranges[d] for d in dims]
    ops = [o for o in side.ops if side.cast is None or o != side.cast]
    with op.location, ir.InsertionPoint(op):
        buffer_type = ir.MemRefType.get(shape, side.root.type)
        buffer = memref.AllocOp(buffer_type, [], [], alignment=64).result
        in_maps = [_restricted(maps[a], renumber, len(dims)) for a in side.args]
        out_map = ir.AffineMap.get_identity(len(dims))
        producer = linalg.GenericOp([], [op.operands[a] for a in side.args], [buffer],
                                    ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in in_maps + [out_map]]),
                                    ir.ArrayAttr.get([iterator_attr(op.context, "parallel")] * len(dims)))
        body = producer.regions[0].blocks.append(*[block.arguments[a].type for a in side.args],
                                                 side.root.type)
        mapping = {block.arguments[a]: body.arguments[i] for i, a in enumerate(side.args)}
        with ir.InsertionPoint(body):
            clone_ops(ops, mapping)
            linalg.YieldOp([mapping.get(side.root, side.root)])
    return buffer


def split_prologues(op) -> bool:
    """Split the non-trivial operand sides of one contraction generic; False when there is none."""
    op = op.operation
    sides = contraction_sides(op)
    if sides is None or (sides.lhs.is_plain and sides.rhs.is_plain):
        return False
    maps = indexing_maps_of(op)
    ranges = loop_ranges_of(op, maps)
    if ranges is None:
        return False
    for side in (sides.lhs, sides.rhs):
        # A side read through compound indices (a convolution's `h + kh`) has no buffer indexed by
        # loop dimensions alone: the contraction keeps it (and, not being plain, the naive mapping).
        if not side.is_plain and not all(isinstance(e, (ir.AffineDimExpr, ir.AffineConstantExpr))
                                         for a in side.args for e in maps[a].results):
            return False
    n_loops = len(ranges)
    block = op.regions[0].blocks[0]
    n_in = len(op.opview.inputs)
    inputs, in_maps, arg_types, plans = [], [], [], []
    for side in (sides.lhs, sides.rhs):
        if side.is_plain:
            first = len(inputs)
            for a in side.args:
                inputs.append(op.operands[a])
                in_maps.append(maps[a])
                arg_types.append(block.arguments[a].type)
            plans.append((side, first, None))
        else:
            buffer = _materialize(op, side, maps, ranges)
            inputs.append(buffer)
            in_maps.append(ir.AffineMap.get(n_loops, 0, [ir.AffineDimExpr.get(d) for d in side.dims]))
            arg_types.append(side.root.type)
            plans.append((side, len(inputs) - 1, buffer))
    out = op.operands[n_in]
    with op.location, ir.InsertionPoint(op):
        new = linalg.GenericOp([], inputs, [out],
                               ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in in_maps + [maps[n_in]]]),
                               op.attributes["iterator_types"])
        body = new.regions[0].blocks.append(*arg_types, block.arguments[n_in].type)
        mapping = {block.arguments[n_in]: body.arguments[len(inputs)]}
        with ir.InsertionPoint(body):
            for side, first, buffer in plans:
                if buffer is None:
                    for i, a in enumerate(side.args):
                        mapping[block.arguments[a]] = body.arguments[first + i]
                    clone_ops(side.ops, mapping)
                else:
                    mapping[side.root] = body.arguments[first]
                    if side.cast is not None:
                        clone_ops([side.cast], mapping)
            clone_ops([sides.product, sides.combine], mapping)
            linalg.YieldOp([mapping[sides.combine.results[0]]])
    with op.location, ir.InsertionPoint.after(new.operation):
        for _, _, buffer in plans:
            if buffer is not None:
                memref.DeallocOp(buffer)
    op.erase()
    return True


def split_all_prologues(module_op) -> int:
    """Split the prologues of every contraction of the module; returns how many were rewritten."""
    return rewrite_generics(module_op, split_prologues)


@register_pass
class SplitPrologues(Pass):
    name = "codegen-gpu-split-prologues"
    summary = "Give the elementwise operand computations fused into a contraction their own kernel"
    description = ("Kernel level (memrefs). A contraction generic whose operand side is more than one "
                   "input read through a widening cast computes that side into a buffer first, so the "
                   "contraction reads plain (f16/bf16) tiles that tensor cores take.")

    def run(self, module):
        split_all_prologues(module)
