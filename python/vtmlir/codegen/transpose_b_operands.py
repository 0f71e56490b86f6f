"""`codegen-transpose-b-operands`: a contraction's B operand laid out with its vector dimension innermost.

The contraction schedule runs its vectors along C's contiguous dimension n, reading B's rows. A
Linear layer's weight is `W[n, k]` (`x @ W^T`): its contiguous dimension is k, so every vector of B
would be a strided gather, in the packed panel too (the packing copy keeps the layout). This pass
gives such a contraction a B whose innermost dimension is n, the other dimensions in their order:

- a constant B (a weight: `memref.get_global` of a constant global, possibly reshaped) is
  transposed once, at compile time, into a new constant global (oneDNN and IREE pre-pack weights
  the same way);
- any other B (attention's K in `Q @ K^T`) is copied, transposed, into a new buffer by a
  data-movement kernel before the contraction (N·K elements moved for M·N·K multiply-adds).

The contraction reads the same values and sums them in the same order: results are bitwise those of
the untransposed kernel.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg, memref

from ..passes.registry import Pass, register_pass
from .bodies import iterator_attr
from .kernels import KernelKind, classify, rewrite_generics
from .weights import Globals

def transpose_b_operand(op, globals_: Globals) -> bool:
    """Give one contraction (`op`, a linalg.generic on memrefs) a B with n innermost."""
    kernel = classify(op)
    if kernel.kind is not KernelKind.CONTRACTION or not kernel.b_transposed:
        return False
    op = op.operation
    b = kernel.b_operand
    value, bmap = op.operands[b], kernel.maps[b]
    results = list(bmap.results)
    position = next(i for i, e in enumerate(results) if isinstance(e, ir.AffineDimExpr) and e.position == kernel.n[-1])
    perm = [i for i in range(len(results)) if i != position] + [position]
    new_map = ir.AffineMap.get(bmap.n_dims, bmap.n_symbols, [results[i] for i in perm])
    source_type = ir.MemRefType(value.type)
    shape = [source_type.shape[i] for i in perm]
    with op.location:
        data = globals_.constant_value(value)
        if data is not None:
            with ir.InsertionPoint(op):
                new_value = globals_.read_relaid(value, data.transpose(perm), "transposed")
        else:
            new_value = _transposed_copy(op, value, perm, shape, source_type.element_type)
    op.operands[b] = new_value
    maps = list(kernel.maps)
    maps[b] = new_map
    op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
    return True


def _transposed_copy(op, value, perm: list[int], shape: list[int], element_type) -> ir.Value:
    """A buffer holding `value` with its dimensions in the order `perm`, written by a copy kernel
    before `op` and freed after it."""
    rank = len(perm)
    # The copy iterates over the new buffer: its dimension j is the source's dimension perm[j].
    source_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(perm.index(p)) for p in range(rank)])
    with ir.InsertionPoint(op):
        buffer = memref.AllocOp(ir.MemRefType.get(shape, element_type), [], [], alignment=64).result
        copy = linalg.GenericOp([], [value], [buffer],
                                ir.ArrayAttr.get([ir.AffineMapAttr.get(source_map),
                                                  ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
                                ir.ArrayAttr.get([iterator_attr(op.context, "parallel")] * rank))
        body = copy.regions[0].blocks.append(element_type, element_type)
        with ir.InsertionPoint(body):
            linalg.YieldOp([body.arguments[0]])
    with ir.InsertionPoint.after(op):
        memref.DeallocOp(buffer)
    return buffer


def transpose_b_operands(module_op) -> int:
    """Transpose the B operand of every contraction that reads it along k; returns how many. A
    weight global that nothing reads untransposed any more is erased (the JIT would keep it)."""
    globals_ = Globals(module_op)
    count = rewrite_generics(module_op, lambda op: transpose_b_operand(op, globals_))
    globals_.erase_unread()
    return count


@register_pass
class TransposeBOperands(Pass):
    name = "codegen-transpose-b-operands"
    summary = "Give contractions a B operand whose innermost dimension is n (weights transposed at compile time)"

    def run(self, module):
        transpose_b_operands(module)
