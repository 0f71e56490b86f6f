"""What a GPU contraction kernel is made of: the two sides of its product and their prologues.

At the kernel level a matmul is a `linalg.generic` whose body is `out + lhs * rhs`. The graph-level
fusion (`linalg-fuse-elementwise-ops`) pulls producers into it: f16 models read `extf(a)` and
`extf(b)`, a Linear after a LayerNorm computes the normalisation of its input row in the body, the
product with an attention's V reads `exp(s - max) / sum`. `contraction_sides` splits such a body into
the product's two operand expressions, each with the block arguments (inputs) it reads, so that
`codegen-gpu-split-prologues` can give every side that is more than a cast of one input its own
elementwise kernel, and the contraction is left with what tensor cores take: a cast at most.

Everything is read through the bindings: the body's ops and their operands, block arguments by
number, indexing maps as `AffineMap`s.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir

from ..bodies import backward_slice, result_owners
from ..kernels import indexing_maps_of

_COMBINERS = ("arith.addf", "arith.addi")
_PRODUCTS = ("arith.mulf", "arith.muli")
_CASTS = ("arith.extf", "arith.extsi", "arith.extui")


@dataclass
class Side:
    """One operand expression of the product: `value` (in the body), the inputs it reads (`args`,
    block argument numbers), the body ops that compute it (`ops`, block order), the loop dimensions
    those inputs index (`dims`, ascending) and the value worth storing (`root`): `value` itself, or
    the operand of a final widening cast, which then stays in the contraction (`cast`)."""

    value: ir.Value
    args: list[int]
    ops: list
    dims: list[int]
    root: ir.Value
    cast: ir.Operation | None

    @property
    def is_plain(self) -> bool:
        """Reads one input directly or through one widening cast: nothing to split off."""
        if len(self.args) != 1:
            return False
        return not self.ops or (len(self.ops) == 1 and self.cast is not None
                                and isinstance(self.root, ir.BlockArgument))


@dataclass
class ContractionSides:
    """A contraction body `combine(out, product(lhs, rhs))` taken apart."""

    combine: ir.Operation
    product: ir.Operation
    lhs: Side
    rhs: Side


def contraction_sides(op) -> ContractionSides | None:
    """The sides of a contraction-shaped generic (reduction loops, one output, body
    `yield out + f(A...) * g(B...)` where f and g read disjoint inputs and use the output nowhere
    else); None otherwise."""
    op = op.operation
    if op.name != "linalg.generic" or len(op.opview.outputs) != 1:
        return None
    maps = indexing_maps_of(op)
    if maps is None:
        return None
    block = op.regions[0].blocks[0]
    n_in = len(op.opview.inputs)
    out_arg = block.arguments[n_in]
    ops = [o.operation for o in block.operations]
    yielded = ops[-1].operands
    owners = result_owners(block)
    if len(yielded) != 1 or yielded[0] not in owners:
        return None
    combine = owners[yielded[0]]
    if combine.name not in _COMBINERS:
        return None
    a, b = combine.operands
    product_value = b if a == out_arg else a if b == out_arg else None
    if product_value is None or product_value not in owners:
        return None
    if sum(1 for _ in out_arg.uses) != 1:
        return None
    product = owners[product_value]
    if product.name not in _PRODUCTS:
        return None
    sides = []
    for value in product.operands:
        found = backward_slice(block, [value], owners)
        if found is None:
            return None
        side_ops, args = found
        if n_in in args or not args:
            return None
        dims = sorted({e.position for i in args for e in maps[i].results if isinstance(e, ir.AffineDimExpr)})
        root, cast = value, None
        if side_ops and side_ops[-1].name in _CASTS and side_ops[-1].results[0] == value:
            cast = side_ops[-1]
            root = cast.operands[0]
        sides.append(Side(value, sorted(args), side_ops, dims, root, cast))
    if set(sides[0].args) & set(sides[1].args):
        return None
    return ContractionSides(combine, product, sides[0], sides[1])
