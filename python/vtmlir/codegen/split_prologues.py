"""`codegen-split-prologues`: a contraction with a fused elementwise prologue becomes two kernels.

`linalg-fuse-elementwise-ops` (graph level) fuses an elementwise producer into every consumer with
one use, contractions and convolutions included: a LayerNorm's normalisation lands inside the
Linear after it (`out += ((x - mean) * rstd * gamma + beta) * W`), a BatchNorm + ReLU inside the 1x1
convolution after it, softmax's division inside the attention's `P @ V`. The product is then no
contraction for linalg's interface (the body is more than a multiply and an add), so it gets no
contraction schedule, and the prologue is recomputed for every output column: N times the work of
computing it once.

This pass undoes that fusion at the kernel level. For a generic whose body ends in
`out + P * Q` and that is neither a contraction nor a convolution, each side (P or Q) computed from
the inputs by arith/math ops is moved into an elementwise kernel of its own, over the shape of one
of the inputs it reads (the anchor, whose map must index every other input of the side by plain
dimensions, the anchor's own window expressions -- both addends of a residual sum fused into the
next 1x1 convolution read `(n, c, h + kh, w + kw)` -- or dimensions of extent 1), writing a new
buffer; the product reads that buffer with the anchor's map. A side that gathers instead (a concat
VTC reads element by element, `vtc/select_views.py`: `memref.load`s of the pieces at indices computed
from `linalg.index`, `arith.select` choosing one; the BatchNorm + ReLU of DenseNet's layers and
transitions fused into their 1x1 convolutions) is computed over the loop dimensions it depends on
(`bodies.make_gather_prologue`) and read as a projected permutation; the body's asserts go with it.
A split that would drop an assert is not made. The split is kept only if the product is then a
contraction or a convolution for linalg (scheduled as one; a contraction whose output's contiguous
dimension no input reads -- the 1x1 fconv of a TeMCO group reading its upsampled tile, split into
(W/2, 2) -- keeps loops, a plain multiply-add).

Where the product is the last reader of the anchor's buffer (allocated in its block, freed after it,
not read by the other side of the product nor by an assert), the prologue overwrites the anchor in
place (`bodies.dies_at`): no buffer is added, so the split never raises the peak TeMCO measures
(a TeMCO group's tile, otherwise doubled while the product runs).

Every element of the prologue is computed by the same ops as before and the products are summed in
the same order: results are bitwise those of the fused kernel's loops.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg

from ..passes.registry import Pass, register_pass
from .bodies import (GATHER_OPS, backward_slice, clone_ops, free_after, make_gather_prologue, make_prologue, owner_in,
                     static_shape)
from .kernels import indexing_maps_of, rewrite_generics


def split_prologues(op) -> bool:
    """Split the prologues out of `op` (a linalg.generic); False if it has none or stays no contraction."""
    op = op.operation
    if linalg.isa_contraction_op(op) or linalg.isa_convolution_op(op):
        return False
    maps = indexing_maps_of(op)
    if maps is None or len(op.opview.outputs) != 1 or static_shape(op.operands[-1]) is None:
        return False
    block = op.regions[0].blocks[0]
    n_inputs = len(op.opview.inputs)
    out_arg = block.arguments[n_inputs]
    terminator = list(block.operations)[-1]
    if len(terminator.operands) != 1:
        return False
    add = owner_in(block, terminator.operands[0], "arith.addf")
    if add is None or out_arg not in list(add.operands):
        return False
    product = add.operands[1] if add.operands[0] == out_arg else add.operands[0]
    mul = owner_in(block, product, "arith.mulf")
    if mul is None:
        return False
    sides = []  # per side: (operand, map)
    new_ops = []
    asserts = [o.operation for o in block.operations if o.operation.name == "cf.assert"]
    for i, side in enumerate(mul.operands):
        if isinstance(side, ir.BlockArgument) and side.owner == block and side.arg_number < n_inputs:
            sides.append((op.operands[side.arg_number], maps[side.arg_number]))
            continue
        made = make_prologue(op, block, side, maps, _inputs_read(block, mul.operands[1 - i], asserts))
        if made is None:
            made = make_gather_prologue(op, block, side, maps, asserts)
            if made is not None:
                asserts = [a for a in asserts if a not in made[3]]
        if made is None:
            for new in reversed(new_ops):
                new.erase()
            return False
        buffer, buffer_map, ops = made[:3]
        new_ops += ops
        sides.append((buffer, buffer_map))
    if not new_ops or asserts:
        for new in reversed(new_ops):
            new.erase()
        return False  # no prologue (a reduction of another kind), or a check the split would drop
    iterators = op.attributes["iterator_types"]
    with op.location, ir.InsertionPoint(op):
        core = linalg.GenericOp([], [v for v, _ in sides], [op.operands[-1]],
                                ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for _, m in sides + [(None, maps[-1])]]),
                                iterators)
        body = core.regions[0].blocks.append(*[v.type.element_type for v, _ in sides] + [out_arg.type])
        mapping = {mul.operands[0]: body.arguments[0], mul.operands[1]: body.arguments[1], out_arg: body.arguments[2]}
        with ir.InsertionPoint(body):
            clone_ops([mul, add], mapping)
            linalg.YieldOp([mapping[add.results[0]]])
    if not (linalg.isa_contraction_op(core.operation) or linalg.isa_convolution_op(core.operation)):
        core.operation.erase()
        for new in reversed(new_ops):
            new.erase()
        return False
    free_after(op, new_ops)
    op.erase()
    return True


def _inputs_read(block, other, asserts) -> set[int] | None:
    """The block arguments that the other side of the product (`other`) and the body's asserts read,
    None if unknown: a prologue may overwrite an input none of them reads."""
    found = backward_slice(block, [other] + [v for a in asserts for v in a.operands], allowed=GATHER_OPS)
    return found[1] if found is not None else None


def split_all_prologues(module_op) -> int:
    """Split the prologues of every kernel; returns how many kernels had some."""
    return rewrite_generics(module_op, split_prologues)


@register_pass
class SplitPrologues(Pass):
    name = "codegen-split-prologues"
    summary = "Move elementwise prologues fused into a contraction (LayerNorm -> Linear, BN -> 1x1 conv) into kernels of their own"

    def run(self, module):
        split_all_prologues(module)
