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

A convolution's side is read through compound indices (`oh + kh`): there the buffer is indexed like
its widest input (the image; a BatchNorm's per-channel parameters read a subset of its indices) and
the convolution reads it through the same indices, so it is still a convolution, which
`codegen-gpu-im2col-convolutions` (after this pass) turns into a batch matmul: a 1x1 convolution
reading its input through BatchNorm and Hardswish was a row reduction over the channels.

Values are unchanged: each element of the side is computed by the same ops from the same inputs,
once instead of once per use; the buffer holds the exact value the product read.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import linalg, memref

from ...passes.registry import Pass, register_pass
from ..bodies import clone_ops, iterator_attr
from ..decompose_convolutions import linear_terms
from ..kernels import indexing_maps_of, loop_ranges_of, rewrite_generics
from .contraction import Side, contraction_sides


@dataclass
class _Space:
    """Where a split-off side is computed: the buffer's `shape`, each side input's map into the
    buffer's indices (`arg_maps`, by block argument number) and the map by which the contraction
    then reads the buffer (`read_map`, over its loops)."""

    shape: list[int]
    arg_maps: dict[int, ir.AffineMap]
    read_map: ir.AffineMap


def _loop_space(side: Side, maps, ranges) -> _Space:
    """The side computed over its loop dimensions (every input read through loop dimensions and
    constants): the buffer is indexed by `side.dims`, in loop order."""
    renumber = {d: i for i, d in enumerate(side.dims)}
    arg_maps = {}
    for a in side.args:
        exprs = [ir.AffineDimExpr.get(renumber[e.position]) if isinstance(e, ir.AffineDimExpr) else e
                 for e in maps[a].results]
        arg_maps[a] = ir.AffineMap.get(len(side.dims), 0, exprs)
    read_map = ir.AffineMap.get(len(ranges), 0, [ir.AffineDimExpr.get(d) for d in side.dims])
    return _Space([ranges[d] for d in side.dims], arg_maps, read_map)


def _index_of(exprs: list, expr) -> int | None:
    for i, e in enumerate(exprs):
        if e == expr:
            return i
    return None


def _input_space(side: Side, maps, ranges) -> _Space | None:
    """The side computed over the indices of its widest input (a convolution's input read at
    `oh + kh`): the buffer has one dimension per non-constant index of that input, and the
    contraction reads it through the same indices, so it stays a convolution for
    `codegen-gpu-im2col-convolutions`. Every other input must read a subset of those indices (a
    BatchNorm's per-channel parameters: `c`); each index must be linear in the loops with
    non-negative coefficients (its extent is its largest value + 1, read by the contraction, so in
    bounds). None where the side does not fit."""
    def varying(a):
        return [e for e in maps[a].results if not isinstance(e, ir.AffineConstantExpr)]

    widest = max(side.args, key=lambda a: len(varying(a)))
    indices = varying(widest)
    if any(_index_of(indices[:i], e) is not None for i, e in enumerate(indices)):
        return None  # an input read twice along one index: no single buffer index for it
    shape = []
    for e in indices:
        found = linear_terms(e)
        if found is None or found[1] < 0 or any(c < 0 for c in found[0].values()):
            return None
        terms, const = found
        shape.append(const + sum(c * (ranges[d] - 1) for d, c in terms.items()) + 1)
    arg_maps = {}
    for a in side.args:
        exprs = []
        for e in maps[a].results:
            if isinstance(e, ir.AffineConstantExpr):
                exprs.append(e)
                continue
            i = _index_of(indices, e)
            if i is None:
                return None
            exprs.append(ir.AffineDimExpr.get(i))
        arg_maps[a] = ir.AffineMap.get(len(indices), 0, exprs)
    return _Space(shape, arg_maps, ir.AffineMap.get(len(ranges), 0, indices))


def _space(side: Side, maps, ranges) -> _Space | None:
    plain = all(isinstance(e, (ir.AffineDimExpr, ir.AffineConstantExpr)) for a in side.args for e in maps[a].results)
    return _loop_space(side, maps, ranges) if plain else _input_space(side, maps, ranges)


def _materialize(op, side: Side, space: _Space) -> ir.Value:
    """An elementwise kernel computing `side.root` at every index of `space` into a new buffer
    (allocated before `op`); returns the buffer."""
    block = op.regions[0].blocks[0]
    ops = [o for o in side.ops if side.cast is None or o != side.cast]
    rank = len(space.shape)
    with op.location, ir.InsertionPoint(op):
        buffer_type = ir.MemRefType.get(space.shape, side.root.type)
        buffer = memref.AllocOp(buffer_type, [], [], alignment=64).result
        in_maps = [space.arg_maps[a] for a in side.args]
        out_map = ir.AffineMap.get_identity(rank)
        producer = linalg.GenericOp([], [op.operands[a] for a in side.args], [buffer],
                                    ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in in_maps + [out_map]]),
                                    ir.ArrayAttr.get([iterator_attr(op.context, "parallel")] * rank))
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
    spaces = {}
    for side in (sides.lhs, sides.rhs):
        if not side.is_plain:
            spaces[id(side)] = _space(side, maps, ranges)
            if spaces[id(side)] is None:  # the contraction keeps it (and, not being plain, the naive mapping)
                return False
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
            space = spaces[id(side)]
            buffer = _materialize(op, side, space)
            inputs.append(buffer)
            in_maps.append(space.read_map)
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
